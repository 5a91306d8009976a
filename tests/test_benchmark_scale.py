"""The scale and thesis suites of the benchmark tool, and their reports, on
made-up records: what the suites run, how they resume across code
changes, and what the reports conclude from given figures."""

import json

import pytest

from benchmarks import commands, reports, store, suites
from benchmarks.__main__ import main
from benchmarks.reports import thesis
from guide import examples


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_the_scale_suite_runs_every_cluster_scheme_from_2_to_40_workers():
    suite = suites.load("scale")
    assert suite.spans_code
    by_table = {}
    for run in suite.runs:
        for table in run["tables"]:
            by_table.setdefault(table, []).append(run)
    assert {run["scheme"] for run in by_table["workers"]} == set(suites.CLUSTER)
    assert sorted({run["workers"] for run in by_table["workers"]}) == \
        [2, 4, 8, 16, 32, 40]
    windowed = {name for name, example in examples.BY_NAME.items()
                if example.kind in (examples.WINDOW, examples.SYNC_WINDOW)}
    assert {run["scheme"] for run in by_table["windows"]} == windowed
    assert {(run["workers"], run["window"]) for run in by_table["windows"]} == \
        {(16, window) for window in (1, 4, 10, 20, 40)}


@pytest.mark.parametrize("name, workers, steps", [
    ("Hogwild", 40, 4688), ("Synchronous-SGD", 40, 117), ("SAGN", 16, 73),
    ("Multi-Worker-Mirrored-Strategy", 8, 586)])
def test_every_worker_takes_minibatches_of_128_whatever_the_scheme(name, workers,
                                                                   steps):
    [run] = [run for run in suites.load("scale").runs if run["scheme"] == name
             and run["workers"] == workers and "window" not in run
             and run["repeat"] == 1]
    argv, _ = commands.command_for(run, "/logs", "/data")
    assert flag(argv, "--batch_size") == "128"
    assert flag(argv, "--train_steps") == str(steps)
    assert flag(argv, "--workers") == str(workers)


def test_the_thesis_suite_is_the_grid_its_key_cells_and_downpour():
    suite = suites.load("thesis")
    grid = [run for run in suite.runs if "grid" in run["tables"]]
    assert len(grid) == 2 * 49
    assert all(run["examples"] == 40 * 60_000 and run["worker_batch"] == 128
               for run in grid)
    own = [run for run in suite.runs if "thesis-model" in run["tables"]]
    assert {(run["scheme"], run["workers"], run["window"]) for run in own} == {
        (scheme, n, window) for scheme in ("AGN", "AEASGD")
        for n, window in ((40, 10), (40, 40), (10, 10))}
    assert all("1000,2000,1000" in run["flags"] for run in own)
    downpour = [run for run in suite.runs if "downpour" in run["tables"]]
    assert sorted((run["scheme"], run["workers"], run["window"])
                  for run in downpour) == [("AGN", 10, 1), ("AGN", 20, 1),
                                           ("DOWNPOUR", 10, 1), ("DOWNPOUR", 20, 1)]
    assert all(run["examples"] == 5 * 60_000 for run in downpour)
    # The cells that carry the findings run first.
    assert {(run["scheme"], run["workers"], run["window"])
            for run in suite.runs[:4]} == {("AGN", n, window) for n in (10, 40)
                                           for window in (10, 40)}


def test_the_thesis_table_is_read_whole():
    grid = thesis.thesis_grid()
    assert len(grid) == 2 * 49
    assert grid["AGN", 40, 10] == {"time_s": 748.94, "train": 0.9417,
                                   "test": 0.9555}
    assert grid["AEASGD", 10, 10]["test"] == 0.9864


def made_up(scheme, workers, late, window=None, table="workers", code="c1",
            status="ok", **measured):
    run = {"scheme": scheme, "workers": workers, "ps": 1, "repeat": 1,
           "dataset": "mnist", "tables": [table]}
    if window is not None:
        run["window"] = window
    measures = {"command_s": 60.0, "late_accuracy": late, "test_accuracy": late,
                "train_accuracy": late + 0.01, "examples_per_s": 20_000,
                "diverged": late <= 0.15, **measured}
    record = {"suite": "scale", "report": "scale", "run": run,
              "label": suites.label(run), "command": "bash run.sh",
              "status": status, "code": code, "commit": f"{code}commit",
              "started": "2026-11-28T10:00:00+00:00", "measures": measures,
              "machine": {"processor": "x", "cores": 2, "memory_gib": 24}}
    if status != "ok":
        record["error"] = "exit code 1: it broke"
    return record


def write(folder, records):
    folder.mkdir(exist_ok=True)
    (folder / store.RUNS).write_text(
        "".join(json.dumps(record) + "\n" for record in records))


