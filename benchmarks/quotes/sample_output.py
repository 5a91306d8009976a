"""docs/sample-output.md's figures: which MNIST run its output comes from,
what that run added to each command, and each example's RESULT line as
the run stored it (its result.json), so that the excerpts are the latest
run's."""

from guide import examples

from ..docs import results
from . import Quote
from .real_data import MAIN, dates

DOC = "docs/sample-output.md"
# The RESULT line's first fields, in the order the examples print them.
FIELDS = ("algorithm", "workers", "ps", "global_step", "test_accuracy",
          "test_loss", "wall_s", "examples", "examples_per_s")
# The examples the page shows: those a run.sh starts through the launcher.
SHOWN = [example.name for example in examples.EXAMPLES
         if example.run_sh == "run.sh"]


def timeout():
    seconds = {record["run"].get("timeout") for record in results(MAIN).records}
    if len(seconds) != 1 or None in seconds:
        raise ValueError(f"the runs' timeouts: {sorted(map(str, seconds))}")
    return {"timeout": f"{seconds.pop():g}"}


def result_line(scheme):
    """The start of the scheme's RESULT line, from its stored result."""
    def figures():
        (record,) = results(MAIN).runs(scheme)
        return {"fields": " ".join(f"{key}={record['result'][key]}"
                                   for key in FIELDS)}
    return figures


QUOTES = [
    Quote(DOC, "What each example printed in the MNIST benchmark run of {date}",
          lambda: {"date": dates(MAIN)}),
    Quote(DOC, "adds `--eval_every`, `--logdir` and `--timeout {timeout}`", timeout),
] + [Quote(DOC, "RESULT {fields} ", result_line(scheme)) for scheme in SHOWN]
