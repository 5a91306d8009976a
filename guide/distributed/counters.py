"""Global state the schemes keep beside the model, on the ps: counts per
worker of commits and gradients, their staleness, and the full record of
commits that Dynamic-SGD keeps. The chief reads them for the RESULT line and
`ProgressHook` for TensorBoard.

Staleness is counted in two units. `mean_staleness` (CommitLog) is in
minibatches: the global steps between a worker's pull and its commit.
`staleness_in_commits` is in commits, the unit of Hermans' thesis, whatever
the window: how many commits reached the central copy between them, kept as
a histogram per worker (`StalenessHistogram`). Its mean is at most about
W − 1 with W workers (docs/schemes.md says why, and what runs measured)."""

import collections
import json
import os

import numpy as np
import tensorflow as tf

from guide.training.monitored import run_without_hooks
from guide.training.report import Histogram

# A staleness histogram has a bucket per τ = 0, 1, ...; the last one also
# counts every larger τ. τ averages at most about W − 1, but a few commits in
# a thousand reach hundreds (up to 854 with 16 workers on 2 cores): 1024
# buckets, or 4 per worker past 256 workers.
MIN_BUCKETS = 1024
BUCKETS_PER_WORKER = 4
# The commit clock's limit, which it never reaches.
NEVER = 2**63 - 1


def staleness_buckets(num_workers):
    """The buckets of a staleness histogram for `num_workers` workers."""
    return max(MIN_BUCKETS, BUCKETS_PER_WORKER * num_workers)


def counter(name, shape=()):
    """An int64 variable of zeros, not trainable: a count the run keeps."""
    return tf.compat.v1.Variable(tf.zeros(shape, tf.int64), trainable=False,
                                 name=name)


class StalenessHistogram:
    """Each worker's commits by their staleness τ in commits, counted on the
    ps (build it under the replica device setter): a commit clock counts the
    commits that landed; a commit's τ is its ticket on the clock (the
    commits that landed before it) minus the clock its worker read before
    reading the parameters. Per worker: `histogram` (one bucket per τ, the
    last also counting larger ones), the exact `maximum` and `total`.

    Alone, it is what the schemes that commit every minibatch keep (Hogwild,
    Distributed-Setup, Multiple-GPUs-Single-Machine, through `count_steps`):
    their result.json has `staleness_in_commits` only. `CommitLog` holds
    one for the windowed schemes, beside the fields only they report."""

    def __init__(self, task):
        self._task_index = task.task_index
        self.buckets = staleness_buckets(task.num_workers)
        with tf.compat.v1.variable_scope("staleness_in_commits"):
            self.clock = counter("clock")
            # Beside the clock, so that counting a commit stays on one ps.
            self._device = self.clock.device
            with tf.compat.v1.device(self._device):
                per_worker = [task.num_workers]
                self.histogram = counter("histogram", per_worker + [self.buckets])
                self.maximum = counter("maximum", per_worker)
                self.total = counter("total", per_worker)
                self.pulled_at = counter("pulled_at", per_worker)
        self._last = None  # the histogram at the last `scalars`

    def read_clock(self):
        """The commit clock now."""
        with tf.compat.v1.device(self._device):
            return self.clock.read_value()

    def record_pull(self):
        """Op: note the clock this worker's copy was pulled at."""
        with tf.compat.v1.device(self._device):
            return tf.compat.v1.scatter_update(
                self.pulled_at, [self._task_index], [self.clock.read_value()])

    def record_commit(self, pulled=None):
        """Op: take this commit's ticket on the clock and count its τ, from
        the clock at `pulled` (default: at this worker's `record_pull`); run
        it once the commit is applied (a control dependency)."""
        me = self._task_index
        with tf.compat.v1.device(self._device):
            if pulled is None:
                pulled = self.pulled_at[me]
            # Atomic: the clock before this increment, never shared by two.
            ticket = tf.raw_ops.ResourceCountUpTo(
                resource=self.clock.handle, limit=NEVER, T=tf.int64)
            # (A ps restored from an older checkpoint can put the clock back.)
            staleness = tf.maximum(ticket - pulled, 0)
            bucket = tf.minimum(staleness, self.buckets - 1)
            return tf.group(
                tf.compat.v1.scatter_nd_add(
                    self.histogram,
                    [tf.stack([tf.constant(me, tf.int64), bucket])], [1]),
                tf.compat.v1.scatter_max(self.maximum, [me], [staleness]),
                tf.compat.v1.scatter_add(self.total, [me], [staleness]))

    def count_steps(self, train_op, loss):
        """`train_op`, counted as one commit a run, for a scheme that commits
        every minibatch (Hogwild): the clock is read before `loss` reads the
        variables (control dependencies added to those reads), and the
        ticket taken once `train_op` has applied the update."""
        pulled = self.read_clock()
        # Private, as no public API adds a control input to an op that exists:
        # the model made these reads before this call. At op creation
        # (tf.control_dependencies) each script would build the clock first
        # and the loss under it, apart from the variables, whose initial
        # values would otherwise wait for the clock, not yet initialised.
        for read in _variable_reads(loss):
            read._add_control_input(pulled.op)
        with tf.control_dependencies([train_op]):
            return self.record_commit(pulled)

    @property
    def fetches(self):
        return [self.histogram, self.maximum]

    def scalars(self, values):
        """TensorBoard's `staleness_in_commits`: the histogram of the commits
        since the last call, if any."""
        histogram, maximum = values
        counts = histogram.sum(axis=0)
        since = counts - (self._last if self._last is not None else 0)
        self._last = counts
        # A count that went back: a restarted ps restored an older checkpoint,
        # and the commits since the last call are unknown.
        if not since.any() or (since < 0).any():
            return {}
        largest = int(np.flatnonzero(since)[-1])
        if largest == self.buckets - 1:  # the last bucket counts larger ones
            largest = int(maximum.max())
        return {"staleness_in_commits": Histogram(since, largest)}

    def results(self, session):
        """`staleness_in_commits`, from the counts on the ps."""
        return {"staleness_in_commits": staleness_fields(*run_without_hooks(
            session, [self.histogram, self.maximum, self.total]))}