def test_a_suite_that_spans_code_changes_resumes_and_tables_the_newest(tmp_path):
    records = [made_up("Hogwild", 2, 0.97, code="c1"),
               made_up("Hogwild", 4, 0.96, code="c1", status="failed"),
               made_up("Hogwild", 4, 0.965, code="c2")]
    write(tmp_path, records)
    stored = store.read(str(tmp_path))
    # Done: both successes, whatever their code; not the failure alone.
    assert store.finished(stored, None) == {store.key_of(stored[0]),
                                            store.key_of(stored[2])}
    assert [record["code"] for record in store.newest(stored)] == ["c1", "c2"]
    reports.write(str(tmp_path), plots=False)
    text = (tmp_path / "results.md").read_text()
    assert "## Runs of 2 code versions" in text
    assert "Earlier code" not in text  # one table, whatever the code
    assert "| Hogwild | 4 | 96.50% |" in text


def test_the_scale_report_says_where_each_scheme_holds_and_breaks(tmp_path):
    records = [made_up("Hogwild", n, accuracy, staleness_mean=mean,
                       staleness_p95=mean * 2, staleness_max=mean * 3,
                       startup_s=startup, memory_mib_per_task=300,
                       examples_per_s=rate)
               for n, accuracy, mean, startup, rate in (
                   (2, 0.975, 1.0, 4.0, 27_000), (8, 0.974, 6.5, 8.0, 30_000),
                   (16, 0.972, 15.8, 11.0, 28_000), (40, 0.96, 30.0, 22.0, 18_000))]
    records += [made_up("DOWNPOUR", n, accuracy) for n, accuracy in (
        (2, 0.97), (16, 0.968), (40, 0.1))]
    records += [made_up("AGN", 16, accuracy, window=window, table="windows")
                for window, accuracy in ((1, 0.95), (4, 0.97), (40, 0.968))]
    write(tmp_path, records)
    reports.write(str(tmp_path))
    text = (tmp_path / "results.md").read_text()
    assert ("- **Hogwild**: best late accuracy 97.50%; within 1 point of it at "
            "2, 8, 16 workers; first below at 40 workers.") in text
    assert "| DOWNPOUR | 40 | diverged |" in text
    assert "first below at 40 workers" in text.split("**DOWNPOUR**")[1]
    assert "| AGN | 4 | 97.00% |" in text
    # The targets, read from the Hogwild runs side by side.
    assert "Start-up at 40 workers: 5.5× the 2-worker job's" in text
    assert "Examples per second at 40 workers: 0.67× the 2-worker job's" in text
    assert ("Hogwild's mean staleness at 8 workers: 6.50 commits against "
            "n − 1 = 7 (-7%; target: within 15%)") in text
    assert "at 40 workers: 30.00 commits against n − 1 = 39 (-23%" in text
    assert (tmp_path / "scale-workers.png").exists()
    assert (tmp_path / "scale-windows.png").exists()


def thesis_record(table, scheme, n, window, accuracy, train=None):
    record = made_up(scheme, n, accuracy, window=window, table=table)
    record.update(suite="thesis", report="thesis")
    if train is not None:
        record["measures"]["train_accuracy"] = train
    return record


def test_the_thesis_report_states_each_finding_against_the_figures(tmp_path):
    grid = [thesis_record("grid", "AGN", n, window,
                          0.955 if (n, window) == (40, 10) else 0.98,
                          train=0.99 if n <= 20 else 0.97)
            for n in range(10, 45, 5) for window in range(10, 45, 5)]
    grid += [thesis_record("grid", "AEASGD", n, 10, 0.98) for n in (10, 40)]
    grid += [thesis_record("downpour", "AGN", 10, 1, 0.97),
             thesis_record("downpour", "AGN", 20, 1, 0.1),
             thesis_record("downpour", "DOWNPOUR", 10, 1, 0.96),
             thesis_record("downpour", "DOWNPOUR", 20, 1, 0.95)]
    write(tmp_path, grid)
    rows = {row[0]: row for row in thesis.findings(store.read(str(tmp_path)))}
    downpour = rows["DOWNPOUR converges with n = 10 and diverges with n = 20 "
                    "(5 epochs, the thesis's model; dist-keras's: AGN at λ = 1)"]
    assert downpour[2] == "n = 10: 97.00%; n = 20: diverged"
    assert downpour[3] == "**reproduces**"
    assert rows["DOWNPOUR converges with n = 10 and diverges with n = 20 (5 "
                "epochs, the thesis's model; the DOWNPOUR example, window 1)"][3] \
        == "**does not reproduce**"
    assert rows["AGN collapses at n = 40 with λ = 10, not with λ = 40 "
                "(this collection's model)"][3] == "**reproduces**"
    assert rows["AGN collapses at n = 40 with λ = 10, not with λ = 40 "
                "(the thesis's model)"][3] == "not measured yet"
    assert rows["AGN's training accuracy falls from n = 25 (this collection's "
                "model)"][3] == "**reproduces**"
    # AEASGD measured flat from 10 to 40 workers: unlike the thesis.
    assert rows["AEASGD's test accuracy falls as n grows (this collection's "
                "model)"][3] == "**does not reproduce**"
    assert main(["report", str(tmp_path)]) == 0
    text = (tmp_path / "results.md").read_text()
    assert "| 40 | 95.50 (95.55) |" in text
    assert (tmp_path / "thesis-grid.png").exists()


