"""The benchmark tool.

    python -m benchmarks run SUITE [--schemes A,B] [--workers 2,4]
                                   [--dataset mnist] [--data_dir DIR]
                                   [--out DIR] [--rerun]
    python -m benchmarks report DIR
    python -m benchmarks docs [--check]

`run` runs a suite's runs one after the other, each through the example's
own run.sh, and appends each run's record to DIR/runs.jsonl (default
benchmarks/results/SUITE) as it ends: the command, every setting, the
commit and code, the versions, the machine, the start time and the whole
result. A run already recorded for the same code is skipped (--rerun runs
it again), so a stopped suite resumes where it stopped; in a suite that
spans code changes (suites.py), a run recorded with any code is. Then it
writes the report, as `report` does: results.md and the plots, from
runs.jsonl alone.
`docs` rewrites the figures the docs take from the stored results
(benchmarks/docs.py).
"""

import argparse
import math
import os
import signal
import sys

from guide import examples
from guide.training import download

from . import provenance, reports, runner, store, suites
from .errors import UsageError
from .progress import Bar, measured

REPO = provenance.REPO
BASELINE = "Non-Distributed_Setup"


def suite_list():
    lines = []
    for name in suites.names():
        try:
            suite = suites.load(name)
        except UsageError as error:
            lines.append(f"  {name:10} (unreadable: {error})")
            continue
        lines.append(f"  {name:10} about {suite.minutes:g} min on two cores, "
                     f"{len(suite.runs)} runs: {suite.description}")
    return "\n".join(lines)


