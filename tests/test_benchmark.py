"""The benchmark tool without running a suite: the suites as data, each
run's command and the same work for every scheme, the stored records and
their rules, and bad input refused in one line with nothing changed."""

import json
import os
import shutil

import pytest

from benchmarks import commands, store, suites
from benchmarks.__main__ import chosen_runs, main, make_parser
from benchmarks.errors import UsageError
from conftest import PYTHON, REPO, run
from guide import examples

RESULTS = os.path.join(REPO, "benchmarks", "results")


def flag(flags, name):
    return flags[flags.index(name) + 1]


@pytest.mark.parametrize("name", suites.names())
def test_every_suite_loads_and_names_its_cost(name):
    suite = suites.load(name)
    assert suite.minutes > 0 and suite.description and suite.runs
    keys = [suites.run_key(run) for run in suite.runs]
    assert len(keys) == len(set(keys))  # a run listed twice runs once


def test_the_synthetic_suite_is_the_old_benchmark_as_data():
    suite = suites.load("synthetic")
    main_runs = [run for run in suite.runs if "main" in run["tables"]]
    # Every example with an accuracy curve, three times each.
    assert len(main_runs) == 3 * len(suites.SCHEMES)
    # Hogwild with 2 workers and 1 ps is in the main table and the sweep.
    hogwild = [run for run in suite.runs if run.get("scheme") == "Hogwild"
               and run.get("workers") == 2 and run.get("ps") == 1
               and run.get("batch") == 100 and run["repeat"] == 1]
    assert len(hogwild) == 1 and hogwild[0]["tables"] == ["main", "sweep"]
    mirrored = next(run for run in suite.runs
                    if run.get("scheme") == "Multi-Worker-Mirrored-Strategy")
    assert "ps" not in mirrored  # an allreduce has no ps


@pytest.mark.parametrize("name, workers", [
    ("Non-Distributed_Setup", None), ("Hogwild", 4), ("DOWNPOUR", 2),
    ("Synchronous-SGD", 4), ("SAGN", 2)])
def test_every_scheme_gets_the_same_examples_and_global_batch(name, workers):
    run = {"scheme": name, "dataset": "synthetic", "examples": 64_000,
           "batch": 100, "window": 8, "evaluations": 10}
    if workers:
        run["workers"] = workers
    flags = commands.example_flags(run, None)
    steps, batch = int(flag(flags, "--train_steps")), int(flag(flags, "--batch_size"))
    kind = examples.BY_NAME[name].kind
    if kind == examples.SYNC:
        assert batch == 100 // workers and steps * batch * workers == 64000
    elif kind == examples.SYNC_WINDOW:
        assert batch == 50 and steps * batch * workers * 8 == 64000
    else:
        assert batch == 100 and steps * batch == 64000
    assert ("--communication_window" in flags) == (kind in (
        examples.WINDOW, examples.SYNC_WINDOW))
    assert int(flag(flags, "--eval_every")) == steps // 10


@pytest.mark.parametrize("name, every", [
    ("Non-Distributed_Setup", 300), ("Hogwild", 300), ("AGN", 300),
    ("Synchronous-SGD", 150), ("SAGN", 38),
    ("Multiple-GPUs-Single-Machine-towers", 300)])
def test_the_mnist_suite_evaluates_every_30000_examples(name, every):
    [run] = [run for run in suites.load("mnist").runs if run["scheme"] == name]
    argv, _ = commands.command_for(run, "/logs", "/data")
    assert flag(argv, "--eval_every") == str(every)
    assert flag(argv, "--dataset") == "mnist" and flag(argv, "--data_dir") == "/data"
    assert "--train_steps" not in argv  # the example's own defaults


def test_a_limited_link_trains_for_its_margin_of_the_unlimited_runs_examples():
    runs = suites.load("network").runs
    [limited] = [run for run in runs if run.get("scheme") == "Synchronous-SGD"
                 and run.get("workers") == 4 and run.get("rate") == "100mbit"]
    argv, _ = commands.command_for(limited, "/logs", "/data", train_examples=120_000)
    assert flag(argv, "--network") == "hosts" and flag(argv, "--bandwidth") == "100mbit"
    # A synchronous step is a minibatch from each of 4 workers: 400 examples.
    assert flag(argv, "--train_steps") == "300" and flag(argv, "--eval_every") == "75"
    [sagn] = [run for run in runs if run.get("scheme") == "SAGN"
              and run.get("workers") == 4 and run.get("rate") == "none"]
    argv, _ = commands.command_for(sagn, "/logs", "/data")
    assert flag(argv, "--eval_every") == "9"  # 4 workers x 8 minibatches a round
    assert flag(argv, "--communication_window") == "8"


