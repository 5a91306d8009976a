"""One task of a job: its process, started again after a restart, its log
file and its last lines of output. Standard library only."""

import collections
import queue
import signal
import subprocess
import time

from . import disks, network, reaping
from .forking import LAUNCHER, Forked, Served

LAST_LINES = 15
# How long a task gets to stop after SIGTERM, and its output to end.
STOP_GRACE_S = 5.0


class Task:
    """One child process, its log file and its last lines of output."""

    def __init__(self, job, index, command, env, log_path, namespace=None,
                 fork=None, processes=None, disk=None):
        self.name = f"{job}:{index}"
        # None: a new Python; LAUNCHER: forked from this launcher; else the
        # socket of the fork server that forks it (forking.py).
        self.fork = fork
        self.job = job
        # `namespace`, if given, is the fd of the network namespace the task
        # joins as it starts (--network hosts).
        self.command, self.env, self.namespace = command, env, namespace
        # Its disks.Disk (--network hosts), or None: the machine's files.
        self.disk = disk
        # The job's PID namespace (reaping.JobNamespace), if it has one.
        self.processes = processes
        self.log = open(log_path, "w", buffering=1)
        self.last_lines = collections.deque(maxlen=LAST_LINES)
        # True while the launcher stops it to restart its group: what it
        # says as it dies (lost peers, mostly) goes to its log only.
        self.quiet = False
        self.process = None
        self.restarts = 0
        self.spawn()

    def spawn(self):
        """Starts the task's process (again, after a restart: same command,
        same TF_CONFIG, same log file), in the job's PID namespace."""
        if self.process is not None:
            self.restarts += 1
            if self.disk and self.disk.empty_on_restart:
                self.disk.renew()
        if self.processes is None or self.fork not in (None, LAUNCHER):
            self.start()
        else:
            self.processes.run(self.start)

    def start(self):
        if self.fork == LAUNCHER:
            # Forked runs Python in the child by design (it is the point);
            # the child replaces the streams a reader thread may hold.
            self.process = Forked(self.command[1:], self.env, self.entering,
                                  self.name)
            return
        if self.fork:
            self.process = Served(self.command[1:], self.env, self.namespace,
                                  self.name, self.fork, disk=self.disk)
            return
        # No preexec_fn: a restart happens while reader threads run, and a
        # forked child must then run no Python before exec. The session is
        # made by Popen's C code, the parent-death signal by an exec
        # wrapper, the network namespace is this thread's while it forks,
        # and the disk is mounted by a wrapper of its own.
        with network.entered(self.namespace):
            self.process = reaping.Spawned(
                network.DIE_WITH_PARENT + disks.wrapper(self.disk) +
                self.command, env=self.env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True)

    def entering(self):
        """In a forked child: joins the task's network namespace and disk."""
        if self.namespace is not None:
            network.enter(self.namespace)
        if self.disk is not None:
            disks.enter(**self.disk.fields())

    def stop(self, sig):
        """Signals the task's whole process group, if the task has not
        exited (not reaped yet, its pid is still its own)."""
        if not reaping.exited(self.process):
            network.kill_group(self.process.pid, sig)


def stop_group(tasks, events, failed, finished, waiting, deadline):
    """--restart_group: stops every task of `tasks` but the evaluator that
    is still running, as `failed` is not, and waits (SIGTERM, then SIGKILL)
    until each has exited, as its reader reports on `events`; returns them
    with `failed`, the tasks to start again (None if the job's `deadline`
    passed meanwhile). What other tasks report meanwhile is put back."""
    group = [task for task in tasks if task.job != "evaluator"
             and task not in finished]
    running = {task for task in group if task is not failed
               and task not in waiting}
    for task in group:
        waiting.pop(task, None)  # a failed ps goes again with the rest
    for task in running:
        task.quiet = True
        task.stop(signal.SIGTERM)
    kill_at = time.monotonic() + STOP_GRACE_S
    others = []
    while running:
        now = time.monotonic()
        if now >= deadline:
            return None
        try:
            task, code = events.get(
                timeout=max(0.0, min(kill_at, deadline) - now))
        except queue.Empty:
            for task in running:
                task.stop(signal.SIGKILL)
            kill_at = float("inf")
            continue
        if task in running:
            running.remove(task)
            task.log.write(f"[launch] restarted with {failed.name}\n")
        else:
            others.append((task, code))
    for event in others:
        events.put(event)
    for task in group:
        task.quiet = False
    return group
