"""docs/multi-host.md's figures: what the ps's link lets through at 100
Mbit/s, from Hogwild's run with 2 workers (benchmarks/results/network,
through its report's rows)."""

from launcher.shaping import bits_per_second

from ..reports.network import SLOW_LINK
from . import Quote
from .helpers import kb, network_rows, number, pick

DOC = "docs/multi-host.md"
WORKERS = 2


def slow_link():
    row, = pick(network_rows(), schemes=["Hogwild"], rate=SLOW_LINK,
                workers=WORKERS)
    return {"kb": kb(row["busiest_bytes_per_example"]),
            "rate": f"{bits_per_second(SLOW_LINK) / 8 / 1e6:g}",
            "bound": number(round(row["bound_examples_per_s"], -2)),
            "workers": WORKERS,
            "measured": number(round(row["examples_per_training_s"], -2))}


QUOTES = [
    Quote(DOC, "At 100 Mbit/s Hogwild's ps link carries {kb} KB per example each "
               "way, so no more than {rate} MB/s / {kb} KB = {bound} examples per "
               "second can pass it; a run with {workers} workers measured "
               "{measured}.", slow_link),
]
