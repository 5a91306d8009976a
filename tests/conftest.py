"""Helpers for tests that start processes: every one has a timeout, and no
process a test started may outlive it."""

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from launcher.forking import PRELOAD
from launcher.job import CHATTER

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable
# What launch.sh runs, from the repository's top (where `run` and `Running`
# start a command unless told otherwise).
LAUNCHER = [PYTHON, "-m", "launcher"]


def processes_mentioning(text):
    """PIDs of live processes whose command line contains `text`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                cmdline = stream.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as stream:
                if stream.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # a zombie has already exited
        except OSError:
            continue
        if text in cmdline:
            found.append(int(pid))
    return found


# The pid of this test process's fork server (fork_server).
FORK_SERVER = {}


def served_tasks():
    """{pid: task name} of the live tasks this test process's fork server
    forked. Tests in one process run one at a time, so they are the running
    test's."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stream:
                name, state, parent = re.match(r"\d+ \((.*)\) (\S) (\d+)",
                                               stream.read()).groups()
        except (OSError, AttributeError):
            continue
        if int(parent) == FORK_SERVER.get("pid") and state != "Z":
            found[int(pid)] = name
    return found


def task_pid(logdir, job, index):
    """The pid of the live task `job:index` of the run writing to `logdir`:
    found by its command line and TF_CONFIG if it is a new Python, by its
    name if its launcher forked it, among the fork server's children if
    that forked it. The launcher does not print pids."""
    name = f"{job}:{index}"
    for pid in processes_mentioning(str(logdir)):
        try:
            with open(f"/proc/{pid}/comm") as stream:
                if stream.read().strip() == name:  # forked by its launcher
                    return pid
            with open(f"/proc/{pid}/environ", "rb") as stream:
                environ = dict(item.split(b"=", 1) for item in
                               stream.read().split(b"\0") if b"=" in item)
        except OSError:
            continue
        task = json.loads(environ.get(b"TF_CONFIG", b"{}")).get("task", {})
        if task == {"type": job, "index": index}:
            return pid
    for pid, served_name in served_tasks().items():
        if served_name == name:
            return pid
    raise AssertionError(f"no live {name} for {logdir}")


@pytest.fixture(scope="session", autouse=True)
def fork_server():
    """One fork server per test process (fork_server.py): it imports
    TensorFlow once and forks the tasks of every launch, which saves each
    launch the 3 s of CPU its launcher would spend importing it. Tests of
    another way of starting tasks set LAUNCH_PRELOAD_TENSORFLOW themselves."""
    folder = tempfile.mkdtemp(prefix="fork-server-")
    path = os.path.join(folder, "socket")
    server = Running([PYTHON, os.path.join(REPO, "tests", "fork_server.py"), path],
                     env=env_without_tf_config(**{PRELOAD: "0"}))
    try:
        server.wait_for_line(r"^ready$", 120)
        os.environ[PRELOAD] = path
        FORK_SERVER["pid"] = server.process.pid
        yield path
    finally:
        os.environ.pop(PRELOAD, None)
        FORK_SERVER.clear()
        server.kill()
        shutil.rmtree(folder, ignore_errors=True)


def wait_until_gone(pid, timeout):
    """Blocks until process `pid` (not our child) exits; False on timeout."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([handle], [], [], timeout)[0])
    finally:
        os.close(handle)


def served_tasks_after(timeout):
    """The fork server's tasks still alive `timeout` seconds from now, or
    none once all have exited. The server kills a task as soon as it sees
    the task's launcher (or kernel client) gone, which takes it a moment
    after the launcher was killed."""
    deadline = time.monotonic() + timeout
    return [pid for pid in served_tasks() if not wait_until_gone(
        pid, max(0.0, deadline - time.monotonic()))]


@pytest.fixture
def run_dir(tmp_path):
    """A folder for the test's runs; fails the test if any process whose
    command line names it, or any task the fork server forked, is still
    alive afterwards (and kills it)."""
    yield tmp_path
    leftovers = processes_mentioning(str(tmp_path))
    leftovers += served_tasks_after(0 if leftovers else 5)
    for pid in leftovers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not leftovers, f"processes left behind: {leftovers}"


def env_without_tf_config(**extra):
    env = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Launched tasks are forked from a process that has imported TensorFlow
    # once (the fork server, else their launcher: launcher/forking.py), which
    # saves most of the suite's CPU time; set LAUNCH_PRELOAD_TENSORFLOW=0 to
    # test the exec path users get instead.
    env.setdefault(PRELOAD, "1")
    env.update(extra)
    return env


def users_environment():
    """This environment as a user's shell has it: no TF_CONFIG, and no
    LAUNCH_PRELOAD_TENSORFLOW, so that the launcher starts each task as a
    new Python, as `bash run.sh` does."""
    return {key: value for key, value in os.environ.items()
            if key not in ("TF_CONFIG", PRELOAD)}


def run(command, *, timeout, cwd=REPO, env=None):
    """Runs a command to completion (or kills it at `timeout`)."""
    return subprocess.run(command, cwd=cwd, env=env or env_without_tf_config(),
                          capture_output=True, text=True, timeout=timeout,
                          check=False)


def error_lines(stderr):
    """The lines of stderr that are not TensorFlow's start-up chatter."""
    return [line for line in stderr.splitlines()
            if line.strip() and not CHATTER.match(line)]


def read_result(logdir):
    with open(os.path.join(logdir, "result.json")) as stream:
        return json.load(stream)


def run_together(commands, *, timeout):
    """Starts every command at once, waits for all; returns {name: (exit code,
    output)}. Every process is killed on the way out, whatever happens."""
    jobs = {name: Running(command) for name, command in commands.items()}
    try:
        return {name: job.finish(timeout=timeout) for name, job in jobs.items()}
    finally:
        for job in jobs.values():
            job.kill()


class Running:
    """A started process whose output can be awaited line by line."""

    def __init__(self, command, *, cwd=REPO, env=None, preexec_fn=None):
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env or env_without_tf_config(),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=preexec_fn)
        self.lines = []
        self._buffer = b""

    def wait_for_line(self, pattern, timeout):
        """Reads output until a line matches `pattern`; returns the match."""
        deadline = time.monotonic() + timeout
        for line in self.lines:
            if re.search(pattern, line):
                return re.search(pattern, line)
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [],
                                        deadline - time.monotonic())
            if not ready:
                break
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                break
            self._buffer += chunk
            *complete, self._buffer = self._buffer.split(b"\n")
            # Keep every line of the chunk, also those after a match.
            found = None
            for raw in complete:
                line = raw.decode(errors="replace")
                self.lines.append(line)
                found = found or re.search(pattern, line)
            if found:
                return found
        raise AssertionError(f"no line matching {pattern!r} within {timeout} s;"
                             f" output so far:\n" + "\n".join(self.lines[-30:]))

    def finish(self, timeout):
        """Waits for exit; returns (exit code, all output)."""
        rest, _ = self.process.communicate(timeout=timeout)
        text = (self._buffer + rest).decode(errors="replace")
        self.lines.extend(text.splitlines())
        return self.process.returncode, "\n".join(self.lines)

    def kill(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
