#!/usr/bin/env python3
"""Runs one example as a whole cluster on this machine, and cleans up after it.

    python launch.py [--ps 1] [--workers 2] [--coordinator] [--evaluator] \
        [--max_restarts 0] [--timeout 600] [--ignore_memory_check] \
        -- SCRIPT [FLAGS...]

Every example's run.sh is one call to this program. It

- starts P parameter-server and W worker processes of SCRIPT on 127.0.0.1
  (and, with --coordinator, one coordinator, "chief" in TF_CONFIG; with
  --evaluator, one evaluator task), on ports the operating system reports
  free, and tells each its role through TF_CONFIG;
- streams their output live, each line prefixed with its task ("[worker:1]"),
  and keeps each task's full log in <logdir>/logs/;
- exits 0 once every worker (and the coordinator) has finished, and stops
  any ps still running;
- refuses, before starting anything, a job whose tasks would not fit in the
  memory available (unless --ignore_memory_check);
- if a task fails or dies, stops all the others at once, names the task,
  shows its last lines and exits 1; if a task rejected its input (exit code
  2), shows its error once, on stderr, and exits 2; with --max_restarts N, a
  task that dies or fails (other than with exit code 2) is instead started
  again with the same TF_CONFIG, its log continuing in the same file, up to
  N restarts in all;
- on Ctrl-C, SIGTERM or --timeout, stops every task and exits non-zero.

By default the whole job runs in a network namespace of its own, so no
process outside it can connect to the tasks; --network hosts gives each
task its own namespace and address, --network host runs them on this
machine's network (launch_network.py, MULTI-HOST.md).

Each task runs in its own process group, and asks the kernel to kill it if
the launcher dies, so no task outlives the launcher. --ps, --workers,
--timeout, --max_restarts, --coordinator, --evaluator, --network and
--ignore_memory_check may also come after SCRIPT (that is how `bash run.sh
--workers 4` reaches here); every other flag goes to SCRIPT.
Standard library only.
"""

import argparse
import collections
import ctypes
import importlib.util
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import launch_network

LAST_LINES = 15
STOP_GRACE_S = 5.0
EXIT_TIMEOUT = 124
# What one task takes at its peak: a Hogwild worker with TensorFlow loaded,
# training on the synthetic data, measured at 775 MiB resident (VmHWM).
MEMORY_PER_TASK_MIB = 800
# Flags the launcher sets through TF_CONFIG; passing them as well is a mistake.
CLUSTER_FLAGS = ("--ps_hosts", "--worker_hosts", "--job_name", "--task_index")
# Each task checks its flags, so a bad flag makes them all say the same error
# line: it is shown once.
USAGE_ERROR = re.compile(r"^\S+: error: ")
# TensorFlow's C++ start-up chatter, which TF_CPP_MIN_LOG_LEVEL does not hide:
# kept in the task logs, left out of the live stream.
CHATTER = re.compile(r"^(WARNING: All log messages before absl::InitializeLog"
                     r"|I\d{4} |To enable the following instructions)")


RESTARTS_HELP = """\
Restarts (--max_restarts N): a task that dies (a signal) or exits non-zero
is started again, with the same TF_CONFIG, the same port and the same
--logdir, up to N restarts in all over the job; exit code 2 (bad input) is
never retried. The examples then resume: a worker rejoins, a restarted chief
carries on from the ps (or from the last checkpoint if a ps was lost), a
restarted ps gets the last checkpoint. This is what a TFJob's
`restartPolicy: OnFailure` (or `ExitCode`, which retries exit codes of 128
and more, i.e. deaths by signal) does for a pod, with N as its
`runPolicy.backoffLimit`, and what torchrun's
`--max-restarts` does, except that torchrun restarts every worker of the
group while this restarts only the task that failed, as Kubernetes does.
With the default, 0, the first failure stops the whole job."""


class LaunchError(Exception):
    """Bad launcher input: one line on stderr, exit code 2."""


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


