"""The network and start-up benchmarks' arithmetic and writers, on made-up
runs (no TensorFlow, no namespaces): the commands, the link's bound, where
the time goes, the targets, merging runs, and refusing bad flags."""

import os
import sys

import pytest

from conftest import PYTHON, REPO, run

sys.path.insert(0, os.path.join(REPO, "benchmarks"))


def flag(flags, name):
    return flags[flags.index(name) + 1]


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
