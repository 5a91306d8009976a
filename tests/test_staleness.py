"""Staleness as a distribution: the histogram each asynchronous run keeps on
the ps (guide/distributed/counters.py), against NumPy counts of the same
commits; what result.json says of it; and a run that diverges, which is a
result too.

`check_reported` is also called on every smoke run's result.json
(test_examples.py)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import read_result, run

# A trace of exchanges with the ps, in the order the ps sees them: each
# worker's pulls and commits, interleaved as three workers might.
TRACE = [("pull", 0), ("pull", 1), ("pull", 2), ("commit", 1), ("pull", 1),
         ("commit", 2), ("pull", 2), ("commit", 1), ("pull", 1), ("commit", 0),
         ("pull", 0), ("commit", 1), ("pull", 1), ("commit", 1), ("pull", 1),
         ("commit", 2), ("pull", 2), ("commit", 0), ("pull", 0), ("commit", 2),
         ("commit", 1)]


def replay(trace, num_workers):
    """The commits of `trace` as (worker, τ), τ counted in commits between
    the worker's pull and its commit: NumPy's side of the bookkeeping."""
    clock, pulled_at, commits = 0, [0] * num_workers, []
    for event, worker in trace:
        if event == "pull":
            pulled_at[worker] = clock
        else:
            commits.append((worker, clock - pulled_at[worker]))
            clock += 1
    return commits


def expected_summary(taus, buckets):
    """A histogram's figures, computed by NumPy from the τ themselves."""
    taus = np.asarray(taus)
    if not len(taus):
        return {"commits": 0}
    values, counts = np.unique(np.minimum(taus, buckets - 1), return_counts=True)

    def percentile(percent):  # the last bucket's τ, if it falls there
        return min(int(np.percentile(taus, percent, method="inverted_cdf")),
                   buckets - 1)

    return {"commits": len(taus), "mean": round(taus.mean(), 2),
            "p50": percentile(50), "p95": percentile(95), "max": int(taus.max()),
            "histogram": {str(value): int(count)
                          for value, count in zip(values, counts)}}


@pytest.mark.parametrize("buckets", [1024, 16])
def test_the_summary_of_a_histogram_is_numpys_count_of_the_commits(buckets):
    """From a deterministic trace of 2,000 commits of 3 workers, some of
    them (with 16 buckets) past the last bucket: the figures are NumPy's,
    but for a percentile that falls in the last bucket, which is its τ."""
    from guide.distributed import counters
    rng = np.random.default_rng(7)
    workers = rng.integers(0, 3, 2000)
    taus = rng.geometric(0.25, 2000) - 1 + 3 * workers  # worker 2 the stalest
    fields = counters.staleness_fields(*counters.staleness_counts(
        workers, taus, 3, buckets))
    assert (fields["unit"], fields["buckets"]) == ("commits", buckets)
    assert fields["overall"] == expected_summary(taus, buckets)
    for worker, summary in enumerate(fields["per_worker"]):
        assert summary == expected_summary(taus[workers == worker], buckets)
    if buckets == 16:
        assert fields["overall"]["max"] > 15  # the last bucket counted more
    check_staleness(fields, workers=3)


def test_a_worker_without_commits_has_only_its_count():
    from guide.distributed import counters
    fields = counters.staleness_fields(*counters.staleness_counts(
        [1, 1], [0, 2], 2, 1024))
    assert fields["per_worker"][0] == {"commits": 0}
    assert fields["overall"] == expected_summary([0, 2], 1024)


def test_the_buckets_hold_every_staleness_of_an_ordinary_run():
    """τ averages at most about W − 1, its tail reaches hundreds: 1024
    buckets up to 256 workers, then 4 per worker."""
    from guide.distributed import counters
    assert counters.staleness_buckets(1) == counters.staleness_buckets(40) == 1024
    assert counters.staleness_buckets(300) == 1200


def test_the_ps_counts_a_trace_of_pulls_and_commits():
    """Each worker's graph, as its script builds it, on one in-process
    server: the pulls and commits of TRACE, run in its order, leave on the
    ps the histogram that NumPy counts from the same trace, and the commit
    clock at the number of commits."""
    import tensorflow as tf

    from guide.distributed import counters
    server = tf.distribute.Server.create_local_server()
    workers = 3
    sessions, ops = [], []
    for index in range(workers):
        graph = tf.Graph()
        with graph.as_default():
            staleness = counters.StalenessHistogram(
                SimpleNamespace(task_index=index, num_workers=workers))
            ops.append({"pull": staleness.record_pull(),
                        "commit": staleness.record_commit(),
                        "init": tf.compat.v1.global_variables_initializer()})
        sessions.append(tf.compat.v1.Session(server.target, graph=graph))
    try:
        sessions[0].run(ops[0]["init"])
        for event, worker in TRACE:
            sessions[worker].run(ops[worker][event])
        with sessions[0].graph.as_default():
            fields = staleness.results(sessions[-1])["staleness_in_commits"]
            clock = sessions[-1].run(staleness.clock)
    finally:
        for session in sessions:
            session.close()
    commits = replay(TRACE, workers)
    assert clock == len(commits)
    assert fields == counters.staleness_fields(*counters.staleness_counts(
        *zip(*commits), workers, counters.staleness_buckets(workers)))
    # The trace has stale commits, of several τ, from every worker.
    assert {tau for _, tau in commits} == {0, 1, 3, 4}
    assert all(summary["max"] > 0 for summary in fields["per_worker"])


