"""Running the benchmark: one run of one configuration through the
example's own run.sh, what it measured, and the start-up cost."""

import contextlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

from plan import REPO, command_for
from summarise import ratio, rounds_per_1000

# The launcher's exit code when its own --timeout stopped the run.
LAUNCHER_TIMEOUT = 124


def run_once(scheme, workers, ps, args, name, global_batch):
    """Runs one configuration; returns its record, with `error` set if the
    run failed."""
    logdir = os.path.join(args.results, "runs", name)
    # A checkpoint left by an earlier benchmark would be restored, and the
    # run would start where that one ended.
    shutil.rmtree(logdir, ignore_errors=True)
    command = command_for(scheme, workers, ps, args, logdir, global_batch)
    record = {"scheme": scheme.name, "kind": scheme.kind, "workers": workers,
              "ps": ps if scheme.cluster else 0, "global_batch": global_batch,
              "command": shown_command(command)}
    started = time.perf_counter()
    code, _ = execute(command, args.run_timeout + 30,
                      os.path.join(args.results, "logs", name + ".log"))
    record["elapsed_s"] = round(time.perf_counter() - started, 2)
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
    result, curve = read_run(logdir)
    return {
        "test_accuracy": result["test_accuracy"], "wall_s": result["wall_s"],
        "examples": result["examples"], "examples_per_s": result["examples_per_s"],
        "rounds_per_1000_examples": rounds_per_1000(scheme, result),
        "mean_staleness": result.get("mean_staleness"),
        "communication_window": result.get("communication_window"),
        # The chief's evaluations for the curve, inside wall_s.
        "eval_s": round(sum(point.get("eval_s", 0) for point in curve), 3),
        "curve": curve}


def shown_command(command):
    """`command` as one shell line, with this Python shown as `python` and
    its paths as `shown_path` shows them."""
    words = ("python" if part == sys.executable else shown_path(part)
             for part in command)
    # A leading ~/ unquoted, so that a shell still expands it.
    return " ".join("~/" + shlex.quote(word[2:]) if word.startswith("~/")
                    else shlex.quote(word) for word in words)


def shown_path(path):
    """`path` as the results show it: relative to the repository's top
    (where every command runs) if it is near it, under `~` if it is in the
    home folder, so that no result names the folders of the machine it
    ran on."""
    if not path or not os.path.isabs(path):
        return path
    if path.startswith(os.path.dirname(REPO) + os.sep):
        return os.path.relpath(path, REPO)
    home = os.path.expanduser("~")
    if path.startswith(home + os.sep):
        return os.path.join("~", os.path.relpath(path, home))
    return path


def execute(command, timeout, log_path):
    """Runs `command` from the repository's top, writes the command line and
    its output to `log_path`; returns (exit code or None if it timed out,
    output)."""
    try:
        finished = subprocess.run(command, cwd=REPO, env=benchmark_env(),
                                  capture_output=True, text=True,
                                  timeout=timeout, check=False)
        output, code = finished.stdout + finished.stderr, finished.returncode
    except subprocess.TimeoutExpired as timeout:
        output = b"".join(part or b"" for part in (timeout.stdout, timeout.stderr))
        output, code = output.decode(errors="replace"), None
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "w") as stream:
        stream.write(shown_command(command) + "\n\n" + output)
    return code, output


def result_of(logdir):
    """A finished run's result.json, with what the launcher measured of it
    (launch.json: "network" and "timeline") added."""
    with open(os.path.join(logdir, "result.json")) as stream:
        result = json.load(stream)
    with contextlib.suppress(FileNotFoundError), \
            open(os.path.join(logdir, "launch.json")) as stream:
        result.update(json.load(stream))
    return result


def read_run(logdir):
    """A finished run's result.json, and its accuracy curve ending with the
    final evaluation."""
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
    return result, curve


def worker_counts(parser, text):
    """--workers' comma-separated counts; anything else is `parser`'s
    one-line error, exit 2."""
    try:
        return [int(count) for count in text.split(",")]
    except ValueError:
        parser.error(f"--workers takes comma-separated numbers, not {text!r}")


def benchmark_env():
    env = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    env["PYTHON"] = sys.executable  # run.sh then uses this very Python
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


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


class Progress:
    """Prints which run of how many is going, and the time so far."""

    def __init__(self, total):
        self.total, self.done = total, 0
        self.started = time.perf_counter()

    def say(self, text):
        elapsed = int(time.perf_counter() - self.started)
        print(f"[{self.done + 1:2}/{self.total} {elapsed // 60}:{elapsed % 60:02}] "
              f"{text}", flush=True)


