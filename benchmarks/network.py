#!/usr/bin/env python3
"""What the network costs each scheme: every distributed example on MNIST,
with each task on a link of its own, at no limit, 1 Gbit/s and 100 Mbit/s.

    python benchmarks/network.py                      # finds MNIST itself
    python benchmarks/network.py --data_dir ~/data/mnist --workers 2 \\
        --schemes Hogwild,DOWNPOUR --rates none,100mbit

Each run is the example's own `bash run.sh --network hosts [--bandwidth
RATE] --workers W --dataset mnist` (windowed schemes with
`--communication_window 8`, --window), the chief measuring test accuracy
every 30,000 training examples. The run at no limit trains with the
example's defaults; at a limit, a run trains for 1.25 times the examples
the unlimited run needed to reach 97% (or with the defaults, if it never
did), so that a slow link does not spend minutes past the point measured.
Reported for each: seconds of training until 97% test accuracy
(evaluations left out), examples per second, the bytes the tasks sent per
example, those of the busiest link (the ps's, each way: launcher/traffic.py)
and the examples per second that link lets through at its rate (the
bound), with the measured rate as a share of it. The baseline runs once,
for reference.

Written to --results (default benchmarks/results/network): runs.json,
results.md and network.png. Nothing is downloaded: without MNIST it stops
with one line.
"""

import argparse
import contextlib
import datetime
import json
import math
import os
import shlex
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine  # noqa: E402
import real_data  # noqa: E402
import runner  # noqa: E402
import write  # noqa: E402

from guide import examples  # noqa: E402
from launcher.shaping import bits_per_second  # noqa: E402

REPO = runner.REPO
TARGET = 0.97
EVALUATE_EVERY_EXAMPLES = 30_000
BATCH = 100
# Past the examples the unlimited run needed, what a limited one trains.
MARGIN = 1.25
NO_LIMIT = "none"
WINDOWED = (examples.WINDOW, examples.SYNC_WINDOW)


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--data_dir", help="folder with the MNIST files "
                                           "(default: the Keras cache)")
    parser.add_argument("--schemes", help="comma-separated example names "
                                          "(default: every one with a ps or "
                                          "an allreduce)")
    parser.add_argument("--rates", default=f"{NO_LIMIT},1gbit,100mbit",
                        help="comma-separated link rates (none: no limit)")
    parser.add_argument("--workers", default="2,4",
                        help="comma-separated worker counts")
    parser.add_argument("--window", type=int, default=8,
                        help="--communication_window of the windowed schemes")
    parser.add_argument("--run_timeout", type=int, default=600,
                        help="seconds after which one run is stopped")
    parser.add_argument("--add", action="store_true",
                        help="keep the runs already in --results' runs.json "
                             "that this invocation does not redo")
    parser.add_argument("--results", default=os.path.join(
        REPO, "benchmarks", "results", "network"), help="output folder")
    return parser


def settings(argv=None):
    """The flags, checked: a bad one exits 2 with one line."""
    parser = make_parser()
    args = parser.parse_args(argv)
    distributed = [example for example in examples.EXAMPLES
                   if example.run_sh == "run.sh" and example.cluster]
    names = {example.name: example for example in distributed}
    chosen = args.schemes.split(",") if args.schemes else list(names)
    unknown = [name for name in chosen if name not in names]
    if unknown:
        parser.error(f"unknown scheme {unknown[0]!r}; choose from "
                     f"{', '.join(names)}")
    args.schemes = [names[name] for name in chosen]
    args.rates = args.rates.split(",")
    for rate in args.rates:
        if rate != NO_LIMIT:
            try:
                bits_per_second(rate)
            except ValueError as error:
                parser.error(f"--rates takes {NO_LIMIT} or {error}")
    args.workers = runner.worker_counts(parser, args.workers)
    return args


def examples_per_step(scheme, workers, window):
    """The training examples in one global step of `scheme`."""
    if scheme.kind == examples.SYNC_WINDOW:
        return workers * window * BATCH
    if scheme.kind in (examples.SYNC, examples.ALLREDUCE):
        return workers * BATCH
    return BATCH


