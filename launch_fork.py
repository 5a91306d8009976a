#!/usr/bin/env python3
"""Tasks forked from a Python that has imported TensorFlow already, so that
no task pays for importing it again (about 3 s of CPU each). Only for
speed, mostly the test suite's: by default launch.py starts every task as a
new Python, as a user's cluster would.

- LAUNCH_PRELOAD_TENSORFLOW=1: the launcher imports TensorFlow once and forks
  each task of its job from itself (`Forked`).
- LAUNCH_PRELOAD_TENSORFLOW=SOCKET: a fork server, started as

      python launch_fork.py SOCKET

  has imported TensorFlow once and forks the tasks of every launch that asks
  it (`Served`), so not even the launcher imports it. The test suite runs
  one per test process (tests/conftest.py).
- 0 or unset: every task is a new Python.

Either way a task starts as launch.py would start a new process: in a
session of its own, stdin from /dev/null, stdout and stderr into the
launcher's pipe, in the job's network namespace, killed if whoever forked it
dies, and its script run as __main__. Standard library only.
"""

import contextlib
import importlib
import io
import json
import os
import runpy
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import traceback

import launch_network
from launch_network import die_with_parent
from launch_options import LaunchError

PRELOAD = "LAUNCH_PRELOAD_TENSORFLOW"
# fork_mode()'s answer for tasks forked from the launcher itself.
LAUNCHER = "launcher"
# A request's length travels first, as 8 bytes.
LENGTH = struct.Struct("!Q")


def fork_mode(value):
    """What LAUNCH_PRELOAD_TENSORFLOW=`value` asks for: None (a new Python
    per task), LAUNCHER, or the socket of a fork server; LaunchError with
    the fix if it is none of them."""
    if value in (None, "", "0"):
        return None
    if value == "1":
        return LAUNCHER
    if os.path.exists(value) and stat.S_ISSOCK(os.stat(value).st_mode):
        return value
    raise LaunchError(f"{PRELOAD} is {value!r}, which is neither 0, 1 nor the "
                     f"socket of a running fork server; unset it, or start "
                     f"one with `python launch_fork.py SOCKET`")


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

    def poll(self):
        with self._lock:
            if self.returncode is None:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None and \
                not select.select([self._exited], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(self.pid, timeout)
        return self.poll()


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
        launch_network.prctl(launch_network.PR_SET_NAME, name.encode()[:15])
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
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


def join_namespaces(user_fd, net_fd):
    """In a forked child: moves into the launcher's user namespace and the
    task's network namespace, unless it is in them already. In this order:
    a network namespace belongs to a user namespace, joined first."""
    for fd, kind, flag in ((user_fd, "user", launch_network.CLONE_NEWUSER),
                           (net_fd, "net", launch_network.CLONE_NEWNET)):
        if os.readlink(f"/proc/self/fd/{fd}") != \
                os.readlink(f"/proc/self/ns/{kind}"):
            launch_network.enter(fd, flag)


class Served:
    """A task forked by the fork server at socket `server`, in
    the user namespace of this launcher and the network namespace
    `net_fd`. The server reaps it and sends its exit code; if this launcher
    dies, the server kills it. The part of Popen's interface the launcher
    uses, as Forked."""

    def __init__(self, argv, env, net_fd, name, server, cwd=None,
                 output=None):
        # Its output goes to the fd `output` if given, else to a pipe that
        # self.stdout reads, as with Popen(stdout=PIPE, stderr=STDOUT).
        if output is None:
            read_end, write_end = os.pipe()
        else:
            read_end, write_end = None, os.dup(output)
        self._connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._connection.connect(server)
        request = json.dumps({"argv": list(argv), "env": dict(env),
                              "cwd": cwd or os.getcwd(), "name": name}).encode()
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
        self.pid = int(self._reply(None))
        if self.pid <= 0:  # what a hang-up reads as
            raise ConnectionError(f"the fork server at {server} hung up "
                                  f"before it forked {name}")
        self.returncode = None
        self._lock = threading.Lock()  # the reader and teardown both wait

    def _reply(self, timeout):
        """The server's next line, or None if none came within `timeout`."""
        while b"\n" not in self._replies:
            if not select.select([self._connection], [], [], timeout)[0]:
                return None
            chunk = self._connection.recv(4096)
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
        """Readable once the task has exited (for select)."""
        return self._connection.fileno()

    def wait(self, timeout=None):
        if self.returncode is None and not (
                b"\n" in self._replies or
                select.select([self._connection], [], [], timeout)[0]):
            raise subprocess.TimeoutExpired(self.pid, timeout)
        return self.poll()


def receive_request(connection):
    """A Served task's request: (its fields, [pipe, user ns, net ns fds])."""
    data, fds, _, _ = socket.recv_fds(connection, 65536, 3)
    if len(data) < LENGTH.size or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None, []
    (length,), data = LENGTH.unpack(data[:LENGTH.size]), data[LENGTH.size:]
    while len(data) < length:
        chunk = connection.recv(length - len(data))
        if not chunk:
            break
        data += chunk
    return json.loads(data), fds


class Server:
    """Forks the tasks that launchers ask for and tells each launcher when
    its task exits; kills a task whose launcher has gone. One thread: a
    select() over the listening socket, every launcher's connection and a
    pidfd per task."""

    def __init__(self, path):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        # pidfd -> [pid, the launcher's connection or None once it has gone]
        self.children = {}

    def serve_forever(self):
        while True:
            waiting = [self.listener, *self.children] + [
                connection for _, connection in self.children.values()
                if connection is not None]
            for ready in select.select(waiting, [], [])[0]:
                if ready is self.listener:
                    self.accept()
                elif ready in self.children:
                    self.reap(ready)
                else:
                    self.launcher_gone(ready)

    def accept(self):
        connection, _ = self.listener.accept()
        request, fds = receive_request(connection)
        if request is None:
            connection.close()
            return
        pipe, user_fd, net_fd = fds
        pid = os.fork()
        if pid == 0:
            # Inside run_forked's handling, so that no error can leave this
            # child running the server's loop.
            def enter():
                os.chdir(request["cwd"])
                join_namespaces(user_fd, net_fd)

            run_forked(request["argv"], request["env"], enter, request["name"],
                       pipe)  # never returns
        for fd in fds:
            os.close(fd)
        self.children[os.pidfd_open(pid)] = [pid, connection]
        with contextlib.suppress(OSError):
            connection.sendall(f"{pid}\n".encode())

    def reap(self, pidfd):
        pid, connection = self.children.pop(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.sendall(
                    f"{os.waitstatus_to_exitcode(status)}\n".encode())
            connection.close()

    def launcher_gone(self, connection):
        """A launcher's connection is readable: it has nothing to say, so it
        has closed, and its task dies as with its launcher."""
        for entry in self.children.values():
            if entry[1] is connection:
                launch_network.kill_group(entry[0])
                entry[1] = None
        connection.close()


def serve(path):
    """Imports TensorFlow, says `ready` on stdout, and forks tasks until it
    is killed (every task it forked dies with it)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    importlib.import_module("tensorflow")
    die_with_parent()
    server = Server(path)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1])
