"""A job this machine cannot hold is refused before anything starts, in one
line that names the limit and the fix; how a job's tasks start (a new
Python each, or forked from one TensorFlow import) follows its size; the
launcher's own TensorFlow import says nothing, or one line if it fails; the
memory the job takes and its first progress record reach launch.json. No
TensorFlow: the limits are faked through the small functions that read
them, and the launcher's TensorFlow is tests/stand_in's."""

import json
import os
import re
import types

import pytest

from conftest import LAUNCHER, REPO, processes_mentioning, run, users_environment
from launcher import LaunchError, contract, forking, limits, usage
from launcher.forking import LAUNCHER as FORKED
from launcher.forking import PRELOAD, Start, start_mode
from launcher.options import parse_command_line
from launcher.summary import Summary

FAKE = os.path.join(REPO, "tests", "fake_task.py")
STAND_IN = os.path.join(REPO, "tests", "stand_in")
NEW_PYTHON = Start(None, "LAUNCH_PRELOAD_TENSORFLOW=0")
FORKED_START = Start(FORKED, "more than 8 tasks")
LAUNCH_S = 60


@pytest.fixture
def roomy(monkeypatch):
    """A machine with room for any job, whatever this one has; each test
    then takes one limit away."""
    monkeypatch.setattr(limits, "available_memory_mib",
                        lambda: (1 << 20, "available"))
    monkeypatch.setattr(limits, "open_files_limit", lambda: (1 << 16, 1 << 16))
    monkeypatch.setattr(limits, "port_range", lambda: (32768, 60999))
    monkeypatch.setattr(limits, "thread_room", lambda needed: [])
    monkeypatch.setattr(limits, "cpu_count", lambda: 2)


def test_a_roomy_machine_refuses_nothing(roomy):
    assert limits.refusal(41, FORKED_START, "private") is None


def test_memory_refusal_names_the_start_mode_and_the_fixes(roomy, monkeypatch):
    monkeypatch.setattr(limits, "available_memory_mib",
                        lambda: (1024, "available"))
    each = limits.MEMORY_MIB["forked"]
    assert limits.refusal(41, FORKED_START, "private") == (
        f"41 forked tasks need about {41 * each / 1024:.1f} GiB ({each} MiB "
        f"each) but only 1.0 GiB is available; use fewer --workers, or pass "
        f"--ignore_memory_check to start anyway")
    # Where the tasks were new Pythons, forking them is a fix too.
    assert limits.refusal(9, NEW_PYTHON, "private") == (
        f"9 new Pythons need about "
        f"{9 * limits.MEMORY_MIB['new_python'] / 1024:.1f} GiB "
        f"({limits.MEMORY_MIB['new_python']} MiB each) but only 1.0 GiB is "
        f"available; use fewer --workers, or pass --ignore_memory_check to "
        f"start anyway, or fork them from one TensorFlow import "
        f"(LAUNCH_PRELOAD_TENSORFLOW=1: about {9 * each / 1024:.1f} GiB)")
    assert limits.refusal(41, FORKED_START, "private", ignore_memory=True) is None


def script_declaring(tmp_path, line):
    script = tmp_path / "heavy.py"
    script.write_text(f"# /// launch\n# {line}\n# ///\n")
    return str(script)


def test_a_script_heavier_than_the_figures_declares_its_own(roomy, monkeypatch,
                                                           tmp_path):
    """Parameter-Server-Strategy's tasks (TensorFlow 2) take four times the
    others': its launch block says so, and every task counts that much."""
    monkeypatch.setattr(limits, "available_memory_mib",
                        lambda: (20 * 1024, "available"))
    monkeypatch.delenv(PRELOAD, raising=False)
    heavy = script_declaring(tmp_path, "memory_mib = 850")
    assert contract.read(heavy).memory_mib == 850
    with pytest.raises(LaunchError) as refused:
        parse_command_line(["--workers", "40", "--", heavy])
    assert str(refused.value) == (
        "41 forked tasks need about 34.0 GiB (850 MiB each, as the script "
        "declares) but only 20.0 GiB is available; use fewer --workers, or "
        "pass --ignore_memory_check to start anyway")
    # The launcher's own figure lets the same job of a lighter script in.
    options, *_ = parse_command_line(["--workers", "40", "--", FAKE])
    assert options.start.kind == "forked"


@pytest.mark.parametrize("value", ["0", "true", '"850"', "8.5"])
def test_a_declared_memory_is_a_positive_integer(value, tmp_path):
    with pytest.raises(contract.ContractError, match="memory_mib must be a "
                                                     "positive integer"):
        contract.read(script_declaring(tmp_path, f"memory_mib = {value}"))


