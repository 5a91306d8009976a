#!/usr/bin/env python3
"""Benchmark on real data: every example with its own defaults on MNIST.

    python benchmarks/real_data.py                       # finds MNIST itself
    python benchmarks/real_data.py --data_dir ~/data/mnist

Each example runs the way a user runs it, `bash run.sh --dataset mnist` (the
baseline: `python Non-Distributed_Setup.py --dataset mnist`), one after the
other on this machine, with the chief measuring test accuracy every 30,000
training examples. Reported for each: the final test accuracy, the seconds
the whole command took, and the seconds of training until the test accuracy
first reached 97% and 98% ("not reached" otherwise), beside the baseline's.
Evaluation time is left out of the training seconds.

MNIST is looked for in --data_dir, else in the Keras cache
(~/.keras/datasets/mnist.npz); when neither has it, this runs the synthetic
benchmark, compare.py, instead. Nothing is downloaded.

Written to --results (default benchmarks/results/mnist): runs.json,
results.md, accuracy.png (every scheme), and one <scheme>.png per scheme
against the baseline, which the examples' READMEs show.
"""

import argparse
import datetime
import json
import os
import shlex
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compare  # noqa: E402 - the synthetic benchmark, when MNIST is missing
import machine  # noqa: E402
import plan  # noqa: E402
import runner  # noqa: E402
import write  # noqa: E402

from guide.examples import ALLREDUCE, SYNC, SYNC_WINDOW  # noqa: E402
from guide.training.flags import UsageError  # noqa: E402

REPO = plan.REPO
TARGETS = (0.97, 0.98)
EVALUATE_EVERY_EXAMPLES = 30_000
WORKERS = 2
# Examples in one global step, as a multiple of the batch: a synchronous step
# (or an allreduce) takes one minibatch from each worker, SAGN's T from each
# (T = 4 by default).
STEP_SIZE = {SYNC: WORKERS, ALLREDUCE: WORKERS, SYNC_WINDOW: WORKERS * 4}


def make_parser():
    parser = argparse.ArgumentParser(
        description=__doc__.strip().splitlines()[0],
        formatter_class=plan.Help)
    parser.add_argument("--data_dir", default=None,
                        help="folder with the four MNIST IDX files or "
                             "mnist.npz (default: the Keras cache)")
    parser.add_argument("--schemes", default=None,
                        help="comma-separated example names (default: all)")
    parser.add_argument("--results", default=os.path.join(
        REPO, "benchmarks", "results", "mnist"), help="output folder")
    parser.add_argument("--run_timeout", type=int, default=300,
                        help="seconds after which one run is stopped")
    return parser


def parse_args(argv=None):
    """The flags as given: nothing filled in, nothing checked."""
    return make_parser().parse_args(argv)


def settings(argv=None):
    """The flags, with --schemes turned into the schemes to run (the
    baseline first); an unknown one exits 2 with one argparse error line."""
    args = parse_args(argv)
    try:
        args.schemes = plan.choose(args.schemes.split(",") if args.schemes
                                   else [scheme.name for scheme in plan.SCHEMES])
    except UsageError as error:
        make_parser().error(str(error))
    return args


def find_mnist(data_dir):
    """The folder holding MNIST, or None: --data_dir, else the Keras cache."""
    if data_dir:
        folder = os.path.abspath(os.path.expanduser(data_dir))
        if not os.path.isdir(folder):
            raise SystemExit(f"real_data.py: error: --data_dir {data_dir} is "
                             f"not a folder; give the folder with the MNIST "
                             f"files")
        return folder
    cache = os.path.join(os.environ.get("KERAS_HOME") or os.path.expanduser(
        os.path.join("~", ".keras")), "datasets")
    return cache if os.path.isfile(os.path.join(cache, "mnist.npz")) else None


def command_for(scheme, data_dir, logdir):
    command = scheme.command(sys.executable)
    per_step = STEP_SIZE.get(scheme.kind, 1) * 100
    if scheme.towers:
        per_step = scheme.towers * 100  # a minibatch for each tower
    return command + ["--dataset", "mnist", "--data_dir", data_dir,
                      "--eval_every", str(round(EVALUATE_EVERY_EXAMPLES / per_step)),
                      "--logdir", logdir]


