"""The evaluator task: tests each new checkpoint of the chief as it appears.

A TFJob's Evaluator replica (and `launch.py --evaluator`) runs one more copy
of the example with TF_CONFIG task type "evaluator". It is no part of the
training cluster: it never connects to the ps or the workers, and training
never waits for it. It watches the run's `--logdir`, evaluates every new
checkpoint the chief writes on the test set, prints one line per checkpoint,
writes `test_accuracy` and `test_loss` for TensorBoard under `<logdir>/eval/`,
and exits once it has evaluated a checkpoint at `--train_steps` or beyond
(the chief's final one).

Waiting for a checkpoint blocks on inotify (Linux): the chief's Saver
renames a new `checkpoint` state file into the logdir, which wakes the read.
TensorFlow's own `checkpoints_iterator` polls the folder every second
instead; it is used only where inotify is missing.
"""

import ctypes
import os

import tensorflow as tf

from guide import data, model

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


def _new_checkpoints(logdir):
    """Yields each new latest checkpoint of `logdir`, blocking in between."""
    os.makedirs(logdir, exist_ok=True)
    try:
        watch = _DirectoryWatch(logdir)
    except (OSError, AttributeError):  # no inotify: TensorFlow's polling
        yield from tf.compat.v1.train.checkpoints_iterator(logdir)
        return
    last = None
    while True:
        # The watch is set before this check, so a checkpoint that lands in
        # between still wakes the wait below.
        latest = tf.train.latest_checkpoint(logdir)
        if latest and latest != last:
            last = latest
            yield latest
        else:
            watch.wait()


def run(args):
    """The evaluator's whole life; returns once the final checkpoint is in."""
    dataset = data.load(args)
    graph = tf.Graph()
    with graph.as_default():
        classifier = model.Classifier(args.seed, summaries=False)
        # The global model's variables, by the names every example's chief
        # saves them under; a checkpoint holds more, which are left alone.
        saver = tf.compat.v1.train.Saver(
            {variable.op.name: variable for variable in classifier.mlp.variables})
        feed = classifier.feed(dataset.test_images, dataset.test_labels)
        writer = tf.compat.v1.summary.FileWriter(
            os.path.join(args.logdir, "eval"))
        with tf.compat.v1.Session() as session:
            for path in _new_checkpoints(args.logdir):
                try:
                    saver.restore(session, path)
                    step = int(tf.train.load_variable(path, "global_step"))
                except (tf.errors.NotFoundError, ValueError):
                    continue  # rotated away since it was listed: take the next
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
                if step >= args.train_steps:
                    break
    writer.close()
