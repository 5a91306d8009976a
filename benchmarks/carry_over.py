"""Do the defaults carry over? Runs a grid of (example, flags, data set, seed,
workers, window) on validation splits and tables each run beside the
baseline's on the same data and seed.

    python benchmarks/carry_over.py --grid today --data mnist=../shared/data/mnist \\
        --data harder=/tmp/harder-mnist --data dense=/tmp/dense-mnist

`harder` and `dense` are made by `benchmarks/harder_data.py` (MNIST with
lowered contrast, occlusion, pixel noise and a fifth of its training labels
changed; `dense` adds `--background 0.3 --contrast 1`, a grey background
that makes the inputs about twice as large as MNIST's, and so the largest
stable rate smaller). Every run is `--validation` (the last 5,000 training images; the
test sets are never looked at) unless the grid says `test`, runs under
`nice -n 19` with a timeout, and its logdir goes under `--scratch`, outside
the repository. A run already in `results/carry_over/runs.json` is not run
again (`--rerun` to force), so grids add up. Some grids try a change to a
scheme's script: those run in a copy of the repository (`git archive HEAD`,
under `--scratch`) with benchmarks/carry_over_local_rate.patch applied, so
the examples here stay untouched. Not part of `make test`: a grid takes
minutes to hours.
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
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "results", "carry_over")
BASELINE = "baseline"
SCRIPTS = {"AGN": "AGN/run.sh", "SAGN": "SAGN/run.sh", "AEASGD": "AEASGD/run.sh",
           "AEAMSGD": "AEAMSGD/run.sh", "Hogwild": "Hogwild/run.sh",
           "DOWNPOUR-Easy": "DOWNPOUR-Easy/run.sh",
           "Synchronous-SGD": "Synchronous-SGD/run.sh"}
# Patches that add a knob to a scheme's script, applied in a scratch copy.
VARIANTS = {"local_rate": "benchmarks/carry_over_local_rate.patch"}


@dataclasses.dataclass(frozen=True)
class Run:
    example: str
    data: str = "harder"  # a name given to --data: harder, dense, mnist
    seed: int = 0
    workers: int = 2
    window: int | None = None  # None: the example's default
    flags: tuple = ()
    variant: str | None = None  # a key of VARIANTS
    split: str = "validation"  # or "test", for the one final measurement

    @property
    def key(self):
        parts = [self.example, self.data, f"seed{self.seed}", self.split]
        if self.example != BASELINE:
            parts.append(f"w{self.workers}")
        if self.window:
            parts.append(f"T{self.window}")
        if self.variant:
            parts.append(self.variant)
        parts += [flag.lstrip("-") for flag in self.flags]
        return "_".join(parts)

    @property
    def condition(self):
        return (self.data, self.seed, self.split)


def _rates(example, values, **fields):
    return [Run(example, flags=("--learning_rate", str(value)), **fields)
            for value in values]


def _schemes(**fields):
    """Today's defaults of the schemes in question, and the baseline."""
    return [Run(BASELINE, **{k: v for k, v in fields.items()
                             if k in ("data", "seed", "split")})] + [
        Run(name, **fields)
        for name in ("AGN", "SAGN", "AEASGD", "AEAMSGD", "Hogwild")]


def _local(example, local, central, **fields):
    return Run(example, variant="local_rate",
               flags=("--learning_rate", str(central),
                      "--local_learning_rate", str(local)), **fields)


