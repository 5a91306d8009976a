"""Do the defaults carry over? Runs a grid of (example, flags, data set, seed,
workers, window) on validation splits and tables each run beside the
baseline's on the same data and seed.

    python experiments/carry-over/carry_over.py --grid today \\
        --data mnist="$HOME/data/mnist" --data harder=/tmp/harder-mnist \\
        --data dense=/tmp/dense-mnist

`harder` and `dense` are made by `harder_data.py`, beside this script (MNIST with
lowered contrast, occlusion, pixel noise and a fifth of its training labels
changed; `dense` adds `--background 0.3 --contrast 1`, a grey background
that makes the inputs about twice as large as MNIST's, and so the largest
stable rate smaller). Every run is `--validation` (the last 5,000 training images; the
test sets are never looked at) unless the grid says `test`, runs under
`nice -n 19` with a timeout, and its logdir goes under `--scratch`, outside
the repository. A run already in `results/runs.json` (beside this script) is not run
again (`--rerun` to force), so grids add up. Runs of a variant run in a
copy of the repository (`git archive HEAD`, under `--scratch`). The grids
with `local_rate` runs needed a patch that no longer applies: asked for
here, they stop with exit code 2 and name the commit to run them at. Not
part of `make test`: a grid takes minutes to hours.
"""

import argparse
import concurrent.futures
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import late_accuracy
from carry_over_grids import (
    BASELINE,
    CHANGED_DEFAULTS,
    GRIDS,
    RETIRED_VARIANTS,
    SCRIPTS,
)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(HERE, "results")
# The RESULT fields on staleness that runs.json keeps, where a scheme has them:
# staleness_in_commits is the distribution every asynchronous scheme records
# now; the stored runs of Dynamic-SGD carry the staleness_histogram it had.
STALENESS = ("mean_staleness", "staleness_in_commits", "staleness_histogram",
             "mean_commit_scale")
# --jobs runs start together: one of them makes a variant's copy, the others wait.
_making_trees = threading.Lock()


def grid(name):
    if name not in GRIDS:
        raise SystemExit(f"no grid {name!r}; choose one of {', '.join(GRIDS)}")
    return GRIDS[name]()


def variant_tree(variant, scratch):
    """A copy of the repository at HEAD for the variant's runs, made once."""
    if variant is None:
        return REPO
    tree = os.path.join(scratch, "trees", variant)
    with _making_trees:
        if not os.path.isdir(tree):
            staging = tree + ".staging"
            shutil.rmtree(staging, ignore_errors=True)
            os.makedirs(staging)
            archive = subprocess.run(["git", "-C", REPO, "archive", "HEAD"],
                                     capture_output=True, check=True, timeout=60)
            subprocess.run(["tar", "-x", "-C", staging], input=archive.stdout,
                           check=True, timeout=60)
            os.rename(staging, tree)
    return tree


def command(run, tree, data_dir, logdir, timeout):
    python = os.path.join(REPO, ".venv", "bin", "python")
    common = ["--dataset", "mnist", "--data_dir", data_dir, "--seed",
              str(run.seed), "--logdir", logdir, *run.flags]
    if run.split == "validation":
        common.append("--validation")
    if run.example == BASELINE:
        return [python, os.path.join(tree, "Non-Distributed_Setup.py"), *common]
    extra = ["--workers", str(run.workers), "--timeout", str(timeout)]
    if run.window:
        extra += ["--communication_window", str(run.window)]
    return ["bash", os.path.join(tree, SCRIPTS[run.example]), *extra, *common]


def execute(run, args):
    data_dir = args.data[run.data]
    logdir = os.path.join(args.scratch, "runs", run.key)
    record = {"key": run.key, **dataclasses.asdict(run)}
    # A run that finished but whose record was lost (runs.json written by
    # another grid at the same time) is read back, not run again.
    finished = read_result(logdir)
    if finished and not args.rerun:
        return {**record, **finished, "elapsed_s": None}
    # A checkpoint left by an earlier try would be resumed from.
    shutil.rmtree(logdir, ignore_errors=True)
    tree = variant_tree(run.variant, args.scratch)
    line = command(run, tree, data_dir, logdir, args.timeout)
    env = dict(os.environ, PYTHON=os.path.join(REPO, ".venv", "bin", "python"))
    started = time.perf_counter()
    try:
        finished = subprocess.run(["nice", "-n", "19", *line], env=env,
                                  capture_output=True, text=True,
                                  timeout=args.timeout + 60, check=False)
        code, output = finished.returncode, finished.stdout + finished.stderr
    except subprocess.TimeoutExpired:
        code, output = None, "timed out"
    record["elapsed_s"] = round(time.perf_counter() - started, 1)
    os.makedirs(os.path.join(args.scratch, "logs"), exist_ok=True)
    with open(os.path.join(args.scratch, "logs", run.key + ".log"), "w") as log:
        log.write(" ".join(line) + "\n" + output)
    finished = read_result(logdir)
    if finished:
        record.update(finished)
        add_late(record, logdir, data_dir)
    else:
        record["error"] = "timed out" if code is None else f"exit code {code}"
    return record


def add_late(record, logdir, data_dir):
    """The mean accuracy of the run's last three checkpoints (late_accuracy.py)."""
    late = late_accuracy.late_accuracy(logdir, data_dir,
                                       record["split"] == "validation")
    if late:
        record["late_accuracy"], record["late_steps"] = late


def read_result(logdir):
    """Accuracy, wall time and the staleness the run saw, from a finished
    run's result.json, or None."""
    try:
        with open(os.path.join(logdir, "result.json")) as stream:
            result = json.load(stream)
        record = {"accuracy": result["test_accuracy"], "wall_s": result.get("wall_s")}
    except (OSError, ValueError, KeyError):
        return None
    record.update({name: result[name] for name in STALENESS if name in result})
    return record