def test_a_cgroup_memory_limit_counts_when_it_is_the_smaller(monkeypatch):
    monkeypatch.setattr(limits, "cgroup_room", lambda *files: 512 << 20)
    assert limits.available_memory_mib() == (
        512, "left under this cgroup's memory limit")


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_least_room_of_a_cgroup_and_its_ancestors_counts(version, tmp_path):
    """A limit on the parent with little left, a wider one on the
    process's own cgroup, and none ("max", or v1's huge number) above."""
    own = tmp_path / "cgroup"
    if version == "v2":
        own.write_text("0::/job/task\n")
        top, limit, use, unlimited = tmp_path, "pids.max", "pids.current", "max"
    else:
        own.write_text("9:memory:/job/task\n8:pids:/job/task\n")
        top, limit, use = tmp_path / "pids", "pids.max", "pids.current"
        unlimited = str(2 ** 63 - 4096)
    for folder, most, used in ((top, unlimited, 900), (top / "job", "1000", 900),
                               (top / "job" / "task", "5000", 800)):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / limit).write_text(f"{most}\n")
        (folder / use).write_text(f"{used}\n")
    assert limits.cgroup_room("pids", (limit, use), (limit, use), str(own),
                              str(tmp_path)) == 100
    (top / "job" / limit).write_text(f"{unlimited}\n")
    assert limits.cgroup_room("pids", (limit, use), (limit, use), str(own),
                              str(tmp_path)) == 4200
    if version == "v1":  # a controller the process is in no hierarchy of
        assert limits.cgroup_room("cpu", (limit, use), (limit, use), str(own),
                                  str(tmp_path)) is None


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_cgroups_reclaimable_page_cache_is_room(version, tmp_path):
    """The cgroup's use counts the page cache of the files its processes
    read; the inactive part of it, which the kernel reclaims before it
    fails an allocation, is room, as MemAvailable counts it."""
    own = tmp_path / "cgroup"
    mib = 1 << 20
    if version == "v2":
        own.write_text("0::/job\n")
        folder, limit, use, inactive = (tmp_path / "job", "memory.max",
                                        "memory.current", "inactive_file")
    else:
        own.write_text("4:memory:/job\n")
        folder, limit, use, inactive = (tmp_path / "memory" / "job",
                                        "memory.limit_in_bytes",
                                        "memory.usage_in_bytes",
                                        "total_inactive_file")
    folder.mkdir(parents=True)
    (folder / limit).write_text(f"{1000 * mib}\n")
    (folder / use).write_text(f"{900 * mib}\n")
    (folder / "memory.stat").write_text(
        f"anon {300 * mib}\n{inactive} {600 * mib}\nactive_file 0\n")
    assert limits.cgroup_room("memory", *limits.MEMORY_CGROUP_FILES,
                              str(own), str(tmp_path)) == 700 * mib


def test_open_files_are_raised_to_the_hard_limit_or_refused(roomy, monkeypatch):
    raised = []
    monkeypatch.setattr(limits, "raise_open_files_limit", raised.append)
    monkeypatch.setattr(limits, "open_files_limit", lambda: (64, 4096))
    assert limits.refusal(41, FORKED_START, "private") is None
    needed = raised[0]
    assert needed > 64 and needed >= 41 * 3  # a log, a pipe, a pidfd each
    monkeypatch.setattr(limits, "open_files_limit", lambda: (64, 100))
    message = limits.refusal(41, FORKED_START, "private")
    assert message == (
        f"41 tasks need about {needed} open files in the launcher and in a "
        f"ps, but this shell allows 64 (`ulimit -n`), at most 100; use fewer "
        f"--workers, or raise the hard limit (`ulimit -Hn {needed}` as root, "
        f"or LimitNOFILE)")
    assert raised == [needed]


def test_ports_are_the_machines_only_on_its_network(roomy, monkeypatch):
    monkeypatch.setattr(limits, "port_range", lambda: (60000, 60050))
    assert limits.refusal(41, FORKED_START, "host") == (
        "41 tasks need about 82 ports but the ephemeral range has 51 "
        "(60000-60050, /proc/sys/net/ipv4/ip_local_port_range); use fewer "
        "--workers, widen it (sysctl net.ipv4.ip_local_port_range), or use "
        "--network private")
    # A namespace of the job's own has the kernel's default range.
    assert limits.refusal(41, FORKED_START, "private") is None


