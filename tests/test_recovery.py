"""Recovery: with --max_restarts, a killed worker, chief or ps is started
again and the run completes, resuming where it can."""

import json
import os
import re
import signal

from conftest import PYTHON, REPO, Running, read_result

LAUNCH = os.path.join(REPO, "launch.py")


def task_pid(logdir, job, index):
    """The pid of the live task `job:index` of the run writing to `logdir`,
    found by its TF_CONFIG (the launcher does not print pids)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                if str(logdir).encode() not in stream.read():
                    continue
            with open(f"/proc/{pid}/environ", "rb") as stream:
                environ = dict(item.split(b"=", 1) for item in
                               stream.read().split(b"\0") if b"=" in item)
        except OSError:
            continue
        if b"TF_CONFIG" not in environ:
            continue
        task = json.loads(environ[b"TF_CONFIG"])["task"]
        if (task["type"], task["index"]) == (job, index):
            return int(pid)
    raise AssertionError(f"no live {job}:{index} for {logdir}")


def kill(run, logdir, job, index, restart_number, max_restarts):
    os.kill(task_pid(logdir, job, index), signal.SIGKILL)
    run.wait_for_line(
        rf"^\[launch\] {job}:{index} died \(signal 9\); restarting it "
        rf"\({restart_number} of {max_restarts}\)", timeout=60)


def test_hogwild_survives_a_killed_worker_chief_and_ps(run_dir):
    logdir = run_dir / "run"
    train_steps = 3000
    run = Running([PYTHON, LAUNCH, "--max_restarts", "3", "--timeout", "170",
                   "--", os.path.join(REPO, "Hogwild", "hogwild.py"),
                   "--train_steps", str(train_steps), "--log_every", "50",
                   "--save_checkpoint_steps", "100", "--logdir", str(logdir)])
    try:
        run.wait_for_line(r"^\[worker:1\] global_step \d+", timeout=90)
        kill(run, logdir, "worker", 1, 1, 3)
        # The new worker 1 trains again: the chief's signal is still there.
        run.wait_for_line(r"^\[worker:1\] global_step \d+", timeout=90)
        kill(run, logdir, "worker", 0, 2, 3)
        # Only the chief died, so it carries on from the ps's values.
        resumed = run.wait_for_line(
            r"^\[worker:0\] resuming at global step (\d+) from the parameter "
            r"servers' current values", timeout=90)
        before_ps_kill = run.wait_for_line(
            r"^\[worker:0\] global_step (\d+)", timeout=90)
        assert int(before_ps_kill[1]) >= int(resumed[1]) > 0
        kill(run, logdir, "ps", 0, 3, 3)
        # The ps lost the model: the chief restores the last checkpoint.
        restored = run.wait_for_line(
            r"^\[worker:0\] resuming at global step (\d+) from checkpoint ",
            timeout=90)
        assert int(restored[1]) > 0
        code, output = run.finish(timeout=120)
    finally:
        run.kill()
    assert code == 0, output[-3000:]
    result = read_result(logdir)
    assert result["global_step"] >= train_steps
    assert result["test_accuracy"] >= 0.8
    # The chief's RESULT counts the steps its own process made.
    assert result["examples"] <= (result["global_step"] - int(resumed[1])) * 100
    assert re.search(r"all 2 worker\(s\) finished", output)
