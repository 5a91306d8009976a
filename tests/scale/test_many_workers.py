"""Every example with 16 workers, and the synchronous ones and Dynamic-SGD's
lock with 40, started as a user starts them (`bash run.sh --workers N`,
the launcher choosing how to start the tasks). Not part of `make test`:
`make test-scale` runs these, one at a time (a 40-worker job takes most of
the machine's memory)."""

import json
import os

import pytest
from test_examples import check_result

from conftest import read_result, run, users_environment
from guide import examples

# Global steps per kind of example: enough that each of 16 workers commits
# a few times after the last one has started.
STEPS = {examples.EVERY_STEP: 800, examples.WINDOW: 800, examples.SYNC: 60,
         examples.SYNC_WINDOW: 20, examples.ALLREDUCE: 60}
CLUSTER = [name for name, example in examples.BY_NAME.items()
           if example.cluster and example.hooks and example.run_sh == "run.sh"]


def run_with_workers(name, workers, run_dir, steps=None):
    example = examples.BY_NAME[name]
    steps = steps or STEPS[example.kind]
    logdir = run_dir / "run"
    command = example.command() + list(example.flags) + [
        "--workers", str(workers), "--train_steps", str(steps),
        "--eval_every", str(max(1, steps // 4)), "--logdir", str(logdir)]
    if name == "Synchronous-SGD-different-learning-rates":
        # One rate per worker.
        command += ["--learning_rates", ",".join(["0.2"] * workers)]
    result = run(command, timeout=900, env=users_environment())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    check_result(outcome, workers, example.ps, steps=steps, min_accuracy=0.3,
                 overshoot=2)
    return outcome, result.stdout, logdir


@pytest.mark.timeout(960)
@pytest.mark.parametrize("name", CLUSTER)
def test_every_example_runs_with_16_workers(name, run_dir):
    run_with_workers(name, 16, run_dir)


@pytest.mark.timeout(960)
@pytest.mark.parametrize("name", ["Synchronous-SGD", "SAGN",
                                  "Multi-Worker-Mirrored-Strategy"])
def test_synchronous_examples_run_with_40_replicas(name, run_dir):
    outcome, _, _ = run_with_workers(name, 40, run_dir, steps=10)
    if "replicas_to_aggregate" in outcome:
        assert outcome["replicas_to_aggregate"] == 40


@pytest.mark.timeout(960)
def test_dynamic_sgds_lock_holds_under_40_contenders(run_dir):
    """The ps applies one commit at a time: the record of commits it keeps
    under the lock counts every worker's commits, each seen exactly once,
    and no commit is staler than the commits recorded before it. (Not
    staler than 39: a worker may commit several times while a slower one
    is in its window.)"""
    outcome, _, logdir = run_with_workers("Dynamic-SGD", 40, run_dir, steps=1600)
    with open(os.path.join(logdir, "commits.json")) as stream:
        record = json.load(stream)["commits"]
    per_worker = [0] * 40
    for commit in record:
        per_worker[commit["worker"]] += 1
    assert per_worker == outcome["commits"]
    assert all(0 <= commit["staleness"] <= position
               for position, commit in enumerate(record))
