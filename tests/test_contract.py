"""What a script declares to the launcher (launcher/contract.py), and the
launcher holding any script, wherever it lives, to that alone."""

import os

import pytest

from conftest import LAUNCHER, REPO, run

FAKE = os.path.join(REPO, "tests", "fake_task.py")
# As test_launcher.py's: a launch of fake tasks, on a loaded machine.
LAUNCH_S = 180


def declaring(tmp_path, fields):
    """A copy of fake_task.py whose launch block is `fields`' lines (no
    block at all for none)."""
    text = open(FAKE).read()
    start = text.index("# /// launch\n")
    end = text.index("# ///\n", start + 1) + len("# ///\n")
    block = "".join(f"# {line}\n" for line in ["/// launch", *fields, "///"])
    copy = tmp_path / "my_task.py"
    copy.write_text(text[:start] + (block if fields else "") + text[end:])
    return str(copy)


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "not"])
def test_a_result_is_required_only_where_the_script_declares_it(run_dir, tmp_path,
                                                                declared):
    """A chief that exits 0 without its declared result stopped on an error
    it swallowed: the job fails. The rule is the script's own, wherever it
    lives; a script that declares none is not held to it."""
    script = declaring(tmp_path, ['result = "result.json"'] if declared else [])
    command = [*LAUNCHER, "--workers", "1", "--", script, "--logdir",
               str(run_dir / "run")]
    result = run(command + ["--mode", "ok"], timeout=LAUNCH_S)
    assert result.returncode == (1 if declared else 0), result.stdout + result.stderr
    assert ("the chief did not write" in result.stdout) == declared
    result = run(command + ["--mode", "result"], timeout=LAUNCH_S)
    assert result.returncode == 0, result.stdout + result.stderr
    # One left by the earlier run in the same logdir does not count.
    result = run(command + ["--mode", "ok"], timeout=LAUNCH_S)
    assert result.returncode == (1 if declared else 0), result.stdout + result.stderr


@pytest.mark.parametrize("fields, words", [
    (['prepare = "not a list"'], "prepare must be a list of strings"),
    (['chief_disk = ["worker", "coordinator"]'], "not coordinator"),
    (['results = "result.json"'], "unknown field 'results'"),
    (['result = "result.json'], "is not TOML"),
])
def test_a_malformed_launch_block_is_one_line_and_exit_2(run_dir, tmp_path,
                                                         fields, words):
    script = declaring(tmp_path, fields)
    result = run([*LAUNCHER, "--", script, "--logdir", str(run_dir / "run")],
                 timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("launch.sh: error: ") and words in line, line
    assert result.stdout == "" and not (run_dir / "run").exists()


def test_traffic_takes_the_counters_at_each_records_time(tmp_path, monkeypatch):
    """The bytes between the first and last progress records, the counters
    interpolated to each record's time; records older than the chief's
    start, and a line still being written, do not count."""
    from launcher import traffic

    readings = iter([{"lo": (0, 0)}, {"lo": (0, 1000)}, {"lo": (0, 3000)}])
    monkeypatch.setattr(traffic, "counters", lambda: next(readings))
    (tmp_path / "result.json").write_text('{"global_step": 30, "examples": 3000}')
    measured = traffic.Traffic({"job": "lo"}, str(tmp_path), "progress.jsonl",
                               "result.json")
    measured.since = 10.0  # when the chief (re)started
    for moment in (10.0, 11.0, 12.0):  # what the sampler thread does
        measured.readings.append((moment, traffic.counters()))
    (tmp_path / "progress.jsonl").write_text(
        '{"global_step": 1, "time": 9.0}\n'      # before the chief started
        '{"global_step": 10, "time": 10.5}\n'    # 500 bytes then, interpolated
        '{"global_step": 20, "time": 11.75}\n'   # 2,500
        '{"global_step": 30, "ti')               # not written whole yet
    measured.read_records()
    network = measured.measure()
    assert (network["bytes"], network["steps"]) == (2000, 10)
    assert network["bytes_per_example"] == 2  # 100 examples a step


@pytest.mark.parametrize("block, words", [
    ("# /// launch\n#prepare = []\n# ///\n", "does not parse"),
    ("# /// launch\n# result = \"result.json\"\n", "does not parse"),
])
def test_a_launch_block_that_does_not_parse_is_refused_not_ignored(
        run_dir, tmp_path, block, words):
    script = tmp_path / "mine.py"
    script.write_text("import sys\n" + block)
    result = run([*LAUNCHER, "--", str(script), "--logdir", str(run_dir / "run")],
                 timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert words in line, line


def test_an_earlier_runs_progress_and_report_are_not_this_ones(tmp_path):
    """A reused logdir: the old records, result and launch.json count for
    nothing; a restarted chief's new, shorter file is read from its start."""
    from launcher import traffic

    (tmp_path / "progress.jsonl").write_text(
        '{"global_step": 1, "time": 1e12}\n{"global_step": 9, "time": 2e12}\n')
    (tmp_path / "launch.json").write_text("{}")
    (tmp_path / "result.json").write_text('{"global_step": 9, "examples": 9}')
    os.utime(tmp_path / "result.json", (0, 0))
    measured = traffic.Traffic({"job": "lo"}, str(tmp_path), "progress.jsonl",
                               "result.json")
    assert not (tmp_path / "launch.json").exists()
    measured.since = 0.0
    measured.readings.append((0.0, {"lo": (0, 0)}))
    measured.read_records()
    assert measured.first is None
    assert measured.finish() is None  # nothing measured, and no stale timeline
    assert not (tmp_path / "launch.json").exists()
    (tmp_path / "progress.jsonl").write_text('{"global_step": 3, "time": 1.0}\n')
    measured.read_records()
    assert measured.first[0] == 3