def make_parser():
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0],
        epilog="suites (benchmarks/suites/NAME.toml):\n" + suite_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="action", required=True,
                                     metavar="{run,report,docs}")
    run = commands.add_parser(
        "run", help="run a suite, adding to DIR/runs.jsonl, then report",
        epilog="suites:\n" + suite_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("suite", help="the suite's name: " + ", ".join(suites.names()))
    run.add_argument("--schemes", help="comma-separated examples: only their "
                                       "runs (and the baseline's, and the "
                                       "suite's own commands)")
    run.add_argument("--workers", help="comma-separated worker counts, in "
                                       "place of the suite's")
    run.add_argument("--dataset", help="synthetic or mnist, in place of the "
                                       "suite's")
    run.add_argument("--data_dir", help="folder with the four MNIST IDX files or "
                                        "mnist.npz (default: the Keras cache)")
    run.add_argument("--out", help="results folder (default: "
                                   "benchmarks/results/SUITE)")
    run.add_argument("--rerun", action="store_true",
                     help="run again the runs already recorded for this code")
    report = commands.add_parser("report", help="write DIR's report from its "
                                                "runs.jsonl")
    report.add_argument("folder", metavar="DIR")
    docs = commands.add_parser("docs", help="rewrite the docs' generated "
                                            "figures from the stored results")
    docs.add_argument("--check", action="store_true",
                      help="change nothing; exit 1 if a figure is stale")
    return parser


def numbers(flag, text):
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = [0]
    if min(values) < 1:
        raise UsageError(f"{flag} takes comma-separated counts of 1 or more, "
                         f"not {text!r}")
    return values


def chosen_runs(suite, args):
    """The suite's runs, narrowed and changed as the flags ask."""
    runs = suite.runs
    if args.schemes:
        wanted = args.schemes.split(",")
        unknown = [name for name in wanted if name not in suites.SCHEMES]
        if unknown:
            raise UsageError(f"unknown scheme {unknown[0]!r}; choose from "
                             f"{', '.join(suites.SCHEMES)}")
        missing = [name for name in wanted if name not in suite.schemes]
        if missing:
            raise UsageError(f"the suite {suite.name!r} has no run of "
                             f"{missing[0]}; its schemes are "
                             f"{', '.join(suite.schemes)}")
        runs = [run for run in runs if run.get("scheme") in wanted + [BASELINE]
                or "command" in run]
    if args.dataset:
        if args.dataset not in suites.DATASETS:
            raise UsageError(f"unknown data set {args.dataset!r}; choose "
                             f"{' or '.join(suites.DATASETS)}")
        runs = [dict(run, dataset=args.dataset) if "scheme" in run else run
                for run in runs]
    if args.workers:
        counts = numbers("--workers", args.workers)
        changed = {}
        for run in runs:
            cluster = "scheme" in run and examples.BY_NAME[run["scheme"]].cluster
            for count in counts if cluster else [None]:
                new = dict(run, workers=count) if count else run
                changed.setdefault(suites.run_key(new), new)
        runs = list(changed.values())
        check_split(runs)
    return runs


def check_split(runs):
    """A synchronous scheme splits its global batch among its workers:
    refuse a count it does not divide."""
    for run in runs:
        example = examples.BY_NAME.get(run.get("scheme"))
        batch, workers = run.get("batch"), run.get("workers")
        if example and example.synchronous and batch and workers and batch % workers:
            raise UsageError(
                f"{run['scheme']}'s global batch of {batch} does not split "
                f"evenly among {workers} workers; choose worker counts that "
                f"divide it")


def shown(folder):
    """A results folder as the user would write it: relative below the
    current folder, whole elsewhere."""
    relative = os.path.relpath(folder)
    return folder if relative.startswith("..") else relative


def find_mnist(data_dir):
    """The folder holding MNIST: --data_dir, else the Keras cache."""
    if data_dir:
        folder = os.path.abspath(os.path.expanduser(data_dir))
        if not os.path.isdir(folder):
            raise UsageError(f"--data_dir {data_dir} is not a folder; give the "
                             f"folder with the MNIST files")
        return folder
    if download.is_cached("mnist"):
        return download.cache_folder()
    raise UsageError("MNIST is neither in --data_dir nor in the Keras cache; "
                     "give --data_dir the folder with its four IDX files")


def train_examples_for(run, records, code):
    """For a run on a limited link: its margin times the examples its
    unlimited twin needed to reach 97%, if that twin got there."""
    if "limited_margin" not in run:
        return None
    twin = {key: value for key, value in run.items() if key != "limited_margin"}
    twin["rate"] = "none"
    key = suites.run_key(twin)
    needed = next((record["measures"].get("examples_to_97")
                   for record in reversed(records)
                   if record["code"] == code and record["status"] == "ok"
                   and store.key_of(record) == key), None)
    return needed and math.ceil(needed * run["limited_margin"])


def run_suite(args):
    suite = suites.load(args.suite)
    runs = chosen_runs(suite, args)
    folder = os.path.abspath(args.out or os.path.join(REPO, "benchmarks", "results",
                                                      suite.name))
    records = store.read(folder)
    store.check_suite(records, suite.name, folder)
    data_dir = None
    if any(run.get("dataset") == "mnist" for run in runs):
        data_dir = find_mnist(args.data_dir)
    reports.check(suite.report)  # a missing matplotlib fails now, not at the end
    code = provenance.source()["code"]
    done = set() if args.rerun else store.finished(
        records, None if suite.spans_code else code)
    todo = [run for run in runs if suites.run_key(run) not in done]
    print(f"{suite.name}: {len(runs)} runs, {len(runs) - len(todo)} already "
          f"recorded{'' if suite.spans_code else ' for this code'} (--rerun "
          f"runs them again), {len(todo)} to go; results in {shown(folder)}",
          flush=True)
    # SIGTERM ends the suite like Ctrl-C: the run going on is killed, and its
    # tasks with it (the launcher's tasks die with the launcher).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    bar, failed = Bar(len(todo)) if todo else None, 0
    try:
        for run in todo:
            bar.starting(suites.label(run))
            record = runner.run_one(suite, run, folder, data_dir,
                                    train_examples_for(run, records, code))
            store.append(folder, record)
            records.append(record)
            failed += record["status"] != "ok"
            bar.finished(measured(record))
    finally:
        if bar:
            bar.close()
    written = reports.write(folder)
    print(f"{failed} of {len(todo)} runs failed; " if failed else "",
          f"report in {shown(folder)}: {', '.join(written)}", sep="",
          flush=True)
    return 1 if failed else 0


def main(argv=None):
    try:
        args = make_parser().parse_args(argv)
        if args.action == "docs":
            from . import docs
            return docs.main(args.check)
        if args.action == "report":
            written = reports.write(os.path.abspath(args.folder), must_exist=True)
            print(f"report in {shown(os.path.abspath(args.folder))}: "
                  f"{', '.join(written)}")
            return 0
        return run_suite(args)
    except UsageError as error:
        print(f"python -m benchmarks: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
