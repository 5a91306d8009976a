"""Every example runs end to end, the way a user starts it, with few steps."""

import json
import os
import re
import signal

import numpy as np
import pytest

from conftest import (
    PYTHON,
    REPO,
    Running,
    read_result,
    run,
    run_together,
    task_pid,
)
from guide import examples
from test_data import fake_mnist, write_idx_fixture
from test_staleness import check_reported
from test_tensorboard import check_tensorboard_tags

STEPS = "200"
# SAGN's global step counts rounds of T = 4 minibatches on every worker:
# 100 of them already train on twice the minibatches of Hogwild's 200 steps.
# It evaluates every 50, so that its accuracy curve still has three points.
SHORTER = {examples.SYNC_WINDOW: ("100", "50")}
# pytest id: (command relative to the repository, workers, ps)
EXAMPLES = {example.name: (example.command(PYTHON) + list(example.flags),
                           example.workers, example.ps)
            for example in examples.EXAMPLES}


def check_result(result, workers, ps, steps=int(STEPS), min_accuracy=0.5,
                 overshoot=1):
    assert (result["workers"], result["ps"]) == (workers, ps)
    # Asynchronous workers may each finish the step, or the communication
    # window, they are in; with many workers, two (`overshoot`): a worker's
    # stop hook reads the global step as its step starts, and others may
    # pass the last step before it reads it again after its own.
    window = result.get("communication_window", 1)
    assert steps <= result["global_step"] <= steps + overshoot * workers * window
    # Chance is about 0.1; after 200 steps the baseline is above 0.8.
    assert result["test_accuracy"] >= min_accuracy
    assert result["test_loss"] > 0 and np.isfinite(result["test_loss"])
    assert result["wall_s"] > 0 and result["examples_per_s"] > 0
    assert result["examples"] == pytest.approx(
        result["examples_per_s"] * result["wall_s"], rel=0.01)
    check_reported(result)
    if "mean_staleness" in result:
        # Asynchronous commits: every worker committed, and each commit
        # moved the global step by one window of minibatches.
        assert len(result["commits"]) == workers and min(result["commits"]) > 0
        assert sum(result["commits"]) * window == result["global_step"]
        # At most (W − 1) T: a worker's pulls and commits alternate, so each
        # other worker's commit lands between one pull and the next commit of
        # a given worker at most once (in Dynamic-SGD's commits, W − 1).
        assert 0 <= result["mean_staleness"] <= (workers - 1) * window
    if "central_learning_rate" in result:
        # The commits' rate η̃ by default: W commits of a / T move the centre
        # by the workers' mean step (AGN), or their mean of W does (SAGN).
        adding = 1 if "replicas_to_aggregate" in result else workers
        assert result["central_learning_rate"] == pytest.approx(
            window * result["learning_rate"] / adding)
    if "replicas_to_aggregate" in result:
        # Synchronous updates: each averaged replicas_to_aggregate gradients
        # (or commits); the rest were dropped as stale.
        sent = result.get("gradients_computed", result.get("commits"))
        dropped = result.get("gradients_dropped", result.get("commits_dropped"))
        assert len(sent) == workers and min(sent) > 0
        assert 0 <= dropped <= sum(sent)
        assert sum(sent) >= result["replicas_to_aggregate"] * result["global_step"]


def check_accuracy_curve(logdir, result):
    """The chief measured test accuracy at the start and every 100 global
    steps: from chance to well above it, with the examples seen counted the
    way result.json counts them."""
    with open(os.path.join(logdir, "accuracy_curve.json")) as stream:
        curve = json.load(stream)
    steps = [point["global_step"] for point in curve]
    assert steps[0] == 0 and curve[0]["test_accuracy"] < 0.3
    assert len(curve) >= 2 and steps == sorted(steps)
    assert max(point["test_accuracy"] for point in curve) >= 0.5
    per_step = result["examples"] // result["global_step"]
    assert all(point["examples"] == point["global_step"] * per_step
               for point in curve)
    times = [point["wall_s"] for point in curve]
    assert times == sorted(times) and times[-1] <= result["wall_s"] + 5


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_trains_and_reports(name, run_dir):
    check_example(name, run_dir)


