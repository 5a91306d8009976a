#!/usr/bin/env python3
"""Benchmark: every scheme on the same work, side by side with the baseline.

    python benchmarks/compare.py            # the full run, about 13 minutes
    python benchmarks/compare.py --quick    # four schemes, about 90 seconds
    python benchmarks/compare.py --dataset mnist --data_dir ~/data/mnist

Every run trains the same classifier on the same data for the same number of
training examples with the same global batch: each update of the central
parameters, or each minibatch of an asynchronous worker, uses --batch_size
examples. The synchronous schemes split that batch among their workers. Runs
go through the examples' own `run.sh`, so through the same launcher a user
starts, and the chief measures test accuracy ten times along the way
(`--eval_every`).

The single-process baseline runs first; every later run prints its ratios to
it, measured in this same benchmark: throughput over the baseline's, and time
to the target accuracy over the baseline's. Then come the worker sweeps (1,
2 and 4 workers, 8 with --workers 1,2,4,8; one ps and two) and the start-up
cost: `bash run.sh` with a handful of steps against a bare
`python -c "import tensorflow"`.

Written to --results (default benchmarks/results, or benchmarks/results-quick
with --quick): runs.json and runs.csv (every number), results.md (the tables
and the targets), accuracy.png and throughput.png, and each run's output in
logs/. Standard library and matplotlib only; TensorFlow runs in the
subprocesses, which never load matplotlib (see benchmarks/requirements.txt).
"""

import argparse
import csv
import dataclasses
import datetime
import json
import math
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = "Non-Distributed_Setup"
LAUNCHER_TIMEOUT = 124
# How each scheme talks to the ps; decides its flags and how its
# communication rounds are counted.
EVERY_STEP, WINDOW, SYNC, SYNC_WINDOW, LOCAL = (
    "every step", "window", "sync", "sync window", "local")


@dataclasses.dataclass(frozen=True)
class Scheme:
    name: str
    command: tuple  # relative to the repository
    kind: str
    launcher: bool = True  # runs through launch.py, takes --workers/--ps
    fixed_workers: int = 0  # this many workers whatever the sweep says


SCHEMES = [
    Scheme(BASELINE, ("{python}", "Non-Distributed_Setup.py"), LOCAL,
           launcher=False, fixed_workers=1),
    Scheme("Distributed-Setup", ("bash", "Distributed-Setup/run.sh"), EVERY_STEP,
           fixed_workers=1),
    Scheme("Hogwild", ("bash", "Hogwild/run.sh"), EVERY_STEP),
    Scheme("DOWNPOUR", ("bash", "DOWNPOUR/run.sh"), WINDOW),
    Scheme("DOWNPOUR-Easy", ("bash", "DOWNPOUR-Easy/run.sh"), WINDOW),
    Scheme("AGN", ("bash", "AGN/run.sh"), WINDOW),
    Scheme("Dynamic-SGD", ("bash", "Dynamic-SGD/run.sh"), WINDOW),
    Scheme("AEASGD", ("bash", "AEASGD/run.sh"), WINDOW),
    Scheme("AEAMSGD", ("bash", "AEAMSGD/run.sh"), WINDOW),
    Scheme("Synchronous-SGD", ("bash", "Synchronous-SGD/run.sh"), SYNC),
    Scheme("Synchronous-SGD-different-learning-rates",
           ("bash", "Synchronous-SGD-different-learning-rates/run.sh"), SYNC),
    Scheme("SAGN", ("bash", "SAGN/run.sh"), SYNC_WINDOW),
    Scheme("Parameter-Server-Strategy",
           ("bash", "Parameter-Server-Strategy/run.sh"), EVERY_STEP),
    Scheme("Multiple-GPUs-Single-Machine",
           ("bash", "Multiple-GPUs-Single-Machine/run.sh"), EVERY_STEP),
    Scheme("Multiple-GPUs-Single-Machine-towers",
           ("bash", "Multiple-GPUs-Single-Machine/run_towers.sh"), LOCAL,
           launcher=False, fixed_workers=2),
]
BY_NAME = {scheme.name: scheme for scheme in SCHEMES}
QUICK_SCHEMES = [BASELINE, "Hogwild", "DOWNPOUR", "Synchronous-SGD"]
SWEEP_SCHEMES = ["Hogwild", "DOWNPOUR", "Synchronous-SGD"]
QUICK_SWEEP_SCHEMES = ["Hogwild"]
# Run again with a larger global batch: how much of a step is the exchange.
BATCH_STUDY_SCHEMES = ("Hogwild", "DOWNPOUR", "Synchronous-SGD")
# The targets the schemes are held to, as ratios to the baseline.
EVERY_STEP_TARGET = ("Hogwild", "Synchronous-SGD")
WINDOW_TARGET = ("DOWNPOUR", "AGN", "SAGN", "Dynamic-SGD", "AEASGD", "AEAMSGD")
EVERY_STEP_MIN_RATIO, WINDOW_MIN_RATIO = 0.5, 0.8
ACCURACY_MAX_GAP = 0.01
STARTUP_MAX_RATIO = 2.0
EVALUATIONS_PER_RUN = 10


class Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default unless it has none, or its help says it."""

    def _get_help_string(self, action):
        if action.default in (None, False):
            return action.help
        return super()._get_help_string(action)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.strip().splitlines()[0], formatter_class=Help)
    parser.add_argument("--quick", action="store_true",
                        help="four schemes, 1 and 2 workers, 20,000 examples")
    parser.add_argument("--examples", type=int, default=None,
                        help="training examples per run (default: 100,000; "
                             "20,000 with --quick)")
    parser.add_argument("--batch_size", type=int, default=100,
                        help="examples per update (the global batch)")
    parser.add_argument("--large_batch", type=int, default=None,
                        help="also run the baseline, Hogwild, DOWNPOUR and "
                             "Synchronous-SGD with this global batch, to see "
                             "how throughput depends on it (default: 1000; "
                             "0 with --quick; 0: skip)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs of each configuration in the main table, "
                             "whose medians are reported (default: 3; 1 "
                             "with --quick)")
    parser.add_argument("--window", type=int, default=8,
                        help="communication window T of the windowed schemes")
    parser.add_argument("--workers", default=None,
                        help="worker counts to sweep, e.g. 1,2,4,8 "
                             "(default: 1,2,4; 1,2 with --quick)")
    parser.add_argument("--schemes", default=None,
                        help="comma-separated example names to run (default: "
                             "all; four with --quick)")
    parser.add_argument("--target_accuracy", type=float, default=None,
                        help="accuracy whose time to reach is compared "
                             "(default: the baseline's final accuracy "
                             "minus 0.02)")
    parser.add_argument("--dataset", choices=("synthetic", "mnist"),
                        default="synthetic")
    parser.add_argument("--data_dir", default=None,
                        help="folder of the MNIST files, with --dataset mnist")
    parser.add_argument("--results", default=None,
                        help="output folder (default: benchmarks/results for "
                             "the full default run, benchmarks/results-quick "
                             "with --quick, else benchmarks/results-custom)")
    parser.add_argument("--run_timeout", type=int, default=600,
                        help="seconds after which one run is stopped")
    args = parser.parse_args(argv)
    try:
        args.sweep_workers = [int(count) for count in
                              (args.workers or ("1,2" if args.quick else "1,2,4"))
                              .split(",")]
    except ValueError:
        parser.error(f"--workers must be comma-separated numbers, got "
                     f"{args.workers!r}")
    names = (args.schemes.split(",") if args.schemes
             else QUICK_SCHEMES if args.quick else [s.name for s in SCHEMES])
    unknown = [name for name in names if name not in BY_NAME]
    if unknown:
        parser.error(f"unknown scheme {unknown[0]!r}; choose from "
                     f"{', '.join(BY_NAME)}")
    args.schemes = [BY_NAME[BASELINE]] + [BY_NAME[name] for name in names
                                          if name != BASELINE]
    args.sweep_schemes = QUICK_SWEEP_SCHEMES if args.quick else SWEEP_SCHEMES
    args.examples = args.examples or (20_000 if args.quick else 100_000)
    if args.large_batch is None:
        args.large_batch = 0 if args.quick else 1000
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    for name in ("examples", "batch_size", "window", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be a positive integer")
    if min(args.sweep_workers) < 1:
        parser.error("--workers must all be 1 or more")
    if args.dataset == "mnist" and not args.data_dir:
        parser.error("--dataset mnist needs --data_dir, the folder of the "
                     "MNIST files")
    if args.data_dir:
        # Every run.sh changes into its example's folder first.
        args.data_dir = os.path.abspath(os.path.expanduser(args.data_dir))
        if not os.path.isdir(args.data_dir):
            parser.error(f"--data_dir {args.data_dir} is not a folder; give "
                         f"the folder that holds the MNIST files")
    if any(scheme.kind in (SYNC, SYNC_WINDOW) for scheme in args.schemes):
        # The synchronous schemes split the global batch among the workers.
        counts = {2} | set(args.sweep_workers)
        for batch in filter(None, (args.batch_size, args.large_batch)):
            uneven = sorted(count for count in counts if batch % count)
            if uneven:
                multiple = math.lcm(*counts)
                parser.error(f"a global batch of {batch} does not split evenly "
                             f"among {uneven[0]} synchronous workers; use a "
                             f"multiple of {multiple}, such as "
                             f"{multiple * math.ceil(batch / multiple)}, for "
                             f"--batch_size and --large_batch")
    # Only the full default run replaces the committed results.
    custom = argv_given(argv) - {"--run_timeout", "--results"}
    args.results = os.path.abspath(args.results or os.path.join(
        REPO, "benchmarks", "results-quick" if args.quick
        else "results-custom" if custom else "results"))
    return args


def argv_given(argv):
    """The options named on the command line."""
    return {part.split("=", 1)[0] for part in
            (sys.argv[1:] if argv is None else argv) if part.startswith("--")}


# --- What one run is asked to do -------------------------------------------

def run_flags(scheme, workers, args, global_batch):
    """The flags that give `scheme` with `workers` workers the same work as
    the baseline: args.examples examples, updates of `global_batch`."""
    batch, flags = global_batch, []
    if scheme.kind in (SYNC, SYNC_WINDOW):
        batch = max(1, global_batch // workers)  # the global batch, split
    if scheme.kind in (WINDOW, SYNC_WINDOW):
        flags += ["--communication_window", str(args.window)]
    # What one global step stands for, in examples.
    per_step = {SYNC: batch * workers,
                SYNC_WINDOW: batch * workers * args.window}.get(scheme.kind, batch)
    steps = max(1, round(args.examples / per_step))
    flags += ["--train_steps", str(steps), "--batch_size", str(batch),
              "--eval_every", str(max(1, steps // EVALUATIONS_PER_RUN)),
              "--log_every", str(steps), "--dataset", args.dataset]
    if args.data_dir:
        flags += ["--data_dir", args.data_dir]
    if scheme.name == "Synchronous-SGD-different-learning-rates":
        # Rates around the common 0.2: the fastest and slowest 1.5 : 0.5.
        rates = [0.2 * (1.5 - i / max(1, workers - 1)) for i in range(workers)]
        flags += ["--learning_rates", ",".join(f"{rate:.3g}" for rate in rates)]
    if scheme.name == "Multiple-GPUs-Single-Machine-towers":
        flags += ["--towers", str(workers)]
    return flags


def command_for(scheme, workers, ps, args, logdir, global_batch):
    command = [part.format(python=sys.executable) for part in scheme.command]
    command += run_flags(scheme, workers, args, global_batch)
    command += ["--logdir", logdir]
    if scheme.launcher:
        command += ["--workers", str(workers), "--ps", str(ps),
                    "--timeout", str(args.run_timeout)]
    return command


# --- Measuring -------------------------------------------------------------

def exchanges(scheme, result):
    """How many times a worker (or the coordinator) exchanged parameters or
    updates with the ps: one pull and one push each."""
    if scheme.kind == LOCAL:
        return 0
    if scheme.kind in (WINDOW, SYNC_WINDOW):
        return sum(result["commits"])
    if scheme.kind == SYNC:
        return sum(result["gradients_computed"])
    return result["global_step"]  # one per minibatch


def rounds_per_1000(scheme, result):
    return round(1000 * exchanges(scheme, result) / max(result["examples"], 1), 2)


def time_to_accuracy(curve, target):
    """Seconds until the first point of `curve` at or above `target`; None
    if it never got there."""
    for point in curve:
        if point["test_accuracy"] >= target:
            return point["wall_s"]
    return None


def ratio(value, reference):
    """value / reference, or None when either is missing or zero."""
    if value is None or not reference:
        return None
    return round(value / reference, 3)


def run_once(scheme, workers, ps, args, name, global_batch):
    """Runs one configuration; returns its record, with `error` set if the
    run failed."""
    logdir = os.path.join(args.results, "runs", name)
    # A checkpoint left by an earlier benchmark would be restored, and the
    # run would start where that one ended.
    shutil.rmtree(logdir, ignore_errors=True)
    command = command_for(scheme, workers, ps, args, logdir, global_batch)
    record = {"scheme": scheme.name, "kind": scheme.kind, "workers": workers,
              "ps": ps if scheme.launcher else 0, "global_batch": global_batch,
              "command": shlex.join("python" if part == sys.executable else part
                                    for part in command)}
    started = time.perf_counter()
    try:
        finished = subprocess.run(command, cwd=REPO, env=benchmark_env(),
                                  capture_output=True, text=True,
                                  timeout=args.run_timeout + 30, check=False)
        output, code = finished.stdout + finished.stderr, finished.returncode
    except subprocess.TimeoutExpired as timeout:
        output = b"".join(part or b"" for part in (timeout.stdout, timeout.stderr))
        output, code = output.decode(errors="replace"), None
    record["elapsed_s"] = round(time.perf_counter() - started, 2)
    os.makedirs(os.path.join(args.results, "logs"), exist_ok=True)
    with open(os.path.join(args.results, "logs", name + ".log"), "w") as stream:
        stream.write(record["command"] + "\n\n" + output)
    if code != 0:
        # 124 is the launcher's own --timeout.
        record["error"] = ("timed out" if code in (None, LAUNCHER_TIMEOUT)
                           else f"exit code {code}")
        return record
    try:
        record.update(measures(scheme, logdir))
    except (OSError, ValueError, KeyError) as error:
        record["error"] = f"unreadable results: {error!r}"
    return record


def measures(scheme, logdir):
    """What one finished run measured, from its result.json and curve."""
    with open(os.path.join(logdir, "result.json")) as stream:
        result = json.load(stream)
    curve_path = os.path.join(logdir, "accuracy_curve.json")
    curve = []
    if os.path.exists(curve_path):
        with open(curve_path) as stream:
            curve = json.load(stream)
    # The final evaluation ends every curve.
    curve.append({"wall_s": result["wall_s"], "global_step": result["global_step"],
                  "examples": result["examples"],
                  "test_accuracy": result["test_accuracy"]})
    return {
        "test_accuracy": result["test_accuracy"], "wall_s": result["wall_s"],
        "examples": result["examples"], "examples_per_s": result["examples_per_s"],
        "rounds_per_1000_examples": rounds_per_1000(scheme, result),
        "mean_staleness": result.get("mean_staleness"),
        "communication_window": result.get("communication_window"),
        # The chief's evaluations for the curve, inside wall_s.
        "eval_s": round(sum(point.get("eval_s", 0) for point in curve), 3),
        "curve": curve}


def benchmark_env():
    env = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    env["PYTHON"] = sys.executable  # run.sh then uses this very Python
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def add_ratios(record, baseline):
    """Throughput and time-to-target, each over the baseline's."""
    record["throughput_ratio"] = ratio(record.get("examples_per_s"),
                                       baseline.get("examples_per_s"))
    record["time_to_target_ratio"] = ratio(record.get("time_to_target_s"),
                                           baseline.get("time_to_target_s"))
    return record


