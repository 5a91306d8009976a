"""The simulator's validation (the `simulator` suite and the `validation`
report): a simulated run gets the flags its measured twin got, and the
report pairs, takes medians, divides and checks the targets as it says,
on made-up runs."""

from benchmarks import commands, suites
from benchmarks.reports import validation

SETTINGS = {"dataset": "mnist", "worker_batch": 128, "examples": 600_000,
            "eval_every_examples": 30_000, "ps": 1}


def record(scheme, workers, rate, tau, accuracy, simulate=False, repeat=1,
           status="ok", **run):
    spec = {"scheme": scheme, "workers": workers, "repeat": repeat,
            "tables": ["workers"], "timeout": 1800, **SETTINGS, **run}
    if simulate:
        spec["simulate"] = True
    figures = {"command_s": 1.0}
    if status == "ok":
        figures.update(examples_per_s=rate, test_accuracy=accuracy)
        if tau is not None:
            figures["staleness_mean"] = tau
    return {"suite": "s", "report": "validation", "run": spec, "label": scheme,
            "command": "c", "status": status, "code": "c1", "commit": "abc",
            "started": "2026-11-28T00:00:00", "measures": figures,
            "machine": {"cpu": "made-up"},
            **({} if status == "ok" else {"error": "exit code 1"})}


def test_a_simulated_run_gets_the_flags_of_the_example_run_it_plays():
    for scheme, workers, window in [("Hogwild", 8, None), ("SAGN", 16, 10),
                                    ("Synchronous-SGD", 40, None)]:
        run = {"scheme": scheme, "workers": workers, "repeat": 1, "timeout": 60,
               **SETTINGS}
        if window:
            run["window"] = window
        example, _ = commands.command_for(run, "/tmp/real", "/data")
        simulated, _ = commands.command_for(dict(run, simulate=True), "/tmp/sim",
                                            "/data")
        flags = commands.example_flags(run, "/data")
        assert simulated[1:4] == ["-m", "simulator", scheme]
        assert " ".join(flags) in " ".join(example)
        assert " ".join(flags) in " ".join(simulated)
        assert simulated[simulated.index("--workers") + 1] == str(workers)
        assert simulated[simulated.index("--result") + 1] == "/tmp/sim/result.json"
    assert "simulated" in suites.label(dict(run, simulate=True))


def test_each_simulated_run_meets_the_median_of_its_measured_twins():
    measured = [record("Hogwild", 8, rate, tau, acc, repeat=repeat)
                for repeat, (rate, tau, acc) in enumerate(
                    [(30_000, 3.0, 0.970), (20_000, 4.0, 0.960),
                     (40_000, 3.5, 0.980)], 1)]
    measured += [record("Hogwild", 8, 1, 1, 0.1, repeat=4, status="failed"),
                 # Other settings: not a twin.
                 record("Hogwild", 8, 90_000, 9.0, 0.5, worker_batch=64),
                 record("DOWNPOUR", 8, 10_000, 6.0, 0.95)]
    simulated = [record("Hogwild", 8, 33_000, 7.0, 0.975, simulate=True),
                 record("Hogwild", 4, 33_000, 3.0, 0.975, simulate=True)]
    rows = validation.rows(simulated, measured)
    assert len(rows) == 1  # 4 workers were not measured
    row = rows[0]
    assert row["measured"] == {"examples_per_s": 30_000, "staleness_mean": 3.5,
                               "test_accuracy": 0.970}
    assert row["runs"] == 3
    assert row["rate"] == 1.1 and row["rate_ok"]
    assert row["tau"] == 2.0 and row["tau_ok"] is False
    assert round(row["points"], 6) == 0.5 and row["accuracy_ok"]


def test_the_targets_are_checked_and_an_unmeasured_figure_is_not():
    measured = [record("Synchronous-SGD", 2, 10_000, None, 0.97),
                record("Hogwild", 2, 10_000, 0.0, 0.97),
                record("Hogwild", 4, 10_000, 1.0, 0.97)]
    simulated = [record("Synchronous-SGD", 2, 8_000, 0.0, 0.955, simulate=True),
                 record("Hogwild", 2, 11_500, 0.0, 0.98, simulate=True),
                 record("Hogwild", 4, 8_400, 1.2, 0.9, simulate=True)]
    sync, hogwild_2, hogwild_4 = validation.rows(simulated, measured)
    assert sync["rate_ok"] is False and sync["tau_ok"] is None
    assert sync["accuracy_ok"] is False  # 1.5 points below
    assert hogwild_2["rate_ok"] and hogwild_2["tau_ok"] and hogwild_2["accuracy_ok"]
    assert hogwild_4["rate_ok"] is False and hogwild_4["tau_ok"] is False
    text = "\n".join(validation.section(simulated, measured))
    assert ("Of 3 cells: examples/s within 15% in 1 of 3; mean staleness within "
            "15% in 1 of 2 (1 cells of synchronous schemes") in text
    assert "final test accuracy within 1 point in 1 of 3" in text
    assert "| Hogwild | 4 | – | 10,000 | 8,400 | 0.84 ✗ |" in text
    assert "- Synchronous-SGD: examples/s × 0.80 at 2; accuracy -1.50 points at 2." \
        in text
    assert "- Hogwild: examples/s × 0.84 at 4; mean τ × 1.20 at 4; accuracy " \
           "-7.00 points at 4." in text