def command_for(scheme, rate, workers, args, data_dir, logdir, train_examples=None):
    per_step = examples_per_step(scheme, workers, args.window)
    command = scheme.command(sys.executable) + [
        "--network", "hosts", *(["--bandwidth", rate] if rate != NO_LIMIT else []),
        "--workers", str(workers), "--timeout", str(args.run_timeout),
        "--dataset", "mnist", "--data_dir", data_dir,
        "--eval_every", str(max(1, round(EVALUATE_EVERY_EXAMPLES / per_step))),
        "--logdir", logdir]
    if scheme.kind in WINDOWED:
        command += ["--communication_window", str(args.window)]
    if train_examples:
        command += ["--train_steps", str(math.ceil(train_examples / per_step))]
    return command


def examples_to(curve, target):
    """Training examples until the first point at or above `target`."""
    return next((point["examples"] for point in curve
                 if point["test_accuracy"] >= target), None)


def run_one(scheme, rate, workers, args, data_dir, train_examples=None):
    name = f"{scheme.name}-{workers}w-{rate}"
    logdir = os.path.join(args.results, "runs", name)
    shutil.rmtree(logdir, ignore_errors=True)  # a checkpoint would resume
    command = command_for(scheme, rate, workers, args, data_dir, logdir,
                          train_examples)
    record = {"scheme": scheme.name, "workers": workers, "rate": rate,
              "command": runner.shown_command(command)}
    started = time.perf_counter()
    code, _ = runner.execute(command, args.run_timeout + 60, os.path.join(
        args.results, "logs", name + ".log"))
    record["command_s"] = round(time.perf_counter() - started, 1)
    curve = []
    curve_path = os.path.join(logdir, "accuracy_curve.json")
    with contextlib.suppress(FileNotFoundError), open(curve_path) as stream:
        curve = json.load(stream)
    record["s_to_97"] = real_data.training_seconds_to(curve, TARGET)
    record["examples_to_97"] = examples_to(curve, TARGET)
    if code != 0:
        timed_out = code in (None, runner.LAUNCHER_TIMEOUT)
        return dict(record, error="timed out" if timed_out else f"exit code {code}")
    record.update(measured(runner.result_of(logdir), curve, rate))
    return record


def evaluations_before(curve, target):
    """Seconds of the chief's evaluations before the first point at or above
    `target`, the one at the start included."""
    reached = next((index for index, point in enumerate(curve)
                    if point["test_accuracy"] >= target), None)
    if reached is None:
        return None
    return round(sum(point.get("eval_s", 0.0) for point in curve[:reached]), 1)


def measured(result, curve, rate):
    """A finished run's throughput, bytes, link bound and where its time
    went: start-up (the launch to the chief's first step, less its first
    evaluation) and evaluations until 97%."""
    eval_s = sum(point.get("eval_s", 0.0) for point in curve)
    training_s = max(result["wall_s"] - eval_s, 1e-9)
    network = result.get("network", {})
    timeline = result.get("timeline", {})
    figures = {"test_accuracy": result["test_accuracy"],
               "examples": result["examples"],
               "examples_per_s": round(result["examples"] / training_s),
               "bytes_per_example": network.get("bytes_per_example"),
               "busiest_link": network.get("busiest_link"),
               "busiest_bytes_per_example":
                   network.get("busiest_link_bytes_per_example"),
               "evaluations_to_97_s": evaluations_before(curve, TARGET)}
    if "launch_to_result_s" in timeline:  # less the first and last evaluation
        evaluations = 2 * curve[0].get("eval_s", 0.0) if curve else 0.0
        figures["startup_s"] = round(timeline["launch_to_result_s"]
                                     - result["wall_s"] - evaluations, 1)
    busiest = figures["busiest_bytes_per_example"]
    if rate != NO_LIMIT and busiest:
        bound = bits_per_second(rate) / 8 / busiest
        figures["bound_examples_per_s"] = round(bound)
        figures["share_of_bound"] = round(figures["examples_per_s"] / bound, 2)
    return figures