def parse_command_line(argv):
    """Splits argv into launcher options, the script and the script's flags."""
    parser = argparse.ArgumentParser(
        prog="launch.py", allow_abbrev=False, add_help=False,
        description="Run an example as a local cluster.",
        epilog=RESTARTS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ps", type=int, default=1,
                        help="parameter-server tasks (default 1)")
    parser.add_argument("--workers", type=int, default=2,
                        help="worker tasks (default 2)")
    parser.add_argument("--gpu_per_worker", action="store_true",
                        help="give worker i the i-th visible GPU (through "
                             "CUDA_VISIBLE_DEVICES) and the ps none")
    parser.add_argument("--coordinator", action="store_true",
                        help="also start a coordinator task, \"chief\" in "
                             "TF_CONFIG, as TensorFlow 2's "
                             "ParameterServerStrategy wants")
    parser.add_argument("--evaluator", action="store_true",
                        help="also start an evaluator task, \"evaluator\" in "
                             "TF_CONFIG, that tests each new checkpoint of "
                             "the chief; training never waits for it")
    parser.add_argument("--max_restarts", type=int, default=0,
                        help="restart a task that dies or fails, up to this "
                             "many times in all (default 0: the first "
                             "failure stops the job); see below")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds before the whole job is stopped "
                             "(default 600; inf for no limit)")
    parser.add_argument("--ignore_memory_check", action="store_true",
                        help=f"start even if the tasks (about "
                             f"{MEMORY_PER_TASK_MIB} MiB each) may not fit "
                             f"in the memory available")
    add_network_option(parser)
    head = argv[:argv.index("--")] if "--" in argv else argv
    if "-h" in head or "--help" in head:
        parser.print_help()
        sys.exit(0)
    if "--" not in argv:
        raise LaunchError("usage: launch.py [--ps N] [--workers N] "
                          "[--timeout S] -- SCRIPT [FLAGS...]")
    split = argv.index("--")
    options, unknown = parser.parse_known_args(argv[:split])
    if unknown:
        raise LaunchError(f"unknown launcher option {unknown[0]}; it takes "
                          f"--ps, --workers, --coordinator, --evaluator, "
                          f"--max_restarts, --timeout and "
                          f"--ignore_memory_check")
    if split + 1 >= len(argv):
        raise LaunchError("no script given after --")
    script, rest = argv[split + 1], argv[split + 2:]
    # The user's flags (from run.sh "$@") override run.sh's defaults.
    options, script_args = parser.parse_known_args(rest, namespace=options)
    for flag in script_args:
        if flag.split("=", 1)[0] in CLUSTER_FLAGS:
            raise LaunchError(f"{flag.split('=', 1)[0]} is set by the launcher "
                              f"through TF_CONFIG; use --ps and --workers "
                              f"here, or run the script by hand to choose "
                              f"hosts")
    if options.ps < 1:
        raise LaunchError(f"--ps {options.ps}: every example keeps its "
                          f"variables on a parameter server; use --ps 1 or "
                          f"more")
    if options.workers < 1:
        raise LaunchError(f"need --workers 1 or more, got --workers "
                          f"{options.workers}")
    if options.max_restarts < 0:
        raise LaunchError(f"--max_restarts must be 0 or more, got "
                          f"{options.max_restarts}")
    if not options.timeout > 0:
        raise LaunchError(f"--timeout must be positive, got {options.timeout}")
    if not os.path.isfile(script):
        raise LaunchError(f"script {script} not found (from {os.getcwd()})")
    if not options.ignore_memory_check:
        check_memory(options.ps + options.workers + int(options.coordinator)
                     + int(options.evaluator))
    return options, parser, script, script_args


def check_memory(tasks):
    """LaunchError if `tasks` TensorFlow processes would not fit in the
    memory available now: started anyway, they would exhaust it."""
    try:
        with open("/proc/meminfo") as stream:
            fields = dict(line.split(":", 1) for line in stream)
        available_mib = int(fields["MemAvailable"].split()[0]) // 1024
    except (OSError, KeyError, ValueError):
        return  # not Linux: nothing to compare with
    needed_mib = tasks * MEMORY_PER_TASK_MIB
    if needed_mib > available_mib:
        raise LaunchError(
            f"{tasks} tasks need about {needed_mib / 1024:.1f} GiB "
            f"({MEMORY_PER_TASK_MIB} MiB each) but only "
            f"{available_mib / 1024:.1f} GiB is available; use fewer "
            f"--workers, or pass --ignore_memory_check to start anyway")


