"""benchmarks/README.md's figures on slower links: results/network.

A figure the reports' tables show is quoted as they show it (`shown`);
one the page works out from them is rounded as a decimal, halves up
(`rounded`, in bench_format.py)."""

import statistics

from ..docs import results
from ..reports.network import NO_LIMIT, SLOW_LINK
from . import Quote
from .bench_format import (
    DOC,
    EVERY_STEP,
    FAST_LINK,
    MIRRORED,
    SYNC,
    SYNC_WINDOW,
    WINDOW,
    kilobytes,
    listed,
    machine,
    rounded,
    spread,
)
from .helpers import PER_MINIBATCH, network_rows, pick, values

# On slower links: benchmarks/results/network, through its report's rows.

def rows_of(workers=None, **where):
    """The network report's rows with `where`'s values, of one worker count
    if given."""
    return [row for row in pick(network_rows(), **where)
            if workers is None or row["workers"] == workers]


def twin(row, rate):
    """The same scheme's row with as many workers at `rate`."""
    [other] = rows_of(row["workers"], schemes=[row["scheme"]], rate=rate)
    return other


def run_limits():
    timeouts = {record["run"]["timeout"] for record in results("network").records}
    longer, usual = max(timeouts), min(timeouts)
    needed = values(rows_of(4, kinds=SYNC, rate=SLOW_LINK), "s_to_97")
    return {"limit": longer,
            "needed": usual if min(needed) > usual else f"(not {usual})"}


def per_minibatch_bytes():
    free = rows_of(kinds=PER_MINIBATCH, rate=NO_LIMIT)
    share = statistics.median(row["busiest_bytes_per_example"]
                              / row["bytes_per_example"] for row in free)
    figures = {"share": "half" if rounded(share, 1) == "0.5" else rounded(share, 2)}
    for workers in (2, 4):
        figures[f"w{workers}"] = kilobytes(values(pick(free, workers=workers),
                                                  "bytes_per_example"))
    return figures


def per_minibatch_rates():
    slow = rows_of(kinds=PER_MINIBATCH, rate=SLOW_LINK)
    figures = {"bound": rounded(statistics.median(
        values(slow, "bound_examples_per_s")), -2)}
    for workers in (2, 4):
        for name, kinds in (("every", EVERY_STEP), ("sync", SYNC)):
            figures[f"{name}{workers}"] = spread(values(
                rows_of(workers, kinds=kinds, rate=SLOW_LINK),
                "examples_per_training_s"), -1, "–")
    return figures


def per_minibatch_seconds():
    return {f"{name}{workers}": spread(values(
        rows_of(workers, kinds=kinds, rate=SLOW_LINK), "s_to_97"), 0, "–")
        for workers in (2, 4) for name, kinds in (("every", EVERY_STEP),
                                                   ("sync", SYNC))}


def windowed_bytes():
    windows = {record["run"]["window"] for record in results("network").records}
    figures = {"window": listed(map(str, sorted(windows)))}
    for workers in (2, 4):
        figures[f"w{workers}"] = kilobytes(values(
            rows_of(workers, kinds=WINDOW, rate=NO_LIMIT), "bytes_per_example"))
    return figures


def windowed_seconds():
    figures = {}
    for workers in (2, 4):
        slow = rows_of(workers, kinds=WINDOW, rate=SLOW_LINK)
        figures[f"w{workers}"] = spread(values(slow, "s_to_97"), 0, "–")
        figures[f"sagn{workers}"] = spread(values(
            rows_of(workers, kinds=SYNC_WINDOW, rate=SLOW_LINK), "s_to_97"))
        figures[f"missed{workers}"] = "".join(
            f"; {row['scheme']} did not reach 97%: it ended at "
            f"{row['test_accuracy']:.4f}" for row in slow if not row.get("s_to_97"))
    return figures