def with_compute_bounds(records):
    """Each limited run's bound if its computation and its link take turns:
    the unlimited run's time per example plus the link's; and its share."""
    unlimited = {(record["scheme"], record["workers"]): record
                 for record in records if record["rate"] == NO_LIMIT}
    for record in records:
        free = unlimited.get((record["scheme"], record["workers"]), {})
        if record.get("bound_examples_per_s") and free.get("examples_per_s"):
            serial = 1 / (1 / free["examples_per_s"]
                          + 1 / record["bound_examples_per_s"])
            record["serial_bound_examples_per_s"] = round(serial)
            record["share_of_serial_bound"] = round(
                record["examples_per_s"] / serial, 2)
    return records


def against_baseline(records, baseline):
    """Each unlimited run's time to 97% against the baseline's, its examples
    to 97% against the baseline's, and its training split into the
    baseline's time for as many examples and the rest."""
    baseline_examples = examples_to(baseline.get("curve", []), TARGET)
    if not (baseline.get("s_to_97") and baseline_examples):
        return records
    baseline_rate = baseline["examples"] / baseline["training_s"]
    for record in records:
        if record["rate"] == NO_LIMIT and record["s_to_97"]:
            compute_s = record["examples_to_97"] / baseline_rate
            record.update({
                "times_baseline": round(record["s_to_97"] / baseline["s_to_97"], 2),
                "examples_times_baseline": round(
                    record["examples_to_97"] / baseline_examples, 2),
                "baseline_compute_s": round(compute_s, 1),
                "beyond_compute_s": round(record["s_to_97"] - compute_s, 1)})
    return records


# What the targets allow at no limit, as a multiple of the
# baseline's time to 97%, by how a scheme talks to the ps.
NO_LIMIT_TARGETS = {examples.WINDOW: 2.0, examples.SYNC_WINDOW: 2.0,
                    examples.EVERY_STEP: 3.0, examples.SYNC: 4.0,
                    examples.ALLREDUCE: 4.0}
WINDOWED_SPEED_UP, BOUND_FACTOR, SLOW_LINK = 4.0, 1.5, "100mbit"


def verdicts(records):
    """The targets, met or missed, one line each, from the records."""
    kinds = {name: example.kind for name, example in examples.BY_NAME.items()}
    by_key = {(record["scheme"], record["workers"], record["rate"]): record
              for record in records}
    lines = []
    for (scheme, workers, rate), record in by_key.items():
        hogwild, windowed = by_key.get(("Hogwild", workers, rate), {}), \
            rate == SLOW_LINK and kinds.get(scheme) in WINDOWED
        if windowed and not record["s_to_97"]:
            lines.append(f"- {scheme}, {workers} workers, {rate}: did not reach "
                         f"97%: missed")
        elif windowed and hogwild.get("s_to_97"):
            speed_up = hogwild["s_to_97"] / record["s_to_97"]
            lines.append(f"- {scheme}, {workers} workers, {rate}: reached 97% "
                         f"{speed_up:.1f}x sooner than Hogwild (target "
                         f"{WINDOWED_SPEED_UP:g}x): "
                         f"{'met' if speed_up >= WINDOWED_SPEED_UP else 'missed'}")
        free = by_key.get((scheme, workers, NO_LIMIT), {})
        if (record.get("share_of_bound") and free.get("examples_per_s")
                and record["bound_examples_per_s"] < free["examples_per_s"]):
            share = record["share_of_bound"]
            lines.append(f"- {scheme}, {workers} workers, {rate}: {share} of "
                         f"the link's bound (target {1 / BOUND_FACTOR:.2f}): "
                         f"{'met' if share * BOUND_FACTOR >= 1 else 'missed'}; "
                         f"{record.get('share_of_serial_bound')} of the bound "
                         "with compute")
        if "times_baseline" in record and kinds.get(scheme) in NO_LIMIT_TARGETS:
            allowed = NO_LIMIT_TARGETS[kinds[scheme]]
            times = record["times_baseline"]
            lines.append(f"- {scheme}, {workers} workers, no limit: {times}x "
                         f"the baseline's time to 97% (target {allowed:g}x): "
                         f"{'met' if times <= allowed else 'missed'}")
    return lines