def middle(values):
    """The median of an odd number of values (the upper one of an even
    number); None counts as larger than any number: never reached."""
    ordered = sorted(values, key=lambda value: (value is None, value or 0))
    return ordered[len(ordered) // 2] if ordered else None


def combine(attempts, target):
    """One record for the repeated runs of one configuration: each measure's
    median, every run's accuracy and throughput, and the accuracy curve of
    the run with the median throughput. A failed run makes it a failure."""
    for attempt in attempts:
        if "error" not in attempt:
            attempt["time_to_target_s"] = time_to_accuracy(attempt["curve"], target)
    failed = [attempt for attempt in attempts if "error" in attempt]
    if failed:
        record = dict(failed[0])
        if len(attempts) > 1:
            record["error"] = (f"{len(failed)} of {len(attempts)} runs failed: "
                               f"{failed[0]['error']}")
        return record
    record = dict(middle_by(attempts, "examples_per_s"))
    for key in ("test_accuracy", "examples_per_s", "wall_s", "time_to_target_s",
                "rounds_per_1000_examples", "mean_staleness"):
        record[key] = middle([attempt.get(key) for attempt in attempts])
    record["runs"] = len(attempts)
    for key in ("test_accuracy", "examples_per_s"):
        record[f"{key}_each_run"] = [attempt[key] for attempt in attempts]
    return record


def middle_by(attempts, key):
    ordered = sorted(attempts, key=lambda attempt: attempt[key])
    return ordered[len(ordered) // 2]


def median_seconds(command, repeats, clear=None):
    """The median wall time of `command` over `repeats` runs, each after
    deleting the folder `clear`, if given."""
    times = []
    for _ in range(repeats):
        if clear:
            shutil.rmtree(clear, ignore_errors=True)
        started = time.perf_counter()
        subprocess.run(command, cwd=REPO, env=benchmark_env(), capture_output=True,
                       timeout=300, check=True)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 2)


def measure_startup(args, repeats):
    """Bare `import tensorflow` against `bash run.sh` with five steps."""
    logdir = os.path.join(args.results, "runs", "startup")
    bare = median_seconds([sys.executable, "-c", "import tensorflow"], repeats)
    runs = []
    for index in range(repeats):
        runs.append(median_seconds(
            ["bash", "Hogwild/run.sh", "--train_steps", "5",
             "--logdir", f"{logdir}-{index}"], 1, clear=f"{logdir}-{index}"))
    run_sh = round(statistics.median(runs), 2)
    return {"import_tensorflow_s": bare, "run_sh_s": run_sh,
            "ratio": ratio(run_sh, bare), "repeats": repeats,
            "command": "bash Hogwild/run.sh --train_steps 5"}


# --- The targets -----------------------------------------------------------

def check_targets(records, startup, window):
    """One row per target: what, the measured value, the bound, met or not."""
    baseline = records[0]
    main = {record["scheme"]: record for record in records
            if record.get("main") and "error" not in record}
    rows = [(f"{record['scheme']} ran", record["error"], "no error", False)
            for record in records if record.get("main") and "error" in record]
    for names, label, bound in (
            (EVERY_STEP_TARGET, "2 workers", EVERY_STEP_MIN_RATIO),
            (WINDOW_TARGET, f"window {window}", WINDOW_MIN_RATIO)):
        for name in names:
            if name in main:
                measured = main[name]["throughput_ratio"]
                rows.append((f"{name} throughput, {label}", measured,
                             f">= {bound}", measured >= bound))
    for name, record in main.items():
        if name == BASELINE:
            continue
        gap = round(baseline["test_accuracy"] - record["test_accuracy"], 4)
        rows.append((f"{name} accuracy below the baseline's", gap,
                     f"<= {ACCURACY_MAX_GAP}", gap <= ACCURACY_MAX_GAP))
    if startup:
        rows.append(("start-up: run.sh over import tensorflow", startup["ratio"],
                     f"<= {STARTUP_MAX_RATIO}", startup["ratio"] <= STARTUP_MAX_RATIO))
    return rows


# --- Writing the results ---------------------------------------------------

def shown(value, digits=None):
    if value is None:
        return "–"
    if digits is not None:
        return f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


MAIN_COLUMNS = [
    ("scheme", "scheme", None), ("workers", "workers", None), ("ps", "ps", None),
    ("test_accuracy", "test accuracy", 4), ("examples_per_s", "examples/s", 0),
    ("throughput_ratio", "× baseline throughput", 2),
    ("time_to_target_s", "s to target", 2),
    ("time_to_target_ratio", "× baseline time to target", 2),
    ("rounds_per_1000_examples", "ps rounds / 1000 examples", 1),
    ("mean_staleness", "mean staleness", 2)]


BATCH_COLUMNS = [
    ("scheme", "scheme", None), ("workers", "workers", None), ("ps", "ps", None),
    ("test_accuracy", "test accuracy", 4), ("examples_per_s", "examples/s", 0),
    ("throughput_ratio", "× baseline throughput", 2),
    ("rounds_per_1000_examples", "ps rounds / 1000 examples", 1)]


def markdown_table(records, columns=MAIN_COLUMNS):
    lines = ["| " + " | ".join(title for _, title, _ in columns) + " |",
             "|" + "---|" * len(columns)]
    for record in records:
        if "error" in record:
            cells = [record["scheme"], shown(record["workers"]), shown(record["ps"]),
                     f"failed: {record['error']}"] + [""] * (len(columns) - 4)
        else:
            cells = [shown(record.get(key), digits) for key, _, digits in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_markdown(path, meta, records, startup, targets):
    main = [record for record in records if record.get("main")]
    batch_study = [record for record in records if record.get("batch_study")]
    sweep = sorted((record for record in records if record.get("sweep")),
                   key=lambda record: (record["scheme"], record["ps"],
                                       record["workers"]))
    parts = [
        f"# Benchmark results ({meta['date']})", "",
        f"Command: `{meta['command']}`  ",
        f"Hardware: {meta['hardware']}  ",
        f"Software: {meta['software']}  ",
        f"Work per run: {meta['examples']:,} training examples, global batch "
        f"{meta['batch_size']}, {meta['dataset']} data; windowed schemes use "
        f"T = {meta['window']}. Target accuracy for the time ratio: "
        f"{meta['target_accuracy']:.4f}.", "",
        "## Every scheme, 1 ps", "",
        f"Each row: the medians of {meta['repeats']} runs (every run's accuracy "
        f"and examples/s are in runs.csv).", "", markdown_table(main), ""]
    if sweep:
        parts += ["## Workers and parameter servers", "", markdown_table(sweep), ""]
    if batch_study:
        parts += [f"## A larger global batch: {batch_study[0]['global_batch']}", "",
                  "Each ratio is to the baseline at the same batch.", "",
                  markdown_table(batch_study, BATCH_COLUMNS), ""]
    if startup:
        parts += ["## Start-up and shut-down", "",
                  f"`{startup['command']}`: {startup['run_sh_s']} s; bare "
                  f"`python -c \"import tensorflow\"`: "
                  f"{startup['import_tensorflow_s']} s; ratio "
                  f"{startup['ratio']} (medians of {startup['repeats']}).", ""]
    parts += ["## Targets", "", "| target | measured | bound | met |",
              "|---|---|---|---|"]
    parts += [f"| {what} | {value} | {bound} | {'yes' if met else '**no**'} |"
              for what, value, bound, met in targets]
    parts += ["", "Why a target is missed, measured: [the benchmark's README]"
              "(../README.md#why-some-targets-are-missed)."]
    with open(path, "w") as stream:
        stream.write("\n".join(parts) + "\n")


CSV_FIELDS = ["scheme", "workers", "ps", "global_batch", "test_accuracy",
              "wall_s", "examples", "examples_per_s", "throughput_ratio",
              "time_to_target_s", "time_to_target_ratio",
              "rounds_per_1000_examples", "mean_staleness", "communication_window",
              "test_accuracy_each_run", "examples_per_s_each_run", "main", "sweep",
              "batch_study", "error", "command"]


def write_csv(path, records):
    with open(path, "w", newline="") as stream:
        writer = csv.DictWriter(stream, CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)


def pyplot():
    """matplotlib.pyplot for files, no display. `make venv` installs
    matplotlib apart from the examples' packages, in the environment's
    benchmark-packages folder (see benchmarks/requirements.txt), so that the
    TensorFlow processes do not load it."""
    try:
        import matplotlib
    except ImportError:
        sys.path.append(os.path.join(sys.prefix, "benchmark-packages"))
        try:
            import matplotlib
        except ImportError:
            raise SystemExit("compare.py: error: the plots need matplotlib; run "
                             "`make venv`, or `pip install -r "
                             "benchmarks/requirements.txt`") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot
    return matplotlib.pyplot


def write_plots(folder, records):
    """accuracy.png (test accuracy against time and against examples, every
    scheme of the main table) and throughput.png (examples/s against
    workers, one line per swept scheme and ps count)."""
    plt = pyplot()
    main = [record for record in records if record.get("main") and "curve" in record]
    figure, (by_time, by_examples) = plt.subplots(1, 2, figsize=(13, 5.5),
                                                  sharey=True)
    colours = plt.get_cmap("tab20").colors  # enough for every scheme
    for index, record in enumerate(main):
        style = {"linewidth": 2.5, "color": "black"} if record["scheme"] == BASELINE \
            else {"linewidth": 1.2, "color": colours[index % len(colours)],
                  "linestyle": "-" if index % 2 else "--"}
        times = [point["wall_s"] for point in record["curve"]]
        examples = [point["examples"] for point in record["curve"]]
        accuracy = [point["test_accuracy"] for point in record["curve"]]
        by_time.plot(times, accuracy, marker=".", label=record["scheme"], **style)
        by_examples.plot(examples, accuracy, marker=".", **style)
    by_time.set(xlabel="seconds of training", ylabel="test accuracy",
                title="Test accuracy over time")
    by_examples.set(xlabel="training examples seen", title="… and over examples")
    # The first evaluations are near chance; the differences are at the top.
    by_time.set_ylim(max(0.0, main[0]["test_accuracy"] - 0.25), None)
    for axes in (by_time, by_examples):
        axes.grid(alpha=0.3)
    figure.legend(loc="lower center", ncol=4, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.16, 1, 1))
    figure.savefig(os.path.join(folder, "accuracy.png"), dpi=100)
    plt.close(figure)

    sweep = [record for record in records
             if record.get("sweep") and "error" not in record]
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for key in sorted({(record["scheme"], record["ps"]) for record in sweep}):
        points = sorted((record["workers"], record["examples_per_s"])
                        for record in sweep if (record["scheme"], record["ps"]) == key)
        axes.plot(*zip(*points), marker="o", label=f"{key[0]}, {key[1]} ps")
    baseline = [record for record in records if record["scheme"] == BASELINE
                and "error" not in record]
    if baseline:
        axes.axhline(baseline[0]["examples_per_s"], color="black", linestyle="--",
                     label="Non-Distributed_Setup")
    axes.set(xlabel="workers", ylabel="examples/s (all workers)",
             title="Throughput against workers")
    axes.set_xticks(sorted({record["workers"] for record in sweep}) or [1])
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(os.path.join(folder, "throughput.png"), dpi=100)
    plt.close(figure)


def hardware():
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as stream:
            for line in stream:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as stream:
            memory_kb = int(stream.readline().split()[1])
        memory = f", {memory_kb / 2**20:.0f} GiB"
    except OSError:
        memory = ""
    cores = len(os.sched_getaffinity(0))
    return f"{cores} cores ({model}){memory}, {platform.system()}"


def software():
    version = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; print(tf.__version__)"],
        capture_output=True, text=True, timeout=120, env=benchmark_env()).stdout
    return f"Python {platform.python_version()}, TensorFlow {version.strip()}"