def mirrored():
    figures = {}
    for workers in (2, 4):
        [free] = rows_of(workers, schemes=[MIRRORED], rate=NO_LIMIT)
        figures[f"bytes{workers}"] = kilobytes([free["bytes_per_example"]])
        figures[f"busiest{workers}"] = kilobytes([free["busiest_bytes_per_example"]])
        figures[f"s{workers}"] = rounded(twin(free, SLOW_LINK)["s_to_97"])
    return figures


def fast_link():
    fast = [row for row in rows_of(rate=FAST_LINK) if "error" not in row]
    free = {id(row): twin(row, NO_LIMIT)["examples_per_training_s"] for row in fast}
    above = all(row["bound_examples_per_s"] > free[id(row)] for row in fast)
    ratios = sorted((row["examples_per_training_s"] / free[id(row)], row["scheme"],
                     row["workers"]) for row in fast)
    lowest = [f"{scheme} with {workers}" for _, scheme, workers in ratios[:2]]
    lowest[0] += " workers"
    return {"above": "above" if above else "not above",
            "ratios": spread([ratio for ratio, _, _ in ratios], 2),
            "lowest": listed(rounded(ratio, 2) for ratio, _, _ in ratios[:2])
            + ", " + listed(lowest)}


def more_examples(two, four):
    if two == four:
        return f"{two} times Hogwild's, with 2 workers as with 4"
    return f"{two} times Hogwild's with 2 workers and {four} with 4"


def windowed_against_hogwild():
    hogwild = {(row["workers"], row["rate"]): row
               for row in rows_of(schemes=["Hogwild"])}

    def sooner(kinds, key, rate, workers=None):
        """Hogwild's `key` over each of these rows'."""
        return [hogwild[row["workers"], rate][key] / row[key]
                for row in rows_of(workers, kinds=kinds, rate=rate) if row.get(key)]

    def most_examples(kinds, workers):
        return rounded(1 / min(sooner(kinds, "examples_to_97", NO_LIMIT, workers)), 1)

    per_minibatch = values(rows_of(kinds=PER_MINIBATCH, rate=NO_LIMIT),
                           "bytes_per_example")
    windowed = values(rows_of(kinds=WINDOW, rate=NO_LIMIT), "bytes_per_example")
    slow = rows_of(kinds=WINDOW, rate=SLOW_LINK)
    return {
        "fraction": rounded(statistics.median(per_minibatch)
                            / statistics.median(windowed)),
        "sooner": spread(sooner(WINDOW, "s_to_97", SLOW_LINK), 1),
        "sagn_sooner": spread(sooner(SYNC_WINDOW, "s_to_97", SLOW_LINK), 1),
        "examples": more_examples(most_examples(WINDOW, 2), most_examples(WINDOW, 4)),
        "sagn2": most_examples(SYNC_WINDOW, 2), "sagn4": most_examples(SYNC_WINDOW, 4),
        "link": rounded(statistics.median(values(slow, "bound_examples_per_s")), -3),
        "compute": spread(values(rows_of(kinds=WINDOW, rate=NO_LIMIT),
                                 "examples_per_training_s"), -3),
        "turns": spread(values(slow, "serial_bound_examples_per_s"), -3),
        "of_turns": spread(values(slow, "share_of_serial_bound"), 2),
        "of_link": spread(values(slow, "share_of_bound"), 2)}


def synchronous_shares():
    slow = rows_of(kinds=SYNC, rate=SLOW_LINK)
    return {"link": spread(values(slow, "share_of_bound"), 2),
            "turns": spread(values(slow, "share_of_serial_bound"), 2)}


def time_with_no_limit():
    started = [row for row in rows_of(rate=NO_LIMIT)
               if row.get("startup_s") is not None]
    [hogwild] = pick(started, schemes=["Hogwild"])
    windowed, synchronous = pick(started, kinds=WINDOW), pick(started, kinds=SYNC)
    return {
        "startup": spread(values(started, "startup_s")),
        "workers": listed(sorted({str(row["workers"]) for row in started})),
        "hogwild_rest": hogwild["beyond_compute_s"], "hogwild": hogwild["s_to_97"],
        "windowed_rest": spread(values(windowed, "beyond_compute_s"), 1),
        "sagn_rest": spread(values(pick(started, kinds=SYNC_WINDOW),
                                   "beyond_compute_s"), 1),
        "windowed_examples": spread(values(windowed, "examples_times_baseline"), 1),
        "sync_examples": spread(values(synchronous, "examples_times_baseline"), 1),
        "sync_rest": spread(values(synchronous, "beyond_compute_s"))}


