"""The Basics-Tutorial notebooks run top to bottom, and are committed clean.

Each notebook ends the cells that demonstrate something with an `assert`, so
executing it is the test: any cell error fails it. Every kernel gets its own
free ports through TUTORIAL_PORT, and keeps its connection file and its
temporary files inside the test's run_dir, whose check then fails the test if
a kernel is left running; a notebook that leaves temporary files fails too.
The kernels are Python 3 kernels forked by the fork server, which has
imported TensorFlow once (served_kernel.py).
"""

import asyncio
import glob
import json
import os
import random
import re
import socket

import nbformat
import pytest
from jupyter_client import AsyncKernelManager
from nbclient import NotebookClient

from conftest import PYTHON, REPO, env_without_tf_config

TUTORIAL = os.path.join(REPO, "Basics-Tutorial")
SINGLE = ["Servers", "Parameter-Server", "Local-then-Global-Variables",
          "Sessions-and-Hooks"]
MULTIPLE_WORKERS = ["Parameter-Server", "Local-then-Global-Variables-Worker1",
                    "Local-then-Global-Variables-Worker2"]
# Importing TensorFlow took most of a notebook's time in a kernel of its own:
# about 6 s alone, up to about 20 s when three kernels import it at once.
CELL_TIMEOUT = 120
KERNEL = "python3-forked"


def notebook_path(name, folder=TUTORIAL):
    return os.path.join(folder, name + ".ipynb")


def first_ephemeral_port():
    """Where the ports the system hands out for bind(0) start: the kernels'
    own sockets take such ports while the notebooks run."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as stream:
            return int(stream.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def is_free(port):
    """Whether `port` can be bound on 127.0.0.1 and on all interfaces, which
    is where TensorFlow's servers bind it."""
    for host in ("127.0.0.1", "0.0.0.0"):
        with socket.socket() as probe:
            try:
                probe.bind((host, port))
            except OSError:
                return False
    return True


def free_base_port():
    """A port p such that p, p + 1 and p + 2 are free, below the ephemeral
    range, so that no socket the kernels open for themselves can take one of
    them before the notebook's servers do."""
    start, stop = 10000, first_ephemeral_port() - 3
    if stop <= start:  # an unusual range: any unprivileged port below it
        start = 1024
    for _ in range(50):
        base = random.randrange(start, stop)
        if all(is_free(base + offset) for offset in range(3)):
            return base
    raise RuntimeError("found no three consecutive free ports")


@pytest.fixture
def kernel_dir(run_dir, monkeypatch):
    """Where this test's kernels keep their files, inside run_dir, whose check
    then catches a kernel left running: their connection files, which their
    command lines name, in jupyter-runtime/ (without a path, jupyter_client
    makes them in /tmp), and their temporary files in tmp/."""
    runtime_dir = run_dir / "jupyter-runtime"
    runtime_dir.mkdir()
    (run_dir / "tmp").mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime_dir))
    # The kernel spec of a Python 3 kernel forked by the fork server.
    spec_dir = run_dir / "jupyter" / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [PYTHON, os.path.join(REPO, "tests", "served_kernel.py"),
                 "-f", "{connection_file}"],
        "display_name": "Python 3 (forked)", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(run_dir / "jupyter"))
    return run_dir


def execute_together(paths, kernel_dir):
    """Executes the notebooks at the same time, each in its own kernel, with
    one TUTORIAL_PORT for all; returns {path: error message} for those that
    failed, or {"tmp": ...} if they all ran but left temporary files. Every
    kernel is shut down at the end, whatever happened."""
    temp_dir = kernel_dir / "tmp"
    env = env_without_tf_config(TUTORIAL_PORT=str(free_base_port()),
                                TMPDIR=str(temp_dir))

    async def execute_all():
        managers = [AsyncKernelManager(kernel_name=KERNEL, connection_file=str(
            kernel_dir / "jupyter-runtime" / f"kernel-{index}.json"))
            for index in range(len(paths))]
        clients = [
            NotebookClient(nbformat.read(path, as_version=4), km=manager,
                           timeout=CELL_TIMEOUT, shutdown_kernel="immediate",
                           resources={"metadata": {"path": os.path.dirname(path)}})
            for path, manager in zip(paths, managers)]
        try:
            return await asyncio.gather(
                *[client.async_execute(env=env, cleanup_kc=True) for client in clients],
                return_exceptions=True)
        finally:
            for manager in managers:
                if manager.has_kernel:
                    await manager.shutdown_kernel(now=True)

    results = asyncio.run(execute_all())
    failures = {path: re.sub(r"\x1b\[[0-9;]*m", "", str(result))  # no terminal colours
                for path, result in zip(paths, results)
                if isinstance(result, BaseException)}
    if not failures and os.listdir(temp_dir):
        failures["tmp"] = f"temporary files left behind: {os.listdir(temp_dir)}"
    return failures


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", SINGLE)
def test_notebook_runs(name, kernel_dir):
    failures = execute_together([notebook_path(name)], kernel_dir)
    assert not failures, "\n".join(failures.values())


@pytest.mark.timeout(300)
def test_multiple_workers_run_together(kernel_dir):
    folder = os.path.join(TUTORIAL, "Multiple-Workers")
    failures = execute_together([notebook_path(name, folder)
                                 for name in MULTIPLE_WORKERS], kernel_dir)
    assert not failures, "\n\n".join(f"{os.path.basename(path)}: {error}"
                                     for path, error in failures.items())


def test_notebooks_are_committed_without_outputs():
    paths = sorted(glob.glob(os.path.join(TUTORIAL, "**", "*.ipynb"),
                             recursive=True))
    expected = sorted([notebook_path(name) for name in SINGLE]
                      + [notebook_path(name, os.path.join(TUTORIAL, "Multiple-Workers"))
                         for name in MULTIPLE_WORKERS])
    assert paths == expected, "every notebook must be executed by a test above"
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        assert notebook.metadata.kernelspec.name == "python3", path
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [], f"{path}: outputs in {cell.source[:60]!r}"
                assert cell.execution_count is None, path
