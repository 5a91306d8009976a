"""Runs each synchronous example many times back to back, with a handful of
steps each, and counts the runs that did not end cleanly.

Not part of the test suite (30 runs of each take about 5 minutes per example
on two cores); run it with `make reliability` or:

    python tests/reliability.py [--runs 30] [--steps 20] [--cpus C] [EXAMPLE ...]

With --cpus, each run's whole job shares C CPUs' worth of time, in bursts
(tests/load.py; needs root): load on purpose, as on a busy cluster node.

A run passes when it exits 0 within --timeout seconds with its result at
--train_steps, and neither its output nor any task's log holds a Python
traceback or a closed token queue ("sync_token_q"). The log folders of
failed runs are kept and named.
"""

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from guide import examples  # noqa: E402
from load import CpuQuota  # noqa: E402

SYNCHRONOUS = [folder for folder, example in examples.BY_FOLDER.items()
               if example.synchronous]
PROBLEMS = {"Traceback (most recent call last)": "traceback",
            "sync_token_q": "token queue error"}


def problems(output, logdir):
    """What went wrong in a finished run, as short phrases."""
    texts = [output]
    logs = os.path.join(logdir, "logs")
    for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        with open(os.path.join(logs, name), errors="replace") as stream:
            texts.append(stream.read())
    return sorted({phrase for text in texts for marker, phrase in PROBLEMS.items()
                   if marker in text})


def reported_step(logdir):
    """The global step of the run's result.json, or None without one."""
    try:
        with open(os.path.join(logdir, "result.json")) as stream:
            return json.load(stream)["global_step"]
    except (OSError, ValueError, KeyError):
        return None


def run_once(example, steps, timeout, logdir, cpus=None):
    """One run, under a CPU quota of `cpus` if given; returns (seconds, list
    of problems)."""
    command = ["bash", os.path.join(REPO, example, "run.sh"), "--timeout",
               str(timeout), "--train_steps", str(steps), "--logdir", logdir]
    start = time.perf_counter()
    with CpuQuota(cpus) if cpus else contextlib.nullcontext() as quota:
        try:
            result = subprocess.run(quota.command(command) if quota else command,
                                    capture_output=True, text=True,
                                    timeout=timeout + 30, check=False)
        except subprocess.TimeoutExpired:
            return time.perf_counter() - start, ["hang: the launcher did not stop"]
    seconds = time.perf_counter() - start
    found = problems(result.stdout + result.stderr, logdir)
    if result.returncode == 124:
        found.append(f"hang: stopped after {timeout} s")
    elif result.returncode:
        found.append(f"exit code {result.returncode}")
    elif (reported := reported_step(logdir)) is None or reported < steps:
        found.append(f"result at global step {reported}, not {steps}")
    return seconds, found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", nargs="*", default=SYNCHRONOUS,
                        help="example folders (default: the synchronous ones)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=120,
                        help="seconds before a run counts as hung")
    parser.add_argument("--cpus", type=float,
                        help="run each job under a quota of this many CPUs "
                             "(tests/load.py; needs root)")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="reliability-")
    all_passed = True
    for example in args.examples:
        durations, failures = [], []
        for index in range(1, args.runs + 1):
            logdir = os.path.join(scratch, f"{example}-{index}")
            seconds, found = run_once(example, args.steps, args.timeout, logdir,
                                     args.cpus)
            durations.append(seconds)
            if found:
                failures.append((index, found, logdir))
            else:
                shutil.rmtree(logdir, ignore_errors=True)
            print(f"{example} run {index}/{args.runs}: {seconds:.1f} s "
                  f"{'; '.join(found) or 'ok'}", flush=True)
        passed = args.runs - len(failures)
        all_passed &= not failures
        under = f" under {args.cpus:g} CPUs" if args.cpus else ""
        print(f"== {example}{under}: {passed} of {args.runs} runs passed; median "
              f"{statistics.median(durations):.1f} s, slowest "
              f"{max(durations):.1f} s", flush=True)
        for index, found, logdir in failures:
            print(f"   run {index}: {'; '.join(found)} (logs in {logdir})")
    if all_passed:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