# --- The whole benchmark ---------------------------------------------------

class Progress:
    """Prints which run of how many is going, and the time so far."""

    def __init__(self, total):
        self.total, self.done = total, 0
        self.started = time.perf_counter()

    def say(self, text):
        elapsed = int(time.perf_counter() - self.started)
        print(f"[{self.done + 1:2}/{self.total} {elapsed // 60}:{elapsed % 60:02}] "
              f"{text}", flush=True)


def plan(args):
    """Every run, the baseline first: dicts of scheme, workers, ps, global
    batch, and the tables it belongs to (main, sweep, batch_study)."""
    runs = []
    for scheme in args.schemes:
        workers = scheme.fixed_workers or 2
        runs.append({"scheme": scheme, "workers": workers, "ps": 1,
                     "batch": args.batch_size, "main": True,
                     "sweep": scheme.name in args.sweep_schemes
                     and workers in args.sweep_workers})
    for scheme in args.schemes:
        if scheme.name not in args.sweep_schemes:
            continue
        for ps in (1, 2):
            for workers in args.sweep_workers:
                if (ps, workers) != (1, 2):  # that one is in the main table
                    runs.append({"scheme": scheme, "workers": workers, "ps": ps,
                                 "batch": args.batch_size, "sweep": True})
    if args.large_batch:
        for scheme in args.schemes:
            if scheme.name in (BASELINE,) + BATCH_STUDY_SCHEMES:
                runs.append({"scheme": scheme, "workers": scheme.fixed_workers or 2,
                             "ps": 1, "batch": args.large_batch,
                             "batch_study": True})
    return runs


