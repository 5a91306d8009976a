"""The launcher's --network modes: where a job's tasks listen, and who can
reach them.

- private (the default): the launcher runs itself again inside a user and a
  network namespace of its own (util-linux `unshare`), so the tasks listen
  only there and no process outside the job can connect to them. The
  launcher inside dies with the one outside, and the tasks, and whatever
  they started, with it (the job's PID namespace: reaping.py). Where the
  system does not allow unprivileged user namespaces, the job runs as
  `host` after one warning line.
- hosts: the same namespace, and in it one network namespace per task, each
  with an address of its own (10.10.0.2, 10.10.0.3, ...) on a bridge, and a
  disk of its own (disks.py): a multi-host cluster on one machine. The
  addresses exist only inside the job's namespace, so nothing is ever sent
  anywhere else.
- host: every task in this machine's network namespace on 127.0.0.1, where
  TensorFlow's servers listen on every interface.

The namespaces need no privileges, only util-linux and iproute2: the
bridge, the links and the addresses are set up with `ip`, one `ip -batch`
for the job's namespace, then one for each task's, all at once. No
namespace is named (`ip netns add` would mount it under /run, to outlive
the job): the launcher holds each by an fd, so the kernel frees them all,
links included, when it exits.
$LAUNCH_UNSHARE names the unshare program to use (default `unshare`).
"""

import contextlib
import ctypes
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from . import PROG, disks
from .shaping import ShapingError, shape

MODES = ("private", "hosts", "host")
# Set by the outer launcher for the one it starts inside the namespace.
INSIDE = "LAUNCH_NETWORK_INSIDE"
# The outer launcher's pid.
PARENT = "LAUNCH_NETWORK_PARENT"
UNSHARE = "LAUNCH_UNSHARE"
# After forwarding Ctrl-C or SIGTERM, how long the launcher inside gets to
# stop its tasks before the whole namespace is killed.
FORWARD_GRACE_S = 15.0
# How long the launcher outside waits beyond the job's --timeout (which
# the one inside enforces) before it kills the one inside.
OUTER_MARGIN_S = 120.0
SUBNET = "10.10.0"
BRIDGE = "br0"

NO_IP = ("--network private and hosts need ip, from iproute2 (apt-get "
         "install iproute2), or use --network host")
# Each `ip -batch` line with what it does, for an error to say.
LOOPBACK_UP = {"link set lo up": "bring up lo"}

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
PR_SET_PDEATHSIG, PR_SET_NAME = 1, 15

libc = ctypes.CDLL("libc.so.6", use_errno=True)
prctl = libc.prctl
# A process started as a new program asks the kernel, through this exec
# wrapper (util-linux, as `unshare` is), to SIGKILL it if its parent dies:
# a C program does what a preexec_fn would, and no Python code runs between
# fork and exec, which is unsafe while other threads run (a restart). Where
# setpriv is missing, the job's PID namespace still ends the tasks with the
# launcher (reaping.py).
DIE_WITH_PARENT = (["setpriv", "--pdeathsig", "KILL", "--"]
                   if shutil.which("setpriv") else [])


class NetworkError(Exception):
    """The namespaces or the bridge could not be made."""


def namespace_command():
    """The command prefix that runs a program in a new user and network
    namespace, as root there. The launcher run there puts its tasks in a
    PID namespace of their own (reaping.py)."""
    return [os.environ.get(UNSHARE, "unshare"), "--user", "--map-root-user",
            "--net"]


