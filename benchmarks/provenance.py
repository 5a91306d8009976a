"""What every stored run carries besides its result: the commit and the
code it ran, the Python, TensorFlow and NumPy versions, and the machine.

Runs are grouped by their *code*: a hash of every tracked file that can
change what a run measures (and of the uncommitted changes to them), which
leaves out prose, images, tests and stored results. Committing a results
file or editing a README keeps the code the same, so a suite resumes and
its tables stay whole; a change to a script, `guide/`, the launcher or the
benchmark tool starts a new group.
"""

import fnmatch
import functools
import hashlib
import os
import platform
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Tracked files that cannot change a run's figures.
NOT_CODE = ("*.md", "*.png", "*.ipynb", "docs/*", "tests/*", "experiments/*",
            "benchmarks/results/*", "kubernetes/*", ".ci/*", ".gitignore",
            "pyproject.toml", "Dockerfile",
            # The tool's parts that only read what the runs stored.
            "benchmarks/reports/*", "benchmarks/quotes/*", "benchmarks/docs.py",
            "benchmarks/convert.py")


def git(*args):
    """`git args` in the repository: its output, or None outside a
    repository or without git."""
    try:
        finished = subprocess.run(["git", "-C", REPO, *args], capture_output=True,
                                  timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return finished.stdout if finished.returncode == 0 else None


def is_code(path):
    return not any(fnmatch.fnmatch(path, pattern) for pattern in NOT_CODE)


@functools.cache
def source():
    """{"commit", "dirty", "code"}: HEAD, whether any tracked code file
    differs from it, and the code's hash (see the module's docstring): of
    every code file's content as it is on disk, so that a run made before
    its changes were committed has the code of the commit that holds them."""
    listing = git("ls-files", "-s", "-z")
    commit = git("rev-parse", "HEAD")
    if listing is None or commit is None:
        return {"commit": None, "dirty": None, "code": None}
    blobs = {}
    for entry in listing.decode().split("\0"):
        if entry:
            # "mode blob stage\tpath": the blob hash names the content.
            meta, path = entry.split("\t", 1)
            if is_code(path):
                blobs[path] = meta.split()[1]
    changed = [path for path in (git("diff", "HEAD", "--name-only", "-z") or b"")
               .decode().split("\0") if path in blobs]
    for path in changed:
        on_disk = os.path.join(REPO, path)
        blob = os.path.exists(on_disk) and git("hash-object", "--", on_disk)
        blobs[path] = blob.decode().strip() if blob else "deleted"
    digest = hashlib.sha256("\n".join(f"{blob} {path}" for path, blob
                                      in sorted(blobs.items())).encode())
    return {"commit": commit.decode().strip(), "dirty": bool(changed),
            "code": digest.hexdigest()[:16]}


@functools.cache
def versions():
    """Python's, TensorFlow's and NumPy's, TensorFlow's asked of the Python
    that runs the examples (this process never imports it)."""
    probe = ("import numpy, tensorflow; "
             "print(tensorflow.__version__, numpy.__version__)")
    try:
        finished = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True,
            timeout=300, check=False, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        tensorflow, numpy = finished.stdout.split()
    except (OSError, subprocess.TimeoutExpired, ValueError):
        tensorflow = numpy = None
    return {"python": platform.python_version(), "tensorflow": tensorflow,
            "numpy": numpy}


@functools.cache
def machine():
    """The cores this process may use, the memory, the processor and the
    system."""
    model, memory_gib = platform.processor() or platform.machine(), None
    try:
        with open("/proc/cpuinfo") as stream:
            model = next((line.split(":", 1)[1].strip() for line in stream
                          if line.startswith("model name")), model)
        with open("/proc/meminfo") as stream:
            memory_gib = round(int(stream.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {"cores": len(os.sched_getaffinity(0)), "memory_gib": memory_gib,
            "cpu": model, "system": platform.system()}


def described(record):
    """One line naming a stored run's machine and software."""
    machine, versions = record.get("machine") or {}, record.get("versions") or {}
    parts = []
    if machine.get("cores"):
        parts.append(f"{machine['cores']} cores ({machine.get('cpu') or '?'})")
    if machine.get("memory_gib"):
        parts.append(f"{machine['memory_gib']:g} GiB")
    if machine.get("system"):
        parts.append(machine["system"])
    software = [f"{name} {versions[key]}" for key, name in (
        ("python", "Python"), ("tensorflow", "TensorFlow"), ("numpy", "NumPy"))
        if versions.get(key)]
    return ", ".join(parts) + "; " + ", ".join(software)