def load_records():
    path = os.path.join(RESULTS, "runs.json")
    if not os.path.exists(path):
        return {}
    with open(path) as stream:
        return {record["key"]: record for record in json.load(stream)}


def save(records):
    os.makedirs(RESULTS, exist_ok=True)
    ordered = sorted(records.values(), key=lambda record: record["key"])
    with open(os.path.join(RESULTS, "runs.json"), "w") as stream:
        json.dump(ordered, stream, indent=1)
        stream.write("\n")
    with open(os.path.join(RESULTS, "results.md"), "w") as stream:
        stream.write(table(ordered))


def describe(record):
    flags = " ".join(record["flags"])
    if record["variant"]:
        flags = f"[{record['variant']}] {flags}"
    if flags:
        return flags
    # Runs with no flags ran the defaults of their day.
    return "earlier defaults" if record["example"] in CHANGED_DEFAULTS else "defaults"


def table(records):
    """One markdown table per data set and split: each run beside the
    baseline with default flags on the same data and seed."""
    baselines = {(r["data"], r["seed"], r["split"]): r
                 for r in records if r["example"] == BASELINE and not r["flags"]}
    lines = ["# Carry-over grid", "",
             "Written by `carry_over.py`. Validation accuracy (the "
             "last 5,000 training images) unless the split says test; "
             "Δ = the run minus the baseline (`Non-Distributed_Setup.py`, "
             "defaults) on the same data, seed and split, in points. "
             "*Late*: the mean of the run's last three checkpoints, which "
             "span its last tenth (`late_accuracy.py`). "
             "`harder`: `harder_data.py --seed 0`.", ""]
    groups = sorted({(r["data"], r["split"]) for r in records})
    for data, split in groups:
        lines += [f"## {data}, {split}", "",
                  "| example | flags | seed | workers | T | accuracy | baseline "
                  "| Δ | late | baseline late | Δ late | wall s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        chosen = [r for r in records if (r["data"], r["split"]) == (data, split)]
        chosen.sort(key=lambda r: (r["example"] != BASELINE, r["example"],
                                   describe(r), r["seed"], r["workers"],
                                   r["window"] or 0))
        for r in chosen:
            base = baselines.get((r["data"], r["seed"], r["split"]), {})
            cells = []
            for name in ("accuracy", "late_accuracy"):
                value, reference = r.get(name), base.get(name)
                cells += ["" if value is None else f"{value:.4f}",
                          "" if reference is None else f"{reference:.4f}",
                          "" if None in (value, reference)
                          else f"{100 * (value - reference):+.2f}"]
            if r.get("accuracy") is None:
                cells[0] = r.get("error", "")
            workers = "" if r["example"] == BASELINE else r["workers"]
            lines.append(
                f"| {r['example']} | {describe(r)} | {r['seed']} | {workers} | "
                f"{r['window'] or 'default'} | {' | '.join(cells)} | "
                f"{r.get('wall_s') or ''} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--grid", action="append", required=True,
                        help=f"one of: {', '.join(GRIDS)} (repeatable)")
    parser.add_argument("--data", action="append", required=True,
                        type=lambda text: tuple(text.split("=", 1)),
                        help="NAME=FOLDER of four IDX .gz files: mnist, and "
                             "the outputs of harder_data.py "
                             "(repeatable)")
    parser.add_argument("--scratch", default="/tmp/carry_over",
                        help="logdirs, logs and patched copies, outside the repo")
    parser.add_argument("--jobs", type=int, default=2,
                        help="runs at a time (each is 1 ps + W workers)")
    parser.add_argument("--timeout", type=int, default=400,
                        help="seconds before a run is stopped")
    parser.add_argument("--only", default="",
                        help="run only the runs whose key matches this regex")
    parser.add_argument("--rerun", action="store_true",
                        help="run again what runs.json already holds")
    parser.add_argument("--dry_run", action="store_true",
                        help="list the runs, run nothing")
    args = parser.parse_args(argv)
    args.data = dict(args.data)
    asked = [(name, run) for name in args.grid for run in grid(name)
             if re.search(args.only, run.key)]
    retired = [(name, run.variant) for name, run in asked
               if run.variant in RETIRED_VARIANTS]
    if retired:
        name, variant = retired[0]
        print(f"--grid {name}: its {variant} runs need a patch that no longer "
              f"applies; run them at commit {RETIRED_VARIANTS[variant]}, the "
              f"last it applies to", file=sys.stderr)
        return 2
    runs = [run for _, run in asked]
    unknown = sorted({run.data for run in runs} - set(args.data))
    if unknown:
        parser.error(f"the grid needs --data {unknown[0]}=FOLDER")
    records = load_records()
    # Runs recorded before late_accuracy.py, whose logdirs are still there.
    for record in records.values():
        if ("accuracy" in record and "late_accuracy" not in record
                and record["data"] in args.data):
            add_late(record, os.path.join(args.scratch, "runs", record["key"]),
                     args.data[record["data"]])
    todo = [run for run in dict.fromkeys(runs)
            if args.rerun or run.key not in records
            or "error" in records[run.key]]
    print(f"{len(todo)} of {len(runs)} runs to do", flush=True)
    if args.dry_run:
        for run in todo:
            print(run.key)
        return 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(execute, run, args) for run in todo]
        for future in concurrent.futures.as_completed(futures):
            record = future.result()
            records[record["key"]] = record
            save(records)
            print(f"{record['key']}: {record.get('accuracy', record.get('error'))}"
                  f" ({record['elapsed_s']} s)", flush=True)
    save(records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
