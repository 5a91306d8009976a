"""What every report shares: the group's header (code, commits, dates,
machine), each row's topology, tables, and plots that come out the same
bytes every time."""

import os
import statistics
import sys

from guide import examples

from .. import provenance, suites
from ..errors import UsageError

BASELINE = examples.BASELINE.name
# Where a report links to benchmarks/README.md; `write` makes it relative to
# the results folder, wherever that is.
README_LINK = "<benchmarks/README.md>"
README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "README.md")


def benchmark_packages():
    """matplotlib and tqdm are installed apart from the examples' packages,
    in the environment's benchmark-packages folder (`make venv`; see
    benchmarks/requirements.txt), so that the TensorFlow processes never
    load matplotlib: Keras imports it whenever it can."""
    folder = os.path.join(sys.prefix, "benchmark-packages")
    if os.path.isdir(folder) and folder not in sys.path:
        sys.path.append(folder)


def pyplot():
    """matplotlib.pyplot for files, no display; UsageError with the fix
    where matplotlib is missing."""
    benchmark_packages()
    try:
        import matplotlib
    except ImportError:
        raise UsageError("the reports need matplotlib; run `make venv`, or "
                         "`pip install -r benchmarks/requirements.txt`") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot
    return matplotlib.pyplot


def save(figure, path, dpi):
    """The same bytes for the same figure: no date, no version in the file."""
    figure.savefig(path, dpi=dpi, metadata={"Software": None})
    pyplot().close(figure)


def shown(value, digits=None, suffix=""):
    if value is None:
        return "–"
    if digits is not None:
        return f"{value:,.{digits}f}{suffix}" if digits == 0 else \
            f"{value:.{digits}f}{suffix}"
    return f"{value:,}{suffix}" if isinstance(value, int) else f"{value}{suffix}"


def median(values, digits=2):
    """The median of the values given (None left out), rounded to `digits`
    (None: not rounded); None if there are none."""
    values = [value for value in values if value is not None]
    if not values:
        return None
    middle = statistics.median(values)
    return middle if digits is None else round(middle, digits)


def topology(run):
    """The tasks a run had, in words."""
    example = examples.BY_NAME.get(run.get("scheme"))
    if example is None:
        return "–"
    if not example.cluster:
        towers = run.get("workers") or example.towers
        return f"one process, {towers} towers" if towers else "one process"
    workers = run.get("workers", example.workers)
    workers = f"{workers} worker{'s' if workers != 1 else ''}"
    if example.ps == 0:
        return f"{workers}, ring allreduce"
    parts = ["coordinator"] if example.coordinator else []
    parts += [f"{run.get('ps', example.ps)} ps", workers]
    return " + ".join(parts)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def header(group, level):
    """Which code, commits, dates and machines a group of runs comes from."""
    commits = list(dict.fromkeys(
        (record.get("commit") or "unknown")[:10]
        + (" (uncommitted changes)" if record.get("dirty") else "")
        for record in group))
    dates = sorted(record["started"][:10] for record in group)
    machines = list(dict.fromkeys(provenance.described(record) for record in group))
    codes = list(dict.fromkeys(record["code"] for record in group))
    code = codes[0]
    if len(codes) > 1:
        lines = [f"{'#' * level} Runs of {len(codes)} code versions", "",
                 "Each run's newest record, whatever its code: the suite "
                 "spans code changes.", ""]
    elif code.startswith("converted"):
        lines = [f"{'#' * level} Converted results ({code})", ""]
    else:
        lines = [f"{'#' * level} Code {code}", ""]
    lines += [f"Commit{'s' if len(commits) > 1 else ''}: {', '.join(commits)}  ",
              f"Runs: {len(group)}, {dates[0]}" + (f" to {dates[-1]}"
                                                   if dates[-1] != dates[0] else "")
              + "  ",
              f"Machine: {'; '.join(machines)}", ""]
    notes = list(dict.fromkeys(record["converted_from"] for record in group
                               if record.get("converted_from")))
    lines += [f"Converted: {note}" for note in notes]
    failed = [record for record in group if record["status"] != "ok"]
    if failed:
        lines += ["", f"{len(failed)} run{'s' if len(failed) > 1 else ''} "
                      f"failed: " + "; ".join(f"{record['label']} "
                                             f"({record['error']})"
                                             for record in failed)]
    return lines + ([""] if notes or failed else [])


def commands(group):
    """Every run's command, folded away."""
    lines = ["<details><summary>Every run's command</summary>", ""]
    lines += [f"- {record['label']}: `{record['command']}`" for record in group]
    return lines + ["", "</details>", ""]


def by_config(group):
    """{config key: [records]}, in the order each config first appears; a
    config is a run's key without its repeat."""
    configs = {}
    for record in group:
        key = suites.run_key({name: value for name, value in record["run"].items()
                              if name != "repeat"})
        configs.setdefault(key, []).append(record)
    return configs
