"""Runs one script as a whole cluster on this machine, and cleans up after it.

    bash launch.sh [--ps 1] [--workers 2] [--coordinator] [--evaluator] \
        [--max_restarts 0] [--restart_group] [--timeout 600] \
        [--output all|summary] [--ignore_memory_check] -- SCRIPT [FLAGS...]

(launch.sh picks the Python and runs `python -m launcher`.) It knows of
SCRIPT only what SCRIPT declares (contract.py, docs/launcher.md). It

- runs the script's preparation step, if it declares one, then starts P
  parameter-server and W worker processes of SCRIPT (and, with
  --coordinator, a coordinator, "chief" in TF_CONFIG; with --evaluator, an
  evaluator), on ports the operating system reports free, each told its
  role through TF_CONFIG;
- streams their output live, each line prefixed with its task ("[worker:1]"),
  and keeps each task's full log in <logdir>/logs/; above 4 workers, only
  the chief's, the ps's and the evaluator's, with a line now and then for
  the others (summary.py);
- exits 0 once every worker (and the coordinator) has finished, and stops
  any ps still running;
- refuses, before starting anything, a job this machine cannot hold: its
  memory (unless --ignore_memory_check), open files, ports, threads
  (limits.py);
- if a task fails or dies, stops all the others at once, names the task,
  shows its last lines and exits 1; if a task rejected its input (exit code
  2), exits 2, its error shown once on stderr; with --max_restarts N, a
  failed task is started again with the same TF_CONFIG, up to N restarts in
  all (with --restart_group, every other task but the evaluator with it);
- on Ctrl-C, SIGTERM or --timeout, stops every task and exits non-zero; at
  --timeout each task first writes its Python stack to its log.

The job runs in a network namespace of its own by default (network.py).
Each task runs in its own process group, and every task in a PID namespace
of the job's that the kernel empties when the launcher dies, however it
dies (reaping.py), so no process of the job outlives the launcher. The
launcher's options may also come after SCRIPT (that is how `bash run.sh
--workers 4` reaches here); every other flag goes to SCRIPT. Standard
library only.
"""

import json
import os
import queue
import re
import signal
import sys
import threading
import time

from . import contract, network, traffic
from .forking import no_core_files
from .options import gpu_for, layout, visible_gpus
from .reaping import readable
from .summary import Summary
from .task import STOP_GRACE_S, Task, stop_group
from .usage import Usage

EXIT_TIMEOUT = 124
# Each task checks its flags, so a bad flag makes them all say the same error
# line: it is shown once.
USAGE_ERROR = re.compile(r"^\S+: error: ")
# The start line lists the ports of a job of up to this many tasks, the
# first few of a bigger one.
PORTS_LISTED = 8
# TensorFlow's C++ start-up chatter, which TF_CPP_MIN_LOG_LEVEL does not hide:
# kept in the task logs, left out of the live stream.
CHATTER = re.compile(r"^(WARNING: All log messages before absl::InitializeLog"
                     r"|I\d{4} |To enable the following instructions)")


class Terminated(Exception):
    """SIGTERM arrived."""


def show(line):
    """Prints a line; if our reader has gone (`| head`), drops output quietly."""
    try:
        print(line, flush=True)
    except OSError:
        # Point stdout at /dev/null so that later prints and the interpreter's
        # final flush do not fail too; the tasks' logs still get everything.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def say(message):
    show(f"[launch] {message}")