def training_seconds_to(curve, target):
    """Seconds of training, evaluations left out, until the first point at
    or above `target`; None if none is."""
    evaluating = 0.0
    for point in curve:
        if point["test_accuracy"] >= target:
            return round(point["wall_s"] - evaluating, 1)
        evaluating += point.get("eval_s", 0.0)
    return None


def late_accuracy(curve):
    """The mean test accuracy over the evaluations in the run's last tenth
    of examples: a single evaluation moves by a few tenths of a point from
    one to the next, with the minibatches last seen."""
    last = curve[-1]["examples"]
    late = [point["test_accuracy"] for point in curve
            if point["examples"] >= 0.9 * last]
    return round(sum(late) / len(late), 4)


def run_one(scheme, data_dir, results, timeout):
    logdir = os.path.join(results, "runs", scheme.name)
    shutil.rmtree(logdir, ignore_errors=True)  # a checkpoint would resume
    command = command_for(scheme, data_dir, logdir)
    record = {"scheme": scheme.name, "command": runner.shown_command(command)}
    started = time.perf_counter()
    code, _ = runner.execute(command, timeout, os.path.join(
        results, "logs", scheme.name + ".log"))
    record["command_s"] = round(time.perf_counter() - started, 1)
    if code != 0:
        record["error"] = "timed out" if code is None else f"exit code {code}"
        return record
    result, curve = runner.read_run(logdir)
    eval_s = sum(point.get("eval_s", 0.0) for point in curve)
    record.update({
        "test_accuracy": result["test_accuracy"],
        "train_steps": result["train_steps"],
        "learning_rate": result["learning_rate"],
        "examples": result["examples"],
        "training_s": round(result["wall_s"] - eval_s, 1),
        "curve": curve,
        **{f"s_to_{round(target * 100)}": training_seconds_to(curve, target)
           for target in TARGETS}})
    return record


def shown(value, suffix=""):
    return "not reached" if value is None else f"{value}{suffix}"


