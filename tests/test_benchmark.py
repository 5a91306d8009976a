"""The benchmark's own arithmetic and writers, on made-up runs (no
TensorFlow): equal work per scheme, the ratios, the targets, the table, the
CSV and the plots; and one short run of the step tracer."""

import csv
import os
import re
import sys

import pytest

from conftest import PYTHON, REPO, run
from guide import examples

# The benchmark's modules import one another by name, as compare.py does.
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import plan  # noqa: E402
import real_data  # noqa: E402
import runner  # noqa: E402
import summarise  # noqa: E402
import write  # noqa: E402


def flag(flags, name):
    return flags[flags.index(name) + 1]


@pytest.mark.parametrize("name, workers", [
    ("Non-Distributed_Setup", 1), ("Hogwild", 4), ("DOWNPOUR", 2),
    ("Synchronous-SGD", 4), ("SAGN", 2)])
def test_every_scheme_gets_the_same_examples_and_global_batch(name, workers):
    args = plan.settings(["--examples", "64000", "--batch_size", "100",
                               "--window", "8"])
    scheme = plan.BY_NAME[name]
    flags = plan.run_flags(scheme, workers, args, 100)
    steps, batch = int(flag(flags, "--train_steps")), int(flag(flags, "--batch_size"))
    if scheme.kind == examples.SYNC:
        assert batch == 100 // workers and steps * batch * workers == 64000
    elif scheme.kind == examples.SYNC_WINDOW:
        assert batch == 50 and steps * batch * workers * 8 == 64000
    else:
        assert batch == 100 and steps * batch == 64000
    assert ("--communication_window" in flags) == (scheme.kind in (
        examples.WINDOW, examples.SYNC_WINDOW))
    assert int(flag(flags, "--eval_every")) == steps // 10


def test_ratios_and_time_to_target():
    curve = [{"wall_s": 0.0, "test_accuracy": 0.1},
             {"wall_s": 1.5, "test_accuracy": 0.79},
             {"wall_s": 3.0, "test_accuracy": 0.81}]
    assert summarise.time_to_accuracy(curve, 0.8) == 3.0
    assert summarise.time_to_accuracy(curve, 0.79) == 1.5
    assert summarise.time_to_accuracy(curve, 0.9) is None
    assert summarise.ratio(15000, 40000) == 0.375
    assert summarise.ratio(None, 40000) is None and summarise.ratio(1.0, 0) is None
    baseline = {"examples_per_s": 40000.0, "time_to_target_s": 2.0}
    record = summarise.add_ratios({"examples_per_s": 10000.0, "time_to_target_s": 3.0},
                                baseline)
    assert (record["throughput_ratio"], record["time_to_target_ratio"]) == (0.25, 1.5)


def test_repeated_runs_are_reported_by_their_medians():
    def attempt(throughput, accuracy, reached_at):
        return {"scheme": "Hogwild", "examples_per_s": throughput,
                "test_accuracy": accuracy, "wall_s": 100000 / throughput,
                "rounds_per_1000_examples": 10.0, "mean_staleness": None,
                "curve": [{"wall_s": 0.0, "test_accuracy": 0.1},
                          {"wall_s": reached_at, "test_accuracy": accuracy}]}
    runs = [attempt(15000, 0.84, 3.0), attempt(19000, 0.78, 2.0),
            attempt(16000, 0.83, 4.0)]
    record = summarise.combine(runs, target=0.8)
    assert record["examples_per_s"] == 16000 and record["test_accuracy"] == 0.83
    assert record["time_to_target_s"] == 4.0  # 3.0, never, 4.0: never counts last
    assert record["test_accuracy_each_run"] == [0.84, 0.78, 0.83]
    assert record["curve"] == runs[2]["curve"]  # the median-throughput run's
    failed = summarise.combine(
        runs[:2] + [{"scheme": "Hogwild", "error": "exit code 1"}], target=0.8)
    assert failed["error"] == "1 of 3 runs failed: exit code 1"


def test_rounds_per_1000_examples_count_each_exchange_with_the_ps():
    by_kind = {kind: examples.Example("x", "x", "x.py", "run.sh", kind, "x")
               for kind in (examples.EVERY_STEP, examples.WINDOW, examples.SYNC,
                            examples.LOCAL)}
    result = {"global_step": 1000, "examples": 100000, "commits": [70, 55],
              "gradients_computed": [1000, 1000]}
    assert summarise.rounds_per_1000(by_kind[examples.EVERY_STEP], result) == 10.0
    assert summarise.rounds_per_1000(by_kind[examples.WINDOW], result) == 1.25
    assert summarise.rounds_per_1000(by_kind[examples.SYNC], result) == 20.0
    assert summarise.rounds_per_1000(by_kind[examples.LOCAL], result) == 0.0


