"""Nothing of a job outlives its launcher: its tasks and what they started,
in every --network mode, whether the job succeeds, fails, is stopped by
SIGTERM or its launcher is SIGKILLed; restarts and a ps failing in its own
shutdown; 40 workers. Fake tasks, no TensorFlow (tests/stand_in's, where
the launcher imports it)."""

import os
import signal

import pytest

from conftest import (
    LAUNCHER,
    REPO,
    Running,
    processes_mentioning,
    run,
    users_environment,
    wait_until_gone,
)
from launcher import network
from launcher.forking import PRELOAD

FAKE = os.path.join(REPO, "tests", "fake_task.py")
STAND_IN = os.path.join(REPO, "tests", "stand_in")
NO_NAMESPACES = network.namespaces_unavailable()
# What the launcher stops a job with, and how long a process may take to go.
GONE_WITHIN_S = 30


@pytest.fixture(autouse=True)
def each_task_a_new_python(monkeypatch):
    """The exec path users get: tasks, and their children, are found by
    their command line."""
    monkeypatch.setenv(PRELOAD, "0")


def launch(logdir, mode, fake_mode, *options):
    if mode != "host" and NO_NAMESPACES:
        pytest.skip(f"--network {mode} needs user namespaces, which this "
                    f"system refuses ({NO_NAMESPACES})")
    return [*LAUNCHER, "--network", mode, *options, "--", FAKE, "--mode",
            fake_mode, "--child", "--logdir", str(logdir)]


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as stream:
        return int(stream.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.parametrize("mode", network.MODES)
@pytest.mark.parametrize("outcome, fake_mode, workers, code", [
    ("success", "ok", 1, 0), ("failure", "fail", 2, 1)])
def test_a_finished_job_leaves_no_task_nor_child(mode, outcome, fake_mode,
                                                 workers, code, run_dir):
    # Each task's child holds the task's output open and waits for a
    # signal: the job must still end, and the child with it.
    logdir = run_dir / "run"
    result = run(launch(logdir, mode, fake_mode, "--workers", str(workers)),
                 timeout=60)
    assert result.returncode == code, result.stdout + result.stderr
    assert not processes_mentioning(str(logdir))


@pytest.mark.parametrize("mode, ending", [
    (mode, ending) for mode in network.MODES
    for ending in ("SIGTERM", "SIGKILL", "SIGKILL inside")
    # --network host has no launcher inside a namespace.
    if (mode, ending) != ("host", "SIGKILL inside")])
def test_a_stopped_launcher_leaves_no_task_nor_child(mode, ending, run_dir):
    logdir = run_dir / "run"
    job = Running(launch(logdir, mode, "hang", "--workers", "1"))
    try:
        ready = [job.wait_for_line(
            rf"\[{name}\] ready pid=(\d+) .* child=(\d+)$", 30).groups()
            for name in ("ps:0", "worker:0")]
        # Each task, and the child it started before it said it was ready.
        assert all(parent_of(int(child)) == int(task) for task, child in ready)
        pids = sorted({int(pid) for pair in ready for pid in pair}
                      | set(processes_mentioning(str(logdir))))  # + launchers
        assert job.process.pid in pids
        if ending == "SIGTERM":
            job.process.send_signal(signal.SIGTERM)
            assert job.finish(timeout=30)[0] == 143
        elif ending == "SIGKILL":
            job.process.send_signal(signal.SIGKILL)
        else:
            (inner,) = [pid for pid in pids
                        if parent_of(pid) == job.process.pid]
            os.kill(inner, signal.SIGKILL)
            assert job.finish(timeout=30)[0] == 128 + signal.SIGKILL
        job.process.wait(timeout=30)
        assert all(wait_until_gone(pid, GONE_WITHIN_S) for pid in pids)
    finally:
        job.kill()


@pytest.mark.parametrize("start, said", [
    ("new Python", "each task a new Python (LAUNCH_PRELOAD_TENSORFLOW=0)"),
    ("forked", "tasks forked from one TensorFlow import (more than 8 tasks)")],
    ids=["new_python", "forked"])
def test_forty_workers_stopped_leave_no_task_nor_child(start, said, run_dir):
    """Each a new Python, or forked from the launcher, as a job of so many
    tasks is by default (LAUNCH_PRELOAD_TENSORFLOW unset)."""
    logdir = run_dir / "run"
    env = None
    if start == "forked":
        env = {**users_environment(), "PYTHONPATH": STAND_IN}
    job = Running(launch(logdir, "private", "hang", "--workers", "40",
                         "--output", "all", "--ignore_memory_check"), env=env)
    try:
        assert said in job.wait_for_line(r"^\[launch\] ", GONE_WITHIN_S).string
        names = ["ps:0"] + [f"worker:{index}" for index in range(40)]
        ready = [job.wait_for_line(
            rf"\[{name}\] ready pid=(\d+) .* child=(\d+)$", GONE_WITHIN_S).groups()
            for name in names]
        pids = {int(pid) for pair in ready for pid in pair}
        assert len(pids) == 82
        pids |= set(processes_mentioning(str(logdir)))  # + the launchers
        job.process.send_signal(signal.SIGTERM)
        assert job.finish(timeout=GONE_WITHIN_S)[0] == 143
        assert all(wait_until_gone(pid, GONE_WITHIN_S) for pid in pids)
    finally:
        job.kill()


def test_a_restarted_task_is_in_its_own_namespace_again(run_dir):
    # Each fake task listens on its own address, which exists only in its
    # namespace: a restart started anywhere else could not.
    logdir = run_dir / "run"
    result = run(launch(logdir, "hosts", "fail_once", "--max_restarts", "1"),
                 timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "worker:1 exited with code 3; restarting it (1 of 1)" in result.stdout
    assert "[worker:1] worker 1 done" in result.stdout


def test_the_launcher_runs_no_python_between_fork_and_exec():
    # A preexec_fn runs Python in the forked child, unsafe while the reader
    # threads run (a restart).
    folder = os.path.join(REPO, "launcher")
    for name in filter(lambda name: name.endswith(".py"), os.listdir(folder)):
        with open(os.path.join(folder, name)) as stream:
            assert "preexec_fn=" not in stream.read(), name


def test_a_ps_failing_after_every_worker_finished_is_reported(run_dir):
    logdir = run_dir / "run"
    result = run(launch(logdir, "host", "ps_fails_last", "--max_restarts", "1"),
                 timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[launch] ps:0 exited with code 3 after every worker had finished;" \
        " not a failure of the job" in result.stdout
    assert "restarting" not in result.stdout
