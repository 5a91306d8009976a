"""The launcher's --network hosts as separate machines: a disk of its own
for each task (launcher/disks.py) and links of a given speed
(launcher/shaping.py), with the fake task that needs no TensorFlow."""

import os
import re

import pytest
from test_launcher import EVERY_PATH, FAKE, launch, path  # noqa: F401 - a fixture

from conftest import LAUNCHER, error_lines, run
from launcher import network

NEEDS_NAMESPACES = pytest.mark.skipif(
    network.namespaces_unavailable() is not None,
    reason="this system does not allow user namespaces")


@EVERY_PATH
@NEEDS_NAMESPACES
def test_in_network_hosts_each_task_sees_its_own_disk_only(run_dir):
    result = run(launch(run_dir, "--network", "hosts", "--evaluator",
                        mode="disks"), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    seen = dict(re.findall(r"^\[(\S+)\] sees (.*)$", result.stdout, re.MULTILINE))
    # The disk rule: the chief (worker 0) and the evaluator share the logdir,
    # under which the others' disks and the launcher's logs are hidden.
    shared = "evaluator-0.txt,worker-0.txt can write none"
    assert seen == {"ps:0": "ps-0.txt can write none",
                    "worker:0": shared, "evaluator:0": shared,
                    "worker:1": "worker-1.txt can write none"}
    disks = run_dir / "run" / "disks"
    assert sorted(os.listdir(disks)) == ["ps-0", "worker-1"]
    assert os.listdir(disks / "ps-0") == ["ps-0.txt"]


@NEEDS_NAMESPACES
def test_a_task_restarted_on_an_empty_disk_has_lost_its_files(run_dir):
    kept = run(launch(run_dir, "--network", "hosts", "--max_restarts", "2",
                      mode="fail_once"), timeout=60)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert kept.stdout.count("[worker:1] worker 1 fails this once") == 1
    # Its marker of the first failure is gone with its disk, so it fails again.
    empty = run([*LAUNCHER, "--network", "hosts", "--max_restarts", "2",
                 "--disk_on_restart", "empty", "--", FAKE, "--mode",
                 "fail_once", "--logdir", str(run_dir / "empty")], timeout=60)
    assert empty.returncode == 1, empty.stdout + empty.stderr
    assert empty.stdout.count("[worker:1] worker 1 fails this once") == 3
    disks = run_dir / "empty" / "disks"
    assert sorted(os.listdir(disks)) == [
        "ps-0", "worker-1", "worker-1.lost-1", "worker-1.lost-2"]
    assert os.listdir(disks / "worker-1.lost-1") == ["failed_once"]


def test_disk_on_restart_needs_network_hosts(run_dir):
    result = run(launch(run_dir, "--disk_on_restart", "empty"), timeout=60)
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        "launch.sh: error: --disk_on_restart needs --network hosts, where each "
        "task has a disk of its own"]


@NEEDS_NAMESPACES
def test_bandwidth_limits_each_tasks_link_with_a_token_bucket(run_dir):
    result = run(launch(run_dir, "--network", "hosts", "--bandwidth", "100mbit",
                        mode="links"), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    shown = dict(re.findall(r"^\[(\S+)\] eth0 (.*)$", result.stdout, re.MULTILINE))
    assert set(shown) == {"ps:0", "worker:0", "worker:1"}
    for queueing in shown.values():
        assert re.search(r"qdisc tbf 1: root .*rate 100Mbit", queueing), queueing


@pytest.mark.parametrize("flags, error", [
    (["--bandwidth", "1gbit"],
     "--bandwidth needs --network hosts, where each task has a link of its own"),
    (["--latency", "5"],
     "--latency needs --network hosts, where each task has a link of its own"),
    (["--network", "hosts", "--bandwidth", "fast"],
     "--bandwidth takes a rate such as 10gbit, 1gbit or 100mbit, not 'fast'"),
    (["--network", "hosts", "--latency", "-1"],
     "--latency must be positive, got -1"),
])
def test_bad_link_options_are_one_line(run_dir, flags, error):
    result = run(launch(run_dir, *flags), timeout=60)
    assert result.returncode == 2
    assert error_lines(result.stderr) == [f"launch.sh: error: {error}"]


@NEEDS_NAMESPACES
def test_latency_delays_each_link_or_says_in_one_line_why_not(run_dir):
    """netem is not built into every kernel: where it is missing, --latency
    is refused before any task starts."""
    result = run(launch(run_dir, "--network", "hosts", "--latency", "5",
                        mode="links"), timeout=60)
    if result.returncode == 2:
        (line,) = error_lines(result.stderr)
        assert line.startswith("launch.sh: error: --latency needs the kernel's "
                               "netem qdisc, which this one lacks")
        assert "ready" not in result.stdout
    else:
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.count("netem") == 3