def startup_suite():
    """Whether the startup suite ran where the network suite did."""
    return {"where": "" if machine("startup") == machine("network")
            else ", on a different machine"}


QUOTES = [
    # On slower links: what the latest runs say.
    Quote(DOC, "the 4-worker synchronous runs again with a {limit} s limit, since "
               "at 100 Mbit/s they need more than {needed} s", run_limits),
    Quote(DOC, "| per-minibatch schemes, bytes per example ({share} of it on the "
               "ps's link, each way) | {w2} KB | {w4} KB |", per_minibatch_bytes),
    Quote(DOC, "| their examples/s at 100 Mbit/s (the ps's link allows about "
               "{bound}) | {every2} asynchronous, {sync2} synchronous | {every4}, "
               "{sync4} |", per_minibatch_rates),
    Quote(DOC, "| their seconds to 97% at 100 Mbit/s | {every2} asynchronous, "
               "{sync2} synchronous | {every4}, {sync4} |", per_minibatch_seconds),
    Quote(DOC, "| windowed schemes (T = {window}), bytes per example | {w2} KB | "
               "{w4} KB |", windowed_bytes),
    Quote(DOC, "| their seconds to 97% at 100 Mbit/s | {w2} (SAGN "
               "{sagn2}{missed2}) | {w4} (SAGN {sagn4}{missed4}) |", windowed_seconds),
    Quote(DOC, "| Multi-Worker-Mirrored-Strategy: bytes per example, busiest link, "
               "97% at 100 Mbit/s | {bytes2} KB, {busiest2} KB, {s2} s | {bytes4} "
               "KB, {busiest4} KB, {s4} s |", mirrored),
    Quote(DOC, "At 1 Gbit/s the link's bound is {above} every scheme's unlimited "
               "rate: two cores, not the link, set the pace, and runs went at "
               "{ratios} times their unlimited rate (the lowest, {lowest}, not "
               "explained).", fast_link),
    Quote(DOC, "The windowed schemes send about 1/{fraction} of the bytes, but "
               "reach 97% only {sooner} times sooner than Hogwild (SAGN "
               "{sagn_sooner}), for two measured reasons. Most need more examples "
               "to get there: up to {examples} (SAGN {sagn2} and {sagn4} times).",
          windowed_against_hogwild),
    Quote(DOC, "at 100 Mbit/s the link alone would allow about {link} examples/s, "
               "their computation alone {compute}, and the two taking turns "
               "{turns}; they reach {of_turns} of that, but only {of_link} of the "
               "link's bound.", windowed_against_hogwild),
    Quote(DOC, "The synchronous schemes reach {link} of the link's bound ({turns} "
               "of the bound with compute)", synchronous_shares),
    Quote(DOC, "With no limit, start-up ({startup} s at {workers} workers, from the "
               "launcher's start inside the job's namespace)", time_with_no_limit),
    Quote(DOC, "two cores: {hogwild_rest} of Hogwild's {hogwild} s, {windowed_rest} "
               "s for the windowed schemes (SAGN {sagn_rest} s). The windowed "
               "schemes' gap to the baseline is mostly examples ({windowed_examples} "
               "times the baseline's), the synchronous ones' both ({sync_examples} "
               "times the examples, and {sync_rest} s of exchange and waiting).",
          time_with_no_limit),
    Quote(DOC, "much of it is the tasks' `import tensorflow`, which [the "
               "`startup` suite](#start-up) measures{where}.", startup_suite),
]
