"""The evaluator task: tests each new checkpoint of the chief as it appears.

A TFJob's Evaluator replica (and `launch.sh --evaluator`) runs one more copy
of the example with TF_CONFIG task type "evaluator". No task connects to it
or waits for it. It prints one line per checkpoint it tests, and writes
`test_accuracy` and `test_loss` under `<logdir>/eval/` for TensorBoard.
When checkpoints land faster than it tests them, it tests the newest and
names those it skipped in a `not tested:` line. It waits on inotify
(Linux, through the inotify_simple package) for the chief's Saver to rename
a new `checkpoint` file into the logdir; TensorFlow's
`checkpoints_iterator`, which polls every second, is used only where
inotify or the package is missing.
"""

import contextlib
import json
import os

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from guide.training import model, report

# Not TensorFlow's checkpoints_iterator, left for where inotify is missing:
# it polls once a second, so on a run that saves several checkpoints a second
# it tested under half of them, and ended up to a second after the chief.
# inotify wakes within a millisecond of each write and names each file;
# inotify_simple is one small module over it (watchdog would add threads and
# a package 14 times larger for the same events).
try:
    import inotify_simple
except ImportError:  # not installed (not in the Kubernetes image), or Windows
    inotify_simple = None

# Where an object-based checkpoint (tf.train.Checkpoint) keeps its object
# graph, whose names a tf.compat.v1 Saver restores the variables by.
OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


def _watch(folder):
    """An inotify watch on the files written or renamed into `folder`, or
    None where there is none (no package, no inotify, no watch left)."""
    try:
        watch = inotify_simple.INotify()
    except (AttributeError, OSError):
        return None
    try:
        watch.add_watch(folder, inotify_simple.flags.CLOSE_WRITE
                        | inotify_simple.flags.MOVED_TO)
    except OSError:
        watch.close()
        return None
    return watch


class _Landings:
    """`logdir`'s latest checkpoint (or None), now and after each write into
    it; also the names of the checkpoints that land there, in order, so that
    the evaluator can say which it never tested (a newer one was there by
    the time it was free)."""

    every_write = True  # the chief's result.json wakes it too

    def __init__(self, logdir, watch):
        self._logdir, self._watch = logdir, watch
        self._landed, self._tested = [], set()

    def __iter__(self):
        while True:
            # The watch is set before this listing, so a file that lands in
            # between still wakes the read below.
            yield tf.train.latest_checkpoint(self._logdir)
            self._note(timeout=None)

    def untested_before(self, checkpoint):
        """Marks `checkpoint` (the latest listed) tested; returns the names
        of those that landed before it untested, each once. It is listed
        only after it landed, so its landing is read by the end of this call
        (unless it landed before the watch: then none is named before it)."""
        self._tested.add(os.path.basename(checkpoint))
        self._note(timeout=0)
        last = max((index for index, name in enumerate(self._landed)
                    if name in self._tested), default=-1)
        untested = [name for name in self._landed[:last]
                    if name not in self._tested]
        del self._landed[:last + 1]
        return untested

    def close(self):
        self._watch.close()

    def _note(self, timeout):
        # A checkpoint has landed once its index file has, after its data.
        self._landed += [event.name.removesuffix(".index")
                         for event in self._watch.read(timeout=timeout)
                         if event.name.endswith(".index")]


class _Polls:
    """Where inotify is missing: TensorFlow's iterator, which polls every
    second and yields new checkpoints only, so neither result.json nor the
    names of checkpoints it never listed reach the evaluator."""

    every_write = False

    def __init__(self, logdir):
        self._logdir = logdir

    def __iter__(self):
        return tf.compat.v1.train.checkpoints_iterator(self._logdir)

    def untested_before(self, checkpoint):
        return []

    def close(self):
        pass


def _checkpoints(logdir):
    os.makedirs(logdir, exist_ok=True)
    watch = _watch(logdir)
    return _Landings(logdir, watch) if watch else _Polls(logdir)


def _say_untested(names):
    if names:
        print(f"not tested: {', '.join(names)} (a newer checkpoint was there "
              f"by the time the evaluator was free)", flush=True)


def _final_step(logdir, train_steps):
    """The global step in the chief's result.json, once this run's chief
    has written it: a run ends at --train_steps or past it, so a file with
    fewer is an earlier, shorter run's in the same logdir."""
    path = os.path.join(logdir, "result.json")
    try:
        with open(path) as stream:
            step = int(json.load(stream)["global_step"])
    except (OSError, ValueError, KeyError):
        return None  # not there, or half written: its last write wakes us
    return step if step >= train_steps else None


def read_variables(checkpoint, names):
    """{name: value} of the variables `names` in `checkpoint`, saved by name
    (a tf.compat.v1 Saver) or as an object (tf.train.Checkpoint, whose keys
    are object paths: each variable is found by name in its object graph)."""
    reader = tf.train.load_checkpoint(checkpoint)
    keys = {name: name for name in names}
    if not all(reader.has_tensor(name) for name in names):
        keys = object_keys(reader)
    return {name: reader.get_tensor(keys[name]) for name in names}


def global_step_of(checkpoint):
    """The global step `checkpoint` holds, however it was saved."""
    return int(read_variables(checkpoint, ["global_step"])["global_step"])


def object_keys(reader):
    """{variable name: its key} in an object-based checkpoint's `reader`."""
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH))
    return {attribute.full_name: attribute.checkpoint_key
            for node in graph.nodes for attribute in node.attributes}


def run(logdir, dataset, train_steps, hidden_layers=model.HIDDEN_LAYERS):
    """Evaluates each new checkpoint in `logdir` on `dataset`'s test set,
    with the model of these `hidden_layers` that the chief trains; returns
    after the final one, at the global step of the chief's result.json
    (without inotify, the first at `train_steps` or past it)."""
    graph = tf.Graph()
    with graph.as_default():
        # Its initial values do not matter: every checkpoint overwrites them.
        classifier = model.Classifier(summaries=False, hidden_layers=hidden_layers)
        # The global model's variables, by the names every example's chief
        # saves them under; a checkpoint holds more, which are left alone.
        saver = tf.compat.v1.train.Saver(
            {variable.op.name: variable for variable in classifier.mlp.variables})
        feed = classifier.feed(dataset.test_images, dataset.test_labels)
        with tf.compat.v1.Session() as session, \
                contextlib.closing(_checkpoints(logdir)) as checkpoints:
            last, step = None, None
            for latest in checkpoints:
                if latest and latest != last:
                    try:
                        saver.restore(session, latest)
                        step = global_step_of(latest)
                    except (tf.errors.NotFoundError, ValueError, KeyError):
                        continue  # rotated away since it was listed: the next
                    last = latest
                    _say_untested(checkpoints.untested_before(latest))
                    loss, accuracy = session.run(
                        [classifier.loss, classifier.accuracy], feed)
                    print(f"global_step {step} test_accuracy {accuracy:.4f} "
                          f"test_loss {loss:.4f}", flush=True)
                    report.write_scalars(
                        os.path.join(logdir, "eval"), step,
                        {"test_accuracy": accuracy, "test_loss": loss})
                # Asynchronous workers can carry the last step past
                # --train_steps: the final one is result.json's step.
                final = (_final_step(logdir, train_steps)
                         if checkpoints.every_write else train_steps)
                if step is not None and final is not None and step >= final:
                    break
