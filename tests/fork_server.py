#!/usr/bin/env python3
"""The test suite's fork server: a Python that has imported TensorFlow once
and forks the tasks of every launch that asks it, so that no task, and not
even its launcher, pays for importing TensorFlow again (about 3 s of CPU
each). Started as

    python tests/fork_server.py SOCKET

it says `ready` once TensorFlow is loaded (SOCKET is made 0600, in a folder
only its user can open: made 0700 if missing, else checked); only a client
of its own user is served; a launcher run with
LAUNCH_PRELOAD_TENSORFLOW=SOCKET then sends it each task to fork
(launcher/forking.py's `Served`, whose request this answers). The test
suite runs one per test process (tests/conftest.py). Each task starts as
the launcher would start it (`run_forked`), in the launcher's user
namespace, the task's network namespace and its disk, if it has one
(launcher/disks.py); the server reaps it and tells
its launcher its exit code, and kills it if that launcher goes. Standard
library only, but for TensorFlow itself.
"""

import argparse
import contextlib
import importlib
import json
import os
import select
import socket
import stat
import sys
import time

# The repository in the place of tests/, which a forked task's script folder
# then takes (run_forked), as with a task the launcher forks.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from launcher import disks, network  # noqa: E402
from launcher.forking import CREDENTIALS, LENGTH, run_forked  # noqa: E402
from launcher.network import die_with_parent  # noqa: E402

# A client has this long to send its whole request, of at most this many
# bytes (a request is a command line, an environment and two names).
REQUEST_TIMEOUT_S = 10.0
REQUEST_LIMIT = 1 << 20


def join_namespaces(user_fd, net_fd):
    """In a forked child: moves into the launcher's user namespace and the
    task's network namespace, unless it is in them already. In this order:
    a network namespace belongs to a user namespace, joined first."""
    for fd, kind, flag in ((user_fd, "user", network.CLONE_NEWUSER),
                           (net_fd, "net", network.CLONE_NEWNET)):
        if os.readlink(f"/proc/self/fd/{fd}") != \
                os.readlink(f"/proc/self/ns/{kind}"):
            network.enter(fd, flag)


class Refused(Exception):
    """A request the server will not fork: one line says why."""


def report(message):
    """One line on stderr, unless nobody reads it and the pipe is full: the
    server never blocks on what it has to say."""
    try:
        if select.select([], [2], [], 0)[1]:
            os.write(2, f"fork_server.py: {message}\n".encode())
    except OSError:
        pass


def parse(data, fds):
    """A complete request's (fields, [pipe, user ns, net ns fds]), checked:
    Refused if it is not what launcher.forking.Served sends."""
    if len(fds) != 3:
        raise Refused(f"{len(fds)} file descriptors instead of 3")
    for fd, kind in ((fds[1], "user"), (fds[2], "net")):
        if not os.readlink(f"/proc/self/fd/{fd}").startswith(f"{kind}:["):
            raise Refused(f"no {kind} namespace where one was due")
    try:
        request = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise Refused(f"not JSON ({error})") from None
    strings = (isinstance(request, dict)
               and isinstance(request.get("argv"), list) and request["argv"]
               and isinstance(request.get("env"), dict)
               and isinstance(request.get("cwd"), str)
               and isinstance(request.get("name"), str))
    if not strings or not all(isinstance(item, str) for item in [
            *request["argv"], *request["env"], *request["env"].values()]):
        raise Refused("not a request of argv, env, cwd and name")
    disk = request.get("disk")
    if disk is not None and not (
            isinstance(disk, dict) and isinstance(disk.get("hidden"), list)
            and all(isinstance(item, str) for item in [
                disk.get("logdir"), disk.get("source"), *disk["hidden"]])):
        raise Refused("a disk that is not a logdir, a source and hidden folders")
    return request, fds


class Client:
    """A connection whose request has not all come yet."""

    def __init__(self, connection, deadline):
        self.connection, self.deadline = connection, deadline
        self.data, self.fds = b"", []

    def receive(self):
        """Reads what has come; the request once complete, else None."""
        try:
            data, fds, _, _ = socket.recv_fds(self.connection, 65536, 3)
        except BlockingIOError:
            return None
        self.fds += fds
        if not data:
            raise Refused("hung up before its request was complete")
        self.data += data
        if len(self.fds) > 3:
            raise Refused("more than 3 file descriptors")
        if len(self.data) < LENGTH.size:
            return None
        (length,) = LENGTH.unpack(self.data[:LENGTH.size])
        if length > REQUEST_LIMIT:
            raise Refused(f"a request of {length} bytes; at most "
                          f"{REQUEST_LIMIT} are read")
        if len(self.data) > LENGTH.size + length:
            raise Refused("more bytes than its length says")
        if len(self.data) < LENGTH.size + length:
            return None
        return parse(self.data[LENGTH.size:], self.fds)

    def close(self):
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.connection.close()


