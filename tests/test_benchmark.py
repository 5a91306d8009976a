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
    records = [{"scheme": "Non-Distributed_Setup", "test_accuracy": 0.98,
                "train_steps": 6000, "examples": 600000, "command_s": 14.0,
                "s_to_97": 3.1, "s_to_98": 9.5},
               {"scheme": "AGN", "test_accuracy": 0.9712, "train_steps": 6000,
                "examples": 600000, "command_s": 30.0, "s_to_97": 25.0,
                "s_to_98": None},
               {"scheme": "SAGN", "error": "exit code 1", "command_s": 3.0}]
    table = real_data.markdown({"date": "d", "command": "c", "hardware": "h",
                                "software": "s"}, records)
    assert "| AGN | 0.9712 | -0.0088 | 6,000 | 600,000 | 30.0 | 25.0 s | " \
           "not reached |" in table
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


def test_the_network_benchmark_runs_each_example_on_shaped_links():
    import network

    args = network.settings(["--schemes", "Hogwild,DOWNPOUR,Synchronous-SGD,SAGN",
                             "--rates", "none,100mbit", "--workers", "4"])
    by_name = {scheme.name: scheme for scheme in args.schemes}
    sync = network.command_for(by_name["Synchronous-SGD"], "100mbit", 4, args,
                               "/data", "/logs", train_examples=120_000)
    assert sync[sync.index("--network") + 1] == "hosts"
    assert flag(sync, "--bandwidth") == "100mbit" and flag(sync, "--workers") == "4"
    # A synchronous step is a minibatch from each worker: 400 examples.
    assert flag(sync, "--train_steps") == "300" and flag(sync, "--eval_every") == "75"
    assert "--communication_window" not in sync
    window = network.command_for(by_name["DOWNPOUR"], "none", 4, args, "/data",
                                 "/logs")
    assert "--bandwidth" not in window and "--train_steps" not in window
    assert flag(window, "--communication_window") == "8"
    sagn = network.command_for(by_name["SAGN"], "none", 4, args, "/data", "/logs")
    assert flag(sagn, "--eval_every") == "9"  # 4 workers × 8 minibatches a round


def test_the_network_benchmark_compares_each_run_with_its_links_bound():
    import network

    result = {"test_accuracy": 0.97, "examples": 300_000, "wall_s": 31.0,
              "network": {"bytes_per_example": 8400, "busiest_link": "ps:0",
                          "busiest_link_bytes_per_example": 4200}}
    curve = [{"eval_s": 0.5, "test_accuracy": 0.1},
             {"eval_s": 0.5, "test_accuracy": 0.97}]
    figures = network.measured(result, curve, "100mbit")
    assert figures["examples_per_s"] == 10_000  # 30 s of training
    # 12.5 MB/s through 4,200 bytes per example.
    assert figures["bound_examples_per_s"] == 2976
    assert figures["share_of_bound"] == 3.36
    assert "bound_examples_per_s" not in network.measured(result, curve, "none")
    table = network.markdown({"date": "d", "command": "c", "hardware": "h",
                              "software": "s"},
                             [{"scheme": "Hogwild", "workers": 2, "rate": "100mbit",
                               "s_to_97": 40.2, **figures},
                              {"scheme": "Hogwild", "workers": 4, "rate": "100mbit",
                               "s_to_97": None, "error": "timed out"}])
    assert "| Hogwild | 2 | 100mbit | 40.2 s | 10,000 | 8,400 | 4,200 | 2,976 " \
           "| 3.36 | – | – |" in table
    assert "| Hogwild | 4 | 100mbit | – | – | – | – | – | – | – | – (timed out) |" \
        in table


def network_run(scheme, rate, s_to_97, examples_per_s, **more):
    return {"scheme": scheme, "workers": 2, "rate": rate, "s_to_97": s_to_97,
            "examples_per_s": examples_per_s, **more}


def test_the_network_benchmark_says_where_the_time_goes_and_judges_the_targets():
    import network

    curve = [{"test_accuracy": 0.1, "eval_s": 2.0},
             {"test_accuracy": 0.9, "eval_s": 0.5},
             {"test_accuracy": 0.96, "eval_s": 0.25},
             {"test_accuracy": 0.97, "eval_s": 0.5}]
    # Those before the 97% point, the first included; its own comes after.
    assert network.evaluations_before(curve, 0.97) == 2.8
    assert network.evaluations_before(curve, 0.99) is None
    figures = network.measured({"test_accuracy": 0.97, "examples": 100, "wall_s": 9,
                                "timeline": {"launch_to_result_s": 20.0}},
                               curve, "none")
    # 20 s to RESULT, 9 s of training, and two evaluations of 2 s each.
    assert figures["startup_s"] == 7.0

    hogwild_slow = network_run("Hogwild", "100mbit", 120.0, 2_500,
                               bound_examples_per_s=3_000, share_of_bound=0.83)
    records = [
        network_run("Hogwild", "none", 12.0, 25_000, examples_to_97=300_000),
        hogwild_slow,
        network_run("DOWNPOUR", "none", 10.0, 40_000, examples_to_97=400_000),
        network_run("DOWNPOUR", "100mbit", 40.0, 12_000,
                    bound_examples_per_s=20_000, share_of_bound=0.6)]
    network.with_compute_bounds(records)
    # 1 / (1/25,000 + 1/3,000) examples per second, if they take turns.
    assert hogwild_slow["serial_bound_examples_per_s"] == 2679
    assert hogwild_slow["share_of_serial_bound"] == 0.93
    # A baseline at 40,000 examples/s that needed 200,000 examples (5 s).
    baseline = {"s_to_97": 5.0, "examples": 400_000, "training_s": 10.0,
                "curve": [{"examples": 100_000, "test_accuracy": 0.95},
                          {"examples": 200_000, "test_accuracy": 0.97}]}
    network.against_baseline(records, baseline)
    assert (records[0]["times_baseline"], records[0]["examples_times_baseline"],
            records[0]["baseline_compute_s"], records[0]["beyond_compute_s"]) == \
        (2.4, 1.5, 7.5, 4.5)
    assert "times_baseline" not in hogwild_slow
    lines = network.verdicts(records)
    assert "- Hogwild, 2 workers, no limit: 2.4x the baseline's time to 97% " \
           "(target 3x): met" in lines
    assert "- DOWNPOUR, 2 workers, no limit: 2.0x the baseline's time to 97% " \
           "(target 2x): met" in lines
    assert "- DOWNPOUR, 2 workers, 100mbit: reached 97% 3.0x sooner than " \
           "Hogwild (target 4x): missed" in lines
    assert "- DOWNPOUR, 2 workers, 100mbit: 0.6 of the link's bound (target " \
           "0.67): missed; 0.9 of the bound with compute" in lines
    assert "- Hogwild, 2 workers, 100mbit: 0.83 of the link's bound (target " \
           "0.67): met; 0.93 of the bound with compute" in lines
    # A windowed run that never got to 97% misses the target, and says so.
    records[3]["s_to_97"] = None
    assert "- DOWNPOUR, 2 workers, 100mbit: did not reach 97%: missed" in \
        network.verdicts(records)


