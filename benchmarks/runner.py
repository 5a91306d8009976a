"""One run of a suite: its command, from the repository's top, with a
timeout; its output to a log; and its record, whatever happened."""

import contextlib
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

from . import commands, measures, provenance, suites

# The launcher's exit code when its own --timeout stopped the run.
LAUNCHER_TIMEOUT = 124
# Past the run's own timeout, how long the launcher has to stop it and clean
# up before this kills it.
GRACE_S = 60


def environment(extra):
    env = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    env["PYTHON"] = sys.executable  # run.sh then uses this very Python
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env | extra


def execute(argv, env, timeout, log_path):
    """Runs `argv` from the repository's top and writes the command line and
    its output to `log_path`; returns (exit code, or None if it timed out;
    the last line of its error output)."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "w") as log:
        log.write(commands.shown_command(argv, env) + "\n\n")
        log.flush()
        try:
            # run.sh execs the launcher: a timeout's kill ends it, and it its tasks.
            code = subprocess.run(argv, cwd=commands.REPO, env=environment(env),
                                  stdout=log, stderr=subprocess.STDOUT,
                                  timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            code = None
    with open(log_path, errors="replace") as log:
        lines = [line.strip() for line in log.read().splitlines()[2:] if line.strip()]
    return code, lines[-1] if lines else "no output"


def result_of(logdir):
    """A finished run's result.json, with what the launcher measured of it
    (launch.json: "network", "timeline", "tasks" and "memory") added."""
    with open(os.path.join(logdir, "result.json")) as stream:
        result = json.load(stream)
    with contextlib.suppress(FileNotFoundError), \
            open(os.path.join(logdir, "launch.json")) as stream:
        result.update(json.load(stream))
    return result


def curve_of(logdir):
    with contextlib.suppress(FileNotFoundError), \
            open(os.path.join(logdir, "accuracy_curve.json")) as stream:
        return json.load(stream)
    return []


def run_one(suite, run, folder, data_dir=None, train_examples=None):
    """Runs `run` of `suite`; returns its record, `status` "failed" with an
    `error` if it did not finish."""
    name = suites.slug(run)
    logdir = os.path.join(folder, "runs", name)
    # A checkpoint left by an earlier run would be restored, and the run
    # would start where that one ended.
    shutil.rmtree(logdir, ignore_errors=True)
    if "command" in run or run.get("simulate"):
        os.makedirs(logdir)  # for whatever the command leaves there
    argv, env = commands.command_for(run, logdir, data_dir, train_examples)
    record = {"suite": suite.name, "report": suite.report, "run": run,
              "label": suites.label(run),
              "command": commands.shown_command(argv, env),
              "started": datetime.datetime.now(datetime.UTC).isoformat(
                  timespec="seconds"),
              **provenance.source(), "versions": provenance.versions(),
              "machine": provenance.machine()}
    if train_examples:
        record["train_examples"] = train_examples
    started = time.perf_counter()
    code, last_line = execute(argv, env, run["timeout"] + GRACE_S,
                              os.path.join(folder, "logs", name + ".log"))
    seconds = round(time.perf_counter() - started, 2)
    record["measures"] = {"command_s": seconds}
    if os.path.exists(os.path.join(logdir, "result.json")):
        # An example's result, or the figures a suite's own command left
        # there for its report.
        try:
            found = {"result": result_of(logdir)}
            if run.get("simulate"):
                record["measures"].update(measures.of_simulation(found["result"]))
            elif "command" not in run:
                found["curve"] = measures.with_final_point(found["result"],
                                                           curve_of(logdir))
                record["measures"].update(measures.of_example(
                    run["scheme"], found["result"], found["curve"]))
            record.update(found)
        except (OSError, ValueError, KeyError) as error:
            code, last_line = code or 1, f"unreadable result: {error!r}"
    elif "command" not in run and code == 0:
        code, last_line = 1, "no result.json"
    if code == 0:
        record["status"] = "ok"
    else:
        record["status"] = "failed"
        record["error"] = ("timed out" if code in (None, LAUNCHER_TIMEOUT)
                           else f"exit code {code}: {last_line}")[:500]
        # What was measured before it stopped (a curve) stays in the record.
        curve = curve_of(logdir)
        if curve and "curve" not in record:
            record["curve"] = curve
            record["measures"].update({
                "s_to_97": measures.training_seconds_to(curve, 0.97),
                "examples_to_97": measures.examples_to(curve, 0.97)})
    return record
