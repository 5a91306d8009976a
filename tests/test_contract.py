"""What a script declares to the launcher (launcher/contract.py), and the
launcher holding any script, wherever it lives, to that alone."""

import os

import pytest

from conftest import LAUNCHER, REPO, run

FAKE = os.path.join(REPO, "tests", "fake_task.py")
# As test_launcher.py's: a launch of fake tasks, on a loaded machine.
LAUNCH_S = 180


def declaring(tmp_path, fields):
    """A copy of fake_task.py whose launch block is `fields`' lines."""
    text = open(FAKE).read()
    start = text.index("# /// launch\n")
    end = text.index("# ///\n", start + 1)
    copy = tmp_path / "my_task.py"
    copy.write_text(text[:start] + "# /// launch\n" +
                    "".join(f"# {line}\n" for line in fields) + text[end:])
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
