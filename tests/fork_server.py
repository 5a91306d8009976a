#!/usr/bin/env python3
"""The test suite's fork server: a Python that has imported TensorFlow once
and forks the tasks of every launch that asks it, so that no task, and not
even its launcher, pays for importing TensorFlow again (about 3 s of CPU
each). Started as

    python tests/fork_server.py SOCKET

it says `ready` once TensorFlow is loaded; a launcher run with
LAUNCH_PRELOAD_TENSORFLOW=SOCKET then sends it each task to fork
(launcher/forking.py's `Served`, whose request this answers). The test
suite runs one per test process (tests/conftest.py). Each task starts as
the launcher would start it (`run_forked`), in the launcher's user
namespace and the task's network namespace; the server reaps it and tells
its launcher its exit code, and kills it if that launcher goes. Standard
library only, but for TensorFlow itself.
"""

import contextlib
import importlib
import json
import os
import select
import socket
import sys

# The repository in the place of tests/, which a forked task's script folder
# then takes (run_forked), as with a task the launcher forks.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from launcher import network  # noqa: E402
from launcher.forking import LENGTH, run_forked  # noqa: E402
from launcher.network import die_with_parent  # noqa: E402


def join_namespaces(user_fd, net_fd):
    """In a forked child: moves into the launcher's user namespace and the
    task's network namespace, unless it is in them already. In this order:
    a network namespace belongs to a user namespace, joined first."""
    for fd, kind, flag in ((user_fd, "user", network.CLONE_NEWUSER),
                           (net_fd, "net", network.CLONE_NEWNET)):
        if os.readlink(f"/proc/self/fd/{fd}") != \
                os.readlink(f"/proc/self/ns/{kind}"):
            network.enter(fd, flag)


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
                network.kill_group(entry[0])
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
