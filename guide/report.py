"""What every run reports: progress lines while training, one RESULT line
and `result.json` at the end."""

import json
import os
import time

import numpy as np
import tensorflow as tf

# TensorFlow's Python warnings about deprecated v1 APIs, and its complaint
# that an asynchronous global step did not move between two reads, are noise
# in these examples; errors still show.
tf.get_logger().setLevel("ERROR")


class ProgressHook(tf.compat.v1.train.SessionRunHook):
    """Prints global step, loss and examples/s every `every_n_steps` steps.

    The rate counts the examples of every worker (global steps times
    `examples_per_step`), so it is the whole job's throughput. Given a
    `summary_dir`, it also writes the loss and that rate to TensorBoard
    (`loss`, `examples_per_sec`), and the scalars of each of `summaries`:
    objects with `fetches` and a `scalars(values)` method that turns the
    fetched values into `{tag: value}` (`CommitLog`, `CommitRecord`,
    `DroppedGradients`, `ElasticDistance`), read only then, not at every
    step. When the hooked `session.run` stands for several local steps (a
    whole communication window), say how many with `steps_per_run`.
    """

    def __init__(self, global_step, loss, every_n_steps, examples_per_step,
                 summary_dir=None, steps_per_run=1, summaries=()):
        self._fetches = {"global_step": global_step, "loss": loss}
        self._every_n_steps = every_n_steps
        self._examples_per_step = examples_per_step
        self._summary_dir = summary_dir
        self._steps_per_run = steps_per_run
        self._summaries = list(summaries)
        self._local_step = 0
        self._last = None

    def after_create_session(self, session, coord):
        self._last = (session.run(self._fetches["global_step"]),
                      time.perf_counter())

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        before = self._local_step
        self._local_step += self._steps_per_run
        if self._local_step // self._every_n_steps == before // self._every_n_steps:
            return
        step, loss = (run_values.results["global_step"],
                      run_values.results["loss"])
        last_step, last_time = self._last
        now = time.perf_counter()
        rate = (step - last_step) * self._examples_per_step / max(now - last_time, 1e-9)
        self._last = (step, now)
        print(f"global_step {step} loss {loss:.4f} examples/s {rate:.0f} "
              f"(local step {self._local_step})", flush=True)
        if self._summary_dir:
            scalars = {"loss": loss, "examples_per_sec": rate}
            if self._summaries:
                values = run_context.session.run(
                    [source.fetches for source in self._summaries])
                for source, value in zip(self._summaries, values):
                    scalars.update(source.scalars(value))
            write_scalars(self._summary_dir, step, scalars)


# Marks a summary written eagerly as a scalar for TensorBoard's "scalars"
# dashboard (tf.summary.scalar would need TensorBoard at run time).
_SCALAR = tf.compat.v1.SummaryMetadata(
    plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))
_eager_writers = {}


def write_scalars(logdir, step, scalars):
    """Writes `{tag: value}` to TensorBoard's event file in `logdir`, at
    global step `step`. The tags are the same in every example, so that the
    runs of different schemes overlay in one chart."""
    if not tf.executing_eagerly():
        writer = tf.compat.v1.summary.FileWriterCache.get(logdir)
        writer.add_summary(tf.compat.v1.Summary(value=[
            tf.compat.v1.Summary.Value(tag=tag, simple_value=float(value))
            for tag, value in scalars.items()]), int(step))
        return
    # An eager program (Parameter-Server-Strategy) cannot use a v1 FileWriter.
    if logdir not in _eager_writers:
        _eager_writers[logdir] = tf.summary.create_file_writer(logdir)
    writer = _eager_writers[logdir]
    with writer.as_default():
        for tag, value in scalars.items():
            tf.summary.write(tag, float(value), step=int(step), metadata=_SCALAR)
    writer.flush()


