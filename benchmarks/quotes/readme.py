"""README.md's figures: what the network costs."""

from guide import examples

from ..reports.network import SLOW_LINK
from . import Quote
from .helpers import (
    PER_MINIBATCH,
    kb,
    network_rows,
    number,
    pick,
    span,
    values,
)

DOC = "README.md"
SYNC = (examples.SYNC,)
EVERY_STEP = (examples.EVERY_STEP,)
WINDOW = (examples.WINDOW,)


def per_minibatch():
    rows = network_rows()
    free = pick(rows, kinds=PER_MINIBATCH, rate="none")
    slow = pick(rows, kinds=PER_MINIBATCH, rate=SLOW_LINK)
    bounds = sorted(values(slow, "bound_examples_per_s"))
    return {
        "kb": kb(max(values(free, "bytes_per_example"))),
        "bound": number(round(bounds[len(bounds) // 2], -2)),
        "slow": span(values(pick(rows, kinds=EVERY_STEP, rate=SLOW_LINK),
                            "s_to_97")),
        "slow_sync": span(values(pick(rows, kinds=SYNC, rate=SLOW_LINK),
                                 "s_to_97")),
        "free": span(values(free, "s_to_97"))}


def windowed():
    rows = network_rows()
    slow = pick(rows, kinds=WINDOW, rate=SLOW_LINK)
    sagn = pick(rows, schemes=["SAGN"], rate=SLOW_LINK)
    hogwild = {row["workers"]: row["s_to_97"]
               for row in pick(rows, schemes=["Hogwild"], rate=SLOW_LINK)}
    speed_ups = [hogwild[row["workers"]] / row["s_to_97"] for row in slow
                 if row.get("s_to_97")]
    return {"kb": kb(max(values(pick(rows, kinds=WINDOW, rate="none"),
                                "bytes_per_example"))),
            "slow": span(values(slow, "s_to_97")),
            "sagn": span(values(sagn, "s_to_97")),
            "speed_up": span(speed_ups, 1)}


def mirrored():
    rows = pick(network_rows(), schemes=["Multi-Worker-Mirrored-Strategy"],
                rate=SLOW_LINK)
    seconds = {row["workers"]: number(row["s_to_97"]) for row in rows}
    return {"two": seconds[2], "four": seconds[4]}


QUOTES = [
    Quote(DOC, "send the whole model each way per minibatch, about {kb} KB per "
               "example", per_minibatch),
    Quote(DOC, "the ps's link bounds them to about {bound} examples/s, whatever "
               "the number of workers, and 97% takes {slow} s (synchronous: "
               "{slow_sync} s) instead of {free} s", per_minibatch),
    Quote(DOC, "about {kb} KB per example: at 100 Mbit/s those that got there "
               "reached 97% in {slow} s (SAGN {sagn} s), {speed_up} times sooner "
               "than Hogwild", windowed),
    Quote(DOC, "its ring spreads the traffic over every link: {two} s with 2 "
               "workers, {four} s with 4", mirrored),
]
