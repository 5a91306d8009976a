"""What the terminal shows of a job with many workers: the launcher's,
the chief's and the ps's lines, a line now and then for the other workers,
whose lines go to their logs only, and a hidden worker's last lines when
it fails; --output all shows every line. Fake tasks, each a new Python."""

import json
import os
import re

import pytest

from conftest import LAUNCHER, REPO, run
from launcher.forking import PRELOAD

FAKE = os.path.join(REPO, "tests", "fake_task.py")
LAUNCH_S = 120


@pytest.fixture(autouse=True)
def each_task_a_new_python(monkeypatch):
    monkeypatch.setenv(PRELOAD, "0")


def launch(run_dir, *options, mode="ok"):
    return [*LAUNCHER, *options, "--", FAKE, "--mode", mode,
            "--logdir", str(run_dir / "run")]


def test_many_workers_show_the_chief_and_a_line_for_the_others(run_dir):
    result = run(launch(run_dir, "--workers", "40", "--ignore_memory_check"),
                 timeout=LAUNCH_S)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert re.match(r"\[launch\] 1 ps \+ 40 worker\(s\) of .*, each task a new "
                    r"Python \(LAUNCH_PRELOAD_TENSORFLOW=0\), on 127\.0\.0\.1 "
                    r"ports \d+, \d+, \d+ and 38 more; ", lines[0]), lines[0]
    assert "[worker:0] worker 0 done" in lines
    # The other workers' lines went to their logs only.
    assert not [line for line in lines if re.match(r"\[worker:[1-9]", line)]
    logs = run_dir / "run" / "logs"
    for index in range(1, 40):
        assert f"worker {index} done" in (logs / f"worker-{index}.log").read_text()
    # Once at the end at least (and every 10 s before, which this run may
    # not have lasted).
    assert re.fullmatch(r"\[workers\] 39 others: 0 running, 39 finished, 0 "
                        r"restarted; latest: \[worker:\d+\] worker \d+ done",
                        lines[-2]), lines[-2]
    assert lines[-1].startswith("[launch] all 40 worker(s) finished")
    with open(run_dir / "run" / "launch.json") as stream:
        report = json.load(stream)
    assert report["tasks"] == {"count": 41, "start": "new_python",
                               "why": "LAUNCH_PRELOAD_TENSORFLOW=0"}
    # Sampled at least once, as the tasks started (they end before PSS is
    # read, once their memory has stopped growing).
    assert report["memory"]["peak_rss_sum_mib"] > 0


def test_a_failing_worker_the_stream_hid_shows_its_last_lines(run_dir):
    result = run(launch(run_dir, "--workers", "5", mode="fail"),
                 timeout=LAUNCH_S)
    assert result.returncode == 1
    assert "[worker:1] worker 1 is about to fail" not in result.stdout
    assert "worker:1 exited with code 3; stopped every other task" in result.stdout
    assert "\n    worker 1 is about to fail" in result.stdout  # its last lines


def test_output_all_shows_every_workers_lines(run_dir):
    result = run(launch(run_dir, "--workers", "5", "--output", "all"),
                 timeout=LAUNCH_S)
    assert result.returncode == 0, result.stdout + result.stderr
    for index in range(5):
        assert f"[worker:{index}] worker {index} done" in result.stdout
    assert "[workers]" not in result.stdout


def test_a_hidden_worker_restarted_is_said_and_counted(run_dir):
    result = run(launch(run_dir, "--workers", "5", "--max_restarts", "1",
                        mode="fail_once"), timeout=LAUNCH_S)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[launch] worker:1 exited with code 3; restarting it (1 of 1)" \
        in result.stdout
    assert re.search(r"^\[workers\] 4 others: 0 running, 4 finished, 1 "
                     r"restarted; ", result.stdout, re.MULTILINE), result.stdout
