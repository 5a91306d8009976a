"""Tasks forked from a Python that has imported TensorFlow already, so that
no task pays for importing it again (2 to 2.5 s of CPU each, and about 140
MiB of memory: limits.py). A user's small job starts each task as a new Python,
as a user's cluster would; a big one forks them, which is what lets 40
workers start on two cores.

- LAUNCH_PRELOAD_TENSORFLOW unset: forked from the launcher if the job has
  more than FORK_ABOVE_TASKS tasks, else a new Python each.
- LAUNCH_PRELOAD_TENSORFLOW=1: the launcher imports TensorFlow once and forks
  each task of its job from itself (`Forked`), whatever the job's size.
- LAUNCH_PRELOAD_TENSORFLOW=SOCKET: a fork server (tests/fork_server.py),
  which has imported TensorFlow once, forks the tasks of every launch that
  asks it (`Served`, the launcher's side of that conversation), so not even
  the launcher imports it. The test suite runs one per test process.
- LAUNCH_PRELOAD_TENSORFLOW=0: every task is a new Python, whatever the
  job's size.

Either way a task starts as the launcher would start a new process: in a
session of its own, stdin from /dev/null, stdout and stderr into the
launcher's pipe, in the job's network namespace, killed if whoever forked it
dies, and its script run as __main__. Standard library only.
"""

import collections
import contextlib
import faulthandler
import io
import json
import os
import resource
import runpy
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
import traceback

from . import LaunchError, network
from .network import die_with_parent
from .reaping import readable

PRELOAD = "LAUNCH_PRELOAD_TENSORFLOW"
# fork_mode()'s answer for tasks forked from the launcher itself.
LAUNCHER = "launcher"
# Unless LAUNCH_PRELOAD_TENSORFLOW says otherwise, a job of more tasks than
# this forks them from the launcher. A new Python per task is what a user's
# cluster runs, and what small jobs keep (the examples' defaults have 2 to
# 5 tasks); beyond 8, the imports alone take 20 s of CPU or more (2 to 2.5
# s each), before any task trains. To the chief's first progress line,
# Hogwild on MNIST, batch 128, 2 cores that other jobs shared (single runs
# varied threefold): 4 workers, 14.0 and 33.2 s with a new Python per task,
# 7.2 and 3.4 s forked; 8 workers, 109 and 22.1 s against 9.1 and 45.4 s
# (that launcher's own import caught in a burst of load).
FORK_ABOVE_TASKS = 8
# A request's length travels first, as 8 bytes.
LENGTH = struct.Struct("!Q")
# How long a launcher waits for the fork server to take its request and
# answer with the task's pid.
SERVER_DEADLINE_S = 60.0
# SO_PEERCRED's answer: the peer's pid, uid and gid.
CREDENTIALS = struct.Struct("3i")


def fork_mode(value):
    """What LAUNCH_PRELOAD_TENSORFLOW=`value` asks for: None (a new Python
    per task), LAUNCHER, or the socket of a fork server; LaunchError with
    the fix if it is none of them."""
    if value in (None, "", "0"):
        return None
    if value == "1":
        return LAUNCHER
    if os.path.exists(value) and stat.S_ISSOCK(os.stat(value).st_mode):
        owner = os.stat(value).st_uid
        if owner != os.geteuid():
            # Our tasks' environment would go to another user's program.
            raise LaunchError(f"{PRELOAD} is {value!r}, a socket of uid "
                              f"{owner}, not yours; start a fork server of "
                              f"your own, or unset it")
        return value
    raise LaunchError(f"{PRELOAD} is {value!r}, which is neither 0, 1 nor the "
                     f"socket of a running fork server; unset it, or start "
                     f"one with `python tests/fork_server.py SOCKET`")