def shown(value, suffix=""):
    return "–" if value is None else f"{value:,}{suffix}" \
        if isinstance(value, int) else f"{value}{suffix}"


def markdown(meta, records):
    lines = [f"# What the network costs ({meta['date']})", "",
             f"Command: `{meta['command']}`  ", f"Hardware: {meta['hardware']}  ",
             f"Software: {meta['software']}", "",
             "Every task on a link of its own (`--network hosts`), limited to "
             "the rate each way. *To 97%*: seconds of training, evaluations "
             "left out. *Bytes/example*: all that the tasks sent, per training "
             "example; *busiest link*: the busiest link's (the ps's, where "
             "there is one), each way; *bound*: the examples per second that "
             "link lets through at its rate.", "",
             "*With compute*: the bound if the exchanges and the computation "
             "take turns, from the unlimited run's time per example plus the "
             "link's.", "",
             "| example | workers | link | to 97% | examples/s | bytes/example "
             "| busiest link bytes/example | bound (examples/s) | measured / bound "
             "| bound with compute | measured / that |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for record in records:
        lines.append(
            f"| {record['scheme']} | {record['workers']} | {record['rate']} | "
            f"{shown(record['s_to_97'], ' s')} | "
            f"{shown(record.get('examples_per_s'))} | "
            f"{shown(record.get('bytes_per_example'))} | "
            f"{shown(record.get('busiest_bytes_per_example'))} | "
            f"{shown(record.get('bound_examples_per_s'))} | "
            f"{shown(record.get('share_of_bound'))} | "
            f"{shown(record.get('serial_bound_examples_per_s'))} | "
            f"{shown(record.get('share_of_serial_bound'))}"
            f"{' (' + record['error'] + ')' if 'error' in record else ''} |")
    lines += ["", "## Where the time goes with no limit", "",
              "From the launch to 97%: *start-up* until the chief's first "
              "step (its first evaluation left out), the chief's "
              "*evaluations* until 97%, and *training* until 97%. Training "
              "is then split into what the baseline took for as many "
              "examples, and the rest: the exchanges and the tasks sharing "
              "the cores. *× baseline*: time to 97% against the baseline's "
              f"({shown(meta.get('baseline_s_to_97'), ' s')}), and the "
              "examples needed against the baseline's.", "",
              "| example | workers | start-up | evaluations | training | of which "
              "the baseline's compute | the rest | × baseline (time) "
              "| × baseline (examples) |", "|---|---|---|---|---|---|---|---|---|"]
    for record in records:
        if record["rate"] == NO_LIMIT:
            lines.append(
                f"| {record['scheme']} | {record['workers']} | "
                f"{shown(record.get('startup_s'), ' s')} | "
                f"{shown(record.get('evaluations_to_97_s'), ' s')} | "
                f"{shown(record['s_to_97'], ' s')} | "
                f"{shown(record.get('baseline_compute_s'), ' s')} | "
                f"{shown(record.get('beyond_compute_s'), ' s')} | "
                f"{shown(record.get('times_baseline'))} | "
                f"{shown(record.get('examples_times_baseline'))} |")
    lines += ["", "## Targets", "", *verdicts(records)]
    return "\n".join(lines) + "\n"


def plot(path, records, rates, worker_counts):
    """Seconds to 97% per scheme, a bar per link rate, a panel per worker
    count; a scheme that did not get there has no bar."""
    plt = write.pyplot()
    schemes = list(dict.fromkeys(record["scheme"] for record in records))
    figure, panels = plt.subplots(len(worker_counts), 1, squeeze=False,
                                  figsize=(max(8, len(schemes) * 1.1),
                                           3.5 * len(worker_counts)))
    width = 0.8 / len(rates)
    for panel, workers in zip(panels[:, 0], worker_counts):
        for offset, rate in enumerate(rates):
            seconds = {record["scheme"]: record["s_to_97"] for record in records
                       if record["workers"] == workers and record["rate"] == rate}
            panel.bar([index + offset * width for index in range(len(schemes))],
                      [seconds.get(scheme) or 0 for scheme in schemes], width,
                      label=rate if rate != NO_LIMIT else "no limit")
        panel.set_xticks([index + 0.4 - width / 2 for index in range(len(schemes))])
        panel.set_xticklabels(schemes, rotation=30, ha="right", fontsize=8)
        panel.set(ylabel="seconds to 97%", title=f"{workers} workers")
        panel.set_yscale("log")
        panel.grid(alpha=0.3, axis="y")
        panel.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def merged(path, meta, records):
    """`records` in place of the runs of `path` they redo, the others kept
    in their order; the meta says both commands."""
    if not os.path.exists(path):
        return meta, records
    with open(path) as stream:
        earlier = json.load(stream)
    redone = {(run["scheme"], run["workers"], run["rate"]) for run in records}
    kept = [run for run in earlier["runs"]
            if (run["scheme"], run["workers"], run["rate"]) not in redone]
    order = {example.name: index for index, example in enumerate(examples.EXAMPLES)}
    runs = sorted(kept + records, key=lambda record: (
        order.get(record["scheme"], len(order)), record["workers"]))
    old = earlier["meta"]
    meta["baseline_s_to_97"] = f"{old['baseline_s_to_97']}, then " \
                               f"{meta['baseline_s_to_97']}"
    meta["command"] = f"{old['command']}`, then `{meta['command']}"
    return meta, runs


def main(argv=None):
    args = settings(argv)
    data_dir = real_data.find_mnist(args.data_dir)
    if data_dir is None:
        raise SystemExit("network.py: error: MNIST is neither in --data_dir nor "
                         "in the Keras cache; give --data_dir the folder with "
                         "its files")
    write.pyplot()  # a missing matplotlib fails now, not after the runs
    os.makedirs(args.results, exist_ok=True)
    records = []
    baseline = real_data.run_one(examples.BASELINE, data_dir, args.results,
                                 args.run_timeout)
    print(f"baseline: to 97% {real_data.shown(baseline.get('s_to_97'), ' s')}",
          flush=True)
    limited = [rate for rate in args.rates if rate != NO_LIMIT]
    for scheme in args.schemes:
        for workers in args.workers:
            # First with no limit, which also says how far the others train.
            unlimited = run_one(scheme, NO_LIMIT, workers, args, data_dir)
            needed = unlimited["examples_to_97"]
            runs = [unlimited] if NO_LIMIT in args.rates else []
            for rate in limited:
                runs.append(run_one(scheme, rate, workers, args, data_dir,
                                    needed and round(needed * MARGIN)))
            for record in runs:
                records.append(record)
                print(f"{scheme.name}, {workers} workers, {record['rate']}: to "
                      f"97% {shown(record['s_to_97'], ' s')}, "
                      f"{shown(record.get('examples_per_s'))} examples/s, "
                      f"{shown(record.get('bytes_per_example'))} bytes/example"
                      f"{', ' + record['error'] if 'error' in record else ''}",
                      flush=True)
    against_baseline(records, baseline)
    new_records = list(records)
    meta = {"date": datetime.date.today().isoformat(),
            "command": shlex.join(["python", "benchmarks/network.py", *map(
                runner.shown_path, sys.argv[1:] if argv is None else argv)]),
            "hardware": machine.hardware(), "software": machine.software(),
            "baseline_s_to_97": baseline.get("s_to_97")}
    if args.add:
        meta, records = merged(os.path.join(args.results, "runs.json"), meta,
                               records)
    with_compute_bounds(records)
    with open(os.path.join(args.results, "runs.json"), "w") as stream:
        json.dump({"meta": meta, "runs": records}, stream, indent=1)
        stream.write("\n")
    with open(os.path.join(args.results, "results.md"), "w") as stream:
        stream.write(markdown(meta, records))
    plot(os.path.join(args.results, "network.png"), records, args.rates,
         args.workers)
    print(f"results in {os.path.relpath(args.results)}: results.md, runs.json, "
          f"network.png")
    return 1 if any("error" in record and record["s_to_97"] is None
                    for record in new_records) else 0


if __name__ == "__main__":
    sys.exit(main())
