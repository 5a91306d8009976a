"""Slow, not part of `make test` (`make test-scale` runs it): the
launcher at 40 workers of Hogwild, through its run.sh, as a user starts it
(no LAUNCH_PRELOAD_TENSORFLOW: a job of so many tasks forks them from one
TensorFlow import): the terminal shows the chief and a summary of the
others, launch.json has its figures, and nothing of the job is left. About
half a minute on two cores."""

import json
import re

import pytest

from conftest import processes_mentioning, read_result, run, users_environment
from guide import examples

WORKERS = 40
STEPS = "300"
# A bound on a run, not an expectation: this one took 17 to 22 s.
RUN_S = 540


@pytest.fixture(scope="module", autouse=True)
def fork_server():
    """None: in the place of tests/conftest.py's, which would import
    TensorFlow for these runs, which start theirs as a user's do."""
    yield None


def run_with_workers(name, logdir, *flags):
    example = examples.BY_NAME[name]
    result = run([*example.command(), "--workers", str(WORKERS), "--dataset",
                  "synthetic", *flags, "--logdir", str(logdir)],
                 timeout=RUN_S, env=users_environment())
    if result.returncode == 2 and "need about" in result.stderr:
        pytest.skip(f"this machine cannot hold the job now: {result.stderr}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.mark.timeout(RUN_S + 60)
def test_forty_hogwild_workers_train_and_leave_nothing(run_dir):
    logdir = run_dir / "run"
    # A progress line at each of the chief's steps: it takes about one in 40.
    result = run_with_workers("Hogwild", logdir, "--train_steps", STEPS,
                              "--log_every", "1")
    outcome = read_result(logdir)
    assert (outcome["workers"], outcome["ps"]) == (WORKERS, 1)
    assert outcome["global_step"] >= int(STEPS)
    lines = result.stdout.splitlines()
    assert "tasks forked from one TensorFlow import (more than 8 tasks)" \
        in lines[0]
    # The chief's progress lines and a summary of the 39 others, whose
    # progress lines went to their logs only.
    assert [line for line in lines if line.startswith("[worker:0] global_step")]
    assert not [line for line in lines if re.match(r"\[worker:[1-9]", line)]
    assert any(re.match(r"\[workers\] 39 others: 0 running, 39 finished, "
                        r"0 restarted; latest: \[worker:\d+\] ", line)
               for line in lines)
    assert "global_step" in (logdir / "logs" / "worker-39.log").read_text()
    # The TensorFlow chatter of the launcher's own import is not shown.
    assert "absl::InitializeLog" not in result.stdout + result.stderr
    with open(logdir / "launch.json") as stream:
        report = json.load(stream)
    assert report["tasks"] == {"count": WORKERS + 1, "start": "forked",
                               "why": "more than 8 tasks"}
    memory = report["memory"]
    # Read once the tasks' memory stopped growing, when a worker that
    # finished early may be gone already.
    assert 0 < memory["tasks_at_peak"] <= WORKERS + 1
    assert 0 < memory["peak_pss_anon_mib"] <= memory["peak_pss_mib"] < \
        memory["peak_rss_sum_mib"]
    # The chief, among the first forked, may train before the last worker
    # is started.
    timeline = report["timeline"]
    assert 0 < timeline["launch_to_started_s"] < timeline["launch_to_result_s"]
    assert 0 < timeline["launch_to_first_progress_s"] < \
        timeline["launch_to_result_s"]
    assert not processes_mentioning(str(logdir))