def summary_line(record):
    if "error" in record:
        return f"    FAILED ({record['error']}); see its log"
    parts = [f"accuracy {record['test_accuracy']:.4f}",
             f"{record['examples_per_s']:,.0f} examples/s"]
    if record["scheme"] != BASELINE:
        parts.append(f"throughput {shown(record['throughput_ratio'])}× baseline")
    if "time_to_target_ratio" in record and record["scheme"] != BASELINE:
        parts.append(f"time to target {shown(record['time_to_target_ratio'])}× "
                     f"baseline")
    return "    " + ", ".join(parts)


def main(argv=None):
    args = parse_args(argv)
    pyplot()  # before the runs: a missing matplotlib fails now, not at the end
    # SIGTERM ends the benchmark like Ctrl-C: the run going on is killed, and
    # its tasks with it (the launcher's tasks die with the launcher).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    os.makedirs(args.results, exist_ok=True)
    runs = plan(args)
    for planned in runs:
        planned["repeats"] = args.repeats if planned.get("main") else 1
    repeats = args.repeats
    progress = Progress(sum(planned["repeats"] for planned in runs) + 1)
    records, target = [], args.target_accuracy
    for planned in runs:
        scheme, workers, ps, batch = (planned["scheme"], planned["workers"],
                                      planned["ps"], planned["batch"])
        name = f"{scheme.name}-{workers}w-{ps}ps-b{batch}"
        attempts = []
        for attempt in range(1, planned["repeats"] + 1):
            progress.say(f"{scheme.name}, {workers} worker(s)"
                         + (f", {ps} ps" if scheme.launcher else "")
                         + f", global batch {batch}"
                         + (f", run {attempt} of {planned['repeats']}"
                            if planned["repeats"] > 1 else ""))
            attempts.append(run_once(scheme, workers, ps, args,
                                     f"{name}-{attempt}", batch))
            progress.done += 1
        finished = [attempt for attempt in attempts if "error" not in attempt]
        if scheme.name == BASELINE and target is None and finished:
            target = round(middle([attempt["test_accuracy"]
                                   for attempt in finished]) - 0.02, 4)
        record = combine(attempts, target)
        for table in ("main", "sweep", "batch_study"):
            record[table] = planned.get(table, False)
        if record["batch_study"]:
            # Compared with the baseline at the same batch, run just before.
            if scheme.name == BASELINE:
                large_baseline = record
                record["throughput_ratio"] = 1.0
            else:
                record["throughput_ratio"] = ratio(
                    record.get("examples_per_s"),
                    large_baseline.get("examples_per_s"))
        elif scheme.name == BASELINE:
            if "error" in record:
                print(summary_line(record))
                return 1  # nothing to compare with
            baseline = add_ratios(record, {})
            baseline["throughput_ratio"] = 1.0
            if baseline["time_to_target_s"] is not None:
                baseline["time_to_target_ratio"] = 1.0
        else:
            add_ratios(record, baseline)
        records.append(record)
        print(summary_line(record), flush=True)
    progress.say(f"start-up: bare import tensorflow and bash run.sh, "
                 f"{repeats} time(s) each")
    startup = measure_startup(args, repeats)
    print(f"    run.sh {startup['run_sh_s']} s, import tensorflow "
          f"{startup['import_tensorflow_s']} s: ratio {startup['ratio']}")

    command = shlex.join(["python", "benchmarks/compare.py",
                          *(sys.argv[1:] if argv is None else argv)])
    meta = {"date": datetime.date.today().isoformat(), "command": command,
            "hardware": hardware(), "software": software(),
            "examples": args.examples, "batch_size": args.batch_size,
            "window": args.window, "dataset": args.dataset, "repeats": args.repeats,
            "target_accuracy": target}
    targets = check_targets(records, startup, args.window)
    with open(os.path.join(args.results, "runs.json"), "w") as stream:
        json.dump({"meta": meta, "startup": startup, "runs": records,
                   "targets": [dict(zip(("target", "measured", "bound", "met"), row))
                               for row in targets]}, stream, indent=1)
        stream.write("\n")
    write_csv(os.path.join(args.results, "runs.csv"), records)
    write_markdown(os.path.join(args.results, "results.md"), meta, records,
                   startup, targets)
    write_plots(args.results, records)
    missed = [row[0] for row in targets if not row[3]]
    print(f"results in {os.path.relpath(args.results)}: results.md, runs.json, "
          f"runs.csv, accuracy.png, throughput.png; "
          f"{len(targets) - len(missed)} of {len(targets)} targets met")
    return 1 if any("error" in record for record in records) else 0


if __name__ == "__main__":
    sys.exit(main())
