"""Whether this machine can hold a job, checked once before anything starts
(before the preparation step, and before any namespace is made): its
memory, the launcher's open files, the ports and the threads the tasks
need. Each check sets what the job needs, from per-task figures measured
on real runs, against what a small function reads of the machine (the
tests replace those); the first that fails is the launcher's one line,
exit code 2, with the limit and the fix. Standard library only.
"""

import os
import resource

# What a job takes from the memory available, per task, by how its tasks
# start (forking.Start.kind), in MiB: the fall of MemAvailable at the peak
# of a run (a script sampled /proc every 0.5 s), over its tasks, and the
# peak of the sum of Pss_Anon (/proc/PID/smaps_rollup: anonymous memory, a
# page shared copy-on-write counted once in all) over the job's processes,
# launchers included, which other jobs on this shared machine cannot move.
# The heaviest examples on MNIST (the real files) with their default
# model, 1000 steps, 1 ps (none for Multi-Worker-Mirrored-Strategy), 8
# workers, 2 cores, the tasks mapping one copy of the data set:
#               Dynamic-SGD  AEAMSGD    MWMS       Synchronous-SGD
#   new Python  213 / 259    242 / 254  271 / 255  272 / 256
#   forked      134 / 120    108 / 118  131 / 132  134 / 118
# (MemAvailable / Pss_Anon). Dynamic-SGD at 16 workers forked: 76 / 109.
# Each figure below is the largest plus about 18%. A task that cannot map
# the shared copy holds its own, 220 MiB more on MNIST (guide's data);
# before the tasks shared it, 40 workers of Hogwild forked took 289 to 293
# MiB a task (launch.json). Parameter-Server-Strategy (TensorFlow 2) takes
# four times as much forked, and says so in its launch block (contract.py's
# memory_mib).
MEMORY_MIB = {"new_python": 320, "forked": 160, "fork_server": 160}

# The launcher's open files: for each task its log, the pipe it reads and
# the pidfd it waits on (3), one more with --network hosts (the task's
# network namespace) or a fork server (the connection). Measured
# (/proc/PID/fd) in the launcher that runs the job: 31 for 9 tasks, 55 for
# 17, 127 for 41 (fake tasks, and Hogwild forked).
LAUNCHER_FILES = 16
FILES_PER_TASK = 4
# A task's own: a ps holds connections to the workers, besides
# TensorFlow's own files: 26 for a ps of 9 tasks, 42 of 17, 90 of 41.
TASK_FILES = 32
TASK_FILES_PER_PEER = 2

# Threads of one TensorFlow task (/proc/PID/status Threads, at their peak):
# 105 to 112 for a ps and a worker of each example above and of Hogwild on
# 2 cores, up to 124 in Parameter-Server-Strategy's workers; 102 and 106
# with one core (taskset -c 0). Most do not grow with the cores,
# TensorFlow's pools do, by a few a core.
THREADS_PER_TASK = 120
THREADS_PER_TASK_PER_CPU = 4
# The launcher's own; the reader it runs for each task is counted with
# the task (threads()).
LAUNCHER_THREADS = 8

# Listening ports: one per task, from the ephemeral range, which the
# connections between them also draw on; twice the tasks is ample.
PORTS_PER_TASK = 2
PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"

# A memory cgroup's limit, its use and, in its memory.stat, the inactive
# page cache in that use, which the kernel reclaims before it fails an
# allocation (MemAvailable counts it as available too): cgroup v2's, v1's.
MEMORY_CGROUP_FILES = (("memory.max", "memory.current", "inactive_file"),
                       ("memory.limit_in_bytes", "memory.usage_in_bytes",
                        "total_inactive_file"))


