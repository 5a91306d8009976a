"""What one run of a suite executes: the example's own `run.sh` (or the
baseline's script) with the flags that give it the suite's work, or the
suite's own command."""

import math
import os
import shlex
import sys

from guide import examples
from guide.examples import ALLREDUCE, SYNC, SYNC_WINDOW, WINDOW

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The examples' defaults the arithmetic below needs: the batch, and SAGN's
# window (a round is a window from each worker).
DEFAULT_BATCH, DEFAULT_SAGN_WINDOW = 100, 4
PRELOAD = "LAUNCH_PRELOAD_TENSORFLOW"


def examples_per_step(example, workers, batch, window):
    """Training examples in one global step of `example`, where `batch` is
    each worker's minibatch."""
    if example.kind == SYNC_WINDOW:
        return (workers or example.workers) * (window or DEFAULT_SAGN_WINDOW) * batch
    if example.kind in (SYNC, ALLREDUCE):
        return (workers or example.workers) * batch
    return batch  # towers split theirs


def example_flags(run, data_dir, train_examples=None):
    """The flags of an example run (its logdir and cluster size aside)."""
    example = examples.BY_NAME[run["scheme"]]
    workers, window = run.get("workers"), run.get("window")
    flags = []
    batch = run.get("batch")
    if batch and example.synchronous:
        batch = max(1, batch // workers)  # the global batch, split
    batch = run.get("worker_batch", batch)  # each worker's, whatever the scheme
    if window and example.kind in (WINDOW, SYNC_WINDOW):
        flags += ["--communication_window", str(window)]
    per_step = examples_per_step(example, workers, batch or DEFAULT_BATCH, window)
    steps = run.get("train_steps")
    if "examples" in run:
        steps = max(1, round(run["examples"] / per_step))
    elif train_examples:
        steps = math.ceil(train_examples / per_step)
    if steps:
        flags += ["--train_steps", str(steps)]
    if batch:
        flags += ["--batch_size", str(batch)]
    if "evaluations" in run and steps:
        flags += ["--eval_every", str(max(1, steps // run["evaluations"])),
                  "--log_every", str(steps)]
    elif "eval_every_examples" in run:
        flags += ["--eval_every",
                  str(max(1, round(run["eval_every_examples"] / per_step)))]
    elif "eval_every" in run:
        flags += ["--eval_every", str(run["eval_every"])]
    flags += ["--dataset", run["dataset"]]
    if data_dir:
        flags += ["--data_dir", data_dir]
    if example.name == "Synchronous-SGD-different-learning-rates" and "examples" in run:
        # On the same work as the others: rates around the common 0.2, the
        # fastest and slowest 1.5 : 0.5.
        count = workers or example.workers
        rates = [0.2 * (1.5 - i / max(1, count - 1)) for i in range(count)]
        flags += ["--learning_rates", ",".join(f"{rate:.3g}" for rate in rates)]
    if example.towers and workers:
        flags += ["--towers", str(workers)]
    return flags + run.get("flags", [])


def command_for(run, logdir, data_dir=None, train_examples=None):
    """(argv, extra environment) of one run, from the repository's top."""
    if "command" in run:
        argv = [sys.executable if word == "python" else
                word.replace("{logdir}", logdir) for word in run["command"]]
        return argv, {}
    example = examples.BY_NAME[run["scheme"]]
    if run.get("simulate"):
        return simulator_command(run, logdir, data_dir), {}
    argv = example.command(sys.executable) + example_flags(run, data_dir,
                                                           train_examples)
    argv += ["--logdir", logdir]
    if example.cluster:
        argv += ["--workers", str(run["workers"])]
        if "ps" in run:
            argv += ["--ps", str(run["ps"])]
        if "network" in run:
            argv += ["--network", run["network"]]
        if run.get("rate", "none") != "none":
            argv += ["--bandwidth", run["rate"]]
        argv += ["--timeout", str(run["timeout"])]
    env = {}
    if "preload" in run:
        env[PRELOAD] = "1" if run["preload"] else "0"
    return argv, env


def simulator_command(run, logdir, data_dir):
    """The simulator's play of the example's run on this machine: the same
    flags, the same cluster, its figures in the logdir's result.json."""
    argv = [sys.executable, "-m", "simulator", run["scheme"], "--workers",
            str(run["workers"])]
    if "ps" in run:
        argv += ["--ps", str(run["ps"])]
    if run.get("rate", "none") != "none":
        argv += ["--bandwidth", run["rate"]]
    return argv + ["--machine", "this"] + example_flags(run, data_dir) + [
        "--json", "--result", os.path.join(logdir, "result.json")]


def shown_command(argv, env=None):
    """`argv` as one shell line, with this Python shown as `python` and its
    paths as `shown_path` shows them, its environment first."""
    words = ("python" if part == sys.executable else shown_path(part)
             for part in argv)
    # A leading ~/ unquoted, so that a shell still expands it.
    line = " ".join("~/" + shlex.quote(word[2:]) if word.startswith("~/")
                    else shlex.quote(word) for word in words)
    prefix = "".join(f"{key}={shlex.quote(value)} " for key, value
                     in sorted((env or {}).items()))
    return prefix + line


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
