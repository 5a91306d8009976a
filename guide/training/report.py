"""What every run reports: progress lines while training, one RESULT line
and `result.json` at the end."""

import json
import math
import os
import time
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from guide.training.data import NUM_CLASSES
from guide.training.flags import EXIT_TRY_AGAIN, Failure
from guide.training.monitored import run_without_hooks

# Where the chief records its progress, in its --logdir (record_progress).
PROGRESS_FILE = "progress.jsonl"


class ProgressHook(tf.compat.v1.train.SessionRunHook):
    """Prints global step, loss and the whole job's examples/s (global steps
    × `examples_per_step`) every `every_n_steps` local steps; `steps_per_run`
    is how many a hooked `session.run` stands for (a communication window).
    Given a `summary_dir`, writes `loss`, `examples_per_sec` and the scalars
    of each of `summaries` to TensorBoard: objects with `fetches` and a
    `scalars(values)` that returns `{tag: value}` (a value may be a
    `Histogram`), e.g. `counters.CommitLog`.
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
        self._latest = None

    def after_create_session(self, session, coord):
        self._last = (session.run(self._fetches["global_step"]),
                      time.perf_counter())

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        before = self._local_step
        self._local_step += self._steps_per_run
        self._latest = run_values.results
        if before == 0 and self._summary_dir:
            # The chief's first step, in the progress file only: with many
            # workers its first line may come late or never (it trains few
            # of the steps), and the launcher times start-up to this record.
            record_progress(self._summary_dir, run_values.results["global_step"])
        if self._local_step // self._every_n_steps == before // self._every_n_steps:
            return
        step, loss = (run_values.results["global_step"],
                      run_values.results["loss"])
        rate = self._rate_since_last(step)
        print(f"global_step {step} loss {loss:.4f} examples/s {rate:.0f} "
              f"(local step {self._local_step})", flush=True)
        if self._summary_dir:
            record_progress(self._summary_dir, step)
            scalars = {"loss": loss, "examples_per_sec": rate}
            if self._summaries:
                values = run_context.session.run(
                    [source.fetches for source in self._summaries])
                for source, value in zip(self._summaries, values):
                    scalars.update(source.scalars(value))
            write_scalars(self._summary_dir, step, scalars)

    def _rate_since_last(self, step):
        """The job's examples/s since the last progress line (or the start),
        which this one becomes."""
        last_step, last_time = self._last
        now = time.perf_counter()
        self._last = (step, now)
        return (step - last_step) * self._examples_per_step / max(
            now - last_time, 1e-9)

    def end(self, session):
        """A chief that the other workers left fewer local steps than one
        progress line's writes its last loss and rate now, so that every
        run has both in TensorBoard."""
        if (self._summary_dir and self._latest
                and self._local_step < self._every_n_steps):
            step, loss = self._latest["global_step"], self._latest["loss"]
            write_scalars(self._summary_dir, step,
                          {"loss": loss, "examples_per_sec":
                           self._rate_since_last(step)})


def record_progress(logdir, step):
    """The chief's progress file (the `progress` of the scripts' launch
    blocks, launcher/contract.py): one line {"global_step", "time"} appended
    per progress line, time.monotonic() being the same clock in every
    process. The launcher counts the bytes on the wire between the first
    and the last."""
    with open(os.path.join(logdir, PROGRESS_FILE), "a") as stream:
        stream.write(json.dumps({"global_step": int(step),
                                 "time": round(time.monotonic(), 4)}) + "\n")


class Histogram(NamedTuple):
    """A histogram of the integers 0, 1, ... for TensorBoard's histograms
    dashboard: `counts[i]` of them were i, the last bucket also counting
    larger ones, of which `largest` is the largest."""

    counts: np.ndarray
    largest: int

    def proto(self):
        """The HistogramProto, through its last non-empty bucket: bucket i
        spans i ± 0.5 (TensorBoard takes the outer edges of the first and
        last non-empty ones from min and max)."""
        counts = np.asarray(self.counts, np.float64)
        seen = np.flatnonzero(counts)
        if not len(seen):
            return tf.compat.v1.HistogramProto()
        counts = counts[:seen[-1] + 1]
        values = np.arange(len(counts), dtype=np.float64)
        return tf.compat.v1.HistogramProto(
            min=seen[0] - 0.5, max=self.largest + 0.5, num=counts.sum(),
            sum=values @ counts, sum_squares=(values * values) @ counts,
            bucket_limit=(values + 0.5).tolist(), bucket=counts.tolist())


def _summary_value(tag, value):
    if isinstance(value, Histogram):
        return tf.compat.v1.Summary.Value(tag=tag, histo=value.proto())
    return tf.compat.v1.Summary.Value(tag=tag, simple_value=float(value))


# Marks a summary written eagerly as a scalar for TensorBoard's "scalars"
# dashboard (tf.summary.scalar would need TensorBoard at run time).
_SCALAR = tf.compat.v1.SummaryMetadata(
    plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))
_eager_writers = {}


def write_scalars(logdir, step, scalars):
    """Writes `{tag: value}` at global step `step` to TensorBoard's event file
    in `logdir`, and flushes it, so that no exit path loses it. A
    `Histogram` value goes to the histograms dashboard, the others to the
    scalars dashboard."""
    if not tf.executing_eagerly():
        writer = tf.compat.v1.summary.FileWriterCache.get(logdir)
        writer.add_summary(tf.compat.v1.Summary(value=[
            _summary_value(tag, value) for tag, value in scalars.items()]),
            int(step))
        writer.flush()
        return
    # An eager program (Parameter-Server-Strategy) cannot use a v1 FileWriter.
    if logdir not in _eager_writers:
        _eager_writers[logdir] = tf.summary.create_file_writer(logdir)
    writer = _eager_writers[logdir]
    with writer.as_default():
        for tag, value in scalars.items():
            if isinstance(value, Histogram):
                tf.summary.experimental.write_raw_pb(
                    tf.compat.v1.Summary(value=[_summary_value(tag, value)])
                    .SerializeToString(), step=int(step))
            else:
                tf.summary.write(tag, float(value), step=int(step),
                                 metadata=_SCALAR)
    writer.flush()


class AccuracyCurve:
    """Test accuracy every `every` global steps (0: never), as points of
    (seconds since the start, global step, examples seen, accuracy) in
    `<logdir>/accuracy_curve.json` and as `test_accuracy` (and `test_loss`,
    when measured) in TensorBoard."""

    def __init__(self, logdir, every, examples_per_step):
        self.every = every
        self._logdir = logdir
        self._path = os.path.join(logdir, "accuracy_curve.json")
        self._examples_per_step = examples_per_step
        self._points = []
        self._start = time.perf_counter()
        self._next_step = 0

    def restart_clock(self):
        self._start = time.perf_counter()

    def due(self, step):
        return bool(self.every) and step >= self._next_step

    def measure(self, step, evaluate):
        """Adds the point for global step `step`; `evaluate()` returns the
        test accuracy, or a (test loss, test accuracy) pair."""
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
        # As it goes, so that a run stopped early still shows its curve.
        self.write()

    def write(self):
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        with open(self._path, "w") as stream:
            json.dump(self._points, stream, indent=1)
            stream.write("\n")


class AccuracyCurveHook(tf.compat.v1.train.SessionRunHook):
    """An `AccuracyCurve` of `classifier` on `dataset`'s test set, measured as
    the session starts and then every `every` global steps, written after
    each."""

    def __init__(self, logdir, every, global_step, classifier, dataset, *,
                 examples_per_step):
        self._curve = AccuracyCurve(logdir, every, examples_per_step)
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


class ElasticDistance:
    """TensorBoard's `elastic_distance`, for `ProgressHook`: ‖θ − θ̃‖, from
    this worker's copy to the centre."""

    def __init__(self, local_variables, central_variables):
        self.fetches = tf.sqrt(tf.add_n([
            tf.reduce_sum(tf.square(local - central.read_value()))
            for local, central in zip(local_variables, central_variables)]))

    @staticmethod
    def scalars(distance):
        return {"elastic_distance": distance}


