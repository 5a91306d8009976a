"""A suite run end to end, as `make test-bench` runs it: the quick suite's
baseline on MNIST from an empty folder fails, and the suite goes on."""

import json

from benchmarks import store
from conftest import PYTHON, processes_mentioning, run


def test_a_suite_runs_records_a_failure_and_goes_on(tmp_path):
    """The quick suite's baseline on MNIST from an empty folder fails (no
    data); the two start-up commands after it still run. Every record
    carries its provenance; a second call skips the run that succeeded and
    tries the failed one again."""
    out, empty = tmp_path / "out", tmp_path / "empty"
    empty.mkdir()
    argv = [PYTHON, "-m", "benchmarks", "run", "quick", "--schemes",
            "Non-Distributed_Setup", "--dataset", "mnist", "--data_dir", str(empty),
            "--out", str(out)]
    result = run(argv, timeout=240)
    assert result.returncode == 1, result.stdout + result.stderr
    records = [json.loads(line) for line in (out / store.RUNS).read_text()
               .splitlines()]
    assert [item["status"] for item in records] == ["failed", "ok", "ok"]
    assert "exit code 2" in records[0]["error"]
    for item in records:
        assert len(item["commit"]) == 40 and item["code"] and item["versions"][
            "tensorflow"] and item["machine"]["cores"] >= 1 and item["started"]
    lines = result.stdout.splitlines()
    assert lines[1].startswith("Non-Distributed_Setup") and "FAILED" in lines[1]
    assert lines[3].startswith("run.sh, 5 steps, run 1: ")
    assert "1 of 3 runs failed" in lines[-1]
    report = (out / "results.md").read_text()
    assert "1 run failed: Non-Distributed_Setup" in report
    again = run(argv, timeout=120)
    assert "2 already recorded for this code" in again.stdout
    assert len((out / store.RUNS).read_text().splitlines()) == 4
    assert not processes_mentioning(str(out))