def test_threads_are_checked_against_each_limit(roomy, monkeypatch):
    each = limits.THREADS_PER_TASK + 2 * limits.THREADS_PER_TASK_PER_CPU
    needed = 41 * (each + 1) + limits.LAUNCHER_THREADS
    monkeypatch.setattr(limits, "thread_room", lambda wanted: [
        (10 ** 6, "kernel.threads-max (2000000)", "raise it"),
        (needed - 1, "the cgroup's pids.max", "raise pids.max")])
    assert limits.refusal(41, FORKED_START, "private") == (
        f"41 tasks need about {needed} threads ({each} each) but the "
        f"cgroup's pids.max leaves room for {needed - 1}; use fewer --workers, "
        f"or raise pids.max")


def test_the_limits_of_this_machine_can_be_read():
    mib, where = limits.available_memory_mib()
    assert mib > 0 and where
    soft, hard = limits.open_files_limit()
    assert 0 < soft <= hard
    low, high = limits.port_range()
    assert 0 < low < high < 65536
    # Twice threads-max: more than half of it, so the threads running now
    # are counted, and the room is less than the limit.
    with open("/proc/sys/kernel/threads-max") as stream:
        most = int(stream.read())
    rooms = {limit: room for room, limit, _ in limits.thread_room(2 * most)}
    assert 0 < rooms[f"kernel.threads-max ({most})"] < most


@pytest.mark.parametrize("value, tasks, fork, why", [
    (None, 9, FORKED, "more than 8 tasks"),
    (None, 8, None, "8 tasks or fewer"),
    ("", 41, FORKED, "more than 8 tasks"),
    ("0", 41, None, "LAUNCH_PRELOAD_TENSORFLOW=0"),
    ("1", 3, FORKED, "LAUNCH_PRELOAD_TENSORFLOW=1")])
def test_a_big_job_is_forked_unless_told_otherwise(value, tasks, fork, why):
    assert forking.FORK_ABOVE_TASKS == 8
    assert start_mode(value, tasks) == (fork, why)


def test_the_command_line_refuses_a_job_that_does_not_fit(roomy, monkeypatch):
    monkeypatch.setattr(limits, "available_memory_mib",
                        lambda: (512, "available"))
    monkeypatch.delenv(PRELOAD, raising=False)
    with pytest.raises(LaunchError, match=r"^41 forked tasks need about"):
        parse_command_line(["--workers", "40", "--", FAKE])
    monkeypatch.setenv(PRELOAD, "0")
    with pytest.raises(LaunchError, match=r"^3 new Pythons need about"):
        parse_command_line(["--", FAKE])
    options, *_ = parse_command_line(["--", FAKE, "--ignore_memory_check"])
    assert options.start == (None, "LAUNCH_PRELOAD_TENSORFLOW=0")
    assert options.output == "all"  # 2 workers
    options, *_ = parse_command_line(["--workers", "5", "--", FAKE,
                                      "--ignore_memory_check"])
    assert options.output == "summary"


def test_a_refusal_is_one_line_before_anything_starts(run_dir):
    """Too few open files, for real: nothing is made, nothing is left."""
    logdir = run_dir / "run"
    result = run(["prlimit", "--nofile=64:64", "--", *LAUNCHER, "--workers",
                  "40", "--ignore_memory_check", "--", FAKE, "--logdir",
                  str(logdir)], timeout=LAUNCH_S)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    assert re.fullmatch(r"launch\.sh: error: 41 tasks need about \d+ open files "
                        r"in the launcher and in a ps, but this shell allows "
                        r"64 \(`ulimit -n`\), at most 64; .*", line), line
    assert result.stdout == ""
    assert not logdir.exists()
    assert not processes_mentioning(str(logdir))


def stand_in_environment(**extra):
    """A user's environment, with LAUNCH_PRELOAD_TENSORFLOW unset, where
    the launcher imports tests/stand_in/tensorflow."""
    return {**users_environment(), "PYTHONPATH": f"{STAND_IN}{os.pathsep}{REPO}",
            **extra}


