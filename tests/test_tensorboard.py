"""TensorBoard: the tags each README lists are in the events a run leaves,
read with TensorBoard's own reader; the scalars behind them; and
`guide/board.py`, which starts TensorBoard over every example's runs/.

The runs themselves are the smoke runs of test_examples.py, which call
`check_tensorboard_tags` on their log folders."""

import os
import re
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import PYTHON, REPO, run
from guide import board, examples

EXAMPLE_FOLDERS = sorted(examples.BY_FOLDER)


def readme_tags(folder):
    """The tags a README's TensorBoard section lists, one bullet each:
    "- `tag`: ..." or "- `tag`, `other_tag`: ...". `folder` None is
    Non-Distributed_Setup.py's, in docs/results.md."""
    path = (os.path.join(REPO, folder, "README.md") if folder else
            os.path.join(REPO, "docs", "results.md"))
    with open(path) as stream:
        text = stream.read()
    section = re.search(r"^#+ TensorBoard\n(.*?)(?=^#|\Z)", text, re.M | re.S)
    assert section, f"{path} has no TensorBoard section"
    tags = []
    for line in section.group(1).splitlines():
        if line.startswith("- `"):
            tags += re.findall(r"`([^`]+)`", line.split(":", 1)[0])
    return tags


def event_tags(logdir):
    """Every scalar tag in the event files of `logdir`, read with
    TensorBoard's EventAccumulator (an eager `tf.summary.write` lands among
    its tensors)."""
    from tensorboard.backend.event_processing.event_accumulator import (
        EventAccumulator,
    )
    events = EventAccumulator(str(logdir))
    events.Reload()
    tags = events.Tags()
    return set(tags["scalars"]) | set(tags["tensors"])


def check_tensorboard_tags(logdir, folder, workers):
    """Every tag the README of `folder` lists is in the run's events;
    `commits/worker_<i>` once per worker."""
    expected = set()
    for tag in readme_tags(folder):
        expected |= ({tag.replace("<i>", str(index)) for index in range(workers)}
                     if "<i>" in tag else {tag})
    missing = expected - event_tags(logdir)
    assert not missing, \
        f"{folder or 'docs/results.md'} lists tags not written: {missing}"


@pytest.mark.parametrize("folder", EXAMPLE_FOLDERS + [None])
def test_every_readme_lists_the_common_tags(folder):
    assert {"loss", "examples_per_sec", "test_accuracy", "test_loss"} <= set(
        readme_tags(folder))


@pytest.mark.parametrize("folder, tags", [
    ("DOWNPOUR", {"staleness", "commits/worker_<i>"}),
    ("Dynamic-SGD", {"staleness", "commits/worker_<i>"}),
    ("AEASGD", {"staleness", "commits/worker_<i>", "elastic_distance"}),
    ("AEAMSGD", {"elastic_distance"}),
    ("Synchronous-SGD", {"gradients_dropped"}),
    ("SAGN", {"gradients_dropped"}),
])
def test_readmes_list_the_scheme_tags(folder, tags):
    assert tags <= set(readme_tags(folder))


# TensorFlow (which guide.training.report and TensorBoard's reader import) is
# imported only by the tests that use it, not when test_examples.py
# imports this module.


def test_commit_log_staleness_is_per_interval():
    import tensorflow as tf

    from guide.distributed import counters
    with tf.Graph().as_default():
        log = counters.CommitLog(SimpleNamespace(task_index=0, num_workers=2))
    first = log.scalars([np.array([2, 1]), np.array([0, 6])])
    assert first == {"commits/worker_0": 2, "commits/worker_1": 1,
                     "staleness": 2.0}
    # No commit since: no staleness point, the counts again.
    assert log.scalars([np.array([2, 1]), np.array([0, 6])]) == {
        "commits/worker_0": 2, "commits/worker_1": 1}
    assert log.scalars([np.array([3, 2]), np.array([4, 6])])["staleness"] == 2.0


def test_commit_record_counts_staleness_in_minibatches():
    from guide.distributed import counters
    record = counters.CommitRecord(None, None, None, num_workers=2,
                                 steps_per_commit=4)
    workers, staleness = np.array([0, 1, 0, 0, 0]), np.array([0, 1, 1, 0, 0])
    assert record.scalars([3, workers, staleness]) == {
        "commits/worker_0": 2, "commits/worker_1": 1, "staleness": 8 / 3}
    assert record.scalars([4, workers, staleness])["staleness"] == 0.0


def test_dropped_gradients_per_step():
    from guide.distributed import counters
    dropped = counters.DroppedGradients(None, None, None, replicas=2)
    # 3 workers, 2 averaged per step: 10 steps, 31 computed, 1 waiting.
    assert dropped.scalars([np.array([11, 10, 10]), 10, 1]) == {
        "gradients_dropped": 1.0}
    assert dropped.scalars([np.array([20, 20, 20]), 20, 0]) == {
        "gradients_dropped": 1.0}
    assert dropped.scalars([np.array([20, 20, 20]), 20, 0]) == {}


def test_board_names_each_example_with_runs(tmp_path):
    for folder in ("DOWNPOUR", "Synchronous-SGD", "Hogwild"):
        (tmp_path / folder / "runs").mkdir(parents=True)
    (tmp_path / "DOWNPOUR" / "runs" / "a").mkdir()
    (tmp_path / "Synchronous-SGD" / "runs" / "b").mkdir()
    (tmp_path / "runs" / "c").mkdir(parents=True)
    assert board.logdir_spec(str(tmp_path)).split(",") == [
        f"DOWNPOUR:{tmp_path}/DOWNPOUR/runs",
        f"Synchronous-SGD:{tmp_path}/Synchronous-SGD/runs",
        f"Non-Distributed_Setup:{tmp_path}/runs"]


def test_board_without_runs_says_how_to_make_one(tmp_path):
    result = run([PYTHON, "guide/board.py", "--root", str(tmp_path)], timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "make demo" in result.stderr


@pytest.mark.parametrize("steps, lines", [(3, 0), (12, 1)])
def test_progress_hook_writes_loss_and_rate_however_few_its_steps(
        tmp_path, capsys, steps, lines):
    """A chief the other workers leave fewer local steps than one progress
    line still writes its loss and rate, once, at the end."""
    import tensorflow as tf

    from guide.training import report
    with tf.Graph().as_default():
        global_step = tf.compat.v1.train.get_or_create_global_step()
        step = global_step.assign_add(1)
        hook = report.ProgressHook(global_step, tf.constant(0.5), 10,
                                   examples_per_step=100,
                                   summary_dir=str(tmp_path))
        with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as session:
            for _ in range(steps):
                session.run(step)
    assert capsys.readouterr().out.count("examples/s") == lines
    assert {"loss", "examples_per_sec"} <= event_tags(tmp_path)