class AccuracyCurve:
    """Test accuracy as training goes, for `--eval_every`: points of (seconds
    since the start, global step, examples seen, accuracy), written to
    `<logdir>/accuracy_curve.json`, and each point as `test_accuracy` (and
    `test_loss`, when measured) to TensorBoard. `examples_per_step` is as in
    `evaluate_and_write`."""

    def __init__(self, args, examples_per_step=None):
        self.every = args.eval_every
        self._logdir = args.logdir
        self._path = os.path.join(args.logdir, "accuracy_curve.json")
        self._examples_per_step = examples_per_step or args.batch_size
        self._points = []
        self._start = time.perf_counter()
        self._next_step = 0

    def restart_clock(self):
        self._start = time.perf_counter()

    def due(self, step):
        """Whether `step` has reached the next multiple of --eval_every."""
        return bool(self.every) and step >= self._next_step

    def measure(self, step, evaluate):
        """Adds the point for global step `step`: `evaluate()` returns the
        test accuracy, or a (test loss, test accuracy) pair, and the seconds
        it took are kept too (`eval_s`)."""
        started = time.perf_counter()
        measured = evaluate()
        scalars = {}
        if isinstance(measured, (tuple, list)):
            scalars["test_loss"], measured = measured
        accuracy = scalars["test_accuracy"] = measured
        write_scalars(self._logdir, step, scalars)
        self._points.append({
            "wall_s": round(started - self._start, 3),
            "global_step": int(step),
            "examples": int(step) * self._examples_per_step,
            "test_accuracy": round(float(accuracy), 4),
            "eval_s": round(time.perf_counter() - started, 4)})
        self._next_step = (int(step) // self.every + 1) * self.every

    def write(self):
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        with open(self._path, "w") as stream:
            json.dump(self._points, stream, indent=1)
            stream.write("\n")


class AccuracyCurveHook(tf.compat.v1.train.SessionRunHook):
    """An `AccuracyCurve` kept by a MonitoredSession: measured when the
    session starts, then whenever the global step passes a multiple of
    `--eval_every`, and written when the session closes. Does nothing when
    `--eval_every` is 0."""

    def __init__(self, args, global_step, classifier, dataset,
                 examples_per_step=None):
        self._curve = AccuracyCurve(args, examples_per_step)
        self._global_step = global_step
        self._measured = [classifier.loss, classifier.accuracy]
        self._feed = classifier.feed(dataset.test_images, dataset.test_labels)

    def after_create_session(self, session, coord):
        if self._curve.every:
            self._curve.restart_clock()
            self._measure(session, session.run(self._global_step))

    def _measure(self, session, step):
        self._curve.measure(
            step, lambda: session.run(self._measured, self._feed))

    def before_run(self, run_context):
        if self._curve.every:
            return tf.compat.v1.train.SessionRunArgs(self._global_step)
        return None

    def after_run(self, run_context, run_values):
        if self._curve.due(run_values.results):
            self._measure(run_context.session, run_values.results)

    def end(self, session):
        if self._curve.every:
            self._curve.write()


def run_without_hooks(session, fetches, feed_dict=None):
    """`session.run`, but a MonitoredSession's hooks do not see it.

    Used for the final evaluation, so it is not counted as a training step;
    and, in the schemes with a communication window, for the local steps,
    which must not pay for the round trip to the ps that the hooks' read of
    the global step costs, and for every exchange with the ps but the one
    per window that the hooks should see.
    """
    if hasattr(session, "run_step_fn"):  # a MonitoredSession
        def step(step_context):
            return step_context.session.run(fetches, feed_dict)
        try:
            return session.run_step_fn(step)
        except RuntimeError as error:
            # Distributed: when a restarted ps made the MonitoredSession
            # build a new session during the call, TensorFlow hands the step
            # the old, closed one; the next call gets the new one.
            if "closed Session" not in str(error):
                raise
            return session.run_step_fn(step)
    return session.run(fetches, feed_dict)


def counter(name, shape=()):
    """An int64 variable of zeros, not trainable: a count the run keeps."""
    return tf.compat.v1.Variable(tf.zeros(shape, tf.int64), trainable=False,
                                 name=name)


class CommitLog:
    """Each worker's commits and their staleness, counted on the ps.

    Build it under the replica device setter: its counters are then global
    state, one entry per worker, that the chief reads at the end. A commit's
    staleness is the global step when it lands minus the global step when
    its worker last pulled: how many minibatches other workers added to the
    central copy while this worker computed on its own.
    """

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

    def record_commit(self, global_step, steps):
        """Op: count one commit of `steps` minibatches and its staleness, and
        advance the global step by `steps`."""
        landed_at = global_step.read_value()
        staleness = landed_at - self.pulled_at[self._task_index]
        with tf.control_dependencies([staleness]):  # read before advancing
            return tf.group(
                tf.compat.v1.scatter_add(self.commits, [self._task_index], [1]),
                tf.compat.v1.scatter_add(self.staleness_sum, [self._task_index],
                                         [staleness]),
                global_step.assign_add(steps))

    @property
    def fetches(self):
        """What `scalars` needs, read by `ProgressHook` every --log_every."""
        return [self.commits, self.staleness_sum]

    def scalars(self, values):
        """TensorBoard's `commits/worker_<i>` (commits so far) and
        `staleness`: the mean staleness of the commits since the last call
        (none when there were none)."""
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
    """One counter per worker, on the ps, that the chief reads at the end.

    Build it under the replica device setter; `increment` is an op that adds
    one to this worker's entry.
    """

    def __init__(self, task, name):
        self.counts = counter(name, [task.num_workers])
        self.increment = tf.compat.v1.scatter_add(self.counts, [task.task_index],
                                                  [1])

    def dropped_summaries(self, global_step, waiting, replicas):
        """For `ProgressHook`: the `gradients_dropped` scalar, as in
        `read_with_dropped`."""
        return DroppedGradients(self.counts, global_step, waiting, replicas)

    def read_with_dropped(self, session, global_step, waiting, replicas):
        """For counted gradients (or commits) of a SyncReplicasOptimizer job:
        the counts per worker, and how many were never averaged into an
        update, dropped as stale: counted − R × global steps − those still
        `waiting` in the accumulator (`cluster.gradients_waiting`). An upper
        bound, if a step ever averaged more than R."""
        counts, step, left_over = run_without_hooks(
            session, [self.counts, global_step, waiting])
        return ([int(count) for count in counts],
                int(counts.sum()) - replicas * int(step) - int(left_over))


class DroppedGradients:
    """TensorBoard's `gradients_dropped`, for `ProgressHook`: the gradients
    (or commits) dropped as stale per global step since the last call, from
    counts as in `WorkerCounter.read_with_dropped`."""

    def __init__(self, counts, global_step, waiting, replicas):
        self.fetches = [counts, global_step, waiting]
        self._replicas = replicas
        self._last = (0, 0)

    def scalars(self, values):
        counts, step, waiting = values
        dropped = int(counts.sum()) - self._replicas * int(step) - int(waiting)
        last_dropped, last_step = self._last
        self._last = (dropped, int(step))
        if int(step) <= last_step:
            return {}
        # The three counts are read at once but not atomically, so an
        # interval can come out a little below zero; none is dropped then.
        return {"gradients_dropped":
                max(dropped - last_dropped, 0) / (int(step) - last_step)}


class CommitRecord:
    """TensorBoard's `commits/worker_<i>` and `staleness` (as
    `CommitLog.scalars`) from a full record of commits: the commit counter
    `clock` and, per commit, its worker and its staleness τ in commits,
    written in minibatches, τ × `steps_per_commit`, as every other example
    counts it."""

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


class ElasticDistance:
    """TensorBoard's `elastic_distance`, for `ProgressHook`: ‖θ − θ̃‖, the
    distance between this worker's copy and the centre. Build it in the
    graph, before the session starts."""

    def __init__(self, local_variables, central_variables):
        self.fetches = tf.sqrt(tf.add_n([
            tf.reduce_sum(tf.square(local - central.read_value()))
            for local, central in zip(local_variables, central_variables)]))

    @staticmethod
    def scalars(distance):
        return {"elastic_distance": distance}


def save_local_copy(session, variables, logdir):
    """Writes this worker's own parameters to `<logdir>/local_copy.npz`.

    Checkpoints hold only the global state; this keeps the chief's local
    copy θ too, for the schemes where it differs from the central one.
    """
    values = run_without_hooks(session, variables)
    os.makedirs(logdir, exist_ok=True)
    np.savez(os.path.join(logdir, "local_copy.npz"),
             **{variable.op.name.split("/", 1)[1]: value
                for variable, value in zip(variables, values)})


def write_commit_record(session, logdir, clock, commit_worker, commit_staleness,
                        pulled_at):
    """Writes `<logdir>/commits.json`: every commit in the order the ps
    applied it (worker, staleness τ), and each worker's clock at its last
    pull. Returns the list of commits."""
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
    staleness and how often each staleness occurred (`τ:count,...`)."""
    per_worker = [0] * num_workers
    histogram = {}
    for commit in commits:
        per_worker[commit["worker"]] += 1
        histogram[commit["staleness"]] = histogram.get(commit["staleness"], 0) + 1
    mean = sum(tau * count for tau, count in histogram.items()) / max(len(commits), 1)
    return {"commits": per_worker, "mean_staleness": round(mean, 2),
            "staleness_histogram": [f"{tau}:{histogram[tau]}"
                                    for tau in sorted(histogram)]}


def _shown(value):
    """A value as the RESULT line shows it: lists comma-joined, no spaces."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return value


def evaluate_and_write(session, args, algorithm, classifier, dataset,
                       global_step, wall_s, *, workers, ps, examples_per_step=None,
                       **extra):
    """The chief's last act: test-set evaluation, the RESULT line, result.json.

    `examples_per_step` is how many training examples one global step
    consumed (default: one minibatch); `extra` adds scheme-specific fields.
    """
    test_loss, test_accuracy, step = run_without_hooks(
        session, [classifier.loss, classifier.accuracy, global_step],
        classifier.feed(dataset.test_images, dataset.test_labels))
    return write_result(args, algorithm, step, test_loss, test_accuracy, wall_s,
                        workers=workers, ps=ps, examples_per_step=examples_per_step,
                        **extra)


def write_result(args, algorithm, step, test_loss, test_accuracy, wall_s, *,
                 workers, ps, examples_per_step=None, **extra):
    """Prints the RESULT line and writes result.json from measured values,
    and the final test figures to TensorBoard."""
    write_scalars(args.logdir, step, {"test_accuracy": test_accuracy,
                                      "test_loss": test_loss})
    # Only the steps this run made: a resumed run started at args.start_step.
    examples = (step - getattr(args, "start_step", 0)) * (
        examples_per_step or args.batch_size)
    fields = {
        "algorithm": algorithm, "workers": workers, "ps": ps,
        "global_step": int(step),
        "test_accuracy": round(float(test_accuracy), 4),
        "test_loss": round(float(test_loss), 4),
        "wall_s": round(wall_s, 2), "examples": int(examples),
        "examples_per_s": round(examples / wall_s, 1),
        "dataset": args.dataset, "train_steps": args.train_steps,
        "batch_size": args.batch_size, "learning_rate": args.learning_rate,
        "seed": args.seed,
        **({"evaluated_on": "validation"} if getattr(args, "validation", False)
           else {}),
        **extra}
    os.makedirs(args.logdir, exist_ok=True)
    with open(os.path.join(args.logdir, "result.json"), "w") as stream:
        json.dump(fields, stream, indent=2)
        stream.write("\n")
    print("RESULT " + " ".join(f"{key}={_shown(value)}"
                               for key, value in fields.items()),
          flush=True)
    return fields
