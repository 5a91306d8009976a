"""Fetches MNIST or Fashion-MNIST into Keras's cache, checked, without
TensorFlow: a task calls it when run by hand, and the launcher runs it as
the examples' preparation step before any task starts, outside the job's
network namespace, where the tasks have no route out:

    python -m guide.training.download SCRIPT [THE SCRIPT'S FLAGS...]

Each file goes to a temporary name beside its place, is checked against its
published hash, and only then renamed into place, so a reader never sees a
half-written or wrong file. $DATA_MIRROR (a URL or folder holding the same
file names) replaces the origin, for a mirror or a machine with no internet.
"""

import argparse
import fcntl
import hashlib
import os
import sys
import tempfile

ORIGIN = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
MIRROR = "DATA_MIRROR"
TITLE = {"mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}
# (name in the cache, hash algorithm, published digest), from Keras's loader
# for mnist.npz and from Fashion-MNIST's own README for its four IDX files.
FILES = {
    "mnist": [("mnist.npz", "sha256",
               "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1")],
    "fashion_mnist": [
        ("fashion-mnist/train-images-idx3-ubyte.gz", "md5",
         "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        ("fashion-mnist/train-labels-idx1-ubyte.gz", "md5",
         "25c81989df183df01b3e8a0aad5dffbe"),
        ("fashion-mnist/t10k-images-idx3-ubyte.gz", "md5",
         "bef4ecab320f06d8554ea6380940ec79"),
        ("fashion-mnist/t10k-labels-idx1-ubyte.gz", "md5",
         "bb300cfdad3c16e7a12a480ee83cd310"),
    ],
}
# Each file is under 12 MB: a source that sends more is not this data set.
MAX_BYTES = 20 << 20
TIMEOUT_S = 60
CHUNK = 1 << 20


class FetchError(Exception):
    """The data set could not be fetched; the message says why, in a line."""


def cache_folder():
    """$KERAS_HOME/datasets (default ~/.keras/datasets): Keras's cache."""
    home = os.environ.get("KERAS_HOME") or os.path.join(
        os.path.expanduser("~"), ".keras")
    return os.path.join(home, "datasets")


def is_cached(name, cache=None):
    """Whether every file of `name` is in the cache (not whether it is
    sound: reading it checks that)."""
    cache = cache or cache_folder()
    return all(os.path.isfile(os.path.join(cache, path))
               for path, _, _ in FILES[name])


def fetch(name, cache=None):
    """Puts every missing file of `name` into `cache`, one process at a
    time (the others wait on a lock file, then find the files there).
    FetchError says, in one line, what failed and what to do instead."""
    cache = cache or cache_folder()
    try:
        os.makedirs(cache, exist_ok=True)
        lock = open(os.path.join(cache, f".{name}.lock"), "a")
    except OSError as error:
        raise FetchError(_unavailable(name, cache, f"cannot write to {cache}: "
                                                   f"{_reason(error)}")) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for path, algorithm, digest in FILES[name]:
            target = os.path.join(cache, path)
            if not os.path.isfile(target):
                try:
                    _fetch_file(os.path.basename(path), target, algorithm,
                                digest)
                except FetchError as error:
                    raise FetchError(_unavailable(name, cache, error)) from None


def _unavailable(name, cache, reason):
    folder = os.path.dirname(os.path.join(cache, FILES[name][0][0]))
    files = ", ".join(os.path.basename(path) for path, _, _ in FILES[name])
    return (f"{TITLE[name]} is not in {cache} and could not be downloaded "
            f"({reason}); put {files} in {folder}, or pass --data_dir with the "
            f"folder that holds them")


def _fetch_file(file_name, target, algorithm, digest):
    import urllib.request  # here: a cached data set needs no HTTP client

    source = os.environ.get(MIRROR) or ORIGIN
    url = source if "://" in source else "file://" + os.path.abspath(source)
    url = url.rstrip("/") + "/" + file_name
    os.makedirs(os.path.dirname(target), exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=os.path.dirname(target),
                                       prefix=f".{file_name}.", suffix=".part")
    try:
        hasher = hashlib.new(algorithm)
        with os.fdopen(handle, "wb") as out, \
                urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            size = 0
            while chunk := response.read(CHUNK):
                size += len(chunk)
                if size > MAX_BYTES:
                    raise FetchError(f"{url} sent more than {MAX_BYTES} bytes")
                hasher.update(chunk)
                out.write(chunk)
        if hasher.hexdigest() != digest:
            raise FetchError(f"{url} does not have the published {algorithm} "
                             f"{digest}")
        os.replace(partial, target)
    except OSError as error:  # urllib's errors are OSErrors too
        raise FetchError(f"{url}: {_reason(error)}") from None
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _reason(error):
    reason = getattr(error, "reason", None) or error.strerror or error
    return str(reason).splitlines()[0] if str(reason) else type(error).__name__


def prepare(argv):
    """The launcher's preparation step for a script that declares this
    module (`prepare` in its launch block): argv is the script and its
    flags; fetches --dataset unless --data_dir holds it or it is cached."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("script")
    parser.add_argument("--dataset")
    parser.add_argument("--data_dir")
    # The last of a repeated flag wins, as in the script's own parser.
    args, _ = parser.parse_known_args(argv)
    name = args.dataset
    if name in FILES and not args.data_dir and not is_cached(name):
        print(f"downloading {TITLE[name]} into {cache_folder()}", flush=True)
        fetch(name)


def main(argv):
    script = argv[0] if argv else "download.py"
    try:
        prepare(argv)
    except FetchError as error:
        print(f"{os.path.basename(script)}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