class Start(collections.namedtuple("Start", "fork why")):
    """How a job's tasks start: `fork` as fork_mode() gives it, and why, in
    a few words for the launcher's first line."""

    @property
    def kind(self):
        """"new_python", "forked" (from the launcher) or "fork_server"."""
        return ("new_python" if self.fork is None else
                "forked" if self.fork == LAUNCHER else "fork_server")

    def describe(self):
        return {"new_python": "each task a new Python",
                "forked": "tasks forked from one TensorFlow import",
                "fork_server": "tasks forked by the fork server"}[self.kind] \
            + f" ({self.why})"


def start_mode(value, tasks):
    """The Start of a job of `tasks` tasks with LAUNCH_PRELOAD_TENSORFLOW
    =`value` (None if unset); LaunchError as fork_mode()."""
    if value in (None, ""):
        if tasks > FORK_ABOVE_TASKS:
            return Start(LAUNCHER, f"more than {FORK_ABOVE_TASKS} tasks")
        return Start(None, f"{FORK_ABOVE_TASKS} tasks or fewer")
    fork = fork_mode(value)
    return Start(fork, f"{PRELOAD}={value}" if fork in (None, LAUNCHER)
                 else PRELOAD)


class Forked:
    """A task forked from this launcher, which has loaded TensorFlow already
    (LAUNCH_PRELOAD_TENSORFLOW=1): the child runs the script's argv[0] as
    __main__, so no task pays for importing TensorFlow again. The part of
    Popen's interface the launcher uses."""

    def __init__(self, argv, env, enter, name):
        read_end, write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            run_forked(argv, env, enter, name, write_end)  # never returns
        os.close(write_end)
        self.stdout = open(read_end, "rb")
        self.returncode = None
        self._exited = os.pidfd_open(self.pid)  # readable once it has exited
        self._lock = threading.Lock()  # the reader and teardown both wait

    def fileno(self):
        """Readable once the task has exited (for poll)."""
        return self._exited

    def end_group(self):
        """Once the task has exited and before it is reaped: SIGKILLs what
        it left in its process group."""
        if self.returncode is None:
            network.kill_group(self.pid)

    def poll(self):
        with self._lock:
            if self.returncode is None:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None and not readable([self._exited], timeout):
            raise subprocess.TimeoutExpired(self.pid, timeout)
        return self.poll()


def no_core_files():
    """Lets this process, and those it starts, dump no core: a task aborted
    at --timeout writes its Python stack to its log instead."""
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))


def run_forked(argv, env, enter, name, pipe):
    """In a Forked child: sets up what a new process would start with, runs
    the script, and exits with its exit code; never returns."""
    code = 1
    try:
        os.setsid()
        die_with_parent()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(pipe, 1)
        os.dup2(pipe, 2)
        # New streams, unbuffered as PYTHONUNBUFFERED makes them: the old
        # ones' locks may be held by a reader thread that the fork left out.
        sys.stdin = open(0, closefd=False)
        sys.stdout, sys.stderr = (io.TextIOWrapper(
            open(fd, "wb", buffering=0, closefd=False), encoding="utf-8",
            errors=errors, line_buffering=True, write_through=True)
            for fd, errors in ((1, "strict"), (2, "backslashreplace")))
        if enter is not None:
            enter()
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        # Every task shares the launcher's command line: its name (in ps,
        # /proc/<pid>/comm) says which it is.
        network.prctl(network.PR_SET_NAME, name.encode()[:15])
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.environ.clear()
        os.environ.update(env)
        if env.get("PYTHONFAULTHANDLER"):  # as a new Python would, at its start
            faulthandler.enable()
        no_core_files()
        sys.argv = list(argv)
        # As a new Python would: the script's folder first, then $PYTHONPATH
        # (where launch.sh puts the repository, for a script copied elsewhere).
        added = [path for path in env.get("PYTHONPATH", "").split(os.pathsep)
                 if path and path not in sys.path[1:]]
        sys.path[:1] = [os.path.dirname(os.path.abspath(argv[0])), *added]
        runpy.run_path(argv[0], run_name="__main__")
        code = 0
    except SystemExit as done:
        code = done.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        # As Python does: report it, then die of the SIGINT itself.
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        if code == 0 and name.startswith("ps:"):
            # A worker may still be closing its last session with this ps,
            # which a ps run by exec answers during its interpreter's
            # teardown: a forked one waits for the launcher to stop it.
            signal.pause()
        os._exit(code)


