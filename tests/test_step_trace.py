"""One short run of the step tracer, benchmarks/step_trace.py."""

import re

from conftest import PYTHON, run


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