def namespaces_unavailable():
    """None if this system lets us make the namespaces, else why not."""
    try:
        probe = subprocess.run(namespace_command() + ["true"], capture_output=True,
                               text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return str(error)
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        return lines[-1] if lines else \
            f"{probe.args[0]} exited with code {probe.returncode}"
    return None


def host_warning(reason):
    return (f"{PROG}: warning: no private network for this job ({reason}), "
            f"so its tasks listen on every interface and anyone who can reach "
            f"this machine can read and change their variables; allow "
            f"unprivileged user namespaces (sysctl kernel.unprivileged_userns_"
            f"clone=1, user.max_user_namespaces above 0) or firewall the "
            f"ports, and pass --network host to say you know")


def choose(mode, task_count, argv, timeout=float("inf"), shaping=(None, None)):
    """The Network to place `task_count` tasks with in --network `mode`,
    or the exit code of the launcher run inside a new namespace with argv
    (given up on `timeout` s, the job's, plus a margin); None for this
    machine's network. `shaping`: each task's link's (rate, latency in ms),
    in `hosts` mode (shaping.py)."""
    inner_mode = inside()
    if inner_mode:
        return set_up(inner_mode, task_count, shaping)
    if mode == "host":
        return None
    reason = namespaces_unavailable()
    if reason is None:
        return run_inside(mode, argv, timeout + OUTER_MARGIN_S)
    if mode == "hosts":
        raise NetworkError(f"--network hosts needs user namespaces, and this "
                           f"system refused one ({reason}); allow "
                           f"unprivileged user namespaces, or use --network "
                           f"host")
    print(host_warning(reason), file=sys.stderr, flush=True)
    return None


def run_inside(mode, argv, timeout):
    """Runs the launcher with `argv` inside a new namespace; returns its exit
    code. Ctrl-C and SIGTERM are passed on to it; if it has not stopped
    FORWARD_GRACE_S later, or has not ended within `timeout` s, it is
    killed, and its tasks with it."""
    # The folder that holds this package, so that `-m launcher` finds it
    # from any working folder (which the tasks' relative paths need kept).
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(filter(None, [top, os.environ.get("PYTHONPATH")]))
    # In a session of its own, so that Ctrl-C reaches it once, from us.
    inner = subprocess.Popen(
        DIE_WITH_PARENT + namespace_command() +
        [sys.executable, "-m", "launcher", *argv],
        env=dict(os.environ, PYTHONPATH=path,
                 **{INSIDE: mode, PARENT: str(os.getpid())}),
        start_new_session=True)
    # Readable once it has exited.
    ended = os.pidfd_open(inner.pid)
    killer = threading.Timer(FORWARD_GRACE_S, kill_group, args=(inner.pid,))
    killer.daemon = True
    killer.started = False

    def forward(signum, frame):
        kill_group(inner.pid, signum)
        if not killer.started:  # a Timer runs once, however many signals
            killer.started = True
            killer.start()

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    try:
        # select() takes no timeout beyond TIMEOUT_MAX (--timeout inf).
        if not select.select([ended], [], [], timeout
                             if timeout < threading.TIMEOUT_MAX else None)[0]:
            kill_group(inner.pid)
            print(f"{PROG}: error: the launcher inside the job's namespace "
                  f"had not ended {timeout:g} s after it started; killed it "
                  f"and every task", file=sys.stderr, flush=True)
        code = inner.wait(timeout=FORWARD_GRACE_S)
    finally:
        killer.cancel()
        os.close(ended)
    return 128 - code if code < 0 else code


def die_with_parent():
    """Asks the kernel to SIGKILL this process when its parent dies: every
    forked task, and the launcher inside the namespace, runs it first."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def kill_group(pgid, sig=signal.SIGKILL):
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def inside():
    """The mode this launcher runs in, if it is the one inside the job's
    namespace; else None."""
    return os.environ.get(INSIDE)


def set_up(mode, task_count, shaping=(None, None)):
    """Inside the job's namespace: its loopback up, and in `hosts` mode one
    namespace per task. Returns the Network the launcher places tasks with."""
    os.environ.pop(INSIDE, None)
    parent = int(os.environ.pop(PARENT, "0"))
    # Die with the launcher outside, and with it every task, as a task dies
    # with us; had it died already, we would have a new parent.
    die_with_parent()
    if os.getppid() != parent:
        sys.exit(1)
    if mode == "hosts":
        network = Hosts(task_count, shaping)
    else:
        ip([(None, LOOPBACK_UP)])
        network = Network()
    network.launcher_pid = parent  # the one the user started: the job's launch
    return network


class Network:
    """Every task on 127.0.0.1, in the launcher's network namespace."""

    description = "127.0.0.1"
    launcher_pid = None  # set_up's: the launcher outside the namespace

    def host(self, number):
        return "127.0.0.1"

    def namespace(self, number):
        """The fd of the network namespace task `number` joins as it starts
        (None: the launcher's own)."""
        return None

    def enter(self, number):
        """What task `number` runs before exec to join its namespace."""
        return entering(self.namespace(number))

    def link(self, number):
        """The interface, in the launcher's namespace, whose counters are
        task `number`'s traffic (traffic.py)."""
        return "lo"

    def disk(self, logdir, job, index, options, chief_disk=()):
        """The disk task job:index sees its `logdir` on (disks.Disk), or
        None for the machine's own file system; `chief_disk`: the task types
        the script says share the chief's (contract.py)."""
        return None


class Hosts(Network):
    """Task k in a network namespace of its own at 10.10.0.<k+2>, on a
    bridge in the job's network namespace (this thread's, whose loopback
    comes up too)."""

    def __init__(self, task_count, shaping=(None, None)):
        if task_count > 250:
            raise NetworkError(f"--network hosts has room for 250 tasks, not "
                               f"{task_count}")
        self.description = f"{SUBNET}.2-{task_count + 1} (one namespace each)"
        self.namespaces = new_namespaces(task_count)
        # Task k's link is a veth pair: t<k> on the bridge here, and eth0
        # made in the task's namespace, which ip opens by the fd it inherits.
        job = {**LOOPBACK_UP,
               f"link add {BRIDGE} up type bridge": f"make bridge {BRIDGE}"}
        tasks = []
        for number, task in enumerate(self.namespaces):
            job[f"link add t{number} master {BRIDGE} up type veth peer name "
                f"eth0 netns /proc/self/fd/{task}"] = f"make veth t{number}"
            address = self.host(number)
            tasks.append((task, {
                **LOOPBACK_UP,
                f"address add {address}/24 brd + dev eth0":
                    f"give task {number} its address {address}",
                "link set eth0 up": f"bring up task {number}'s eth0"}))
        ip([(None, job)], pass_fds=self.namespaces)
        ip(tasks)  # once every eth0 exists
        if not any(shaping):
            return
        try:
            for number, task in enumerate(self.namespaces):
                shape(self.link(number), *shaping)  # what the task receives
                with entered(task):
                    shape("eth0", *shaping)  # what it sends
        except ShapingError as error:
            raise NetworkError(str(error)) from None

    def host(self, number):
        return f"{SUBNET}.{number + 2}"

    def namespace(self, number):
        return self.namespaces[number]

    def link(self, number):
        return f"t{number}"

    def disk(self, logdir, job, index, options, chief_disk=()):
        return disks.for_task(logdir, job, index, options.coordinator,
                              options.disk_on_restart, chief_disk)


def enter(namespace_fd, kind=CLONE_NEWNET):
    """Moves this thread into the namespace `namespace_fd` of type `kind`."""
    if libc.setns(namespace_fd, kind) != 0:
        raise NetworkError(f"setns: {os.strerror(ctypes.get_errno())}")


def entering(namespace_fd):
    """What a new task runs first to join the network namespace
    `namespace_fd`; None for none (it stays in its parent's)."""
    return None if namespace_fd is None else lambda: enter(namespace_fd)


@contextlib.contextmanager
def entered(namespace_fd):
    """Runs the block with this thread (only: a namespace is per thread) in
    the network namespace `namespace_fd` (None: where it is), so that a
    process started there is in it from its first instruction."""
    if namespace_fd is None:
        yield
        return
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        enter(namespace_fd)
        try:
            yield
        finally:
            enter(home)
    finally:
        os.close(home)


def new_namespaces(count):
    """The fds of `count` new network namespaces; this thread stays in its
    own."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    namespaces = []
    try:
        for _ in range(count):
            if libc.unshare(CLONE_NEWNET) != 0:
                raise NetworkError(f"unshare: {os.strerror(ctypes.get_errno())}")
            try:
                namespaces.append(os.open("/proc/thread-self/ns/net", os.O_RDONLY))
            finally:
                enter(home)
    finally:
        os.close(home)
    return namespaces


def ip(batches, pass_fds=()):
    """Runs each of `batches`, (namespace fd or None for this thread's,
    {line of `ip -batch`: what it does}), by an `ip` of its own in that
    network namespace, all at once; NetworkError for the first line that
    failed."""
    program = shutil.which("ip")
    if program is None:
        raise NetworkError(NO_IP)
    started = []
    for namespace, steps in batches:
        # A file, not a pipe: no size at which writing it could block.
        with tempfile.TemporaryFile("w+") as lines, entered(namespace):
            lines.writelines(f"{line}\n" for line in steps)
            lines.seek(0)
            started.append((steps, subprocess.Popen(
                [program, "-batch", "-"], stdin=lines, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True, pass_fds=pass_fds)))
    # Each ip waited for before any error is raised: none is left running.
    for error in [failure(steps, process) for steps, process in started]:
        if error:
            raise NetworkError(error)


def failure(steps, process):
    """Why `process` failed to run `steps`, in one line; None if it did not."""
    said = process.communicate()[1].splitlines()
    if process.returncode == 0:
        return None
    # ip -batch stops at the first line that fails, says why, then which:
    # "RTNETLINK answers: File exists", "Command failed -:3".
    said = said or [f"ip exited with code {process.returncode}"]
    failed = re.fullmatch(r"Command failed \S+:(\d+)", said[-1])
    what = list(steps.values())[int(failed[1]) - 1] if failed else \
        "set up the job's network"
    return f"cannot {what}: " + re.sub(r"^(RTNETLINK answers|Error): ", "", said[0])
