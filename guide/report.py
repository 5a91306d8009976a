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
    `summary_dir`, it also writes that rate to TensorBoard. When the hooked
    `session.run` stands for several local steps (a whole communication
    window), say how many with `steps_per_run`.
    """

    def __init__(self, global_step, loss, every_n_steps, examples_per_step,
                 summary_dir=None, steps_per_run=1):
        self._fetches = {"global_step": global_step, "loss": loss}
        self._every_n_steps = every_n_steps
        self._examples_per_step = examples_per_step
        self._summary_dir = summary_dir
        self._steps_per_run = steps_per_run
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
            writer = tf.compat.v1.summary.FileWriterCache.get(self._summary_dir)
            writer.add_summary(tf.compat.v1.Summary(value=[
                tf.compat.v1.Summary.Value(tag="examples_per_sec",
                                           simple_value=rate)]), step)


class AccuracyCurve:
    """Test accuracy as training goes, for `--eval_every`: points of (seconds
    since the start, global step, examples seen, accuracy), written to
    `<logdir>/accuracy_curve.json`. `examples_per_step` is as in
    `evaluate_and_write`."""

    def __init__(self, args, examples_per_step=None):
        self.every = args.eval_every
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
        test accuracy, and the seconds it took are kept too (`eval_s`)."""
        started = time.perf_counter()
        accuracy = evaluate()
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
        self._accuracy = classifier.accuracy
        self._feed = classifier.feed(dataset.test_images, dataset.test_labels)

    def after_create_session(self, session, coord):
        if self._curve.every:
            self._curve.restart_clock()
            self._measure(session, session.run(self._global_step))

    def _measure(self, session, step):
        self._curve.measure(
            step, lambda: session.run(self._accuracy, self._feed))

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
    """Prints the RESULT line and writes result.json from measured values."""
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
        "seed": args.seed, **extra}
    os.makedirs(args.logdir, exist_ok=True)
    with open(os.path.join(args.logdir, "result.json"), "w") as stream:
        json.dump(fields, stream, indent=2)
        stream.write("\n")
    print("RESULT " + " ".join(f"{key}={_shown(value)}"
                               for key, value in fields.items()),
          flush=True)
    return fields
