"""One copy in memory of the data every task on a machine reads.

Each task of a job loads the same data set: 40 workers each holding MNIST
as float32 held 220 MiB apiece, 8.6 GiB in all. Instead, the first task to
load a data set writes its arrays once to files in a folder of this user's
under the system's temporary folder, and every task maps those files
read-only, so that the operating system keeps one copy of their pages for
all of them. The arrays are the same float32 values either way.

A data set is known by what it was built from (its files' paths, sizes,
modification times, inodes and change times, or the synthetic set's seed;
VERSION for the code that builds either), so changed files are read
again. Where the folder cannot be used (not writable, full,
another user's), each task keeps its own copy, as before. Standard library
and NumPy only.
"""

import contextlib
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile

import numpy as np

# Bump when the arrays a key names would come out different.
VERSION = 1
FIELDS = ("train_images", "train_labels", "test_images", "test_labels")


def folder():
    return os.path.join(tempfile.gettempdir(), f"distributed-guide-data-{os.getuid()}")


def key_of(*parts):
    """A name for the data set built from `parts` (JSON-like values)."""
    text = repr((VERSION,) + parts).encode()
    return hashlib.sha256(text).hexdigest()[:20]


def files_key(kind, paths):
    """The key of a data set read from `paths`: their names, sizes,
    modification times, inodes and change times (a new file that keeps the
    size and the modification time, as `rsync -t` or `cp -p` make, has a
    new inode or a new change time)."""
    identities = []
    for path in paths:
        status = os.stat(path)
        identities.append((os.path.abspath(path), status.st_size,
                           status.st_mtime_ns, status.st_ino,
                           status.st_ctime_ns))
    return key_of(kind, *identities)


def load(key, build, make):
    """The data set named `key`: mapped from its files if a task wrote them,
    else built by `build()`, written for the others, then mapped. `make`
    turns the four arrays (FIELDS' order) into the caller's dataset."""
    base = folder()
    try:
        if not _ours(base):
            return build()
        target = os.path.join(base, key)
        if not os.path.isdir(target):
            with open(os.path.join(base, f"{key}.lock"), "a") as lock:
                # One task builds and writes it; the others wait, then map it.
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not os.path.isdir(target):
                    _write(build(), base, target)
        return make(*(np.load(os.path.join(target, f"{field}.npy"),
                              mmap_mode="r") for field in FIELDS))
    except OSError:
        return build()  # no room, or no folder: each task its own copy


def _ours(base):
    """Makes `base` if need be; whether it is this user's alone (a folder,
    not a link to one)."""
    os.makedirs(base, mode=0o700, exist_ok=True)
    status = os.lstat(base)
    return stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid() \
        and not status.st_mode & 0o077


def _write(dataset, base, target):
    """Writes the arrays to a new folder, then renames it to `target`, so
    that a task never maps a half-written set."""
    partial = tempfile.mkdtemp(dir=base, prefix=".partial-")
    try:
        for field in FIELDS:
            np.save(os.path.join(partial, f"{field}.npy"), getattr(dataset, field))
        os.rename(partial, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(partial)
