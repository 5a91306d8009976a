"""The launcher's inputs, and what it works out before starting a task:
its command line, how its tasks start, whether the machine can hold them
(limits.py), the --logdir it uses, free ports and GPUs. Nothing here starts
or stops a process: that is job.py's and task.py's alone.
Standard library only.
"""

import argparse
import importlib.util
import os
import socket
import subprocess
import sys
import time

from . import PROG, LaunchError, contract, disks, forking, limits, network, shaping

# The least memory a task takes, however it starts (limits.py).
MEMORY_PER_TASK_MIB = min(limits.MEMORY_MIB.values())
# Above this many workers the live stream shows the chief's lines, not the
# others', which a line every SUMMARY_EVERY_S sums up (summary.py).
SUMMARY_ABOVE_WORKERS = 4
# Flags the launcher sets through TF_CONFIG; passing them as well is a mistake.
CLUSTER_FLAGS = ("--ps_hosts", "--worker_hosts", "--job_name", "--task_index")

RESTARTS_HELP = f"""\
Restarts (--max_restarts N): a task that dies (a signal) or exits non-zero
is started again, with the same TF_CONFIG, the same port and the same
--logdir, up to N restarts in all over the job; exit code 2 (bad input) is
never retried. The examples then resume: a worker rejoins, a restarted chief
carries on from the ps (or from the last checkpoint if a ps was lost), a
restarted ps gets the last checkpoint. This is what a TFJob's
`restartPolicy: OnFailure` (or `ExitCode`, which retries exit codes of 128
and more, i.e. deaths by signal) does for a pod, with N as its
`runPolicy.backoffLimit`.
With the default, 0, the first failure stops the whole job.

--restart_group: a task that fails takes every other task of the job with it
(the evaluator excepted): the launcher stops them all and starts them all
again, and that counts as one restart. This is what an allreduce job with no
ps (--ps 0) needs, where the workers' collectives cannot go on, nor take a
new worker in, once one worker is gone: all resume together from the last
checkpoint. It is what torchrun's `--max-restarts` does, which always
restarts every worker of the group; without it, as Kubernetes does for a
pod, only the task that failed is restarted. --ps 0 does not imply it: a job
asks for it, as Multi-Worker-Mirrored-Strategy's run.sh does.

Disks (--network hosts): each task sees the --logdir as a disk of its own,
but for the chief and the task types the script names in its launch block's
chief_disk (the examples name the evaluator), who share the logdir itself;
the others' are folders of <logdir>/disks/ (launcher/disks.py). A restarted
task keeps its disk, as a restarted container does. --disk_on_restart empty
starts it on an empty one instead, as a pod created anew on another node,
but for the chief's and evaluator's disk, a persistent volume on
Kubernetes; empty_all, that one too (a job with no persistent volume).

What the launcher knows of SCRIPT is what its `# /// launch` block
declares: a preparation step, the chief's progress and result files, the
disk rule (docs/launcher.md).

Many workers: a job of more than {forking.FORK_ABOVE_TASKS} tasks is forked from one
TensorFlow import in the launcher, not a new Python per task (the same job,
for a fraction of the CPU time and memory). LAUNCH_PRELOAD_TENSORFLOW=1 in
the environment forks any job, =0 starts a new Python per task whatever
its size; set to the socket of a fork server (`python tests/fork_server.py
SOCKET`, which has imported TensorFlow once), that server forks the tasks
of every launch: the test suite runs one per test process. Before anything
starts, a job the machine cannot hold (memory, open files, ports, threads)
is refused in one line. Above {SUMMARY_ABOVE_WORKERS} workers the live output shows the
chief's lines, the ps's, the evaluator's and every error; the other
workers' go to their logs, summed up in a line now and then (--output all
shows them all)."""