def test_the_startup_suite_alternates_the_two_ways():
    runs = [run for run in suites.load("startup").runs if "preload" in run]
    assert [run["preload"] for run in runs[:4]] == [False, True, False, True]
    _, env = commands.command_for(runs[1], "/logs")
    assert env == {commands.PRELOAD: "1"}


def test_recorded_commands_name_no_folder_of_this_machine(monkeypatch):
    monkeypatch.setenv("HOME", "/nowhere/home")
    logdir = os.path.join(RESULTS, "mnist", "runs", "Hogwild")
    data = os.path.join(os.path.dirname(REPO), "data", "mnist")
    [hogwild] = [run for run in suites.load("mnist").runs if run["scheme"] == "Hogwild"]
    shown = commands.shown_command(*commands.command_for(hogwild, logdir, data))
    assert "--logdir benchmarks/results/mnist/runs/Hogwild" in shown
    assert "--data_dir ../data/mnist" in shown and REPO not in shown
    assert commands.shown_command(["ls", "/nowhere/home/my data"]) == "ls ~/'my data'"


def args_for(*argv):
    return make_parser().parse_args(["run", *argv])


def test_flags_narrow_and_change_a_suites_runs():
    suite = suites.load("network")
    runs = chosen_runs(suite, args_for("network", "--schemes", "Hogwild",
                                       "--workers", "8"))
    # The baseline stays, for the comparisons; Hogwild at 8 workers, 3 rates.
    assert [run["scheme"] for run in runs] == ["Non-Distributed_Setup"] + \
        ["Hogwild"] * 3
    assert {run.get("workers") for run in runs[1:]} == {8}
    runs = chosen_runs(suites.load("mnist"), args_for("mnist", "--dataset",
                                                      "synthetic"))
    assert {run["dataset"] for run in runs} == {"synthetic"}