class Launcher:
    def __init__(self, options, script, script_args, logdir, job_network=None,
                 fork=None, namespace=None, declared=None):
        self.options, self.script, self.script_args = options, script, script_args
        # What the script declares of itself (contract.py).
        self.contract = declared or contract.Contract()
        self.fork = fork
        # The job's PID namespace (reaping.JobNamespace), if it has one.
        self.namespace = namespace
        self.network = job_network or network.Network()
        # Whether what the tasks send each other is measured (start()): not
        # on this machine's network.
        self.measured = job_network is not None
        self.logdir = logdir
        self.tasks = []
        self.events = queue.Queue()
        self.print_lock = threading.Lock()
        self.streaming = True  # False once the job is being torn down
        self.errors_shown = set()
        self.readers = []
        # Tasks whose non-zero exit was reported, not counted as a failure.
        self.reported = set()
        # TensorFlow's chief: the coordinator where there is one, else worker 0.
        self.chief = "chief:0" if options.coordinator else "worker:0"
        self.summary = Summary(self.tasks, self.chief, self.show_summary,
                               on=options.output == "summary")
        self.usage = Usage(self.tasks, options.start, logdir,
                           self.contract.progress, self.network.launcher_pid)

    def start(self):
        roles, ports, cluster = layout(self.options, self.network.host)
        self.traffic = traffic.for_job(self.measured and self.network, roles,
                                       self.options, self.logdir, self.contract)
        ps_count, worker_count = self.options.ps, self.options.workers
        chief_count = int(self.options.coordinator)
        evaluator_count = int(self.options.evaluator)
        listed = ", ".join(map(str, ports[:PORTS_LISTED if len(ports) <=
                                        PORTS_LISTED else 3]))
        if len(ports) > PORTS_LISTED:
            listed += f" and {len(ports) - 3} more"
        say(f"{ps_count} ps + {worker_count} worker(s)"
            f"{' + a coordinator' if chief_count else ''}"
            f"{' + an evaluator' if evaluator_count else ''} of {self.script}, "
            f"{self.options.start.describe()}, on "
            f"{self.network.description} ports {listed}; logs and results "
            f"in {self.logdir}")
        # PYTHONFAULTHANDLER: a task that crashes, or is aborted at --timeout,
        # writes its Python stack to its log.
        base_env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
        # TensorFlow's C++ start-up chatter would drown the progress lines.
        base_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        no_core_files()
        command = [sys.executable, self.script, *self.script_args]
        gpus = visible_gpus() if self.options.gpu_per_worker else []
        # Start every process before any reader thread: a Forked task is a
        # fork of this Python, safer with no other thread running.
        for number, (job, index) in enumerate(roles):
            env = dict(base_env, TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": job, "index": index}}))
            if self.options.gpu_per_worker:
                env["CUDA_VISIBLE_DEVICES"] = gpu_for(job, index, gpus)
            log_path = os.path.join(self.logdir, "logs", f"{job}-{index}.log")
            self.tasks.append(Task(
                job, index, command, env, log_path, self.network.namespace(number),
                self.fork, self.namespace,
                self.network.disk(self.logdir, job, index, self.options,
                                  self.contract.chief_disk)))
        self.summary.start()  # before any line is read
        for task in self.tasks:
            self.read(task)
        self.traffic.start()
        self.usage.start()

    def show_summary(self, line):
        with self.print_lock:
            if self.streaming:
                show(line)

    def read(self, task):
        """Starts the thread that pumps the task's current process."""
        reader = threading.Thread(target=self.pump, args=(task, task.process),
                                  daemon=True)
        reader.start()
        self.readers.append(reader)

    def pump(self, task, process):
        """Copies a task's output to its log and, prefixed, to our stdout,
        until the task has exited; then kills what it left in its process
        group (which would hold its output open), reads what is left of its
        output for up to STOP_GRACE_S, reaps it and reports its exit code.
        The task's exit, not the end of its output, is what counts."""
        code = 1  # a reader that failed (a full disk) fails its task
        try:
            code = self.copy_until_exit(task, process)
        finally:  # so that supervise never waits for a task unreported
            self.events.put((task, code))

    def copy_until_exit(self, task, process):
        output = process.stdout.fileno()
        watched, partial, deadline = [output, process], b"", None
        while output in watched or process in watched:
            left = None if deadline is None else \
                max(0.0, deadline - time.monotonic())
            ready = readable(watched, left)
            if not ready:  # its output is held open by something it started
                break
            if process in ready:
                watched.remove(process)
                if hasattr(process, "end_group"):
                    process.end_group()
                deadline = time.monotonic() + STOP_GRACE_S
            if output in ready:
                chunk = os.read(output, 65536)
                if not chunk:
                    watched.remove(output)
                *lines, partial = (partial + chunk).split(b"\n")
                for raw in lines:
                    self.copy(task, raw)
        if partial:
            self.copy(task, partial)
        process.stdout.close()
        return process.wait(timeout=STOP_GRACE_S)

    def copy(self, task, raw):
        line = raw.decode("utf-8", "replace")
        with self.print_lock:
            if task.log.closed:  # a reader teardown gave up waiting for
                return
            task.log.write(line + "\n")
            if CHATTER.match(line):
                return
            task.last_lines.append(line)
            if USAGE_ERROR.match(line):
                if line in self.errors_shown:
                    return
                self.errors_shown.add(line)
                # An error goes to stderr, where the user looks for it.
                print(f"[{task.name}] {line}", file=sys.stderr, flush=True)
                return
            if self.summary.hides(task):
                self.summary.note(task, line)  # its log has it
            elif self.streaming and not task.quiet:
                show(f"[{task.name}] {line}")

    def supervise(self):
        """Waits for the outcome; returns the launcher's exit code."""
        deadline = time.monotonic() + self.options.timeout
        awaited = ("worker", "chief", "evaluator")
        workers_left = sum(task.job in awaited for task in self.tasks)
        restarts = 0
        finished = set()  # the tasks that exited 0
        # {ps task: (its exit code, until when)}: a ps that failed while
        # workers ran waits this long for them to finish before it counts.
        waiting = {}
        while workers_left:
            now = time.monotonic()
            left = max(0.0, min([deadline, *(until for _, until in
                                              waiting.values())]) - now)
            try:
                # Beyond TIMEOUT_MAX (--timeout inf), wait without a limit.
                task, code = self.events.get(
                    timeout=left if left < threading.TIMEOUT_MAX else None)
            except queue.Empty:
                now = time.monotonic()  # the wait may have taken `left`
                if not waiting or now >= deadline:
                    return self.timed_out()
                task = min(waiting, key=lambda ps: waiting[ps][1])
                code = waiting.pop(task)[0]
            else:
                if code != 0 and task.job == "ps":
                    # A ps failing in its own shutdown, as its workers end,
                    # is no failure: their exit codes decide the job.
                    waiting[task] = (code, time.monotonic() + STOP_GRACE_S)
                    continue
            if code not in (0, 2) and restarts < self.options.max_restarts:
                restarts += 1
                what = ("the whole group" if self.options.restart_group
                        else "it")
                message = (f"{task.name} {died(code)}; restarting {what} "
                           f"({restarts} of {self.options.max_restarts})")
                say(message)
                task.log.write(f"[launch] {message}\n")
                group = [task]
                if self.options.restart_group:
                    group = stop_group(self.tasks, self.events, task, finished,
                                       waiting, deadline)
                    if group is None:
                        return self.timed_out()
                for member in group:
                    if member.name == self.chief:
                        self.traffic.chief_restarted()
                    member.spawn()
                    self.read(member)
                continue
            if code != 0:
                for ps, (ps_code, _) in waiting.items():  # most likely the cause
                    say(f"{ps.name} had {died(ps_code)} just before")
                return self.fail(task, code)
            finished.add(task)
            if task.job in awaited:
                workers_left -= 1
        self.summary.stop(final=True)
        for task, (code, _) in waiting.items():
            self.report(task, code)
        # Every worker is done, so no ps has anything left to serve. A ps
        # exits on its own once its workers have signalled it (that is what
        # a job started by hand relies on), but only after the interpreter's
        # teardown, which takes most of a second: stop it now instead. Its
        # output is unbuffered, so its log is complete.
        self.teardown(quiet=False)
        for task in self.tasks:
            # A ps that exited non-zero by itself (not of our signal).
            code = task.process.returncode
            if task.job == "ps" and code and code not in (
                    -signal.SIGTERM, -signal.SIGKILL):
                self.report(task, code)
        measured = self.traffic.finish(self.usage.finish())
        if measured:
            say(measured)
        if self.result_missing():
            say(f"error: every task exited 0, but the chief did not write "
                f"{os.path.join(self.logdir, self.contract.result)}; it stopped "
                f"on an error it did not report (see its log in "
                f"{self.logdir}/logs)")
            return 1
        say(f"all {self.options.workers} worker(s)"
            f"{' and the coordinator' if self.options.coordinator else ''}"
            f"{' and the evaluator' if self.options.evaluator else ''} "
            f"finished; "
            f"logs and results in {self.logdir}")
        return 0

    def result_missing(self):
        """Whether the script declares a result file (contract.py) and the
        chief ended without writing it. A chief that exits 0 without it
        stopped on an error its MonitoredTrainingSession swallowed (the
        session's exit hides OutOfRangeError, which a closed queue raises)."""
        return bool(self.contract.result) and not self.traffic.fresh_result()

    def timed_out(self):
        """Aborts every task, each of which writes its Python stack to its
        log as it dies, then stops whatever is left."""
        self.streaming = False  # the dumps go to the logs only
        for task in self.tasks:
            task.stop(signal.SIGABRT)
        self.readers_done(STOP_GRACE_S)
        self.teardown()
        say(f"timed out after {self.options.timeout:g} s (--timeout); "
            f"stopped every task; the log of each task still running ends "
            f"with its Python stack ({os.path.join(self.logdir, 'logs')})")
        return EXIT_TIMEOUT

    def report(self, task, code):
        if task not in self.reported:
            self.reported.add(task)
            say(f"{task.name} {died(code)} after every worker had finished; "
                f"not a failure of the job (its log: {task.log.name})")

    def fail(self, task, code):
        self.teardown()
        if code == 2:  # the task rejected its input and has said why
            say(f"{task.name} rejected its input (exit code 2); stopped every "
                f"other task")
            return 2
        how = (f"was killed by signal {-code}" if code < 0
               else f"exited with code {code}")
        say(f"{task.name} {how}; stopped every other task. Its last lines "
            f"(full log: {task.log.name}):")
        for line in task.last_lines:
            show(f"    {line}")
        return 1

    def teardown(self, quiet=True):
        """Stops every task still running: SIGTERM, then SIGKILL if need be.
        Unless the job succeeded, what the stopped tasks print while dying
        (lost connections, mostly) goes to their logs only."""
        if quiet:  # no lock: a reader may hold it, stuck on a stalled stdout
            self.streaming = False
        self.summary.stop()
        self.usage.stop()
        # Each task's reader reaps it, once it and its process group have
        # ended: so that a pid is never signalled after it is reaped (and
        # may be another process's), only the readers wait for the tasks.
        for task in self.tasks:
            task.stop(signal.SIGTERM)
        if not self.readers_done(STOP_GRACE_S):
            for task in self.tasks:
                task.stop(signal.SIGKILL)
            self.readers_done(STOP_GRACE_S)
        if self.namespace is not None:
            # Whatever a task started and its group did not hold.
            self.namespace.end(STOP_GRACE_S)
        with self.print_lock:
            self.streaming = False
            for task in self.tasks:
                task.log.close()

    def readers_done(self, timeout):
        """Waits up to `timeout` s for every reader; True if all are done."""
        deadline = time.monotonic() + timeout
        for reader in self.readers:
            reader.join(timeout=max(0.0, deadline - time.monotonic()))
        return not any(reader.is_alive() for reader in self.readers)


def died(code):
    return f"died (signal {-code})" if code < 0 else f"exited with code {code}"
