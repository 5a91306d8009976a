"""CPU load on purpose: a command and everything it starts share a CPU
quota of a fraction of the machine, as on a cluster node whose cores the
hypervisor or other jobs take most of the time.

The quota is a cgroup's (v2 `cpu.max`, else v1 `cpu.cfs_quota_us`), so
the tasks still see every core but run in bursts: within each 100 ms
period they get --cpus × 100 ms of CPU time between them, then wait for
the next period. A job under a quota of 0.5 runs about four times slower
than on two free cores, and its tasks' threads interleave in ways a quiet
machine rarely shows. Needs root.

    python tests/load.py --cpus 0.5 -- bash Hogwild/run.sh
"""

import argparse
import os
import select
import signal
import subprocess
import sys
import time
import uuid

ROOT = "/sys/fs/cgroup"
PERIOD_US = 100_000


class LoadError(Exception):
    pass


def _cgroup_v2_with_cpu():
    """The v2 hierarchy's root, if it hands the cpu controller to the
    cgroups made under it."""
    enabled = os.path.join(ROOT, "cgroup.subtree_control")
    if not os.path.exists(enabled):
        return None
    with open(enabled) as stream:
        return ROOT if "cpu" in stream.read().split() else None


class CpuQuota:
    """A cgroup whose processes share `cpus` CPUs' worth of time; a
    context manager. `command(argv)` is argv started inside it (its
    children follow); on the way out every process left in it is killed
    and the cgroup removed."""

    def __init__(self, cpus):
        if cpus <= 0:
            raise LoadError(f"--cpus {cpus}: give a positive fraction of the "
                            f"machine's CPUs, such as 0.5")
        self.cpus = cpus
        name = f"distributed-tf-load-{uuid.uuid4().hex[:8]}"
        quota = str(max(1000, int(cpus * PERIOD_US)))
        v2 = _cgroup_v2_with_cpu()
        try:
            if v2:
                self.path = os.path.join(v2, name)
                os.mkdir(self.path)
                self._write("cpu.max", f"{quota} {PERIOD_US}")
            else:
                self.path = os.path.join(ROOT, "cpu", name)
                os.mkdir(self.path)
                self._write("cpu.cfs_period_us", str(PERIOD_US))
                self._write("cpu.cfs_quota_us", quota)
        except OSError as error:
            if os.path.isdir(getattr(self, "path", "")):
                os.rmdir(self.path)
            raise LoadError(f"cannot make a CPU-limited cgroup under {ROOT} "
                            f"({error.strerror}); run as root on a machine "
                            f"with the cgroup cpu controller") from error

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as stream:
            stream.write(value)

    def command(self, argv):
        """`argv`, run by a shell that first moves itself into the cgroup
        (no Python runs between fork and exec, as preexec_fn would)."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"',
                os.path.join(self.path, "cgroup.procs"), *argv]

    def pids(self):
        with open(os.path.join(self.path, "cgroup.procs")) as stream:
            return [int(line) for line in stream if line.strip()]

    def throttled_s(self):
        """Seconds the cgroup's processes waited for their quota so far."""
        with open(os.path.join(self.path, "cpu.stat")) as stream:
            stat = dict(line.split() for line in stream if line.strip())
        if "throttled_usec" in stat:
            return int(stat["throttled_usec"]) / 1e6
        return int(stat.get("throttled_time", 0)) / 1e9

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        deadline = time.monotonic() + 30
        while self.pids() and time.monotonic() < deadline:
            for pid in self.pids():
                try:
                    handle = os.pidfd_open(pid)
                except ProcessLookupError:
                    continue
                try:
                    os.kill(pid, signal.SIGKILL)
                    select.select([handle], [], [], 5)  # until it has exited
                finally:
                    os.close(handle)
        try:
            os.rmdir(self.path)
        except OSError:
            if exc_type is None:  # else the error in flight says more
                raise


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        usage="python tests/load.py --cpus CPUS -- COMMAND [ARG...]")
    parser.add_argument("--cpus", type=float, default=0.5,
                        help="CPUs' worth of time the command gets (default 0.5)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    try:
        with CpuQuota(args.cpus) as quota:
            process = subprocess.Popen(quota.command(command))
            code = process.wait()
            print(f"[load] {args.cpus} CPUs: waited {quota.throttled_s():.1f} s "
                  f"for the quota", file=sys.stderr)
            return code
    except LoadError as error:
        print(f"load.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