@pytest.mark.parametrize("argv, message", [
    (["run", "nope"], "there is no suite 'nope'; choose one of"),
    (["run", "quick", "--schemes", "Hogwild,Nope"], "unknown scheme 'Nope'"),
    (["run", "quick", "--schemes", "AGN"], "the suite 'quick' has no run of AGN"),
    (["run", "quick", "--dataset", "cifar"], "unknown data set 'cifar'"),
    (["run", "quick", "--workers", "1,two"], "--workers takes comma-separated"),
    (["run", "quick", "--workers", "3"], "global batch of 100 does not split "
                                         "evenly among 3 workers"),
    (["run", "mnist", "--data_dir", "/no/such/folder"],
     "--data_dir /no/such/folder is not a folder"),
    (["report", "/no/such/folder"], "holds no runs.jsonl"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def record(suite="quick", status="ok", code="c1", **run):
    run = {"scheme": "Hogwild", "workers": 2, "repeat": 1, "tables": ["main"], **run}
    return {"suite": suite, "report": "compare", "run": run, "label": "x",
            "command": "x", "status": status, "code": code, "commit": "abc",
            "started": "2026-11-28", "measures": {"command_s": 1.0},
            **({"error": "exit code 1: no"} if status != "ok" else {})}


def write_jsonl(folder, records, extra=""):
    folder.mkdir(exist_ok=True)
    text = "".join(json.dumps(item) + "\n" for item in records) + extra
    (folder / store.RUNS).write_text(text)
    return text


def test_a_run_is_skipped_only_if_it_succeeded_for_the_same_code(tmp_path):
    write_jsonl(tmp_path, [record(), record(workers=4, status="failed"),
                           record(workers=8, code="c0")])
    records = store.read(str(tmp_path))
    done = store.finished(records, "c1")
    assert done == {store.key_of(records[0])}
    # Another code's runs are kept, in a group of their own.
    groups = store.latest(records + [record(workers=4)])
    assert list(groups) == ["c1", "c0"]
    assert [item["status"] for item in groups["c1"]] == ["ok", "ok"]


@pytest.mark.parametrize("extra, message", [
    ("{not json\n", "line 2 is not valid JSON (Expecting property name enclosed "
                    "in double quotes at column 2)"),
    ('{"suite": "quick"}\n', "line 2 is not a run record (no 'run')"),
    ("[1, 2]\n", "line 2 is not a run record (not a JSON object)"),
    (json.dumps(dict(record(), run="x")) + "\n", "its 'run' is not an object"),
    (json.dumps(dict(record(), measures="x")) + "\n",
     "its 'measures' is not an object"),
    (json.dumps(dict(record(), status="weird")) + "\n", "its status is 'weird'"),
    (json.dumps(dict(record(), status="failed")) + "\n",
     "a failed run without its 'error'"),
])
def test_a_damaged_results_file_is_refused_and_left_alone(tmp_path, extra, message,
                                                          capsys):
    text = write_jsonl(tmp_path, [record()], extra)
    assert main(["run", "quick", "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert (tmp_path / store.RUNS).read_text() == text


def test_a_folder_of_another_suite_is_refused_and_left_alone(tmp_path, capsys):
    text = write_jsonl(tmp_path, [record(suite="mnist")])
    assert main(["run", "quick", "--out", str(tmp_path)]) == 2
    assert "holds runs of the suite 'mnist', not 'quick'; give each suite a " \
           "folder of its own (--out)" in capsys.readouterr().err
    assert (tmp_path / store.RUNS).read_text() == text


def test_a_malformed_suite_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(suites, "FOLDER", str(tmp_path))
    (tmp_path / "odd.toml").write_text('description = "d"\nminutes = 1\n'
                                       'report = "compare"\n[[runs]]\n'
                                       'schemes = ["Hogwild"]\nworkerz = [2]\n')
    with pytest.raises(UsageError, match="run 1: unknown key 'workerz'"):
        suites.load("odd")
    (tmp_path / "odd.toml").write_text("description = \n")
    with pytest.raises(UsageError, match="is not valid TOML"):
        suites.load("odd")


def test_the_help_lists_every_suite_with_its_cost():
    result = run([PYTHON, "-m", "benchmarks", "--help"], timeout=60)
    assert result.returncode == 0
    for name in suites.names():
        suite = suites.load(name)
        assert f"{name:10} about {suite.minutes:g} min on two cores" in result.stdout


def test_the_tool_runs_from_a_copy_of_the_results(tmp_path):
    """`report` needs nothing but the folder's runs.jsonl."""
    folder = tmp_path / "startup"
    shutil.copytree(os.path.join(RESULTS, "startup"), folder)
    (folder / "results.md").unlink()
    result = run([PYTHON, "-m", "benchmarks", "report", str(folder)], timeout=60)
    assert result.returncode == 0, result.stderr
    assert (folder / "results.md").exists()


def test_the_code_version_follows_the_code_not_the_prose(tmp_path, monkeypatch):
    """Editing a README or committing results keeps a suite's runs; a change
    to a script, committed or not, starts a new version."""
    from benchmarks import provenance

    def git(*args):
        run(["git", "-C", str(tmp_path), *args], timeout=30).check_returncode()

    git("init", "-q")
    (tmp_path / "train.py").write_text("rate = 0.2\n")
    (tmp_path / "README.md").write_text("# Train\n")
    git("add", ".")
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "one")
    monkeypatch.setattr(provenance, "REPO", str(tmp_path))

    def source():
        provenance.source.cache_clear()
        return provenance.source()

    first = source()
    assert len(first["commit"]) == 40 and first["dirty"] is False
    (tmp_path / "README.md").write_text("# Train, with a figure\n")
    assert source() == first
    (tmp_path / "train.py").write_text("rate = 0.1\n")
    changed = source()
    assert changed["dirty"] is True and changed["code"] != first["code"]
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qam", "two")
    committed = source()
    assert committed["dirty"] is False and committed["code"] == changed["code"]
    assert committed["commit"] != first["commit"]


def test_a_missing_matplotlib_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    import sys

    shutil.copy(os.path.join(RESULTS, "allreduce-synthetic", store.RUNS), tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    assert main(["report", str(tmp_path)]) == 2
    assert "the reports need matplotlib; run `make venv`" in capsys.readouterr().err


def test_the_readmes_example_suite_is_a_valid_suite():
    import re
    import tomllib

    with open(os.path.join(REPO, "benchmarks", "README.md")) as stream:
        block = re.search(r"```toml\n(.*?)```", stream.read(), re.S)[1]
    text = "\n".join(line[2:] for line in block.splitlines())
    suite = suites.parse("example", tomllib.loads(text))
    # Hogwild and DOWNPOUR at 2 workers are in both tables, and run once.
    assert len(suite.runs) == 7
    assert suite.runs[1]["tables"] == ["main", "sweep"]