def made_up_runs():
    def run(scheme, throughput, accuracy, **extra):
        curve = [{"wall_s": 0.0, "examples": 0, "test_accuracy": 0.08},
                 {"wall_s": 2.0, "examples": 50000, "test_accuracy": accuracy - 0.02},
                 {"wall_s": 4.0, "examples": 100000, "test_accuracy": accuracy}]
        return {"scheme": scheme, "workers": 2, "ps": 1, "global_batch": 100,
                "test_accuracy": accuracy, "examples_per_s": throughput,
                "throughput_ratio": round(throughput / 40000, 3),
                "time_to_target_s": 4.0, "time_to_target_ratio": 1.0,
                "rounds_per_1000_examples": 10.0, "mean_staleness": None,
                "curve": curve, "main": True, "sweep": scheme == "Hogwild",
                "batch_study": False, **extra}
    return [run("Non-Distributed_Setup", 40000, 0.846, workers=1, ps=0),
            run("Hogwild", 22000, 0.843),
            run("DOWNPOUR", 30000, 0.830, mean_staleness=7.5),
            {"scheme": "AGN", "workers": 2, "ps": 1, "error": "timed out",
             "main": True, "sweep": False, "batch_study": False}]


def test_targets_are_checked_against_their_bounds():
    startup = {"ratio": 2.5}
    rows = {what: (value, met) for what, value, _, met in
            summarise.check_targets(made_up_runs(), startup, window=8)}
    assert rows["Hogwild throughput, 2 workers"] == (0.55, True)
    assert rows["DOWNPOUR throughput, window 8"] == (0.75, False)
    assert rows["Hogwild accuracy below the baseline's"] == (0.003, True)
    assert rows["DOWNPOUR accuracy below the baseline's"] == (0.016, False)
    assert rows["start-up: run.sh over import tensorflow"] == (2.5, False)
    # A scheme that failed misses its targets, and says so.
    assert rows["AGN ran"] == ("timed out", False)
    assert not any(what.startswith("AGN") and what != "AGN ran" for what in rows)


def test_markdown_csv_and_plots_are_written(tmp_path):
    records = made_up_runs()
    meta = {"date": "2026-11-21", "command": "python benchmarks/compare.py",
            "repeats": 3,
            "hardware": "2 cores", "software": "Python 3.11", "examples": 100000,
            "batch_size": 100, "window": 8, "dataset": "synthetic",
            "target_accuracy": 0.826}
    startup = {"command": "bash Hogwild/run.sh --train_steps 5", "run_sh_s": 5.0,
               "import_tensorflow_s": 3.0, "ratio": 1.667, "repeats": 3}
    targets = summarise.check_targets(records, startup, 8)
    write.write_markdown(tmp_path / "results.md", meta, records, startup, targets)
    text = (tmp_path / "results.md").read_text()
    assert "| Hogwild | 2 | 1 | 0.8430 | 22000 | 0.55 |" in text
    assert "| AGN | 2 | 1 | failed: timed out |" in text
    assert "| DOWNPOUR throughput, window 8 | 0.75 | >= 0.8 | **no** |" in text
    assert "ratio 1.667 (medians of 3)" in text

    write.write_csv(tmp_path / "runs.csv", records)
    with open(tmp_path / "runs.csv") as stream:
        rows = list(csv.DictReader(stream))
    assert [row["scheme"] for row in rows] == [r["scheme"] for r in records]
    assert rows[2]["mean_staleness"] == "7.5" and rows[3]["error"] == "timed out"

    write.write_plots(str(tmp_path), records)
    for name in ("accuracy.png", "throughput.png"):
        with open(tmp_path / name, "rb") as stream:
            assert stream.read(8) == b"\x89PNG\r\n\x1a\n"
        assert os.path.getsize(tmp_path / name) > 10_000


@pytest.mark.parametrize("argv, message", [
    (["--schemes", "Hogwild,Nope"], "unknown scheme 'Nope'"),
    (["--workers", "1,two"], "--workers must be comma-separated numbers"),
    (["--dataset", "mnist"], "--dataset mnist needs --data_dir"),
    (["--dataset", "mnist", "--data_dir", "/no/such/folder"],
     "--data_dir /no/such/folder is not a folder"),
    (["--workers", "1,2,4,8"], "a global batch of 100 does not split evenly among "
                               "8 synchronous workers; use a multiple of 8, such "
                               "as 104"),
])
def test_bad_options_are_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as raised:
        plan.settings(argv)
    assert raised.value.code == 2
    assert message in capsys.readouterr().err


