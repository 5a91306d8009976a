"""--network hosts: a disk of its own for each task, as on separate machines.

Each task sees the job's --logdir through a mount namespace of its own:
- the chief (worker 0, or the coordinator where there is one), and the
  task types the script's `chief_disk` names (contract.py; the examples
  name the evaluator), share one disk, the logdir itself, where the
  checkpoints, the events and the results are; the launcher's logs/ and
  the other tasks' disks/ are hidden from them under an empty, read-only
  file system;
- every other task gets its own folder, <logdir>/disks/<job>-<index>,
  mounted over the logdir, and sees nothing else of it.
The examples' Kubernetes manifests follow the same rule: the chief and the
evaluator mount the example's claim, every other pod an emptyDir of its own.

A restarted task keeps its disk, as a restarted container keeps its pod's
volumes (`--disk_on_restart kept`, the default). With `empty` it starts on
an empty one, as a pod created anew on another node would with an emptyDir,
but for the chief's disk, which is the manifests' persistent volume; with
`empty_all` the chief's disk too (a job with no persistent volume). An old
disk is kept aside as <logdir>/disks/<name>.lost-<n>.

Standard library only, and runnable as a program, which is how a task
started as a new Python enters its disk (no Python code may run between
fork and exec in the launcher):

    python disks.py DISK_JSON COMMAND [ARG...]
"""

import ctypes
import dataclasses
import json
import os
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
FOLDER = "disks"
# The launcher's own folder in the logdir: the tasks' logs (job.py).
LOGS = "logs"
ON_RESTART = ("kept", "empty", "empty_all")

libc = ctypes.CDLL("libc.so.6", use_errno=True)


class DiskError(OSError):
    """A task's disk could not be mounted."""


@dataclasses.dataclass
class Disk:
    """What task `name` sees at `logdir`: the folder `source` (the logdir
    itself for the chief's disk), with `hidden` folders covered."""

    logdir: str
    source: str
    hidden: tuple = ()
    name: str = "chief"
    # Whether a restart starts the task on an empty disk.
    empty_on_restart: bool = False
    losses: int = 0

    def renew(self):
        """Puts the disk's files aside and leaves it empty, for a task that
        restarts as a new pod would."""
        self.losses += 1
        lost = os.path.join(self.logdir, FOLDER,
                            f"{self.name}.lost-{self.losses}")
        if self.source != self.logdir:
            os.rename(self.source, lost)
            os.makedirs(self.source)
            return
        os.makedirs(lost)
        for entry in os.listdir(self.logdir):
            if entry not in (FOLDER, LOGS):
                os.rename(os.path.join(self.logdir, entry),
                          os.path.join(lost, entry))

    def fields(self):
        """What a task needs to enter it (enter's arguments)."""
        return {"logdir": self.logdir, "source": self.source,
                "hidden": list(self.hidden)}


def for_task(logdir, job, index, coordinator, on_restart="kept",
             chief_disk=()):
    """Task job:index's Disk: the chief's, the logdir itself, if it is the
    chief (worker 0 unless there is a `coordinator`) or of a task type in
    `chief_disk`, else one of its own; what becomes of it on a restart (one
    of ON_RESTART); makes its folder."""
    logdir = os.path.abspath(logdir)
    disks = os.path.join(logdir, FOLDER)
    os.makedirs(disks, exist_ok=True)
    chief = "chief" if coordinator else "worker"
    if (job == chief and index == 0) or job in chief_disk:
        return Disk(logdir, logdir, (disks, os.path.join(logdir, LOGS)),
                    empty_on_restart=on_restart == "empty_all")
    name = f"{job}-{index}"
    source = os.path.join(disks, name)
    os.makedirs(source, exist_ok=True)
    return Disk(logdir, source, name=name,
                empty_on_restart=on_restart != "kept")


def call(what, result):
    if result != 0:
        error = ctypes.get_errno()
        raise DiskError(error, f"{what}: {os.strerror(error)}")


def enter(logdir, source, hidden):
    """Moves this process (single-threaded, root in its user namespace) to
    a mount namespace of its own in which `logdir` shows `source`, and each
    folder of `hidden` is empty and read-only."""
    call("unshare", libc.unshare(CLONE_NEWNS))
    # Nothing mounted here shows in the namespace this one came from.
    call("making / private",
         libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None))
    if source != logdir:
        call(f"binding {source} over {logdir}",
             libc.mount(os.fsencode(source), os.fsencode(logdir), None,
                        MS_BIND | MS_REC, None))
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    for folder in hidden:
        call(f"hiding {folder}", libc.mount(b"none", os.fsencode(folder),
                                           b"tmpfs", flags, b"size=4k"))


def enter_json(text):
    enter(**json.loads(text))


def wrapper(disk):
    """The command prefix that runs a program in `disk` (a Disk or None)."""
    if disk is None:
        return []
    return [sys.executable, "-I", "-S", os.path.abspath(__file__),
            json.dumps(disk.fields())]


def main(argv):
    disk_json, *command = argv
    try:
        enter_json(disk_json)
    except DiskError as error:
        print(f"disks.py: error: cannot mount the task's disk ({error}); "
              f"--network hosts needs mount namespaces", file=sys.stderr)
        return 2
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
