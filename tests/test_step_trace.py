"""One short run of the step tracer, benchmarks/step_trace.py: what it
prints, and the result.json its --result writes for the `steps` report."""

import json
import re

import pytest

from benchmarks.reports import steps
from conftest import PYTHON, run


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """(the finished run, its result.json's path)."""
    path = tmp_path_factory.mktemp("step_trace") / "out" / "result.json"
    result = run([PYTHON, "benchmarks/step_trace.py", "--steps", "5",
                  "--batch_size", "10", "--result", str(path)], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return result, path


def printed_times(stdout):
    return dict(re.findall(r"^  (local|local, through a server|ps|window 8|"
                           r"loop, hooked run|loop, run without hooks) +"
                           r"[0-9.]+ ms \([0-9.]+×\) +([0-9.]+) ms", stdout,
                           re.MULTILINE))


def test_step_trace_times_the_three_steps_and_finds_the_exchange(traced, run_dir):
    """Not a timing assertion: only that every step was timed and that the
    traced ps step shows tensors crossing between the worker and the ps."""
    result, _ = traced
    times = printed_times(result.stdout)
    assert len(times) == 6 and all(float(ms) > 0 for ms in times.values())
    received = dict(re.findall(r"^  job:(ps|worker) .*\((\d+)\)$", result.stdout,
                               re.MULTILINE))
    assert int(received["ps"]) >= 4 and int(received["worker"]) >= 4


def test_its_result_holds_what_it_printed_and_the_report_reads_it(traced):
    result, path = traced
    figures = json.loads(path.read_text())
    assert (figures["batch_size"], figures["steps"]) == (10, 5)
    cpu = {row["kind"]: row["cpu_ms"] for row in figures["kinds"]}
    printed = {("window" if name == "window 8" else name): float(ms)
               for name, ms in printed_times(result.stdout).items()}
    assert cpu.keys() == printed.keys()
    assert all(abs(cpu[kind] - printed[kind]) < 0.006 for kind in cpu)
    assert figures["traced_ps_step"]["ps"]["tensors_received"] >= 4
    assert max(figures["parameter_bytes"].values()) == 784 * 128 * 4
    record = {"status": "ok", "label": "steps, batch 10", "result": figures}
    assert steps.results_of([record]) == {10: figures}
    text = "\n".join(steps.section([record]))
    assert "### Batch 10, 5 steps each" in text
    assert "| variables on the ps (a Hogwild step) |" in text
    assert "| window of 8 (7 local, 1 with the ps; computed) |" in text