def test_step_trace_times_the_three_steps_and_finds_the_exchange(run_dir):
    """Not a timing assertion: only that every step was timed and that the
    traced ps step shows tensors crossing between the worker and the ps."""
    result = run([PYTHON, "benchmarks/step_trace.py", "--steps", "5",
                  "--batch_size", "10"], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    times = dict(re.findall(r"^  (local|local, through a server|ps|window 8) +"
                            r"([0-9.]+) ms", result.stdout, re.MULTILINE))
    assert len(times) == 4 and all(float(ms) > 0 for ms in times.values())
    received = dict(re.findall(r"^  job:(ps|worker) .*\((\d+)\)$", result.stdout,
                               re.MULTILINE))
    assert int(received["ps"]) >= 4 and int(received["worker"]) >= 4




def test_real_data_times_leave_the_evaluations_out():
    curve = [{"wall_s": 0.0, "test_accuracy": 0.1, "eval_s": 0.5},
             {"wall_s": 4.0, "test_accuracy": 0.965, "eval_s": 0.5},
             {"wall_s": 9.0, "test_accuracy": 0.975, "eval_s": 0.5}]
    assert real_data.training_seconds_to(curve, 0.97) == 8.0
    assert real_data.training_seconds_to(curve, 0.98) is None


def test_real_data_late_accuracy_averages_the_last_tenth():
    curve = [{"examples": examples, "test_accuracy": accuracy} for examples, accuracy
             in ((0, 0.1), (500, 0.96), (900, 0.97), (950, 0.975), (1000, 0.98))]
    assert real_data.late_accuracy(curve) == 0.975


@pytest.mark.parametrize("name, every", [
    ("Non-Distributed_Setup", 300), ("Hogwild", 300), ("AGN", 300),
    ("Synchronous-SGD", 150), ("SAGN", 38),
    ("Multiple-GPUs-Single-Machine-towers", 150)])
def test_real_data_evaluates_every_30000_examples(name, every):
    command = real_data.command_for(plan.BY_NAME[name], "/data", "/logs")
    assert flag(command, "--eval_every") == str(every)
    assert flag(command, "--dataset") == "mnist"
    assert flag(command, "--data_dir") == "/data"


def test_recorded_commands_name_no_folder_of_this_machine(monkeypatch):
    """The results are committed: a path beside the repository shows
    relative to its top, where the command runs; one in the home folder
    under ~, left unquoted so that a shell still expands it."""
    monkeypatch.setenv("HOME", "/nowhere/home")
    logdir = os.path.join(REPO, "benchmarks", "results", "runs", "Hogwild")
    data = os.path.join(os.path.dirname(REPO), "data", "mnist")
    command = real_data.command_for(plan.BY_NAME["Hogwild"], data, logdir)
    shown = runner.shown_command(command)
    assert "--logdir benchmarks/results/runs/Hogwild" in shown
    assert "--data_dir ../data/mnist" in shown
    assert REPO not in shown
    assert runner.shown_command(["ls", "/nowhere/home/my data"]) == \
        "ls ~/'my data'"
    assert runner.shown_path("/etc/mnist") == "/etc/mnist"


def test_real_data_finds_mnist_in_the_keras_cache_only_if_there(tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert real_data.find_mnist(None) is None
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "mnist.npz").write_bytes(b"")
    assert real_data.find_mnist(None) == str(tmp_path / "datasets")
    assert real_data.find_mnist(str(tmp_path)) == str(tmp_path)


def test_real_data_table_says_not_reached():
    def curve(*accuracies):
        return [{"examples": 100_000 * (index + 1), "test_accuracy": accuracy}
                for index, accuracy in enumerate(accuracies)]

    records = [{"scheme": "Non-Distributed_Setup", "test_accuracy": 0.98,
                "train_steps": 6000, "examples": 600000, "command_s": 14.0,
                "s_to_97": 3.1, "s_to_98": 9.5,
                "curve": curve(0.9, 0.95, 0.97, 0.975, 0.978, 0.98)},
               {"scheme": "AGN", "test_accuracy": 0.9712, "train_steps": 6000,
                "examples": 600000, "command_s": 30.0, "s_to_97": 25.0,
                "s_to_98": None, "curve": curve(0.9, 0.95, 0.96, 0.968, 0.97, 0.9712)},
               {"scheme": "SAGN", "error": "exit code 1", "command_s": 3.0}]
    table = real_data.markdown({"date": "d", "command": "c", "hardware": "h",
                                "software": "s"}, records)
    # Late: the last tenth of 600,000 examples holds the last evaluation only.
    assert "| AGN | 0.9712 | -0.0088 | 0.9712 | -0.0088 | 6,000 | 600,000 | 30.0 " \
           "| 25.0 s | not reached |" in table
    assert "| SAGN | failed: exit code 1 |" in table


@pytest.mark.parametrize("script", ["compare.py", "real_data.py"])
def test_the_scripts_start_and_reject_an_unknown_scheme(script):
    """The scripts find their modules from anywhere; a bad scheme name is an
    error that exits 2 before anything runs."""
    result = run([PYTHON, os.path.join(REPO, "benchmarks", script), "--schemes",
                  "Hogwild,Nope"], cwd="/", timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith(
        "error: unknown scheme 'Nope'; choose from " + ", ".join(plan.BY_NAME))
    assert result.stdout == ""