GRIDS = {
    # Today's defaults on both sets, seed 0.
    "today": lambda: _schemes(data="harder") + _schemes(data="mnist"),
    # What makes them fall behind: the rate on the baseline itself, the
    # schemes' rate, and the local step apart from the central one.
    "hypotheses": lambda: (
        _rates(BASELINE, (0.4, 0.8)) + _rates(BASELINE, (0.4, 0.8), data="mnist")
        + _rates("AGN", (0.2, 0.4)) + [_local("AGN", 0.2, 0.8),
                                         _local("AGN", 0.4, 0.8)]
        + _rates("SAGN", (0.2, 0.4)) + [_local("SAGN", 0.2, 0.8)]
        + _rates("AEASGD", (0.2, 0.4))
        + _rates("Hogwild", (0.1,)) + [Run("Hogwild", workers=1)]),
    # Larger inputs: does the local step's size matter there?
    "dense": lambda: (
        _schemes(data="dense") + _rates(BASELINE, (0.4, 0.8), data="dense")
        + [_local("AGN", 0.2, 0.8, data="dense"),
           _local("SAGN", 0.2, 0.8, data="dense")]
        + _rates("AGN", (0.2,), data="dense")
        + _rates("AEASGD", (0.2,), data="dense")),
    # The proposed rule, local steps at the baseline's rate 0.2, the centre
    # at T x 0.2 for SAGN (which averages the W commits) and T x 0.2 / W for
    # AGN (which adds them up), under conditions it was not chosen on; and
    # what is left for AEASGD and Hogwild. Most important first.
    "carry": lambda: (
        [_local("SAGN", 0.2, 0.8, data="mnist"),
         _local("AGN", 0.2, 0.4, data="dense"),
         _local("AGN", 0.2, 0.4, data="mnist"),
         _rates("AEASGD", (0.4,), data="dense")[0],
         _local("AGN", 0.2, 0.4, data="harder"),
         Run(BASELINE, data="dense", seed=1),
         _local("SAGN", 0.2, 0.8, data="dense", seed=1),
         _local("AGN", 0.2, 0.4, data="dense", seed=1),
         _local("SAGN", 0.2, 0.8, data="dense", workers=4),
         _local("AGN", 0.2, 0.2, data="dense", workers=4),
         _local("AGN", 0.2, 0.8, data="mnist", window=8),
         _local("AGN", 0.2, 0.2, data="mnist", window=2),
         _local("SAGN", 0.2, 0.8, data="mnist", workers=4),
         _local("AGN", 0.2, 0.2, data="mnist", workers=4),
         _local("AGN", 0.2, 0.8, data="mnist")]
        + _rates("AEASGD", (0.4,), data="mnist")
        + _rates("Hogwild", (0.1,), data="dense")
        + [Run(BASELINE, data="harder", seed=1),
           _local("AGN", 0.2, 0.4, data="harder", seed=1),
           _local("SAGN", 0.2, 0.8, data="harder", seed=1),
           Run(BASELINE, data="dense", seed=2),
           _local("AGN", 0.2, 0.4, data="dense", seed=2),
           _local("SAGN", 0.2, 0.8, data="dense", seed=2),
           _local("AGN", 0.2, 0.8, data="dense", window=8),
           _local("AGN", 0.2, 0.2, data="dense", window=2)]),
    # MNIST under a second seed, and the rates left to decide for AEASGD and
    # Hogwild there.
    "mnist_seeds": lambda: (
        _rates("AEASGD", (0.2,), data="mnist")
        + _rates("Hogwild", (0.1,), data="mnist")
        + [Run(BASELINE, data="mnist", seed=1),
           _local("AGN", 0.2, 0.4, data="mnist", seed=1),
           _local("SAGN", 0.2, 0.8, data="mnist", seed=1)]
        + _rates("AEASGD", (0.2,), data="mnist", seed=1)),
    # AGN with 4 workers: T x rate / W made the centre too slow there.
    "agn_workers": lambda: [
        _local("AGN", 0.2, central, data=data, workers=4)
        for central in (0.4, 0.8) for data in ("mnist", "dense")],
    # The one measurement on MNIST's test set, for the chosen defaults.
    "final": lambda: [
        Run(BASELINE, data="mnist", split="test"),
        _local("AGN", 0.2, 0.4, data="mnist", split="test"),
        _local("SAGN", 0.2, 0.8, data="mnist", split="test"),
        Run("AEASGD", data="mnist", split="test",
            flags=("--learning_rate", "0.2")),
        Run("Hogwild", data="mnist", split="test"),
        Run("AEAMSGD", data="mnist", split="test")],
    # The rest of the conditions for the chosen AEASGD and SAGN defaults.
    # SAGN's --train_steps counts rounds of T minibatches per worker: 3000 / T
    # keeps the ten epochs.
    "extra": lambda: (
        _rates("AEASGD", (0.2,), data="dense", seed=1)
        + _rates("AEASGD", (0.2,), data="mnist", workers=4)
        + _rates("AEASGD", (0.2,), data="dense", workers=4)
        + _rates("AEASGD", (0.2,), data="mnist", window=8)
        + _rates("AEASGD", (0.2,), data="mnist", window=2)
        + [Run("SAGN", data="mnist", window=window, variant="local_rate",
               flags=("--learning_rate", str(round(0.2 * window, 1)),
                      "--local_learning_rate", "0.2",
                      "--train_steps", str(3000 // window)))
           for window in (2, 8)]),
    # The slower centre needs more examples: fifteen epochs instead of ten
    # for the chosen rates, on MNIST and on the dense set (validation).
    "epochs": lambda: [
        run for data in ("mnist", "dense") for run in (
            Run("AGN", data=data, variant="local_rate",
                flags=("--learning_rate", "0.4", "--local_learning_rate", "0.2",
                       "--train_steps", "9000")),
            Run("SAGN", data=data, variant="local_rate",
                flags=("--learning_rate", "0.8", "--local_learning_rate", "0.2",
                       "--train_steps", "1125")),
            Run("AEASGD", data=data,
                flags=("--learning_rate", "0.2", "--train_steps", "9000")))],
}


def grid(name):
    if name not in GRIDS:
        raise SystemExit(f"no grid {name!r}; choose one of {', '.join(GRIDS)}")
    return GRIDS[name]()


def variant_tree(variant, scratch):
    """A copy of the repository at HEAD with the variant's patch applied."""
    if variant is None:
        return REPO
    tree = os.path.join(scratch, "trees", variant)
    if not os.path.isdir(tree):
        staging = tree + ".staging"
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        archive = subprocess.run(["git", "-C", REPO, "archive", "HEAD"],
                                 capture_output=True, check=True, timeout=60)
        subprocess.run(["tar", "-x", "-C", staging], input=archive.stdout,
                       check=True, timeout=60)
        subprocess.run(["patch", "-p1", "-s", "-d", staging, "-i",
                        os.path.join(REPO, VARIANTS[variant])],
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
    else:
        record["error"] = "timed out" if code is None else f"exit code {code}"
    return record


def read_result(logdir):
    """Accuracy and wall time from a finished run's result.json, or None."""
    try:
        with open(os.path.join(logdir, "result.json")) as stream:
            result = json.load(stream)
        return {"accuracy": result["test_accuracy"], "wall_s": result.get("wall_s")}
    except (OSError, ValueError, KeyError):
        return None


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
    return flags or "defaults"


def table(records):
    """One markdown table per data set and split: each run beside the
    baseline with default flags on the same data and seed."""
    baselines = {(r["data"], r["seed"], r["split"]): r.get("accuracy")
                 for r in records if r["example"] == BASELINE and not r["flags"]}
    lines = ["# Carry-over grid", "",
             "Written by `benchmarks/carry_over.py`. Validation accuracy (the "
             "last 5,000 training images) unless the split says test; "
             "Δ = the run minus the baseline (`Non-Distributed_Setup.py`, "
             "defaults) on the same data, seed and split, in points. "
             "`harder`: `benchmarks/harder_data.py --seed 0`.", ""]
    groups = sorted({(r["data"], r["split"]) for r in records})
    for data, split in groups:
        lines += [f"## {data}, {split}", "",
                  "| example | flags | seed | workers | T | accuracy | baseline "
                  "| Δ | wall s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        chosen = [r for r in records if (r["data"], r["split"]) == (data, split)]
        chosen.sort(key=lambda r: (r["example"] != BASELINE, r["example"],
                                   describe(r), r["seed"], r["workers"],
                                   r["window"] or 0))
        for r in chosen:
            base = baselines.get((r["data"], r["seed"], r["split"]))
            accuracy = r.get("accuracy")
            delta = ("" if accuracy is None or base is None
                     else f"{100 * (accuracy - base):+.2f}")
            shown = r.get("error") if accuracy is None else f"{accuracy:.4f}"
            workers = "" if r["example"] == BASELINE else r["workers"]
            lines.append(
                f"| {r['example']} | {describe(r)} | {r['seed']} | {workers} | "
                f"{r['window'] or 'default'} | {shown} | "
                f"{'' if base is None else f'{base:.4f}'} | {delta} | "
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
                             "the outputs of benchmarks/harder_data.py "
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
    runs = [run for name in args.grid for run in grid(name)
            if re.search(args.only, run.key)]
    unknown = sorted({run.data for run in runs} - set(args.data))
    if unknown:
        parser.error(f"the grid needs --data {unknown[0]}=FOLDER")
    records = load_records()
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
