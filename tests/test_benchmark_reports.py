"""The benchmark's reports: results.md regenerated from the committed
runs.jsonl, byte for byte what is committed; and their arithmetic on
made-up runs. The plots regenerated, and a suite run end to end, are
tests/bench_suite (`make test-bench`)."""

import os
import shutil

import pytest

from benchmarks import measures, reports, store
from benchmarks.reports import compare, defaults, network, startup
from conftest import REPO

RESULTS = os.path.join(REPO, "benchmarks", "results")
FOLDERS = sorted(os.path.relpath(folder, RESULTS)
                 for folder, _, files in os.walk(RESULTS) if store.RUNS in files)


def test_every_results_folder_is_found():
    assert {"synthetic", "mnist", "network", "startup"} <= set(FOLDERS)


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_committed_reports_are_regenerated_byte_for_byte(folder, tmp_path):
    """results.md here; the plots, slower to draw, in tests/bench_suite."""
    shutil.copy(os.path.join(RESULTS, folder, store.RUNS), tmp_path)
    assert reports.write(str(tmp_path), plots=False) == ["results.md"]
    with open(os.path.join(RESULTS, folder, "results.md"), encoding="utf-8") as stream:
        committed = stream.read()
    # Its one link, to benchmarks/README.md, is relative to where it is.
    readme = os.path.join(REPO, "benchmarks", "README.md")
    moved = os.path.relpath(readme, tmp_path)
    here = os.path.relpath(readme, os.path.join(RESULTS, folder))
    written = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert written.replace(moved, here) == committed, \
        f"{folder}/results.md differs from what its runs.jsonl gives"
    # And the same bytes a second time.
    reports.write(str(tmp_path), plots=False)
    assert (tmp_path / "results.md").read_text(encoding="utf-8") == written


def made_up(scheme, accuracy, throughput, status="ok", repeat=1, tables=("main",),
            **run):
    curve = [{"wall_s": 0.0, "examples": 0, "test_accuracy": 0.08, "eval_s": 0.5},
             {"wall_s": 2.0, "examples": 50000, "test_accuracy": accuracy - 0.02},
             {"wall_s": 4.0, "examples": 100000, "test_accuracy": accuracy}]
    spec = {"scheme": scheme, "repeat": repeat, "tables": list(tables), "batch": 100,
            "examples": 100000, "window": 8, "dataset": "synthetic", **run}
    if scheme != "Non-Distributed_Setup":
        spec.setdefault("workers", 2)
        spec.setdefault("ps", 1)
    figures = {"command_s": 9.0}
    if status == "ok":
        figures.update(test_accuracy=accuracy, examples_per_s=throughput,
                       wall_s=4.0, rounds_per_1000_examples=10.0,
                       examples=100000, train_steps=1000)
    return {"suite": "synthetic", "report": "compare", "run": spec, "label": scheme,
            "command": "c", "status": status, "code": "c1", "commit": "abc",
            "started": "2026-11-28T00:00:00", "measures": figures, "curve": curve,
            **({} if status == "ok" else {"error": "timed out"})}


def test_repeated_runs_are_reported_by_their_medians_and_ratios():
    group = [made_up("Non-Distributed_Setup", 0.846, 40000),
             made_up("Hogwild", 0.84, 15000), made_up("Hogwild", 0.78, 19000, repeat=2),
             made_up("Hogwild", 0.83, 16000, repeat=3),
             made_up("AGN", 0.8, 0, status="failed")]
    rows, target = compare.rows_of(group)
    assert target == 0.826  # the baseline's 0.846 less 0.02
    _, hogwild, agn = rows["main"]
    assert (hogwild["examples_per_s"], hogwild["test_accuracy"]) == (16000, 0.83)
    assert hogwild["runs"] == 3 and hogwild["throughput_ratio"] == 0.4
    # Reached 0.826 at 4 s in two runs, never in the third: never counts last.
    assert hogwild["time_to_target_s"] == 4.0
    assert agn["error"] == "timed out"
    lines = {what: (value, met) for what, value, _, met in
             compare.targets(rows, {"ratio": 2.5}, 8)}
    assert lines["Hogwild throughput, 2 workers"] == (0.4, False)
    assert lines["Hogwild accuracy below the baseline's"] == (0.016, False)
    assert lines["AGN ran"] == ("timed out", False)
    assert lines["start-up: run.sh over import tensorflow"] == (2.5, False)
    text = "\n".join(compare.section(group))
    assert "| Hogwild | 1 ps + 2 workers | 0.8300 | 16,000 | 0.40 |" in text
    assert "| AGN | 1 ps + 2 workers | failed: timed out |" in text


def test_measures_leave_the_evaluations_out_of_the_time_to_97():
    curve = [{"wall_s": 0.0, "test_accuracy": 0.1, "eval_s": 0.5, "examples": 0},
             {"wall_s": 4.0, "test_accuracy": 0.965, "eval_s": 0.5, "examples": 500},
             {"wall_s": 9.0, "test_accuracy": 0.975, "eval_s": 0.5, "examples": 1000}]
    assert measures.training_seconds_to(curve, 0.97) == 8.0
    assert measures.training_seconds_to(curve, 0.98) is None
    assert measures.evaluations_before(curve, 0.97) == 1.0
    assert measures.late_accuracy(curve) == 0.975


