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

The namespaces need no privileges and no package beyond util-linux: the
bridge and the addresses are set up here through the kernel's own interfaces
(netlink and ioctl), standard library only. $LAUNCH_UNSHARE names the
unshare program to use (default `unshare`).
"""

import contextlib
import ctypes
import fcntl
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
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

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
PR_SET_PDEATHSIG, PR_SET_NAME = 1, 15
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
SIOCSIFADDR, SIOCSIFNETMASK = 0x8916, 0x891C
SIOCBRADDBR, SIOCBRADDIF = 0x89A0, 0x89A2
IFF_UP = 0x1
RTM_NEWLINK, NLMSG_ERROR = 16, 2
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
IFLA_IFNAME, IFLA_LINKINFO, IFLA_NET_NS_FD = 3, 18, 28
IFLA_INFO_KIND, IFLA_INFO_DATA, VETH_INFO_PEER = 1, 2, 1

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
    interface_up("lo")
    network = Hosts(task_count, shaping) if mode == "hosts" else Network()
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

    def disk(self, logdir, job, index, options):
        """The disk task job:index sees its `logdir` on (disks.Disk), or
        None for the machine's own file system."""
        return None


class Hosts(Network):
    """Task k in a network namespace of its own at 10.10.0.<k+2>, on a
    bridge in the job's network namespace."""

    def __init__(self, task_count, shaping=(None, None)):
        if task_count > 250:
            raise NetworkError(f"--network hosts has room for 250 tasks, not "
                               f"{task_count}")
        self.description = f"{SUBNET}.2-{task_count + 1} (one namespace each)"
        bridge_add(BRIDGE)
        interface_up(BRIDGE)
        job = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        self.namespaces = []
        try:
            for number in range(task_count):
                self.namespaces.append(self.add_task(number, job, shaping))
        except ShapingError as error:
            raise NetworkError(str(error)) from None
        finally:
            os.close(job)

    @staticmethod
    def add_task(number, job, shaping):
        """A new network namespace joined to the bridge, its link shaped as
        `shaping` says (rate, latency); returns its fd."""
        if libc.unshare(CLONE_NEWNET) != 0:
            raise NetworkError(f"unshare: {os.strerror(ctypes.get_errno())}")
        task = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            interface_up("lo")
            enter(job)
            port = f"t{number}"
            veth_add(port, "eth0", task)
            bridge_add_port(BRIDGE, port)
            interface_up(port)
            if any(shaping):  # what the task receives
                shape(port, *shaping)
            enter(task)
            set_address("eth0", f"{SUBNET}.{number + 2}")
            interface_up("eth0")
            if any(shaping):  # what it sends
                shape("eth0", *shaping)
        finally:
            enter(job)
        return task

    def host(self, number):
        return f"{SUBNET}.{number + 2}"

    def namespace(self, number):
        return self.namespaces[number]

    def link(self, number):
        return f"t{number}"

    def disk(self, logdir, job, index, options):
        return disks.for_task(logdir, job, index, options.coordinator,
                              options.disk_on_restart, options.chief_disk)


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


def ioctl(request, argument):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        return fcntl.ioctl(probe.fileno(), request, argument)


def interface_up(name):
    request = struct.pack("16sH14x", name.encode(), 0)
    flags = struct.unpack("16sH14x", ioctl(SIOCGIFFLAGS, request))[1]
    ioctl(SIOCSIFFLAGS, struct.pack("16sH14x", name.encode(), flags | IFF_UP))


def set_address(name, address, netmask="255.255.255.0"):
    for request, value in ((SIOCSIFADDR, address), (SIOCSIFNETMASK, netmask)):
        ioctl(request, struct.pack("16sHH4s8x", name.encode(), socket.AF_INET,
                                   0, socket.inet_aton(value)))


def bridge_add(name):
    ioctl(SIOCBRADDBR, name.encode() + b"\0")


def bridge_add_port(bridge, port):
    ioctl(SIOCBRADDIF, struct.pack("16si12x", bridge.encode(),
                                   socket.if_nametoindex(port)))


def attribute(kind, payload):
    """One netlink attribute, padded to 4 bytes."""
    length = 4 + len(payload)
    return struct.pack("HH", length, kind) + payload + b"\0" * (-length % 4)


def veth_add(name, peer, peer_namespace_fd):
    """A veth pair: `name` here, `peer` in the given network namespace."""
    ifinfo = struct.pack("BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0)
    peer_info = ifinfo + attribute(IFLA_IFNAME, peer.encode() + b"\0") + \
        attribute(IFLA_NET_NS_FD, struct.pack("I", peer_namespace_fd))
    body = ifinfo + attribute(IFLA_IFNAME, name.encode() + b"\0") + attribute(
        IFLA_LINKINFO, attribute(IFLA_INFO_KIND, b"veth") + attribute(
            IFLA_INFO_DATA, attribute(VETH_INFO_PEER, peer_info)))
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    message = struct.pack("IHHII", 16 + len(body), RTM_NEWLINK, flags, 1, 0) + body
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                       socket.NETLINK_ROUTE) as netlink:
        netlink.sendall(message)
        reply = netlink.recv(65536)
    kind = struct.unpack_from("IHHII", reply)[1]
    error = struct.unpack_from("i", reply, 16)[0] if kind == NLMSG_ERROR else 0
    if error:
        raise NetworkError(f"cannot make veth {name}: {os.strerror(-error)}")
