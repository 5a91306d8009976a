"""guide/examples.py, the table of every example run, agrees with the
repository: every folder with a run.sh is in it with every shell script and
Python script it holds, and each row says what its run.sh really starts."""

import glob
import os
import re
import shlex

import pytest

from conftest import PYTHON, REPO, run
from guide import examples
from launcher import contract

RUN_SH = re.compile(r'^exec "\$here/\.\./launch\.sh" (.*) -- "\$here/([^"]+)" "\$@"$',
                    re.MULTILINE)


def read(path):
    with open(os.path.join(REPO, path)) as stream:
        return stream.read()


def test_every_folder_with_a_run_sh_is_in_the_table_with_all_its_scripts():
    folders = {os.path.dirname(path)
               for path in glob.glob("*/run.sh", root_dir=REPO)}
    assert set(examples.BY_FOLDER) == folders
    on_disk = {path for folder in folders for pattern in ("*.sh", "*.py")
               for path in glob.glob(f"{folder}/{pattern}", root_dir=REPO)}
    named = {path for example in examples.EXAMPLES if example.folder
             for path in (example.script_path, example.run_sh_path)}
    assert named | set(examples.OPTIONAL_ENTRY_POINTS) == on_disk
    assert examples.BASELINE.command(PYTHON) == [PYTHON, "Non-Distributed_Setup.py"]


@pytest.mark.parametrize("example", examples.EXAMPLES, ids=lambda e: e.name)
def test_each_row_says_what_its_script_and_run_sh_do(example):
    assert example.kind in examples.KINDS
    assert os.path.isfile(os.path.join(REPO, example.script_path))
    # The name the script reports its results under.
    assert f'"{example.algorithm}"' in read(example.script_path)
    if not example.cluster:
        # One process: no launcher cluster to describe.
        assert example.towers or example.run_sh is None
        assert example.workers == 1 and not example.coordinator
        return
    match = RUN_SH.search(read(example.run_sh_path))
    assert match, f"{example.run_sh_path} does not hand a script to launch.sh"
    options, script = shlex.split(match[1]), match[2]
    assert script == example.script
    assert options[options.index("--ps") + 1] == str(example.ps)
    assert options[options.index("--workers") + 1] == str(example.workers)
    assert ("--coordinator" in options) == example.coordinator
    assert ("--gpu_per_worker" in options) == example.gpu_per_worker


def test_the_towers_run_sh_runs_its_script_in_one_process():
    towers = examples.BY_NAME["Multiple-GPUs-Single-Machine-towers"]
    text = read(towers.run_sh_path)
    assert f'"$here/{towers.script}" --mode in_graph' in text
    assert not RUN_SH.search(text)


def test_the_table_loads_without_tensorflow():
    result = run([PYTHON, "-c", "import sys; from guide import examples; "
                  "print(len(examples.EXAMPLES), 'tensorflow' in sys.modules)"],
                 timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(len(examples.EXAMPLES)), "False"]


def test_no_python_file_is_over_450_lines():
    """Each module does one job that a reader can hold in mind."""
    long_files = {}
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [name for name in subfolders if not name.startswith(".")]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path) as stream:
                    lines = sum(1 for _ in stream)
                if lines > 450:
                    long_files[os.path.relpath(path, REPO)] = lines
    assert not long_files


LAUNCHED = sorted({example.script_path for example in examples.EXAMPLES
                   if example.run_sh and RUN_SH.search(read(example.run_sh_path))})


@pytest.mark.parametrize("script", LAUNCHED)
def test_every_launched_script_declares_what_the_launcher_relies_on(script):
    """The launcher knows a script only by its launch block: without it, no
    data fetched before the tasks start, no bytes counted, no failure for a
    missing result, and no shared disk for the evaluator."""
    declared = contract.read(os.path.join(REPO, script))
    assert declared.prepare == ("-m", "guide.training.download")
    assert (declared.progress, declared.result) == ("progress.jsonl",
                                                    "result.json")
    assert declared.chief_disk == ("evaluator",)
