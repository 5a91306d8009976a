"""--bandwidth and --latency (--network hosts): each task's link limited to a
given rate, both ways, with the kernel's traffic shaping, as a slower
network between separate machines would be.

Task k's link is a veth pair: eth0 in the task's namespace carries what it
sends, t<k> on the job's bridge what it receives. A token bucket (`tbf`) on
the outgoing side of each end limits each direction to the rate; a delay
(`netem`) under it adds latency, where the kernel has netem (not every
kernel is built with it). Uses `tc` (iproute2).
"""

import re
import shutil
import subprocess

RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")
UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
# How much tbf lets through at once: what one timer tick (4 ms at the
# kernel's usual HZ=250) sends at the rate, and at least 64 KiB, the most a
# veth hands it in one (GSO) packet. Packets wait at most this long in its
# queue before they are dropped, as at a switch's port.
TICK_S, SMALLEST_BURST = 0.004, 64 * 1024
QUEUE_LATENCY = "100ms"


class ShapingError(Exception):
    """The links could not be shaped as asked."""


def bits_per_second(rate):
    """`rate` (tc's notation: 10gbit, 100mbit, 500kbit) in bits per second;
    ValueError if it is not one."""
    match = RATE.match(rate)
    if not match or float(match[1]) <= 0:
        raise ValueError(f"a rate such as 10gbit, 1gbit or 100mbit, not {rate!r}")
    return float(match[1]) * UNITS[match[2]]


def tc(*arguments):
    """Runs tc; ShapingError with what it said if it fails."""
    program = shutil.which("tc")
    if program is None:
        raise ShapingError("--bandwidth and --latency need tc, from iproute2 "
                           "(apt-get install iproute2)")
    done = subprocess.run([program, *arguments], capture_output=True, text=True,
                          timeout=30, check=False)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no reason given"])[0]
        raise ShapingError(f"tc {' '.join(arguments)}: {said}")


def shape(interface, rate=None, latency_ms=None):
    """Limits what leaves `interface`, in this thread's network namespace,
    to `rate` (tc's notation), and delays it by `latency_ms`, each if given."""
    parent = ["root"]
    if rate:
        burst = max(int(bits_per_second(rate) / 8 * TICK_S), SMALLEST_BURST)
        tc("qdisc", "add", "dev", interface, "root", "handle", "1:", "tbf",
           "rate", rate, "burst", str(burst), "latency", QUEUE_LATENCY)
        parent = ["parent", "1:1"]
    if latency_ms:
        try:
            tc("qdisc", "add", "dev", interface, *parent, "handle", "10:",
               "netem", "delay", f"{latency_ms:g}ms")
        except ShapingError as error:
            raise ShapingError(f"--latency needs the kernel's netem qdisc, "
                               f"which this one lacks ({error}); use "
                               f"--bandwidth alone") from None
