"""docs/running.md's figures: a job's start-up with each task a new Python,
and forked from a launcher that imported TensorFlow once
(benchmarks/results/startup, through its report's summary)."""

from ..docs import results
from ..reports import startup
from . import Quote
from .real_data import cores, spelled

DOC = "docs/running.md"
NEW, FORKED = startup.WAYS[False], startup.WAYS[True]


def start_up():
    rows = [row for row in startup.summary(results("startup").records)
            if "medians" in row]
    most = max(rows, key=lambda row: row["workers"])
    return {"workers": most["workers"], "cores": spelled(cores("startup")),
            "new": f"{most['medians'][NEW]['startup_s']:.1f}",
            "forked": f"{most['medians'][FORKED]['startup_s']:.1f}",
            "halves": halves(most["startup_ratio"])}


def halves(ratio):
    """What preloading does to start-up, in words, `ratio` times shorter."""
    if 1.9 <= ratio < 2.1:
        return "halves"
    if 2.1 <= ratio < 2.5:
        return "more than halves"
    return f"divides by {ratio:.1f}"


QUOTES = [
    Quote(DOC, "with {workers} workers on {cores} cores that is about {new} s of "
               "start-up. `LAUNCH_PRELOAD_TENSORFLOW=1 bash run.sh` has the "
               "launcher import it once and fork every task from itself, which "
               "{halves} that ({forked} s; `make bench-startup`)", start_up),
]