def test_a_cell_run_more_than_once_stands_by_its_median_run(tmp_path):
    """One run can be points off the next (the same DOWNPOUR job at 16
    workers ended at 96.32% and 93.44%), so a cell's verdict and figures
    are its median run's, with the range of its runs beside them."""
    def repeat(record, number):
        record["run"]["repeat"] = number
        record["label"] = suites.label(record["run"])
        return record

    records = [made_up("Hogwild", 2, 0.975, examples_per_s=20_000, startup_s=4.0)]
    records += [repeat(made_up("Hogwild", 16, accuracy, examples_per_s=rate,
                               startup_s=startup), number)
                for number, (accuracy, rate, startup) in enumerate(
                    [(0.95, 30_000, 9.0), (0.972, 10_000, 5.0),
                     (0.976, 20_000, 6.0)], start=1)]
    records += [repeat(made_up("DOWNPOUR", 16, accuracy), number)
                for number, accuracy in enumerate([0.97, 0.1], start=1)]
    records.append(made_up("DOWNPOUR", 2, 0.97))
    write(tmp_path, records)
    reports.write(str(tmp_path), plots=False)
    text = (tmp_path / "results.md").read_text()
    assert "| Hogwild | 16 | 97.20% (95.00–97.60, 3 runs) |" in text
    # The median run's rate against the 2-worker run's, in its row.
    assert "| 10,000 | 0.50 |" in text.split("| Hogwild | 16 |")[1].split("\n")[0]
    assert "within 1 point of it at 2, 16 workers" in text
    # Of two, the lower: a diverged repeat makes the cell a break.
    assert "| DOWNPOUR | 16 | diverged (diverged–97.00, 2 runs) |" in text
    assert "first below at 16 workers" in text.split("**DOWNPOUR**")[1]
    # The cost table takes each figure's median over the repeats.
    assert "Start-up at 16 workers: 1.5× the 2-worker job's" in text
    assert "Examples per second at 16 workers: 1.0× the 2-worker job's" in text


def test_a_window_holds_against_the_schemes_best_at_any_count(tmp_path):
    """At 16 workers a window holds if it keeps the scheme within a point
    of its best anywhere, not of the best window's own accuracy (AGN's
    windows all ended 4 points below its 2-worker run); a count every run
    of which was refused is said to be so."""
    records = [made_up("AGN", 2, 0.97), made_up("AGN", 16, 0.92)]
    records += [made_up("AGN", 16, accuracy, window=window, table="windows")
                for window, accuracy in ((1, 0.93), (4, 0.965), (40, 0.95))]
    records += [made_up("AEASGD", 2, 0.96), made_up("AEASGD", 16, 0.92)]
    records += [made_up("AEASGD", 16, accuracy, window=window, table="windows")
                for window, accuracy in ((1, 0.93), (10, 0.925))]
    refused = made_up("Parameter-Server-Strategy", 32, 0.0, status="failed")
    refused["error"] = ("exit code 2: launch.sh: error: 34 forked tasks need "
                        "about 23.9 GiB")
    records += [made_up("Parameter-Server-Strategy", 2, 0.97), refused]
    write(tmp_path, records)
    reports.write(str(tmp_path), plots=False)
    text = (tmp_path / "results.md").read_text()
    assert ("first below at 16 workers. At 16 workers, window 4 keeps it within "
            "a point of that; windows 1, 40 do not.") in text
    assert ("At 16 workers, no window keeps it within a point of that (best: "
            "window 1, 93.00%).") in text
    assert ("none below up to 2, the most run. Not run at 32 workers: the "
            "launcher refused them, short of memory on this machine.") in text


def test_the_front_page_groups_the_schemes_by_the_most_workers_they_hold_at(
        tmp_path):
    """A scheme counts up to the last worker count before its first break,
    every count up to it holding."""
    records = [made_up("Hogwild", n, accuracy) for n, accuracy in
               ((2, 0.975), (4, 0.974), (16, 0.972), (32, 0.93))]
    records += [made_up("AGN", n, accuracy) for n, accuracy in
                ((2, 0.965), (4, 0.95), (16, 0.96))]
    records += [made_up("DOWNPOUR", n, 0.97) for n in (2, 4, 16)]
    write(tmp_path, records)
    group = store.read(str(tmp_path))
    assert reports.scale.short_lines(group) == [
        "- **up to 16 workers**: Hogwild, DOWNPOUR",
        "- **up to 2 workers**: AGN"]
