#!/usr/bin/env python3
"""Where a job's start-up goes, and what preloading TensorFlow saves.

    python benchmarks/startup.py [--workers 2,4] [--repeats 3]

Runs `bash Hogwild/run.sh --workers W --train_steps 200 --eval_every 0`
(synthetic data, the job's own network) with each task a new Python, as
users get it, and with LAUNCH_PRELOAD_TENSORFLOW=1 (the launcher imports
TensorFlow once and forks every task), one after the other, --repeats
times each. For each run: the start-up (the launcher's start to the chief's
RESULT line, from launch.json's timeline, less the chief's wall_s: its
training from its first step, so what is left is start-up and one final
evaluation), and the whole command. Medians, side by side, with a bare
`import tensorflow` for scale. Written to --results (default
benchmarks/results/startup): results.md and runs.json.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine  # noqa: E402
import runner  # noqa: E402

from launcher.forking import PRELOAD  # noqa: E402

REPO = runner.REPO
WAYS = {"a new Python per task": "0", "forked from a preloaded launcher": "1"}
RUN_TIMEOUT_S = 300


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--workers", default="2,4",
                        help="comma-separated worker counts")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each way per worker count")
    parser.add_argument("--results", default=os.path.join(
        REPO, "benchmarks", "results", "startup"), help="output folder")
    return parser


def settings(argv=None):
    """The flags, checked: a bad one exits 2 with one line."""
    parser = make_parser()
    args = parser.parse_args(argv)
    args.workers = runner.worker_counts(parser, args.workers)
    if args.repeats < 1 or min(args.workers) < 1:
        parser.error("--repeats and --workers take numbers of at least 1")
    return args


def startup_s(result):
    """The launch to RESULT, less the chief's training."""
    return round(result["timeline"]["launch_to_result_s"] - result["wall_s"], 2)


def run_one(workers, preload, logdir):
    """One run's start-up and command time; or its `error`, in one line."""
    shutil.rmtree(logdir, ignore_errors=True)
    command = ["bash", os.path.join(REPO, "Hogwild", "run.sh"), "--workers",
               str(workers), "--network", "private", "--timeout",
               str(RUN_TIMEOUT_S), "--train_steps", "200", "--eval_every", "0",
               "--logdir", logdir]
    env = dict(runner.benchmark_env(), **{PRELOAD: preload})
    started = time.perf_counter()
    try:
        # run.sh execs the launcher: a timeout's kill ends it, and it its tasks.
        subprocess.run(command, env=env, capture_output=True, check=True,
                       timeout=RUN_TIMEOUT_S + 30)
        command_s = round(time.perf_counter() - started, 2)
        return {"startup_s": startup_s(runner.result_of(logdir)),
                "command_s": command_s}
    except subprocess.CalledProcessError as error:
        lines = error.stderr.decode(errors="replace").strip().splitlines()
        return {"error": f"exit code {error.returncode}: "
                         f"{lines[-1] if lines else 'no output'}"}
    except (subprocess.TimeoutExpired, OSError, ValueError, KeyError) as error:
        return {"error": f"{type(error).__name__}: {error}"}


def summary(records):
    """Medians per worker count and way, and the ratio of the two ways."""
    rows = []
    for workers in dict.fromkeys(record["workers"] for record in records):
        medians = {}
        for way in WAYS:
            runs = [record for record in records if record["workers"] == workers
                    and record["way"] == way and "error" not in record]
            if runs:
                medians[way] = {key: round(statistics.median(
                    run[key] for run in runs), 2) for key in ("startup_s", "command_s")}
        failed = [way for way in WAYS if way not in medians]
        if failed:
            rows.append({"workers": workers, "error": f"every run {failed[0]} failed"})
            continue
        new, forked = (medians[way] for way in WAYS)
        rows.append({"workers": workers, "medians": medians,
                     "startup_ratio": round(new["startup_s"] / forked["startup_s"], 2)})
    return rows


def markdown(meta, rows):
    lines = [f"# Start-up, with and without preloading TensorFlow ({meta['date']})",
             "", f"Command: `{meta['command']}`  ", f"Hardware: {meta['hardware']}  ",
             f"Software: {meta['software']}", "",
             f"A bare `import tensorflow`: {meta['import_tensorflow_s']} s. "
             "*Start-up*: the launcher's start to the chief's RESULT line, less "
             "its training (so start-up and one final evaluation); *command*: "
             f"the whole `bash run.sh`. Medians of {meta['repeats']} runs.", "",
             "| workers | way | start-up | command |", "|---|---|---|---|"]
    for row in rows:
        for way, median in row.get("medians", {}).items():
            lines.append(f"| {row['workers']} | {way} | {median['startup_s']} s | "
                         f"{median['command_s']} s |")
    lines += ["", *(f"- {row['workers']} workers: " + (
        row["error"] if "error" in row else
        f"preloading makes start-up {row['startup_ratio']}x shorter")
        for row in rows)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = settings(argv)
    os.makedirs(args.results, exist_ok=True)
    import_s = runner.median_seconds([sys.executable, "-c", "import tensorflow"],
                                     args.repeats)
    records = []
    for workers in args.workers:
        for repeat in range(args.repeats):
            # Alternating, so that a slower minute of the machine hits both.
            for way, preload in WAYS.items():
                record = {"workers": workers, "way": way, "repeat": repeat,
                          **run_one(workers, preload, os.path.join(
                              args.results, "runs", f"{workers}w-{preload}"))}
                records.append(record)
                print(f"{workers} workers, {way}: " + (record["error"] if "error"
                      in record else f"start-up {record['startup_s']} s, "
                      f"command {record['command_s']} s"), flush=True)
    meta = {"date": datetime.date.today().isoformat(),
            "command": " ".join(["python", "benchmarks/startup.py", *map(
                runner.shown_path, sys.argv[1:] if argv is None else argv)]),
            "hardware": machine.hardware(), "software": machine.software(),
            "import_tensorflow_s": import_s, "repeats": args.repeats}
    rows = summary(records)
    with open(os.path.join(args.results, "runs.json"), "w") as stream:
        json.dump({"meta": meta, "runs": records, "summary": rows}, stream, indent=1)
        stream.write("\n")
    with open(os.path.join(args.results, "results.md"), "w") as stream:
        stream.write(markdown(meta, rows))
    print(markdown(meta, rows))
    return 1 if any("error" in record for record in records) else 0


if __name__ == "__main__":
    sys.exit(main())
