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
    """Every scalar and histogram tag in the event files of `logdir`, read
    with TensorBoard's EventAccumulator (an eager `tf.summary.write` lands
    among its tensors)."""
    from tensorboard.backend.event_processing.event_accumulator import (
        EventAccumulator,
    )
    events = EventAccumulator(str(logdir))
    events.Reload()
    tags = events.Tags()
    return set(tags["scalars"]) | set(tags["tensors"]) | set(tags["histograms"])


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
    ("Hogwild", {"staleness_in_commits"}),
    ("DOWNPOUR", {"staleness", "staleness_in_commits", "commits/worker_<i>"}),
    ("Dynamic-SGD", {"staleness", "staleness_in_commits", "commits/worker_<i>"}),
    ("AEASGD", {"staleness", "staleness_in_commits", "commits/worker_<i>",
                "elastic_distance"}),
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
    buckets = log.in_commits.buckets
    in_commits = np.zeros([2, buckets], np.int64)
    in_commits[0, 0], in_commits[1, 1] = 2, 1
    maxima = np.array([0, 1])
    first = log.scalars([np.array([2, 1]), np.array([0, 6]), [in_commits, maxima]])
    histogram = first.pop("staleness_in_commits")
    assert first == {"commits/worker_0": 2, "commits/worker_1": 1,
                     "staleness": 2.0}
    assert list(histogram.counts[:3]) == [2, 1, 0] and histogram.largest == 1
    # No commit since: no staleness point, the counts again.
    assert log.scalars([np.array([2, 1]), np.array([0, 6]),
                        [in_commits, maxima]]) == {
        "commits/worker_0": 2, "commits/worker_1": 1}
    # One more commit each, one of them past the last bucket: the interval's
    # histogram has those two only, and its largest is the exact maximum.
    in_commits = in_commits.copy()
    in_commits[0, 3] += 1
    in_commits[1, buckets - 1] += 1
    later = log.scalars([np.array([3, 2]), np.array([4, 6]),
                         [in_commits, np.array([3, buckets + 40])]])
    assert later["staleness"] == 2.0
    since = later["staleness_in_commits"]
    assert np.flatnonzero(since.counts).tolist() == [3, buckets - 1]
    assert since.largest == buckets + 40


def test_commit_record_counts_staleness_in_minibatches_and_commits():
    from guide.distributed import counters
    record = counters.CommitRecord(None, None, None, num_workers=2,
                                   steps_per_commit=4)
    workers, staleness = np.array([0, 1, 0, 0, 0]), np.array([0, 1, 1, 0, 0])
    first = record.scalars([3, workers, staleness])
    histogram = first.pop("staleness_in_commits")
    assert first == {
        "commits/worker_0": 2, "commits/worker_1": 1, "staleness": 8 / 3}
    assert list(histogram.counts[:3]) == [1, 2, 0] and histogram.largest == 1
    later = record.scalars([4, workers, staleness])
    assert later["staleness"] == 0.0
    assert list(later["staleness_in_commits"].counts[:2]) == [1, 0]


def test_a_histogram_shows_in_tensorboards_histograms_dashboard(tmp_path):
    """`write_scalars` writes a `Histogram` as a histogram summary, which
    TensorBoard's reader lists among the histograms and its histograms
    dashboard turns into buckets, one per τ, of the counts given."""
    from tensorboard import data_compat
    from tensorboard.backend.event_processing.event_accumulator import (
        EventAccumulator,
    )
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.util import tensor_util

    from guide.training import report
    counts = np.zeros(256, np.int64)
    counts[[1, 2, 4, 255]] = [3, 5, 1, 2]  # two past the last bucket
    report.write_scalars(str(tmp_path), 7, {
        "loss": 0.5, "staleness_in_commits": report.Histogram(counts, 300)})
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    # (This test runs eagerly: the scalar lands among the tensors.)
    assert events.Tags()["histograms"] == ["staleness_in_commits"]
    assert events.Tags()["tensors"] == ["loss"]
    (event,) = events.Histograms("staleness_in_commits")
    assert event.step == 7 and event.histogram_value.num == 11
    # What the dashboard plots: [left, right, count] per bucket, the empty
    # ones at either end dropped, the outer edges from min and max.
    value = Summary.Value(tag="staleness_in_commits")
    value.histo.CopyFrom(event_histogram_proto(event.histogram_value))
    migrated = data_compat.migrate_value(value)
    assert migrated.metadata.plugin_data.plugin_name == "histograms"
    buckets = tensor_util.make_ndarray(migrated.tensor)
    assert buckets[:, 2].tolist() == counts[1:].tolist()
    assert buckets[0, 0] == 0.5 and buckets[-1, 1] == 300.5
    assert buckets[1].tolist() == [1.5, 2.5, 5]  # τ = 2: 2 ± 0.5, 5 commits


def event_histogram_proto(value):
    """A HistogramProto again, from EventAccumulator's HistogramValue."""
    from tensorboard.compat.proto.summary_pb2 import HistogramProto
    return HistogramProto(min=value.min, max=value.max, num=value.num,
                          sum=value.sum, sum_squares=value.sum_squares,
                          bucket_limit=value.bucket_limit, bucket=value.bucket)


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