def refusal(tasks, start, network_mode, ignore_memory=False, declared=None):
    """The one line that refuses a job of `tasks` tasks started as `start`
    (forking.Start) on --network `network_mode`, or None if this machine
    can hold it; `declared`: the memory a task takes, as its script
    declares it (contract.py), if it does. Raises the launcher's soft limit
    of open files, up to its hard limit, if the job needs more."""
    checks = [lambda: open_files(tasks, network_mode),
              lambda: ports(tasks, network_mode),
              lambda: threads(tasks)]
    if not ignore_memory:
        checks.insert(0, lambda: memory(tasks, start, declared))
    for check in checks:
        message = check()
        if message:
            return message
    return None


def memory(tasks, start, declared=None):
    available = available_memory_mib()
    if available is None:
        return None  # not Linux: nothing to compare with
    mib, where = available
    each = declared or MEMORY_MIB[start.kind]
    needed = tasks * each
    if needed <= mib:
        return None
    mode = {"new_python": "new Pythons", "forked": "forked tasks",
            "fork_server": "tasks forked by a fork server"}[start.kind]
    fork = ""
    if start.kind == "new_python" and not declared:
        fork = (f", or fork them from one TensorFlow import "
                f"(LAUNCH_PRELOAD_TENSORFLOW=1: about "
                f"{tasks * MEMORY_MIB['forked'] / 1024:.1f} GiB)")
    return (f"{tasks} {mode} need about {needed / 1024:.1f} GiB ({each} MiB "
            f"each{', as the script declares' if declared else ''}) but only "
            f"{mib / 1024:.1f} GiB is {where}; use fewer --workers, or pass "
            f"--ignore_memory_check to start anyway{fork}")


def open_files(tasks, network_mode):
    per_task = FILES_PER_TASK + (network_mode == "hosts")
    needed = max(LAUNCHER_FILES + tasks * per_task,
                 TASK_FILES + tasks * TASK_FILES_PER_PEER)
    soft, hard = open_files_limit()
    if needed <= soft:
        return None
    if hard == resource.RLIM_INFINITY or needed <= hard:
        raise_open_files_limit(needed)
        return None
    return (f"{tasks} tasks need about {needed} open files in the launcher "
            f"and in a ps, but this shell allows {soft} (`ulimit -n`), at "
            f"most {hard}; use fewer --workers, or raise the hard limit "
            f"(`ulimit -Hn {needed}` as root, or LimitNOFILE)")


def ports(tasks, network_mode):
    # The job's own network namespace starts with the kernel's default
    # range (32768-60999), whatever this machine's is.
    low, high = port_range() if network_mode == "host" else (32768, 60999)
    needed = tasks * PORTS_PER_TASK
    if needed <= high - low + 1:
        return None
    return (f"{tasks} tasks need about {needed} ports but the ephemeral "
            f"range has {high - low + 1} ({low}-{high}, {PORT_RANGE}); use "
            f"fewer --workers, widen it (sysctl net.ipv4.ip_local_port_range), "
            f"or use --network private")


def threads(tasks):
    each = THREADS_PER_TASK + THREADS_PER_TASK_PER_CPU * cpu_count()
    # Each task's threads, and its reader in the launcher.
    needed = tasks * (each + 1) + LAUNCHER_THREADS
    for room, limit, fix in thread_room(needed):
        if needed > room:
            return (f"{tasks} tasks need about {needed} threads ({each} "
                    f"each) but {limit} leaves room for {room}; use fewer "
                    f"--workers, or {fix}")
    return None