def test_counting_steps_reads_the_clock_first_and_changes_no_update():
    """Hogwild's step, counted: the clock is read before every read of the
    parameters the loss is computed from, and the parameters after five
    steps are exactly those of the same steps uncounted."""
    import tensorflow as tf

    from guide.distributed import counters
    from guide.training import model
    rng = np.random.default_rng(0)
    batches = [(rng.random((8, 784), np.float32), rng.integers(0, 10, 8))
               for _ in range(5)]

    def train(counted):
        with tf.Graph().as_default():
            global_step = tf.compat.v1.train.get_or_create_global_step()
            classifier = model.Classifier(3)
            train_op = tf.compat.v1.train.GradientDescentOptimizer(0.5).minimize(
                classifier.loss, global_step=global_step)
            if counted:
                staleness = counters.StalenessHistogram(
                    SimpleNamespace(task_index=1, num_workers=2))
                train_op = staleness.count_steps(train_op, classifier.loss)
                # The loss reads each of the 4 variables once; a variable's
                # own snapshot (`<name>/Read/`) is not among those reads.
                model_handles = [variable.handle for variable
                                 in classifier.mlp.variables]
                reads = [op for op in tf.compat.v1.get_default_graph()
                         .get_operations() if op.type == "ReadVariableOp"
                         and any(op.inputs[0] is handle
                                 for handle in model_handles)
                         and "/Read/" not in op.name]
                assert len(reads) == 4
                for read in reads:
                    (clock_read,) = read.control_inputs
                    assert clock_read.inputs[0].op.inputs[0] is staleness.clock.handle
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                for images, labels in batches:
                    session.run(train_op, classifier.feed(images, labels))
                if counted:
                    fields = staleness.results(session)["staleness_in_commits"]
                    assert session.run(staleness.clock) == len(batches)
                    assert fields["per_worker"][1]["histogram"] == {"0": 5}
                return session.run(classifier.mlp.variables)

    for plain, counted in zip(train(False), train(True)):
        assert np.array_equal(plain, counted)


def test_counts_a_restarted_ps_put_back_give_no_interval():
    """A ps restored from an older checkpoint puts its counts back under the
    chief's TensorBoard hook: the interval across the restore shows no
    histogram and no mean staleness, rather than negative ones; the next
    interval counts from the restored counts."""
    import tensorflow as tf

    from guide.distributed import counters
    with tf.Graph().as_default():
        log = counters.CommitLog(SimpleNamespace(task_index=0, num_workers=2))
    histogram = np.zeros([2, log.in_commits.buckets], np.int64)
    maxima = np.array([4, 4])

    def scalars(commits, staleness_sum, counts):
        histogram[:, :len(counts)] = counts
        return log.scalars([np.array(commits), np.array(staleness_sum),
                            [histogram.copy(), maxima]])

    assert "staleness" in scalars([5, 5], [40, 40], [[3, 2], [1, 4]])
    # Restored to fewer commits, then past the last call's count meanwhile.
    restored = scalars([6, 6], [30, 30], [[4, 2], [0, 3]])
    assert "staleness" not in restored
    assert "staleness_in_commits" not in restored
    later = scalars([7, 6], [34, 30], [[4, 3], [0, 3]])
    assert later["staleness"] == 4.0
    assert list(later["staleness_in_commits"].counts[:2]) == [0, 1]


def check_staleness(fields, workers):
    """A `staleness_in_commits` that adds up: per worker and overall, the
    histogram's counts sum to the commits, and when no τ went past the last
    bucket, the histogram gives the mean, percentiles and max reported."""
    assert fields["unit"] == "commits" and len(fields["per_worker"]) == workers
    summaries = fields["per_worker"] + [fields["overall"]]
    assert fields["overall"]["commits"] == sum(
        summary["commits"] for summary in fields["per_worker"])
    for summary in summaries:
        if not summary["commits"]:
            assert summary == {"commits": 0}
            continue
        histogram = {int(tau): count for tau, count in summary["histogram"].items()}
        assert sum(histogram.values()) == summary["commits"]
        assert 0 <= summary["p50"] <= summary["p95"] <= summary["max"]
        if summary["max"] < fields["buckets"] - 1:
            taus = np.repeat(list(histogram), list(histogram.values()))
            assert summary == expected_summary(taus, fields["buckets"])


def check_reported(result):
    """What every run's result.json says of the model and, for an
    asynchronous run, of staleness."""
    assert 0 <= result["train_accuracy"] <= 1
    assert result["diverged"] is (not math.isfinite(result["test_loss"])
                                  or result["test_accuracy"] <= 0.15)
    if "staleness_in_commits" in result:
        fields = result["staleness_in_commits"]
        check_staleness(fields, result["workers"])
        # Every commit counted, once: one per window of minibatches (the
        # counts are checkpointed with the global step).
        window = result.get("communication_window", 1)
        assert fields["overall"]["commits"] * window == result["global_step"]
        if "commits" in result:
            assert result["commits"] == [
                summary["commits"] for summary in fields["per_worker"]]


def test_a_run_that_diverges_reports_it(run_dir):
    """Hogwild at a learning rate of 1e30: the parameters go to NaN within
    steps; the run still ends with exit code 0 and result.json, at chance,
    its loss NaN and `diverged` true, its staleness counted."""
    logdir = run_dir / "run"
    result = run(["bash", "Hogwild/run.sh", "--learning_rate", "1e30",
                  "--train_steps", "30", "--logdir", str(logdir)], timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert outcome["diverged"] is True and math.isnan(outcome["test_loss"])
    assert outcome["test_accuracy"] <= 0.15 and outcome["train_accuracy"] <= 0.15
    assert "the model diverged" in result.stdout
    assert " diverged=True " in result.stdout
    fields = outcome["staleness_in_commits"]
    check_staleness(fields, workers=2)
    assert fields["overall"]["commits"] == outcome["global_step"]