def test_the_network_benchmark_adds_to_the_runs_of_an_earlier_invocation(tmp_path):
    import json

    import network

    path = tmp_path / "runs.json"
    earlier = [network_run("Hogwild", "none", 12.0, 25_000),
               network_run("DOWNPOUR", "none", 10.0, 40_000)]
    path.write_text(json.dumps({"meta": {"command": "first",
                                         "baseline_s_to_97": 4.0},
                                "runs": earlier}))
    redone = network_run("Hogwild", "none", 11.0, 26_000)
    four = dict(network_run("Hogwild", "none", 9.0, 30_000), workers=4)
    meta, runs = network.merged(str(path), {"command": "second",
                                            "baseline_s_to_97": 4.2},
                                [four, redone])
    # The examples' order, then the workers; a redone run replaces its old one.
    assert runs == [redone, four, earlier[1]]
    assert meta == {"command": "first`, then `second",
                    "baseline_s_to_97": "4.0, then 4.2"}


@pytest.mark.parametrize("argv, error", [
    (["--schemes", "Nope"], "unknown scheme 'Nope'"),
    (["--rates", "fast"], "--rates takes none or a rate such as 10gbit"),
    (["--workers", "two"], "--workers takes comma-separated numbers"),
])
def test_the_network_benchmark_refuses_bad_flags_in_one_line(argv, error):
    result = run([PYTHON, os.path.join(REPO, "benchmarks", "network.py"), *argv],
                 timeout=60)
    assert result.returncode == 2
    assert error in result.stderr.strip().splitlines()[-1]


def test_the_startup_benchmark_compares_the_two_ways_side_by_side():
    import startup

    assert startup.startup_s({"timeline": {"launch_to_result_s": 9.5},
                              "wall_s": 2.25}) == 7.25
    new, forked = startup.WAYS
    records = [{"workers": 4, "way": new, "startup_s": seconds, "command_s": 9.0}
               for seconds in (6.0, 7.0, 9.0)]
    records += [{"workers": 4, "way": forked, "startup_s": seconds,
                 "command_s": 5.0} for seconds in (3.5, 3.0, 4.0)]
    [row] = startup.summary(records)
    # Medians: 7.0 s against 3.5 s.
    assert row["medians"][new]["startup_s"] == 7.0
    assert row["startup_ratio"] == 2.0
    table = startup.markdown({"date": "d", "command": "c", "hardware": "h",
                              "software": "s", "import_tensorflow_s": 2.5,
                              "repeats": 3}, [row])
    assert f"| 4 | {forked} | 3.5 s | 5.0 s |" in table
    assert "- 4 workers: preloading makes start-up 2.0x shorter" in table


@pytest.mark.parametrize("argv", [["--workers", "two"], ["--repeats", "0"]])
def test_the_startup_benchmark_refuses_bad_flags_in_one_line(argv):
    result = run([PYTHON, os.path.join(REPO, "benchmarks", "startup.py"), *argv],
                 timeout=60)
    assert result.returncode == 2
    assert "error: --" in result.stderr.strip().splitlines()[-1]


def test_the_startup_benchmark_leaves_failed_runs_out_of_its_medians():
    import startup

    new, forked = startup.WAYS
    records = [{"workers": 2, "way": new, "startup_s": 4.0, "command_s": 6.0},
               {"workers": 2, "way": new, "error": "exit code 2: bad"},
               {"workers": 2, "way": forked, "startup_s": 2.0, "command_s": 4.0},
               {"workers": 4, "way": new, "startup_s": 6.0, "command_s": 9.0},
               {"workers": 4, "way": forked, "error": "TimeoutExpired: ..."}]
    two, four = startup.summary(records)
    assert two["startup_ratio"] == 2.0
    assert four == {"workers": 4, "error": f"every run {forked} failed"}
    table = startup.markdown({"date": "d", "command": "c", "hardware": "h",
                              "software": "s", "import_tensorflow_s": 2.5,
                              "repeats": 2}, [two, four])
    assert f"- 4 workers: every run {forked} failed" in table