def markdown(meta, records):
    baseline = records[0]
    lines = [f"# MNIST, every example with its defaults ({meta['date']})", "",
             f"Command: `{meta['command']}`  ",
             f"Hardware: {meta['hardware']}  ",
             f"Software: {meta['software']}", "",
             "Each example ran as `bash run.sh --dataset mnist` (1 ps + 2 "
             "workers), one at a time. *Seconds* is the whole command, "
             "start-up and shut-down included; *to 97%* and *to 98%* are "
             "seconds of training (evaluations left out) until the test "
             "accuracy, measured every 30,000 examples, first reached them. "
             "*Late*: the mean test accuracy over the evaluations in the last "
             "tenth of the examples, which moves less from run to run than the "
             "last one.",
             "", "| example | test accuracy | − baseline | late | − baseline's | "
             "steps | examples | seconds | to 97% | to 98% |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    baseline_late = late_accuracy(baseline["curve"]) if "curve" in baseline else None
    for record in records:
        if "error" in record:
            lines.append(f"| {record['scheme']} | failed: {record['error']} "
                         f"| | | | | | {record['command_s']} | | |")
            continue
        gap = round(record["test_accuracy"] - baseline.get("test_accuracy", 0), 4)
        late = late_accuracy(record["curve"])
        late_gap = round(late - (late if baseline_late is None else baseline_late), 4)
        lines.append(
            f"| {record['scheme']} | {record['test_accuracy']:.4f} | "
            f"{gap:+.4f} | {late:.4f} | {late_gap:+.4f} | "
            f"{record['train_steps']:,} | {record['examples']:,} | "
            f"{record['command_s']} | {shown(record['s_to_97'], ' s')} | "
            f"{shown(record['s_to_98'], ' s')} |")
    return "\n".join(lines) + "\n"


def plot(results, records):
    plt = write.pyplot()
    finished = [record for record in records if "error" not in record]
    baseline = finished[0] if finished and \
        finished[0]["scheme"] == plan.BASELINE else None

    def draw(axes_pair, record, style):
        by_time, by_examples = axes_pair
        curve = record["curve"]
        accuracy = [point["test_accuracy"] for point in curve]
        by_time.plot([point["wall_s"] for point in curve], accuracy,
                     marker=".", label=record["scheme"], **style)
        by_examples.plot([point["examples"] for point in curve], accuracy,
                         marker=".", **style)

    def finish(figure, axes_pair, path, legend_columns):
        by_time, by_examples = axes_pair
        by_time.set(xlabel="seconds (evaluations included)",
                    ylabel="MNIST test accuracy", title="Test accuracy over time")
        by_examples.set(xlabel="training examples seen", title="… and over examples")
        for axes in axes_pair:
            axes.set_ylim(0.90, 0.99)
            axes.grid(alpha=0.3)
            for target in TARGETS:
                axes.axhline(target, color="grey", linewidth=0.8, linestyle=":")
        figure.legend(loc="lower center", ncol=legend_columns, fontsize=8,
                      frameon=False)
        figure.tight_layout(rect=(0, 0.14 if legend_columns > 2 else 0.08, 1, 1))
        figure.savefig(path, dpi=80)
        plt.close(figure)

    colours = plt.get_cmap("tab20").colors
    figure, axes_pair = plt.subplots(1, 2, figsize=(13, 5.5), sharey=True)
    for index, record in enumerate(finished):
        style = {"linewidth": 2.5, "color": "black"} if record is baseline else {
            "linewidth": 1.2, "color": colours[index % len(colours)],
            "linestyle": "-" if index % 2 else "--"}
        draw(axes_pair, record, style)
    finish(figure, axes_pair, os.path.join(results, "accuracy.png"), 4)
    for record in finished:
        if record is baseline:
            continue
        figure, axes_pair = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
        draw(axes_pair, baseline, {"linewidth": 2, "color": "black"})
        draw(axes_pair, record, {"linewidth": 2, "color": "tab:red"})
        finish(figure, axes_pair, os.path.join(results, f"{record['scheme']}.png"),
               2)


def main(argv=None):
    args = settings(argv)
    data_dir = find_mnist(args.data_dir)
    if data_dir is None:
        print("real_data.py: MNIST is neither in --data_dir nor in the Keras "
              "cache; running the synthetic benchmark (compare.py) instead",
              flush=True)
        return compare.main([])
    write.pyplot()  # a missing matplotlib fails now, not after the runs
    os.makedirs(args.results, exist_ok=True)
    records = []
    for index, scheme in enumerate(args.schemes, 1):
        print(f"[{index}/{len(args.schemes)}] {scheme.name}", flush=True)
        record = run_one(scheme, data_dir, args.results, args.run_timeout)
        records.append(record)
        print("    " + ("FAILED: " + record["error"] if "error" in record else
                        f"accuracy {record['test_accuracy']:.4f}, "
                        f"{record['command_s']} s, to 97% "
                        f"{shown(record['s_to_97'], ' s')}, to 98% "
                        f"{shown(record['s_to_98'], ' s')}"), flush=True)
    meta = {"date": datetime.date.today().isoformat(),
            "command": shlex.join(["python", "benchmarks/real_data.py",
                                   *(sys.argv[1:] if argv is None else argv)]),
            "hardware": machine.hardware(), "software": machine.software(),
            "data_dir": runner.shown_path(data_dir)}
    with open(os.path.join(args.results, "runs.json"), "w") as stream:
        json.dump({"meta": meta, "runs": records}, stream, indent=1)
        stream.write("\n")
    with open(os.path.join(args.results, "results.md"), "w") as stream:
        stream.write(markdown(meta, records))
    if records and "error" not in records[0]:
        plot(args.results, records)
    print(f"results in {os.path.relpath(args.results)}: results.md, runs.json, "
          f"accuracy.png and one plot per scheme")
    return 1 if any("error" in record for record in records) else 0


if __name__ == "__main__":
    sys.exit(main())
