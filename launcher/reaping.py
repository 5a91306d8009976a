"""How the launcher makes sure that no process of a job outlives it: the
job's own PID namespace, the tasks it starts without running Python code
in the child, and waits that end. Standard library only.

Why a PID namespace: a task's process group (each task is a session of its
own) holds what the task starts, unless that calls setsid(), and nothing
kills a group once the launcher has been SIGKILLed. A PID namespace does:
the first process started in it is its init, and when init exits, for any
reason, the kernel SIGKILLs every process left in the namespace. That init
here is `cat` reading a pipe whose only write end the launcher holds, so it
exits as soon as the launcher does, however the launcher ends. The launcher
itself stays outside (only its children go in), so the pids it knows its
tasks by are this machine's; a task's own getpid() is its pid in the job's
namespace.
"""

import ctypes
import errno
import math
import os
import queue
import select
import signal
import subprocess
import threading

from .network import kill_group, libc

CLONE_NEWPID = 0x20000000
# How long starting a process may take (a fork and an exec).
START_DEADLINE_S = 60.0


class JobNamespace:
    """A PID namespace for the processes this launcher starts through
    `run()`, held open by its init (see above); `end()` ends every process
    in it. A thread whose children go into another PID namespace than its
    own cannot start threads, so one thread of its own (the "starter") puts
    itself in the namespace and starts every process there, for the others;
    it lives as long as the launcher, whose tasks' parent it is."""

    def __init__(self):
        self.requests = queue.Queue()
        ready = queue.Queue()
        threading.Thread(target=self.starter, args=(ready,),
                         daemon=True).start()
        error = ready.get(timeout=START_DEADLINE_S)
        if error is not None:
            raise error

    def starter(self, ready):
        if libc.unshare(CLONE_NEWPID) != 0:
            error = ctypes.get_errno()
            ready.put(OSError(error, os.strerror(error)))
            return
        try:
            self.init = subprocess.Popen(
                ["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError as error:
            ready.put(error)
            return
        ready.put(None)
        while True:
            function, answer = self.requests.get()
            try:
                answer.put((function(), None))
            except BaseException as error:  # the caller's to handle
                answer.put((None, error))

    def run(self, function):
        """function(), run by the starter thread: what it starts is in the
        job's namespace. Its result, or its exception raised here."""
        answer = queue.Queue()
        self.requests.put((function, answer))
        try:
            result, error = answer.get(timeout=START_DEADLINE_S)
        except queue.Empty:
            raise OSError(f"no process started within {START_DEADLINE_S:g} "
                          f"s") from None
        if error is not None:
            raise error
        return result

    def end(self, timeout):
        """SIGKILLs init, and so every process left in the namespace; waits
        up to `timeout` s for it to be gone. No process can start in the
        namespace afterwards."""
        with_deadline(self.init, signal.SIGKILL, timeout)


def job_namespace():
    """A JobNamespace, or None where the system does not allow one (it
    needs CAP_SYS_ADMIN in our user namespace: we have it inside the job's
    network namespace, and as root). Without one, the tasks are ended
    through their process groups only, which a SIGKILLed launcher does not
    reach for what a task started."""
    try:
        return JobNamespace()
    except OSError as error:
        if error.errno in (errno.EPERM, errno.EINVAL, errno.ENOSPC):
            return None
        raise


def exited(process):
    """True once `process` (anything with a fileno() readable once it has
    exited: Spawned, Forked, Served) has exited; never reaps it."""
    if process.returncode is not None:  # reaped already
        return True
    try:
        return bool(readable([process], 0))
    except ValueError:  # a Served task's connection, closed as it was reaped
        return True


def readable(watched, timeout=None):
    """Those of `watched` (fds, or objects with a fileno()) that are readable,
    or hung up, within `timeout` s (None: no limit). poll(), as select()
    does not, takes the fds above 1023 that a job of some hundred tasks
    gives the launcher; ValueError for a closed one, as select()."""
    poller, by_fd = select.poll(), {}
    for item in watched:
        fd = item if isinstance(item, int) else item.fileno()
        poller.register(fd, select.POLLIN)
        by_fd[fd] = item
    milliseconds = None if timeout is None or timeout >= threading.TIMEOUT_MAX \
        else min(math.ceil(timeout * 1000), 2**31 - 1)
    return [by_fd[fd] for fd, _ in poller.poll(milliseconds)]


def with_deadline(process, sig, timeout):
    """Sends `sig` to `process` unless it has exited, and waits up to
    `timeout` s for it (a Popen) to end; its exit code, or None."""
    if process.poll() is None:
        try:
            process.send_signal(sig)
        except ProcessLookupError:
            pass
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


class Spawned(subprocess.Popen):
    """A task started as a new process, with a pidfd that poll() sees
    readable once it has exited, without reaping it: the pid, and so the
    process group, stays this task's until its reader reaps it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._exited = os.pidfd_open(self.pid)

    def fileno(self):
        return self._exited

    def end_group(self):
        """Once the task has exited and before it is reaped: SIGKILLs what
        it left in its process group."""
        if self.returncode is None:
            kill_group(self.pid)