def available_memory_mib():
    """(MiB, where) the job may take: MemAvailable, or what this process's
    memory cgroup has left under its limit if that is less; None where
    neither can be read."""
    try:
        with open("/proc/meminfo") as stream:
            fields = dict(line.split(":", 1) for line in stream)
        best = (int(fields["MemAvailable"].split()[0]) // 1024, "available")
    except (OSError, KeyError, ValueError):
        return None
    limit = cgroup_room("memory", *MEMORY_CGROUP_FILES)
    if limit is not None and limit // (1 << 20) < best[0]:
        best = (limit // (1 << 20), "left under this cgroup's memory limit")
    return best


def open_files_limit():
    """(soft, hard) RLIMIT_NOFILE of this process, which its tasks inherit."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def raise_open_files_limit(needed):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def port_range():
    """This network namespace's ephemeral ports, (low, high)."""
    try:
        with open(PORT_RANGE) as stream:
            low, high = map(int, stream.read().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def cpu_count():
    return len(os.sched_getaffinity(0))


def thread_room(needed):
    """[(threads that may still start, the limit, its fix)] for each limit
    on threads this process's tasks count against: the pids cgroup's
    pids.max, RLIMIT_NPROC (not for root), kernel.threads-max. The threads
    running now are counted (a scan of /proc, a tenth of a second on a busy
    machine) only where `needed` is more than half a limit."""
    rooms = []
    pids = cgroup_room("pids", ("pids.max", "pids.current"),
                       ("pids.max", "pids.current"))
    if pids is not None:
        rooms.append((pids, "the cgroup's pids.max",
                      "raise pids.max (a container's --pids-limit)"))
    counted = {}

    def running(whose):
        if not counted:
            counted.update(thread_counts())
        return counted[whose]

    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and os.getuid() != 0:
        rooms.append((soft - (running("user") if needed > soft // 2 else 0),
                      f"`ulimit -u` ({soft})", "raise `ulimit -u`"))
    try:
        with open("/proc/sys/kernel/threads-max") as stream:
            most = int(stream.read())
    except (OSError, ValueError):
        return rooms
    rooms.append((most - (running("all") if needed > most // 2 else 0),
                  f"kernel.threads-max ({most})",
                  "raise it (sysctl kernel.threads-max)"))
    return rooms


def thread_counts():
    """{"all": threads on this machine, "user": those of this user}."""
    counts = {"all": 0, "user": 0}
    uid = str(os.getuid())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as stream:
                status = dict(line.split(":", 1) for line in stream)
            number = int(status["Threads"])
        except (OSError, KeyError, ValueError):
            continue  # gone meanwhile
        counts["all"] += number
        if status["Uid"].split()[0] == uid:
            counts["user"] += number
    return counts


def cgroup_room(controller, v2_files, v1_files, own="/proc/self/cgroup",
                mounted="/sys/fs/cgroup"):
    """Limit less use, in the controller's unit, of this process's cgroup
    (as `own` lists it) and each of its ancestors (cgroup v2 or v1, under
    `mounted`), the least of them; None if no limit applies or none can be
    read. `v2_files`, `v1_files`: read_room's files for each version."""
    try:
        with open(own) as stream:
            lines = stream.read().splitlines()
    except OSError:
        return None
    rooms = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            top, files = mounted, v2_files
        elif controller in controllers.split(","):
            top, files = os.path.join(mounted, controller), v1_files
        else:
            continue
        folder = os.path.normpath(top + path)
        while folder.startswith(top):
            rooms.append(read_room(folder, *files))
            folder = os.path.dirname(folder)
    rooms = [room for room in rooms if room is not None]
    return min(rooms) if rooms else None


def read_room(folder, limit_file, use_file, reclaimable=None):
    """The limit in `folder` less the use, the `reclaimable` part of the use
    (a field of its memory.stat) left out; None without a limit."""
    try:
        with open(os.path.join(folder, limit_file)) as stream:
            limit = stream.read().strip()
        with open(os.path.join(folder, use_file)) as stream:
            used = int(stream.read())
        # "max", or v1's "no limit", a number near 2**63.
        if limit == "max" or int(limit) >= 1 << 62:
            return None
    except (OSError, ValueError):
        return None
    if reclaimable:
        used -= stat_field(os.path.join(folder, "memory.stat"), reclaimable)
    return int(limit) - used


def stat_field(path, name):
    """Field `name` of a memory.stat at `path`; 0 if it cannot be read."""
    try:
        with open(path) as stream:
            for line in stream:
                key, value = line.split()
                if key == name:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0