def test_a_big_job_forks_its_tasks_from_one_quiet_import(run_dir):
    result = run([*LAUNCHER, "--network", "host", "--workers", "8",
                  "--output", "all", "--ignore_memory_check", "--", FAKE,
                  "--logdir", str(run_dir / "run")], timeout=LAUNCH_S,
                 env=stand_in_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tasks forked from one TensorFlow import (more than 8 tasks)" \
        in result.stdout.splitlines()[0]
    assert "absl::InitializeLog" not in result.stdout + result.stderr
    assert "oneDNN" not in result.stdout + result.stderr
    assert "[worker:7] worker 7 done" in result.stdout


def test_a_small_job_starts_a_new_python_per_task(run_dir):
    result = run([*LAUNCHER, "--network", "host", "--workers", "7", "--", FAKE,
                  "--logdir", str(run_dir / "run")], timeout=LAUNCH_S,
                 env=stand_in_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "each task a new Python (8 tasks or fewer)" in result.stdout


def test_a_failed_import_is_one_line_and_exit_2(run_dir):
    logdir = run_dir / "run"
    result = run([*LAUNCHER, "--workers", "9", "--", FAKE, "--logdir",
                  str(logdir)], timeout=LAUNCH_S,
                 env=stand_in_environment(STAND_IN_TENSORFLOW_FAILS="1"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"launch.sh: error: cannot import TensorFlow with {LAUNCHER[0]} "
        f"(ImportError: libtensorflow_framework.so.2: cannot open shared object "
        f"file: No such file or directory); run `make venv` in the repository, "
        f"or start each task as a new Python (LAUNCH_PRELOAD_TENSORFLOW=0) to "
        f"see its whole error"]
    assert not list((logdir / "logs").iterdir())  # no task was started


class FakeTask:
    def __init__(self, name, code=None, restarts=0, pid=None):
        self.name, self.job = name, name.split(":")[0]
        self.process = types.SimpleNamespace(returncode=code, pid=pid)
        self.restarts = restarts


def test_the_summary_line_counts_the_other_workers():
    tasks = [FakeTask("ps:0"), FakeTask("worker:0"), FakeTask("worker:1", 0),
             FakeTask("worker:2", None, 1), FakeTask("worker:3", 0),
             FakeTask("worker:4", -9), FakeTask("evaluator:0")]
    said = []
    summary = Summary(tasks, "worker:0", emit=said.append)
    summary.start()
    assert [summary.hides(task) for task in tasks] == \
        [False, False, True, True, True, True, False]
    assert summary.line() == \
        "[workers] 4 others: 1 running, 2 finished, 1 failed, 1 restarted"
    summary.note(tasks[3], "global_step 5 " + "x" * 200)
    assert summary.line().endswith("; latest: [worker:2] global_step 5 " +
                                   "x" * 83 + "...")
    summary.stop(final=True)  # once more at the end, then never again
    summary.stop(final=True)
    assert said == [summary.line()]
    shown = Summary(tasks, "worker:0", emit=said.append, on=False)
    shown.start()
    assert not any(shown.hides(task) for task in tasks)
    assert shown.thread is None  # nothing to sum up


def test_usage_measures_memory_and_the_first_progress_record(tmp_path):
    (tmp_path / "progress.jsonl").write_text('{"global_step": 0, "time": 1.0}\n')
    tasks = [FakeTask("worker:0", pid=os.getpid()),
             FakeTask("worker:1", code=0, pid=os.getpid())]  # exited: not counted
    measured = usage.Usage(tasks, FORKED_START, str(tmp_path), "progress.jsonl")
    with open(tmp_path / "progress.jsonl", "a") as stream:  # this run's record
        stream.write(json.dumps({"global_step": 1, "time":
                                 measured.launched + 2.5}) + "\n")
    # The first sample finds the resident size growing (from nothing), the
    # second steady: PSS is read then.
    measured.take()
    assert measured.pss_samples == 0
    measured.take()
    report = measured.finish()
    assert report["tasks"] == {"count": 2, "start": "forked",
                               "why": "more than 8 tasks"}
    memory = report["memory"]
    assert (memory["tasks_at_peak"], memory["samples"], memory["pss_samples"]) \
        == (1, 2, 1)
    assert 0 < memory["peak_pss_anon_mib"] <= memory["peak_pss_mib"] == \
        memory["peak_pss_per_task_mib"] <= memory["peak_rss_sum_mib"]
    assert report["timeline"] == {"launch_to_first_progress_s": 2.5}


def test_a_first_progress_record_after_the_last_sample_still_counts(tmp_path):
    """A job that ends within a second of its chief's first record: the
    sampler never looked after it, finish() does, past a line that is not
    a record."""
    progress = tmp_path / "progress.jsonl"
    measured = usage.Usage([], FORKED_START, str(tmp_path), "progress.jsonl")
    progress.write_text("not a record\n" + json.dumps(
        {"global_step": 1, "time": measured.launched + 1.5}) + "\n")
    report = measured.finish()
    assert report["timeline"] == {"launch_to_first_progress_s": 1.5}