class Server:
    """Forks the tasks that launchers ask for and tells each launcher when
    its task exits; kills a task whose launcher has gone. One thread: a
    select() over the listening socket, the connections whose request is
    still coming (each with a deadline), every launcher's connection and a
    pidfd per task. Nothing it does blocks: a client that says nothing, too
    much or nonsense gets one line on stderr and is dropped."""

    def __init__(self, path, request_timeout):
        self.request_timeout = request_timeout
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Created 0600, then made sure of (its folder is 0700: check_folder).
        mask = os.umask(0o177)
        try:
            self.listener.bind(path)
        finally:
            os.umask(mask)
        os.chmod(path, 0o600)
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.clients = {}  # connection -> Client
        # pidfd -> [pid, the launcher's connection or None once it has gone]
        self.children = {}

    def serve_forever(self):
        while True:
            now = time.monotonic()
            for client in [client for client in self.clients.values()
                           if client.deadline <= now]:
                self.drop(client, f"sent no complete request within "
                                  f"{self.request_timeout:g} s")
            deadlines = [client.deadline for client in self.clients.values()]
            waiting = [self.listener, *self.clients, *self.children] + [
                connection for _, connection in self.children.values()
                if connection is not None]
            ready = select.select(waiting, [], [], max(0.0, min(deadlines) - now)
                                  if deadlines else None)[0]
            for ready_one in ready:
                if ready_one is self.listener:
                    self.accept()
                elif ready_one in self.clients:
                    self.receive(self.clients[ready_one])
                elif ready_one in self.children:
                    self.reap(ready_one)
                else:
                    self.launcher_gone(ready_one)

    def accept(self):
        """A new connection, if its peer is this server's own user: a client
        gets its script run with this server's rights, so only those who
        have them already may ask (root, if it is not the owner, has no
        need of someone else's server, and is refused too)."""
        try:
            connection, _ = self.listener.accept()
        except BlockingIOError:
            return
        pid, uid, _ = CREDENTIALS.unpack(connection.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, CREDENTIALS.size))
        if uid != os.geteuid():
            report(f"refused a connection from uid {uid} (pid {pid}): only "
                   f"uid {os.geteuid()} may use this server")
            connection.close()
            return
        connection.setblocking(False)
        self.clients[connection] = Client(
            connection, time.monotonic() + self.request_timeout)

    def drop(self, client, why):
        report(f"dropped a client that {why}")
        del self.clients[client.connection]
        client.close()

    def receive(self, client):
        try:
            request = client.receive()
        except Refused as refused:
            self.drop(client, f"sent {refused}" if not str(refused).startswith(
                "hung up") else str(refused))
            return
        except OSError as error:
            self.drop(client, f"could not be read ({error})")
            return
        if request is None:
            return
        del self.clients[client.connection]
        (request, fds), connection = request, client.connection
        pipe, user_fd, net_fd = fds
        try:
            pid = os.fork()
        except OSError as error:
            report(f"could not fork {request['name']!r}: {error}")
            client.close()
            return
        if pid == 0:
            # Inside run_forked's handling, so that no error can leave this
            # child running the server's loop.
            def enter():
                os.chdir(request["cwd"])
                join_namespaces(user_fd, net_fd)
                disk = request.get("disk")
                if disk is not None:  # --network hosts: the task's own disk
                    disks.enter(disk["logdir"], disk["source"], disk["hidden"])

            run_forked(request["argv"], request["env"], enter, request["name"],
                       pipe)  # never returns
        for fd in fds:
            os.close(fd)
        self.children[os.pidfd_open(pid)] = [pid, connection]
        with contextlib.suppress(OSError):
            connection.sendall(f"{pid}\n".encode())

    def reap(self, pidfd):
        """A task has exited: what it left in its process group is killed
        (its zombie still holds the group's id), then it is reaped."""
        pid, connection = self.children.pop(pidfd)
        os.close(pidfd)
        network.kill_group(pid)
        _, status = os.waitpid(pid, 0)  # it has exited: no wait
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


def check_folder(path):
    """Makes the socket's folder (0700) if it is missing; refuses one that
    another user could reach into or owns (exit 2, one line)."""
    folder = os.path.dirname(os.path.abspath(path))
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    status = os.lstat(folder)
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() \
            or status.st_mode & 0o077:
        print(f"fork_server.py: error: {folder} must be a folder of yours "
              f"that only you can open (mode 0700); make one with `mkdir -m "
              f"700 FOLDER` and put the socket in it", file=sys.stderr)
        sys.exit(2)


def serve(path, preload="tensorflow", request_timeout=REQUEST_TIMEOUT_S):
    """Imports `preload` (none if empty), says `ready` on stdout, and forks
    tasks until it is killed (every task it forked dies with it)."""
    check_folder(path)
    if preload:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        importlib.import_module(preload)
    die_with_parent()
    server = Server(path, request_timeout)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("socket")
    parser.add_argument("--preload", default="tensorflow",
                        help="the module to import once (default tensorflow; "
                             "'' for none)")
    parser.add_argument("--request_timeout", type=float,
                        default=REQUEST_TIMEOUT_S,
                        help="seconds a client has to send its request")
    arguments = parser.parse_args()
    serve(arguments.socket, arguments.preload, arguments.request_timeout)
