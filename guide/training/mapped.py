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
again. A set that no longer maps (a file cut short or removed) is written
again. Where the folder cannot be used (not writable, full, another
user's), each task keeps its own copy, as before. Standard library and
NumPy only.
"""

import contextlib
import fcntl
import glob
import hashlib
import os
import shutil
import stat
import tempfile

import numpy as np

# Bump when the arrays a key names would come out different.
VERSION = 1
FIELDS = ("train_images", "train_labels", "test_images", "test_labels")
# What mapping a set's files raises if one is missing, cut short or not an
# array: np.load's OSError, ValueError, or EOFError for an empty file.
UNMAPPABLE = (OSError, ValueError, EOFError)


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
    target = os.path.join(base, key)
    building, built = False, None
    try:
        if not _ours(base):
            return build()
        with contextlib.suppress(*UNMAPPABLE):
            return _map(target, make)
        with open(os.path.join(base, f"{key}.lock"), "a") as lock:
            # One task builds and writes it; the others wait, then map it.
            fcntl.flock(lock, fcntl.LOCK_EX)
            with contextlib.suppress(*UNMAPPABLE):
                return _map(target, make)  # written while this task waited
            building = True
            built = build()
            _write(built, base, key)
        return _map(target, make)
    except UNMAPPABLE:
        if building and built is None:
            raise  # build()'s own error, not the folder's
        # No room, no folder, or a set that still does not map: each task
        # its own copy, built once.
        return build() if built is None else built


def _map(target, make):
    return make(*(np.load(os.path.join(target, f"{field}.npy"),
                          mmap_mode="r") for field in FIELDS))


def _ours(base):
    """Makes `base` if need be; whether it is this user's alone (a folder,
    not a link to one)."""
    os.makedirs(base, mode=0o700, exist_ok=True)
    status = os.lstat(base)
    return stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid() \
        and not status.st_mode & 0o077


def _write(dataset, base, key):
    """Writes the arrays to a new folder, then renames it to `key`, so that
    a task never maps a half-written set; with the key's lock held. Removes
    what a writer that died left: its partial folder, or a set that does
    not map."""
    for left in glob.glob(os.path.join(base, f".partial-{key}-*")):
        shutil.rmtree(left, ignore_errors=True)
    target = os.path.join(base, key)
    if os.path.lexists(target):
        shutil.rmtree(target)
    partial = tempfile.mkdtemp(dir=base, prefix=f".partial-{key}-")
    try:
        for field in FIELDS:
            with open(os.path.join(partial, f"{field}.npy"), "wb") as stream:
                np.save(stream, getattr(dataset, field))
                # On disk before the rename, so that a machine that stops
                # cannot keep the new name with the data unwritten.
                os.fsync(stream.fileno())
        os.rename(partial, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(partial)