def prepare_logdir(logdir):
    """Creates <logdir>/logs; LaunchError if that cannot be done or written."""
    logs = os.path.join(logdir, "logs")
    existing = os.path.abspath(logdir)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise LaunchError(f"--logdir {logdir}: {existing} is a file, not a "
                          f"folder; pass a folder there")
    try:
        os.makedirs(logs, exist_ok=True)
    except OSError as error:
        raise LaunchError(f"--logdir {logdir}: cannot create {error.filename} "
                          f"({error.strerror}); pass a folder you may write "
                          f"to") from None
    if not os.access(logdir, os.W_OK | os.X_OK) or \
            not os.access(logs, os.W_OK | os.X_OK):
        raise LaunchError(f"--logdir {logdir} is not writable; pass a folder "
                          f"you may write to")


def add_network_option(parser):
    parser.add_argument(
        "--network", choices=launch_network.MODES, default="private",
        help="private (default): the job in a network namespace of its own, "
             "unreachable from outside; hosts: also each task in its own, "
             "with its own address, as on separate machines; host: on "
             "127.0.0.1, where every interface listens (see MULTI-HOST.md)")


def logdir_of(script, script_args):
    """The run's --logdir: the user's, or a new folder under the example."""
    for index, flag in enumerate(script_args):
        if flag == "--logdir" and index + 1 < len(script_args):
            return script_args[index + 1], script_args
        if flag.startswith("--logdir="):
            return flag.split("=", 1)[1], script_args
    stamp = time.strftime("%Y%m%d-%H%M%S")
    logdir = os.path.join(os.path.dirname(os.path.abspath(script)), "runs",
                          f"{stamp}-{os.getpid()}")
    return logdir, script_args + ["--logdir", logdir]


def visible_gpus():
    """The GPU ids this launcher may hand out: CUDA_VISIBLE_DEVICES if set,
    else those `nvidia-smi -L` lists, else none."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [gpu for gpu in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if gpu]
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                 text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(index) for index, line in enumerate(listing.splitlines())
            if line.startswith("GPU ")]


def gpu_for(job, index, gpus):
    """CUDA_VISIBLE_DEVICES for a task: worker i gets the i-th GPU, if there
    is one; a ps, or a worker beyond the GPUs, gets none (so it runs on the
    CPU)."""
    return gpus[index] if job == "worker" and index < len(gpus) else ""


def free_ports(count):
    """Ports the OS reports free on every interface, as TF servers bind there.

    All are held open together, so they differ from each other, then released
    for the servers to take; a port-0 bind is drawn at random from the
    ephemeral range, so two launchers starting at once do not pick the same.
    """
    sockets = []
    try:
        for _ in range(count):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            probe.bind(("", 0))
            sockets.append(probe)
        return [probe.getsockname()[1] for probe in sockets]
    finally:
        for probe in sockets:
            probe.close()


try:
    # Looked up once, here: a restarted task is forked while reader threads
    # run, and the child should then do as little as possible before exec.
    _PRCTL = ctypes.CDLL("libc.so.6", use_errno=True).prctl
except OSError:  # not Linux: the launcher's own teardown still applies
    _PRCTL = None


def die_with_parent():
    """Runs in each child before exec: SIGKILL it if the launcher dies."""
    pr_set_pdeathsig = 1
    if _PRCTL is not None:
        _PRCTL(pr_set_pdeathsig, signal.SIGKILL)


class Task:
    """One child process, its log file and its last lines of output."""

    def __init__(self, job, index, command, env, log_path, enter=None):
        self.name = f"{job}:{index}"
        self.job = job
        # `enter`, if given, runs in the child first: it moves the task into
        # its own network namespace (--network hosts).
        self.command, self.env, self.enter = command, env, enter
        self.log = open(log_path, "w", buffering=1)
        self.last_lines = collections.deque(maxlen=LAST_LINES)
        self.process = None
        self.spawn()
        self.returncode = None

    def spawn(self):
        """Starts the task's process (again, after a restart: same command,
        same TF_CONFIG, same log file)."""
        enter = self.enter
        self.process = subprocess.Popen(
            self.command, env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent if enter is None
            else lambda: (enter(), die_with_parent()))

    def stop(self, sig):
        """Signals the task's whole process group, if it is still running."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass


class Launcher:
    def __init__(self, options, script, script_args, logdir, network=None):
        self.options, self.script, self.script_args = options, script, script_args
        self.network = network or launch_network.Network()
        self.logdir = logdir
        self.tasks = []
        self.events = queue.Queue()
        self.print_lock = threading.Lock()
        self.streaming = True  # False once the job is being torn down
        self.errors_shown = set()
        self.readers = []

    def start(self):
        ps_count, worker_count = self.options.ps, self.options.workers
        chief_count = int(self.options.coordinator)
        evaluator_count = int(self.options.evaluator)
        ports = free_ports(ps_count + worker_count + chief_count +
                           evaluator_count)
        # Task k (ps first, then workers, the chief, the evaluator) has
        # ports[k].
        host = self.network.host
        cluster = {"worker": [f"{host(ps_count + i)}:{port}" for i, port in
                              enumerate(ports[ps_count:ps_count + worker_count])]}
        if ps_count:
            cluster["ps"] = [f"{host(i)}:{port}"
                             for i, port in enumerate(ports[:ps_count])]
        if chief_count:
            cluster["chief"] = [f"{host(ps_count + worker_count)}:"
                                f"{ports[ps_count + worker_count]}"]
        if evaluator_count:
            # As a TFJob does: the evaluator is in every task's cluster, but
            # no training task ever connects to it.
            cluster["evaluator"] = [f"{host(len(ports) - 1)}:{ports[-1]}"]
        os.makedirs(os.path.join(self.logdir, "logs"), exist_ok=True)
        say(f"{ps_count} ps + {worker_count} worker(s)"
            f"{' + a coordinator' if chief_count else ''}"
            f"{' + an evaluator' if evaluator_count else ''} of {self.script} on "
            f"{self.network.description} ports "
            f"{', '.join(map(str, ports))}; logs and results "
            f"in {self.logdir}")
        base_env = dict(os.environ, PYTHONUNBUFFERED="1")
        # TensorFlow's C++ start-up chatter would drown the progress lines.
        base_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        command = [sys.executable, self.script, *self.script_args]
        gpus = visible_gpus() if self.options.gpu_per_worker else []
        roles = [("ps", i) for i in range(ps_count)] + \
                [("worker", i) for i in range(worker_count)] + \
                [("chief", 0)] * chief_count + \
                [("evaluator", 0)] * evaluator_count
        # Start every process before any reader thread: forking while other
        # threads run is what makes preexec_fn unsafe.
        for number, (job, index) in enumerate(roles):
            env = dict(base_env, TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": job, "index": index}}))
            if self.options.gpu_per_worker:
                env["CUDA_VISIBLE_DEVICES"] = gpu_for(job, index, gpus)
            log_path = os.path.join(self.logdir, "logs", f"{job}-{index}.log")
            self.tasks.append(Task(job, index, command, env, log_path,
                                   self.network.enter(number)))
        for task in self.tasks:
            self.read(task)

    def read(self, task):
        """Starts the thread that pumps the task's current process."""
        reader = threading.Thread(target=self.pump, args=(task, task.process),
                                  daemon=True)
        reader.start()
        self.readers.append(reader)

    def pump(self, task, process):
        """Copies a task's output to its log and, prefixed, to our stdout."""
        for raw in process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            task.log.write(line + "\n")
            if CHATTER.match(line):
                continue
            task.last_lines.append(line)
            with self.print_lock:
                if USAGE_ERROR.match(line):
                    if line in self.errors_shown:
                        continue
                    self.errors_shown.add(line)
                    # An error goes to stderr, where the user looks for it.
                    print(f"[{task.name}] {line}", file=sys.stderr, flush=True)
                    continue
                if self.streaming:
                    show(f"[{task.name}] {line}")
        process.stdout.close()
        self.events.put((task, process.wait()))

    def supervise(self):
        """Waits for the outcome; returns the launcher's exit code."""
        deadline = time.monotonic() + self.options.timeout
        awaited = ("worker", "chief", "evaluator")
        workers_left = sum(task.job in awaited for task in self.tasks)
        restarts = 0
        while workers_left:
            left = max(0.0, deadline - time.monotonic())
            try:
                # Beyond TIMEOUT_MAX (--timeout inf), wait without a limit.
                task, code = self.events.get(
                    timeout=left if left < threading.TIMEOUT_MAX else None)
            except queue.Empty:
                self.teardown()
                say(f"timed out after {self.options.timeout:g} s (--timeout); "
                    f"stopped every task")
                return EXIT_TIMEOUT
            task.returncode = code
            if code not in (0, 2) and restarts < self.options.max_restarts:
                restarts += 1
                how = (f"died (signal {-code})" if code < 0
                       else f"exited with code {code}")
                message = (f"{task.name} {how}; restarting it ({restarts} of "
                           f"{self.options.max_restarts})")
                say(message)
                task.log.write(f"[launch] {message}\n")
                task.spawn()
                self.read(task)
                continue
            if code != 0:
                return self.fail(task, code)
            if task.job in awaited:
                workers_left -= 1
        # Every worker is done, so no ps has anything left to serve. A ps
        # exits on its own once its workers have signalled it (that is what
        # a job started by hand relies on), but only after the interpreter's
        # teardown, which takes most of a second: stop it now instead. Its
        # output is unbuffered, so its log is complete.
        self.teardown(quiet=False)
        say(f"all {self.options.workers} worker(s)"
            f"{' and the coordinator' if self.options.coordinator else ''}"
            f"{' and the evaluator' if self.options.evaluator else ''} "
            f"finished; "
            f"logs and results in {self.logdir}")
        return 0

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
        (lost connections, mostly) goes to their logs only.
        """
        if quiet:
            with self.print_lock:
                self.streaming = False
        for task in self.tasks:
            task.stop(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for task in self.tasks:
            try:
                task.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                task.stop(signal.SIGKILL)
                task.process.wait()
        for task in self.tasks:
            # Kill anything a task left behind in its process group.
            task.stop(signal.SIGKILL)
        for reader in self.readers:
            reader.join(timeout=STOP_GRACE_S)
        for task in self.tasks:
            task.log.close()


def choose_network(options, argv):
    """The Network to place tasks with, or the exit code of the launcher
    run inside a new namespace with the same argv."""
    mode = launch_network.inside()
    if mode:
        return launch_network.set_up(mode, options.ps + options.workers +
                                     int(options.coordinator) +
                                     int(options.evaluator))
    if options.network == "host":
        return None
    reason = launch_network.namespaces_unavailable()
    if reason is None:
        return launch_network.run_inside(options.network, argv, die_with_parent)
    if options.network == "hosts":
        raise LaunchError(f"--network hosts needs user namespaces, and this "
                          f"system refused one ({reason}); allow "
                          f"unprivileged user namespaces, or use --network "
                          f"host")
    print(launch_network.host_warning(reason), file=sys.stderr, flush=True)
    return None


def raise_terminated(signum, frame):
    raise Terminated()


def main(argv):
    try:
        options, parser, script, script_args = parse_command_line(argv)
    except LaunchError as error:
        print(f"launch.py: error: {error}", file=sys.stderr)
        return 2
    if "-h" in script_args or "--help" in script_args:
        parser.print_help()
        print(f"\nThe flags of {script}:\n", flush=True)
        return subprocess.run([sys.executable, script, "--help"],
                              check=False).returncode
    if importlib.util.find_spec("tensorflow") is None:
        print(f"launch.py: error: TensorFlow is not installed for "
              f"{sys.executable}; run `make venv` in the repository, or "
              f"activate an environment with `pip install -r "
              f"requirements.txt`", file=sys.stderr)
        return 2
    logdir, full_args = logdir_of(script, script_args)
    try:
        prepare_logdir(logdir)
        # The same --logdir inside a namespace, where our pid is another.
        network = choose_network(options, argv + full_args[len(script_args):])
    except (LaunchError, launch_network.NetworkError) as error:
        print(f"launch.py: error: {error}", file=sys.stderr)
        return 2
    if isinstance(network, int):
        return network
    script_args = full_args
    launcher = Launcher(options, script, script_args, logdir, network)
    signal.signal(signal.SIGTERM, raise_terminated)
    # Explicitly, since a shell starts background jobs with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        launcher.start()
        return launcher.supervise()
    except (KeyboardInterrupt, Terminated) as stop:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        launcher.teardown()
        interrupted = isinstance(stop, KeyboardInterrupt)
        say(f"{'interrupted' if interrupted else 'terminated'}; stopped "
            f"every task")
        return 130 if interrupted else 143


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