class Served:
    """A task forked by the fork server at socket `server`, in
    the user namespace of this launcher and the network namespace
    `net_fd`. The server kills what it left in its process group, reaps it
    and sends its exit code; if this launcher dies, the server kills it.
    The part of Popen's interface the launcher uses, as Forked. A server
    that does not answer within SERVER_DEADLINE_S, or is run by another
    user, is a ConnectionError."""

    def __init__(self, argv, env, net_fd, name, server, cwd=None,
                 output=None, disk=None):
        # Its output goes to the fd `output` if given, else to a pipe that
        # self.stdout reads, as with Popen(stdout=PIPE, stderr=STDOUT).
        if output is None:
            read_end, write_end = os.pipe()
        else:
            read_end, write_end = None, os.dup(output)
        self._connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # connect() and sending wait at most this long (a full backlog).
        self._connection.settimeout(SERVER_DEADLINE_S)
        self._connection.connect(server)
        _, uid, _ = CREDENTIALS.unpack(self._connection.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, CREDENTIALS.size))
        if uid != os.geteuid():
            self._connection.close()
            raise ConnectionError(f"the fork server at {server} runs as uid "
                                  f"{uid}, not as you; not asking it")
        fields = {"argv": list(argv), "env": dict(env),
                  "cwd": cwd or os.getcwd(), "name": name}
        if disk is not None:  # a disks.Disk, which the task enters
            fields["disk"] = disk.fields()
        request = json.dumps(fields).encode()
        user_fd = os.open("/proc/self/ns/user", os.O_RDONLY)
        own_net_fd = None
        if net_fd is None:
            net_fd = own_net_fd = os.open("/proc/self/ns/net", os.O_RDONLY)
        try:
            socket.send_fds(self._connection,
                            [LENGTH.pack(len(request)) + request],
                            [write_end, user_fd, net_fd])
        finally:
            for fd in (write_end, user_fd, own_net_fd):
                if fd is not None:
                    os.close(fd)
        self.stdout = None if read_end is None else open(read_end, "rb")
        self._replies = b""
        pid = self._reply(SERVER_DEADLINE_S)
        if pid is None:
            self._connection.close()
            raise ConnectionError(f"the fork server at {server} did not "
                                  f"answer within {SERVER_DEADLINE_S:g} s")
        self.pid = int(pid)
        if self.pid <= 0:  # what a hang-up reads as
            raise ConnectionError(f"the fork server at {server} hung up "
                                  f"before it forked {name}")
        self.returncode = None
        self._lock = threading.Lock()  # the reader and teardown both wait

    def _reply(self, timeout):
        """The server's next line, or None if none came within `timeout`.
        Read a byte at a time (a line is a number), so that the socket is
        readable exactly when the next line has come."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._replies:
            left = None if deadline is None else \
                max(0.0, deadline - time.monotonic())
            if not readable([self._connection], left):
                return None
            chunk = self._connection.recv(1)
            if not chunk:
                # The server has died, and its tasks with it: this one was
                # killed as by SIGKILL.
                self._replies += f"{-signal.SIGKILL}\n".encode()
            self._replies += chunk
        line, self._replies = self._replies.split(b"\n", 1)
        return line

    def poll(self):
        with self._lock:
            if self.returncode is None:
                code = self._reply(0)
                if code is not None:
                    self.returncode = int(code)
                    self._connection.close()
            return self.returncode

    def fileno(self):
        """Readable once the task has exited (for poll)."""
        return self._connection.fileno()

    def wait(self, timeout=None):
        if self.returncode is None and not (
                b"\n" in self._replies or
                readable([self._connection], timeout)):
            raise subprocess.TimeoutExpired(self.pid, timeout)
        return self.poll()
