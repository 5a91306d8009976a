"""The evaluator task: tests each new checkpoint of the chief as it appears.

A TFJob's Evaluator replica (and `launch.sh --evaluator`) runs one more copy
of the example with TF_CONFIG task type "evaluator". It is no part of the
training cluster: it never connects to the ps or the workers, and training
never waits for it. It watches the run's logdir, evaluates every new
checkpoint the chief writes on the test set, prints one line per checkpoint,
writes `test_accuracy` and `test_loss` for TensorBoard under `<logdir>/eval/`,
and exits once it has evaluated the chief's final checkpoint: the one at
the global step of the `result.json` that the chief writes just before it.

Waiting for a checkpoint blocks on inotify (Linux): the chief's Saver
renames a new `checkpoint` state file into the logdir, which wakes the read.
TensorFlow's own `checkpoints_iterator` polls the folder every second
instead; it is used only where inotify is missing.
"""

import ctypes
import json
import os
import time

import tensorflow as tf

from guide.training import model

_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_TO = 0x00000080
_IN_CLOEXEC = 0o2000000


class _DirectoryWatch:
    """Blocks until a file in a folder is written or renamed into it."""

    def __init__(self, folder):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self._fd = libc.inotify_init1(_IN_CLOEXEC)
        if self._fd < 0 or libc.inotify_add_watch(
                self._fd, os.fsencode(folder),
                _IN_CLOSE_WRITE | _IN_MOVED_TO) < 0:
            raise OSError(ctypes.get_errno(), "inotify")

    def wait(self):
        os.read(self._fd, 65536)  # one or more events; which does not matter


def _wakeups(logdir):
    """Yields the latest checkpoint of `logdir` (or None) at once and then
    each time a file is written into it, blocking in between; and whether
    every write wakes it (False where inotify is missing and TensorFlow's
    polling iterator yields new checkpoints only)."""
    os.makedirs(logdir, exist_ok=True)
    try:
        watch = _DirectoryWatch(logdir)
    except (OSError, AttributeError):
        return tf.compat.v1.train.checkpoints_iterator(logdir), False

    def latest_on_each_write():
        while True:
            # The watch is set before this read, so a file that lands in
            # between still wakes the wait below.
            yield tf.train.latest_checkpoint(logdir)
            watch.wait()
    return latest_on_each_write(), True


def _final_step(logdir, since):
    """The global step in the chief's result.json, once this run's chief
    has written it (a file from before `since` is an earlier run's)."""
    path = os.path.join(logdir, "result.json")
    try:
        if os.stat(path).st_mtime < since:
            return None
        with open(path) as stream:
            return int(json.load(stream)["global_step"])
    except (OSError, ValueError, KeyError):
        return None  # not there, or half written: its last write wakes us


def run(logdir, dataset, train_steps):
    """The evaluator's whole life: evaluates each new checkpoint in `logdir`
    on `dataset`'s test set; returns once the final checkpoint is in. Where
    inotify is missing, the final one is the first at `train_steps` or past
    it."""
    since = time.time()
    graph = tf.Graph()
    with graph.as_default():
        # Its initial values do not matter: every checkpoint overwrites them.
        classifier = model.Classifier(summaries=False)
        # The global model's variables, by the names every example's chief
        # saves them under; a checkpoint holds more, which are left alone.
        saver = tf.compat.v1.train.Saver(
            {variable.op.name: variable for variable in classifier.mlp.variables})
        feed = classifier.feed(dataset.test_images, dataset.test_labels)
        writer = tf.compat.v1.summary.FileWriter(
            os.path.join(logdir, "eval"))
        with tf.compat.v1.Session() as session:
            wakeups, every_write = _wakeups(logdir)
            last, step = None, None
            for latest in wakeups:
                if latest and latest != last:
                    try:
                        saver.restore(session, latest)
                        step = int(tf.train.load_variable(latest, "global_step"))
                    except (tf.errors.NotFoundError, ValueError):
                        continue  # rotated away since it was listed: the next
                    last = latest
                    loss, accuracy = session.run(
                        [classifier.loss, classifier.accuracy], feed)
                    print(f"global_step {step} test_accuracy {accuracy:.4f} "
                          f"test_loss {loss:.4f}", flush=True)
                    writer.add_summary(tf.compat.v1.Summary(value=[
                        tf.compat.v1.Summary.Value(tag="test_accuracy",
                                                   simple_value=accuracy),
                        tf.compat.v1.Summary.Value(tag="test_loss",
                                                   simple_value=loss)]), step)
                    writer.flush()
                # The run's last global step can pass --train_steps (an
                # asynchronous worker finishes the step it is in), so the
                # final checkpoint is the one at result.json's step.
                final = (_final_step(logdir, since) if every_write
                         else train_steps)
                if step is not None and final is not None and step >= final:
                    break
    writer.close()