def _variable_reads(tensor):
    """The reads of resource variables that `tensor` is computed from."""
    reads, seen, pending = [], set(), [tensor.op]
    while pending:
        op = pending.pop()
        if op in seen:
            continue
        seen.add(op)
        if op.type == "ReadVariableOp":
            reads.append(op)
        pending.extend(input_.op for input_ in op.inputs)
    return reads


def staleness_fields(histogram, maximum, total):
    """result.json's `staleness_in_commits`, from the per-worker histograms
    (workers × buckets), maxima and totals of τ: for all commits
    (`overall`) and for each worker's, `commits`, `mean`, `p50`, `p95`,
    `max` and `histogram` {"τ": commits}, the non-empty buckets only. The
    last bucket counts every τ from its own on: `max` and `mean` are exact,
    `p50` and `p95` are too unless they fall in it (then its τ)."""
    histogram = np.asarray(histogram, np.int64)
    maximum = np.asarray(maximum, np.int64)
    total = np.asarray(total, np.int64)
    return {
        "unit": "commits", "buckets": int(histogram.shape[1]),
        "overall": _summary(histogram.sum(axis=0), maximum.max(initial=0),
                            total.sum()),
        "per_worker": [_summary(*row) for row in zip(histogram, maximum, total)]}


def _summary(counts, maximum, total):
    """One histogram's figures; with no commits, only `commits`: 0."""
    commits = int(counts.sum())
    if not commits:
        return {"commits": 0}
    cumulative = np.cumsum(counts)

    def percentile(percent):
        # The nearest rank: the least τ with ⌈percent · commits / 100⌉
        # commits at or below it.
        return int(np.searchsorted(cumulative, -(-percent * commits // 100)))

    return {"commits": commits, "mean": round(int(total) / commits, 2),
            "p50": percentile(50), "p95": percentile(95), "max": int(maximum),
            "histogram": {str(tau): int(count)
                          for tau, count in enumerate(counts) if count}}


class CommitLog:
    """Each worker's commits and their staleness, counted on the ps (build it
    under the replica device setter). `mean_staleness` is in minibatches: the
    global step when a commit lands minus that when its worker last pulled,
    how many minibatches other workers added to the central copy meanwhile;
    `staleness_in_commits`, in commits (`StalenessHistogram`).

    Not an option of `StalenessHistogram`: the schemes that commit every
    minibatch report none of its fields (`commits`, `mean_staleness`, the
    `staleness` and `commits/worker_<i>` scalars), and its variables, the
    histogram's among them, are named under `commit_log/` in the windowed
    schemes' checkpoints."""

    def __init__(self, task):
        self._task_index = task.task_index
        with tf.compat.v1.variable_scope("commit_log"):
            per_worker = [task.num_workers]
            self.commits = counter("commits", per_worker)
            self.staleness_sum = counter("staleness_sum", per_worker)
            self.pulled_at = counter("pulled_at", per_worker)
            self.in_commits = StalenessHistogram(task)
        self._last = (0, 0)  # commits and staleness sum at the last `scalars`

    def record_pull(self, global_step):
        """Op: note the global step and the commit clock this worker's copy
        was pulled at."""
        return tf.group(
            tf.compat.v1.scatter_update(self.pulled_at, [self._task_index],
                                        [global_step.read_value()]),
            self.in_commits.record_pull())

    def record_commit(self, global_step, applied):
        """Op: count one commit and its staleness; run it before the commit
        advances the global step (a control dependency). `applied`: the
        commit's update, after which the commit takes its ticket on the
        commit clock."""
        landed_at = global_step.read_value()
        staleness = landed_at - self.pulled_at[self._task_index]
        with tf.control_dependencies([applied]):
            counted_in_commits = self.in_commits.record_commit()
        return tf.group(
            tf.compat.v1.scatter_add(self.commits, [self._task_index], [1]),
            tf.compat.v1.scatter_add(self.staleness_sum, [self._task_index],
                                     [staleness]),
            counted_in_commits)

    @property
    def fetches(self):
        return [self.commits, self.staleness_sum, self.in_commits.fetches]

    def scalars(self, values):
        """TensorBoard's `commits/worker_<i>` (so far), `staleness` (the
        mean of the commits since the last call, if any, in minibatches) and
        `staleness_in_commits` (their histogram)."""
        commits, staleness_sum, in_commits = values
        total, stale = int(commits.sum()), int(staleness_sum.sum())
        last_total, last_stale = self._last
        self._last = (total, stale)
        scalars = {f"commits/worker_{index}": int(count)
                   for index, count in enumerate(commits)}
        # (Neither count goes back unless a restarted ps restored an older
        # checkpoint: then the commits since the last call are unknown.)
        if total > last_total and stale >= last_stale:
            scalars["staleness"] = (stale - last_stale) / (total - last_total)
        scalars.update(self.in_commits.scalars(in_commits))
        return scalars

    def results(self, session):
        """`commits` (a list, one count per worker), `mean_staleness` (in
        minibatches) and `staleness_in_commits`."""
        commits, staleness_sum = run_without_hooks(
            session, [self.commits, self.staleness_sum])
        mean = staleness_sum.sum() / max(commits.sum(), 1)
        return {"commits": [int(count) for count in commits],
                "mean_staleness": round(float(mean), 2),
                **self.in_commits.results(session)}


class WorkerCounter:
    """One count per worker on the ps (build it under the replica device
    setter); `increment` adds one to this worker's."""

    def __init__(self, task, name):
        self.counts = counter(name, [task.num_workers])
        self.increment = tf.compat.v1.scatter_add(self.counts, [task.task_index],
                                                  [1])

    def dropped_summaries(self, global_step, pending, replicas):
        """For `ProgressHook`: the `gradients_dropped` scalar."""
        return DroppedGradients(self.counts, global_step, pending, replicas)

    def read_with_dropped(self, session, global_step, pending, replicas):
        """The counts per worker of a SyncReplicasOptimizer job's gradients
        (or commits), and how many were dropped as stale (`_dropped`)."""
        counts, step, left_over = run_without_hooks(
            session, [self.counts, global_step, pending])
        return ([int(count) for count in counts],
                _dropped(counts, step, left_over, replicas))


def _dropped(counts, step, pending, replicas):
    """Counted − R × global steps − the `pending` ones still in the
    accumulator (`sync.pending_gradient_count`): the gradients never averaged
    into an update. An upper bound, if a step ever averaged more than R."""
    return int(counts.sum()) - replicas * int(step) - int(pending)


class DroppedGradients:
    """TensorBoard's `gradients_dropped`: gradients (or commits) dropped as
    stale per global step since the last call."""

    def __init__(self, counts, global_step, pending, replicas):
        self.fetches = [counts, global_step, pending]
        self._replicas = replicas
        self._last = (0, 0)

    def scalars(self, values):
        counts, step, pending = values
        dropped = _dropped(counts, step, pending, self._replicas)
        last_dropped, last_step = self._last
        self._last = (dropped, int(step))
        if int(step) <= last_step:
            return {}
        # The three counts are read at once but not atomically, so an
        # interval can come out a little below zero; none is dropped then.
        return {"gradients_dropped":
                max(dropped - last_dropped, 0) / (int(step) - last_step)}


class CommitRecord:
    """`CommitLog.scalars` from a full record of commits: the commit counter
    `clock` and, per commit, its worker and staleness τ in commits, shown in
    minibatches (τ × `steps_per_commit`) as every other example counts it,
    and as the histogram `staleness_in_commits`.

    Not a `CommitLog`: Dynamic-SGD's rule needs each commit's τ in the
    graph, under its lock, and its commits.json keeps every commit, so its
    ps holds that record (dynamic_sgd.py) and this only reads it, for the
    same TensorBoard tags; `staleness_summary` gives its result.json
    fields."""

    def __init__(self, clock, commit_worker, commit_staleness, num_workers,
                 steps_per_commit):
        self.fetches = [clock, commit_worker, commit_staleness]
        self._num_workers = num_workers
        self._steps_per_commit = steps_per_commit
        self._seen = 0

    def scalars(self, values):
        count, workers, staleness = values
        count = int(count)
        per_worker = np.bincount(workers[:count], minlength=self._num_workers)
        scalars = {f"commits/worker_{index}": int(commits)
                   for index, commits in enumerate(per_worker)}
        if count > self._seen:
            since = staleness[self._seen:count]
            scalars["staleness"] = float(since.mean()) * self._steps_per_commit
            histogram, _, _ = staleness_counts(
                np.zeros_like(since), since, 1, staleness_buckets(
                    self._num_workers))
            scalars["staleness_in_commits"] = Histogram(histogram[0],
                                                        int(since.max()))
        self._seen = count
        return scalars


def write_commit_record(session, logdir, clock, commit_worker, commit_staleness,
                        pulled_at):
    """Writes and returns the commits in the order the ps applied them
    (worker, staleness τ) to `<logdir>/commits.json`, with each worker's
    clock at its last pull."""
    count, workers, staleness, pulls = run_without_hooks(
        session, [clock, commit_worker, commit_staleness, pulled_at])
    commits = [{"worker": int(worker), "staleness": int(tau)}
               for worker, tau in zip(workers[:count], staleness[:count])]
    os.makedirs(logdir, exist_ok=True)
    with open(os.path.join(logdir, "commits.json"), "w") as stream:
        json.dump({"commits": commits,
                   "clock_at_last_pull": [int(pull) for pull in pulls]}, stream)
        stream.write("\n")
    return commits


def staleness_counts(workers, staleness, num_workers, buckets):
    """What `StalenessHistogram` keeps on the ps, from a record of commits
    (each one's worker and τ): the histograms (workers × buckets), maxima
    and totals of τ per worker."""
    workers = np.asarray(workers, np.int64)
    staleness = np.asarray(staleness, np.int64)
    histogram = np.zeros([num_workers, buckets], np.int64)
    np.add.at(histogram, (workers, np.minimum(staleness, buckets - 1)), 1)
    maximum = np.zeros(num_workers, np.int64)
    np.maximum.at(maximum, workers, staleness)
    total = np.zeros(num_workers, np.int64)
    np.add.at(total, workers, staleness)
    return histogram, maximum, total


def staleness_summary(commits, num_workers):
    """The RESULT fields of a commit record: commits per worker, the mean
    staleness in commits, `staleness_in_commits` as `StalenessHistogram`
    reports it and, if there were commits, the mean of 1 / (τ + 1): the
    share of the workers' displacements that reached θ̃ under DynSGD's
    rule."""
    workers = [commit["worker"] for commit in commits]
    staleness = [commit["staleness"] for commit in commits]
    per_worker = collections.Counter(workers)
    fields = {"commits": [per_worker[index] for index in range(num_workers)],
              "mean_staleness": round(sum(staleness) / max(len(commits), 1), 2),
              "staleness_in_commits": staleness_fields(*staleness_counts(
                  workers, staleness, num_workers,
                  staleness_buckets(num_workers)))}
    if commits:
        fields["mean_commit_scale"] = round(
            sum(1 / (tau + 1) for tau in staleness) / len(commits), 3)
    return fields