def save_local_copy(session, variables, logdir):
    """Writes this worker's own parameters, which checkpoints do not hold,
    to `<logdir>/local_copy.npz`."""
    values = run_without_hooks(session, variables)
    os.makedirs(logdir, exist_ok=True)
    np.savez(os.path.join(logdir, "local_copy.npz"),
             **{variable.op.name.split("/", 1)[1]: value
                for variable, value in zip(variables, values)})


def _shown(value):
    """A value as the RESULT line shows it: lists comma-joined, no spaces; a
    staleness summary (`counters.staleness_fields`) by its overall mean,
    p95 and max, e.g. `mean:6.93,p95:12,max:31`."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    if isinstance(value, dict) and "overall" in value:
        return ",".join(f"{name}:{value['overall'].get(name)}"
                        for name in ("mean", "p95", "max"))
    return value


# A model at most this many times as accurate as chance has diverged.
DIVERGED_ACCURACY = 1.5 / NUM_CLASSES


def diverged(test_loss, test_accuracy):
    """Whether a trained model has diverged: its test loss is not finite
    (NaN or infinite, as its parameters then often are), or its test
    accuracy, as result.json rounds it, is at most 1.5 × chance."""
    return (not math.isfinite(float(test_loss))
            or round(float(test_accuracy), 4) <= DIVERGED_ACCURACY)


def accuracy_on(accuracy_of, images, labels, chunk=10_000):
    """The accuracy over all of `images` and `labels`, `chunk` examples at a
    time (the whole training set at once would take gigabytes):
    `accuracy_of(images, labels)` is that of one chunk."""
    correct = 0.0
    for start in range(0, len(images), chunk):
        end = min(start + chunk, len(images))
        correct += float(accuracy_of(images[start:end], labels[start:end])) * (
            end - start)
    return correct / max(len(images), 1)


def eager_train_accuracy(mlp, dataset):
    """In an eager program: the accuracy of `mlp` (a `model.MLP`) on all of
    `dataset`'s training set."""
    return accuracy_on(
        lambda images, labels: np.mean(
            np.argmax(mlp.logits(images).numpy(), axis=1) == labels),
        dataset.train_images, dataset.train_labels)