def check_example(name, run_dir, env=None, timeout=120, wrap=list):
    """Runs example `name` as a user starts it, with few steps, in the
    environment `env` (the tests' by default), and checks all it leaves;
    `wrap` may put the command inside another (a CPU quota's)."""
    command, workers, ps = EXAMPLES[name]
    logdir = run_dir / "run"
    steps, every = SHORTER.get(examples.BY_NAME[name].kind, (STEPS, "100"))
    result = run(wrap(command + ["--train_steps", steps, "--eval_every", every,
                                 "--logdir", str(logdir)]), timeout=timeout,
                 env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    check_result(read_result(logdir), workers, ps, steps=int(steps))
    assert read_result(logdir)["algorithm"] == examples.BY_NAME[name].algorithm
    if examples.BY_NAME[name].hooks:  # a Supervisor has no hooks
        check_accuracy_curve(logdir, read_result(logdir))
    assert re.search(r"^(\[(worker|chief):0\] )?RESULT algorithm=\S+ workers=",
                     result.stdout, re.MULTILINE)
    # The chief leaves a checkpoint and TensorBoard events behind.
    files = os.listdir(logdir)
    assert "checkpoint" in files
    assert any(name.startswith("events.out.tfevents") for name in files)
    if examples.BY_NAME[name].hooks:  # a Supervisor: its own summaries
        # Every tag its README lists, read back with TensorBoard's reader.
        check_tensorboard_tags(logdir, examples.BY_NAME[name].folder, workers)


@pytest.mark.parametrize("folder, dataset", [("DOWNPOUR", "mnist"),
                                             ("Synchronous-SGD", "fashion_mnist")])
def test_two_ps_four_workers_and_mnist_files(folder, dataset, run_dir):
    """Variables sharded over two ps (DOWNPOUR: the central copy, with local
    copies on four workers); data read from IDX files, MNIST's or
    Fashion-MNIST's (the same four file names)."""
    mnist_dir = run_dir / "mnist"
    mnist_dir.mkdir()
    write_idx_fixture(mnist_dir, fake_mnist(train=800, test=100))
    logdir = run_dir / "run"
    result = run(["bash", f"{folder}/run.sh", "--ps", "2", "--workers", "4",
                  "--dataset", dataset, "--data_dir", str(mnist_dir),
                  "--train_steps", "40", "--logdir", str(logdir)], timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert outcome["dataset"] == dataset
    # The fixture's labels are random: nothing to learn, only to run.
    check_result(outcome, workers=4, ps=2, steps=40, min_accuracy=0)
    assert sorted(os.listdir(logdir / "logs")) == [
        "ps-0.log", "ps-1.log", "worker-0.log", "worker-1.log", "worker-2.log",
        "worker-3.log"]
    # The chief saves and restores every checkpoint itself, in one file set,
    # not a shard per ps, which on separate machines would land on each
    # ps's own disk.
    nodes = (logdir / "graph.pbtxt").read_text().split("\nnode {")
    devices = {re.search(r'device: "([^"]*)"', node)[1] for node in nodes
               if re.search(r'op: "(SaveV2|RestoreV2|MergeV2Checkpoints)"', node)}
    assert devices == {"/job:worker/task:0/device:CPU:0"}
    data_files = [name for name in os.listdir(logdir) if ".data-" in name]
    assert data_files and all(name.endswith("-of-00001") for name in data_files)


def test_backup_workers_drop_the_slowest_gradients(run_dir):
    """Three workers, two gradients per update: the third of each step
    arrives stale and is dropped."""
    logdir = run_dir / "run"
    result = run(["bash", "Synchronous-SGD/run.sh", "--workers", "3",
                  "--replicas_to_aggregate", "2", "--train_steps", "60",
                  "--logdir", str(logdir)], timeout=150)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    check_result(outcome, workers=3, ps=1, steps=60, min_accuracy=0.3)
    assert outcome["replicas_to_aggregate"] == 2
    assert outcome["gradients_dropped"] > 0


def test_two_examples_at_once_do_not_collide(run_dir):
    outcomes = run_together(
        {name: ["bash", "Distributed-Setup/run.sh", "--train_steps", "50",
                "--logdir", str(run_dir / name)] for name in ("a", "b")},
        timeout=120).values()
    for code, output in outcomes:
        assert code == 0, output[-3000:]
    ports = [set(re.search(r"ports ([\d, ]+);", output).group(1).split(", "))
             for _, output in outcomes]
    assert not ports[0] & ports[1]
    for name in ("a", "b"):
        assert read_result(run_dir / name)["global_step"] == 50


def test_run_sh_works_from_any_folder(run_dir):
    result = run(["bash", os.path.join(REPO, "Distributed-Setup", "run.sh"),
                  "--help"], cwd=str(run_dir), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--workers" in result.stdout and "--train_steps" in result.stdout


def test_a_dying_worker_stops_a_synchronous_job(run_dir):
    """The chief cannot finish a synchronous step without worker 1: the
    launcher must stop the job and name the worker, not hang."""
    job = Running(["bash", "Synchronous-SGD/run.sh", "--train_steps", "1000000",
                   "--log_every", "50", "--logdir", str(run_dir / "run")])
    try:
        job.wait_for_line(r"^\[worker:1\] global_step \d+", 90)
        os.kill(task_pid(run_dir, "worker", 1), signal.SIGKILL)
        code, output = job.finish(timeout=60)
    finally:
        job.kill()
    assert code == 1
    assert "worker:1 was killed by signal 9; stopped every other task" in output