def parse_command_line(argv):
    """Splits argv into launcher options, the script and the script's flags."""
    parser = argparse.ArgumentParser(
        prog=PROG, allow_abbrev=False, add_help=False,
        description="Run an example as a local cluster.",
        epilog=RESTARTS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ps", type=int, default=1,
                        help="parameter-server tasks (default 1; 0 for an "
                             "allreduce example, which has none)")
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
    parser.add_argument("--restart_group", action="store_true",
                        help="with --max_restarts, restart every task (but the "
                             "evaluator) when one fails, not that task alone: "
                             "for an allreduce job; see below")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds before the whole job is stopped, each "
                             "task's Python stack ending its log "
                             "(default 600; inf for no limit)")
    parser.add_argument("--ignore_memory_check", action="store_true",
                        help="start even if the tasks (about "
                             f"{limits.MEMORY_MIB['new_python']} MiB each, "
                             f"{limits.MEMORY_MIB['forked']} forked) may not "
                             "fit in the memory available")
    parser.add_argument("--output", choices=("all", "summary"),
                        help="all: every task's lines, live; summary: the "
                             "chief's, the ps's and the evaluator's, and for "
                             "the other workers a line now and then "
                             f"(default: summary above {SUMMARY_ABOVE_WORKERS} "
                             "workers, else all)")
    add_network_option(parser)
    parser.add_argument("--bandwidth", metavar="RATE",
                        help="with --network hosts: limit each task's link to "
                             "RATE each way (10gbit, 1gbit, 100mbit...)")
    parser.add_argument("--latency", type=float, metavar="MS",
                        help="with --network hosts: delay each way of each "
                             "task's link by MS milliseconds (needs netem)")
    parser.add_argument("--disk_on_restart", choices=disks.ON_RESTART,
                        default="kept",
                        help="with --network hosts: whether a restarted task "
                             "keeps its disk (default), starts on an empty one "
                             "but for the chief's, or on an empty one in all "
                             "cases; see below")
    head = argv[:argv.index("--")] if "--" in argv else argv
    if "-h" in head or "--help" in head:
        parser.print_help()
        sys.exit(0)
    if "--" not in argv:
        raise LaunchError(f"usage: {PROG} [--ps N] [--workers N] "
                          f"[--timeout S] -- SCRIPT [FLAGS...]")
    split = argv.index("--")
    options, unknown = parser.parse_known_args(argv[:split])
    if unknown:
        raise LaunchError(f"unknown launcher option {unknown[0]}; it takes "
                          f"--ps, --workers, --coordinator, --evaluator, "
                          f"--max_restarts, --restart_group, --timeout, "
                          f"--network, --bandwidth, --latency, "
                          f"--disk_on_restart, --output and "
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
    if options.ps < 0:
        raise LaunchError(f"need --ps 0 or more, got --ps {options.ps}")
    if options.workers < 1:
        raise LaunchError(f"need --workers 1 or more, got --workers "
                          f"{options.workers}")
    if options.max_restarts < 0:
        raise LaunchError(f"--max_restarts must be 0 or more, got "
                          f"{options.max_restarts}")
    for flag in ("bandwidth", "latency"):
        if getattr(options, flag) is not None and options.network != "hosts":
            raise LaunchError(f"--{flag} needs --network hosts, where each "
                              f"task has a link of its own")
    if options.bandwidth is not None:
        try:
            shaping.bits_per_second(options.bandwidth)
        except ValueError as error:
            raise LaunchError(f"--bandwidth takes {error}") from None
    if options.latency is not None and not options.latency > 0:
        raise LaunchError(f"--latency must be positive, got {options.latency:g}")
    if options.disk_on_restart != "kept" and options.network != "hosts":
        raise LaunchError("--disk_on_restart needs --network hosts, where "
                          "each task has a disk of its own")
    if not options.timeout > 0:
        raise LaunchError(f"--timeout must be positive, got {options.timeout}")
    if not os.path.isfile(script):
        raise LaunchError(f"script {script} not found (from {os.getcwd()})")
    if options.output is None:
        options.output = ("summary" if options.workers > SUMMARY_ABOVE_WORKERS
                          else "all")
    if {"-h", "--help"} & set(script_args):
        return options, parser, script, script_args  # the script's help
    options.start = forking.start_mode(os.environ.get(forking.PRELOAD),
                                       task_count(options))
    # Once, by the launcher the user started; not again inside the job's
    # namespace.
    if not network.inside():
        try:
            declared = contract.read(script).memory_mib
        except contract.ContractError as error:
            raise LaunchError(str(error)) from None
        refusal = limits.refusal(task_count(options), options.start,
                                 options.network, options.ignore_memory_check,
                                 declared)
        if refusal:
            raise LaunchError(refusal)
    return options, parser, script, script_args


def task_count(options):
    return options.ps + options.workers + int(options.coordinator) + \
        int(options.evaluator)


def check_tensorflow():
    """LaunchError if this Python cannot import TensorFlow."""
    if importlib.util.find_spec("tensorflow") is None:
        raise LaunchError(f"TensorFlow is not installed for {sys.executable}; "
                          f"run `make venv` in the repository, or activate an "
                          f"environment with `pip install -r "
                          f"requirements.txt`")


def add_network_option(parser):
    parser.add_argument(
        "--network", choices=network.MODES, default="private",
        help="private (default): the job in a network namespace of its own, "
             "unreachable from outside; hosts: also each task in its own, "
             "with its own address, as on separate machines; host: on "
             "127.0.0.1, where every interface listens (see docs/multi-host.md)")


def logdir_of(script, script_args):
    """The run's --logdir: the user's, or a new folder, runs/<time>-<pid>
    beside the script."""
    for index, flag in enumerate(script_args):
        if flag == "--logdir" and index + 1 < len(script_args):
            return script_args[index + 1], script_args
        if flag.startswith("--logdir="):
            return flag.split("=", 1)[1], script_args
    logdir = os.path.join(os.path.dirname(os.path.abspath(script)), "runs",
                          f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    return logdir, script_args + ["--logdir", logdir]


def make_logs(logdir):
    """Creates <logdir>/logs, for the tasks' logs; LaunchError, naming the
    problem, unless the logdir is or can become a folder this user may
    write to."""
    existing = os.path.abspath(logdir)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise LaunchError(f"--logdir {logdir}: {existing} is a file, not a "
                          f"folder; pass a folder there")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise LaunchError(f"--logdir {logdir}: {existing} is not writable by "
                          f"this user; pass a folder you may write to")
    try:
        os.makedirs(os.path.join(logdir, disks.LOGS), exist_ok=True)
    except OSError as error:
        raise LaunchError(f"--logdir {logdir}: cannot create {error.filename} "
                          f"({error.strerror}); pass a folder you may write "
                          f"to") from None


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


def layout(options, host):
    """The job's tasks, in start order: [(job, index)], ps first, then the
    workers, the chief, the evaluator; a free port for each (task k has
    ports[k]); and the cluster for TF_CONFIG, task k at host(k). As a TFJob
    does, the evaluator is in every task's cluster, but no training task
    ever connects to it."""
    roles = [("ps", i) for i in range(options.ps)] + \
            [("worker", i) for i in range(options.workers)] + \
            [("chief", 0)] * int(options.coordinator) + \
            [("evaluator", 0)] * int(options.evaluator)
    ports = free_ports(len(roles))
    cluster = {"worker": []}  # first, as TF_CONFIG has always listed it
    for number, ((job, _), port) in enumerate(zip(roles, ports)):
        cluster.setdefault(job, []).append(f"{host(number)}:{port}")
    return roles, ports, cluster


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
