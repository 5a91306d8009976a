"""Global state the schemes keep beside the model, on the ps: counts per
worker of commits and gradients, their staleness, and the full record of
commits that Dynamic-SGD keeps. The chief reads them for the RESULT line and
`ProgressHook` for TensorBoard."""

import collections
import json
import os

import numpy as np
import tensorflow as tf

from guide.training.monitored import run_without_hooks


def counter(name, shape=()):
    """An int64 variable of zeros, not trainable: a count the run keeps."""
    return tf.compat.v1.Variable(tf.zeros(shape, tf.int64), trainable=False,
                                 name=name)


class CommitLog:
    """Each worker's commits and their staleness, counted on the ps (build it
    under the replica device setter). A commit's staleness is the global step
    when it lands minus that when its worker last pulled: how many minibatches
    other workers added to the central copy meanwhile."""

    def __init__(self, task):
        self._task_index = task.task_index
        with tf.compat.v1.variable_scope("commit_log"):
            per_worker = [task.num_workers]
            self.commits = counter("commits", per_worker)
            self.staleness_sum = counter("staleness_sum", per_worker)
            self.pulled_at = counter("pulled_at", per_worker)
        self._last = (0, 0)  # commits and staleness sum at the last `scalars`

    def record_pull(self, global_step):
        """Op: note the global step this worker's copy was pulled at."""
        return tf.compat.v1.scatter_update(self.pulled_at, [self._task_index],
                                           [global_step.read_value()])

    def record_commit(self, global_step):
        """Op: count one commit and its staleness; run it before the commit
        advances the global step (a control dependency)."""
        landed_at = global_step.read_value()
        staleness = landed_at - self.pulled_at[self._task_index]
        return tf.group(
            tf.compat.v1.scatter_add(self.commits, [self._task_index], [1]),
            tf.compat.v1.scatter_add(self.staleness_sum, [self._task_index],
                                     [staleness]))

    @property
    def fetches(self):
        return [self.commits, self.staleness_sum]

    def scalars(self, values):
        """TensorBoard's `commits/worker_<i>` (so far) and `staleness` (the
        mean of the commits since the last call, if any)."""
        commits, staleness_sum = values
        total, stale = int(commits.sum()), int(staleness_sum.sum())
        last_total, last_stale = self._last
        self._last = (total, stale)
        scalars = {f"commits/worker_{index}": int(count)
                   for index, count in enumerate(commits)}
        if total > last_total:
            scalars["staleness"] = (stale - last_stale) / (total - last_total)
        return scalars

    def results(self, session):
        """`commits` (a list, one count per worker) and `mean_staleness`."""
        commits, staleness_sum = run_without_hooks(
            session, [self.commits, self.staleness_sum])
        mean = staleness_sum.sum() / max(commits.sum(), 1)
        return {"commits": [int(count) for count in commits],
                "mean_staleness": round(float(mean), 2)}


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
    minibatches (τ × `steps_per_commit`) as every other example counts it."""

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
            scalars["staleness"] = float(
                staleness[self._seen:count].mean()) * self._steps_per_commit
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


def staleness_summary(commits, num_workers):
    """The RESULT fields of a commit record: commits per worker, the mean
    staleness, how often each staleness occurred (`τ:count,...`) and, if
    there were commits, the mean of 1 / (τ + 1): the share of the workers'
    displacements that reached θ̃ under DynSGD's rule."""
    per_worker = collections.Counter(commit["worker"] for commit in commits)
    histogram = collections.Counter(commit["staleness"] for commit in commits)
    mean = sum(commit["staleness"] for commit in commits) / max(len(commits), 1)
    fields = {"commits": [per_worker[index] for index in range(num_workers)],
              "mean_staleness": round(mean, 2),
              "staleness_histogram": [f"{tau}:{histogram[tau]}"
                                      for tau in sorted(histogram)]}
    if commits:
        fields["mean_commit_scale"] = round(
            sum(1 / (commit["staleness"] + 1) for commit in commits)
            / len(commits), 3)
    return fields