class StepsLost(Failure):
    """The model to report is short of --train_steps after training ended
    (for instance, a ps restored an older checkpoint): a restarted chief
    trains those steps again."""

    exit_code = EXIT_TRY_AGAIN


def evaluate_and_write(session, logdir, settings, algorithm, classifier,
                       dataset, global_step, wall_s, train_back=True, **fields):
    """The chief's last act: evaluates `classifier` on `dataset`'s test set
    and on its whole training set, then `write_result`. If the model is
    short of --train_steps, a ps lost since training stopped at them took
    the steps after its last checkpoint with it: then raises StepsLost,
    reporting nothing, so that a restarted chief trains them again; or,
    with `train_back` False (a synchronous scheme, whose chief cannot train
    alone), reports the model with `steps_lost` and why."""
    test_loss, test_accuracy, step = run_without_hooks(
        session, [classifier.loss, classifier.accuracy, global_step],
        classifier.feed(dataset.test_images, dataset.test_labels))
    lost = settings["train_steps"] - int(step)
    if lost > 0:
        why = (f"the model is at global step {step}, {lost} steps short of "
               f"--train_steps {settings['train_steps']}, after training "
               f"ended (for instance, a parameter server restarted from an "
               f"older checkpoint)")
        if train_back:
            raise StepsLost(f"{why}; nothing is reported, and a restarted chief "
                            f"(--max_restarts) trains those steps again")
        print(f"{why}; the other workers have stopped, so it is reported as "
              f"it is", flush=True)
        fields.update(steps_lost=lost, steps_lost_why=why)
    train_accuracy = accuracy_on(
        lambda images, labels: run_without_hooks(
            session, classifier.accuracy, classifier.feed(images, labels)),
        dataset.train_images, dataset.train_labels)
    return write_result(logdir, settings, algorithm, step, test_loss,
                        test_accuracy, wall_s, train_accuracy=train_accuracy,
                        **fields)


def write_result(logdir, settings, algorithm, step, test_loss, test_accuracy,
                 wall_s, *, workers, ps, train_accuracy=None, start_step=0,
                 examples_per_step=None, **extra):
    """Prints the RESULT line, writes `<logdir>/result.json` and the final
    test figures to TensorBoard. `settings`: the run's flags.run_settings
    (dataset, train_steps, batch_size, ...), each recorded as it is but
    `validation`, recorded as `evaluated_on`; `train_accuracy`: the final
    model's on the whole training set it trained on; the examples counted
    are those of the steps after `start_step` (where a resumed run
    started), `examples_per_step` each (default: one minibatch). A model
    that diverged (`diverged`) is a result too, with `diverged` true."""
    write_scalars(logdir, step, {"test_accuracy": test_accuracy,
                                 "test_loss": test_loss})
    examples = (step - start_step) * (examples_per_step or settings["batch_size"])
    went_wrong = diverged(test_loss, test_accuracy)
    if went_wrong:
        print(f"the model diverged: test loss {float(test_loss):.4g}, test "
              f"accuracy {float(test_accuracy):.4f} (chance is "
              f"{1 / NUM_CLASSES:.2f}); a smaller --learning_rate may train it",
              flush=True)
    fields = {
        "algorithm": algorithm, "workers": workers, "ps": ps,
        "global_step": int(step),
        "test_accuracy": round(float(test_accuracy), 4),
        "test_loss": round(float(test_loss), 4),
        "wall_s": round(wall_s, 2), "examples": int(examples),
        "examples_per_s": round(examples / wall_s, 1),
        "train_accuracy": (None if train_accuracy is None
                           else round(float(train_accuracy), 4)),
        "diverged": went_wrong,
        **{name: value for name, value in settings.items() if name != "validation"},
        **({"evaluated_on": "validation"} if settings["validation"] else {}),
        # Where a resumed run started: its examples are those after it.
        **({"start_step": int(start_step)} if start_step else {}),
        **extra}
    return publish_result(logdir, fields)


def publish_result(logdir, fields):
    """Writes `fields` to `<logdir>/result.json` and prints them as the
    RESULT line; also for a result that another machine measured. A loss
    that is not finite is written as JSON's NaN or Infinity, which Python's
    json reads back."""
    os.makedirs(logdir, exist_ok=True)
    with open(os.path.join(logdir, "result.json"), "w") as stream:
        json.dump(fields, stream, indent=2)
        stream.write("\n")
    print("RESULT " + " ".join(f"{key}={_shown(value)}"
                               for key, value in fields.items()),
          flush=True)
    return fields