def mnist_record(scheme, accuracy, s_to_97, status="ok"):
    curve = [{"examples": 100_000 * (index + 1), "test_accuracy": value}
             for index, value in enumerate((0.9, 0.95, accuracy))]
    figures = {"command_s": 30.0}
    if status == "ok":
        figures.update(test_accuracy=accuracy, train_steps=6000, examples=600000,
                       s_to_97=s_to_97)
    return {"run": {"scheme": scheme, "workers": 2, "ps": 1}, "status": status,
            "measures": figures, "curve": curve,
            **({} if status == "ok" else {"error": "exit code 1: no"})}


def test_the_defaults_table_names_each_rows_topology_and_says_not_reached():
    lines = defaults.table([mnist_record("Non-Distributed_Setup", 0.98, 3.1),
                            mnist_record("AGN", 0.9712, None),
                            mnist_record("SAGN", 0, 0, status="failed")])
    assert "| AGN | 1 ps + 2 workers | 0.9712 | -0.0088 | 0.9712 | -0.0088 | " \
           "6,000 | 600,000 | 30.0 | not reached | not reached |" in lines
    assert "| SAGN | 1 ps + 2 workers | failed: exit code 1: no |" in "\n".join(lines)


def link_record(scheme, rate, s_to_97, per_s, workers=2, **figures):
    run = {"scheme": scheme, "workers": workers, "rate": rate}
    return {"run": run, "status": "ok", "measures": {
        "s_to_97": s_to_97, "examples_per_training_s": per_s, **figures}}


def test_the_network_report_compares_each_run_with_its_links_bound():
    hogwild_slow = link_record("Hogwild", "100mbit", 120.0, 2_500,
                               busiest_bytes_per_example=4_167)
    baseline = {"run": {"scheme": "Non-Distributed_Setup"}, "status": "ok",
                "measures": {"s_to_97": 5.0, "examples": 400_000, "training_s": 10.0},
                "curve": [{"examples": 100_000, "test_accuracy": 0.95},
                          {"examples": 200_000, "test_accuracy": 0.97}]}
    group = [baseline,
             link_record("Hogwild", "none", 12.0, 25_000, examples_to_97=300_000),
             hogwild_slow,
             link_record("DOWNPOUR", "none", 10.0, 40_000, examples_to_97=400_000),
             link_record("DOWNPOUR", "100mbit", 40.0, 12_000,
                         busiest_bytes_per_example=625)]
    rows, _ = network.rows_of(group)
    by = {(row["scheme"], row["rate"]): row for row in rows}
    # 12.5 MB/s through 4,167 bytes per example: 3,000 examples/s.
    assert by["Hogwild", "100mbit"]["bound_examples_per_s"] == 3000
    assert by["Hogwild", "100mbit"]["share_of_bound"] == 0.83
    # 1 / (1/25,000 + 1/3,000) examples per second, if they take turns.
    assert by["Hogwild", "100mbit"]["serial_bound_examples_per_s"] == 2679
    # A baseline at 40,000 examples/s that needed 200,000 examples (5 s).
    hogwild = by["Hogwild", "none"]
    assert (hogwild["times_baseline"], hogwild["examples_times_baseline"],
            hogwild["baseline_compute_s"], hogwild["beyond_compute_s"]) == \
        (2.4, 1.5, 7.5, 4.5)
    lines = network.verdicts(rows)
    assert "- Hogwild, 2 workers, no limit: 2.4x the baseline's time to 97% " \
           "(target 3x): met" in lines
    assert "- DOWNPOUR, 2 workers, 100mbit: reached 97% 3.0x sooner than " \
           "Hogwild (target 4x): missed" in lines
    assert "- Hogwild, 2 workers, 100mbit: 0.83 of the link's bound (target " \
           "0.67): met; 0.93 of the bound with compute" in lines
    by["DOWNPOUR", "100mbit"]["s_to_97"] = None
    assert "- DOWNPOUR, 2 workers, 100mbit: did not reach 97%: missed" in \
        network.verdicts(rows)


def test_the_startup_report_leaves_failed_runs_out_of_its_medians():
    def timed(workers, preload, startup_s=None, error=None):
        return {"run": {"scheme": "Hogwild", "workers": workers, "preload": preload},
                "status": "failed" if error else "ok",
                "measures": {"startup_s": startup_s, "command_s": 6.0}}

    rows = startup.summary([timed(2, False, 4.0), timed(2, False, error="x"),
                            timed(2, True, 2.0), timed(4, False, 6.0),
                            timed(4, True, error="y")])
    assert rows[0]["startup_ratio"] == 2.0
    assert rows[1] == {"workers": 4, "error": "every run forked from a preloaded "
                                              "launcher failed"}
