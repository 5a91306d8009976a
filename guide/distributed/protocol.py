"""How the tasks of a cluster start and stop together, with no sleep and no poll.

TensorFlow's parameter servers never return from `server.join()`, and its
non-chief workers poll for the chief every 30 seconds. Three pairs of
blocking queue operations on the parameter servers replace both:
`announce_chief_ready` / `wait_for_chief` (the examples' workers wait
through `recovery.Resume`'s scaffold instead), `report_training_finished` /
`wait_for_workers_to_finish`, `signal_done` / `serve_until_workers_done`.
Every signal is a state, not a message used up: a queue that holds a token
once it is given, read by `peek`, so a task that starts late or again reads
the same state, and one that signals twice just adds a token.
"""

import contextlib

import tensorflow as tf

from guide.distributed.placement import session_config


def shared_queue(name, capacity, job="ps", index=0, dtypes=(tf.int32,)):
    """A FIFO queue of scalars of `dtypes` on task `job:index`, shared by
    name: every task that makes one with the same name reaches it."""
    with tf.compat.v1.device(f"/job:{job}/task:{index}"):
        return tf.queue.FIFOQueue(capacity, list(dtypes),
                                  shapes=[[]] * len(dtypes),
                                  shared_name=name, name=name)


def state(name, ps_index=0):
    """A signal that, once given, stays given: a queue on a ps holding one
    token per time it was given (a token per (re)start, never per step)."""
    return shared_queue(name, 1 << 16, "ps", ps_index)


def peek(queue):
    """Op: block until `queue` holds a token, and put it back, so that every
    reader, again after a restart too, sees the signal."""
    return queue.enqueue(queue.dequeue())


class PsLock:
    """A lock every worker shares: a mutex on ps 0. `around(build)` is an op
    that runs `build()`'s ops holding it, for one session run: a run that
    fails (its worker killed, a ps lost) frees it, and a restarted ps 0
    starts with it free, so nothing has to put it in place."""

    def __init__(self, name):
        self._device = "/job:ps/task:0"
        with tf.compat.v1.device(self._device):
            self._mutex = tf.raw_ops.MutexV2(shared_name=name, name=name)

    def around(self, build):
        with tf.compat.v1.device(self._device):
            lock = tf.raw_ops.MutexLock(mutex=self._mutex)
        with tf.control_dependencies([lock]):
            done = build()
        with tf.control_dependencies([done]), tf.compat.v1.device(self._device):
            return tf.raw_ops.ConsumeMutexLock(mutex_lock=lock)


def run_in_own_graph(server, task, build):
    """Runs the op `build()` makes, in a graph and session of its own."""
    with tf.Graph().as_default():
        op = build()
        config = session_config(task) if task else None
        with tf.compat.v1.Session(server.target, config=config) as session:
            session.run(op)


def chief_ready(task):
    """The chief's "model ready" signal: a state on every ps, so that a ps
    that restarts has lost it too, and the other workers then wait for the
    chief to put the model back on it."""
    return [state("chief_ready", index) for index in range(task.num_ps)]


def announce_chief_ready(server, task):
    """Chief: tell every other worker that the variables are initialised
    (`recovery.Resume` says it again to a restarted ps)."""
    if task.num_workers > 1:
        run_in_own_graph(server, task, lambda: tf.group(
            *[signal.enqueue(0) for signal in chief_ready(task)]))


def wait_for_chief(server, task):
    """Non-chief: block until the chief has initialised the variables."""
    print(f"worker {task.task_index} waits for the chief (worker 0) to "
          f"initialise the variables", flush=True)
    run_in_own_graph(server, task, lambda: tf.group(
        *[peek(signal) for signal in chief_ready(task)]))


def report_training_finished(server, task):
    """Non-chief: say this worker has finished training, and go on."""
    run_in_own_graph(server, task, lambda: state(
        f"training_finished_{task.task_index}").enqueue(task.task_index))


def wait_for_workers_to_finish(server, task):
    """Chief: block until every other worker has finished training, so that
    the chief's evaluation sees their last updates."""
    if task.num_workers > 1:
        run_in_own_graph(server, task, lambda: tf.group(*[
            peek(state(f"training_finished_{index}"))
            for index in range(1, task.num_workers)]))


def signal_done(server, task):
    """Worker: tell every ps that this worker will send no more requests (a
    ps may exit before its reply arrives: it then needs no telling)."""
    with contextlib.suppress(tf.errors.UnavailableError):
        run_in_own_graph(server, task, lambda: tf.group(*[
            state(f"done_{ps_index}_{task.task_index}", ps_index).enqueue(
                task.task_index) for ps_index in range(task.num_ps)]))


def serve_until_workers_done(server, task):
    """Ps: serve until every worker has said it is done, then return (unlike
    `server.join()`). Exit through `sys.exit`, not `os._exit`: the workers
    may still be closing their sessions on it."""
    def every_worker_done():
        # One state per worker: a worker that signals twice counts once.
        return tf.group(*[
            peek(state(f"done_{task.task_index}_{index}", task.task_index))
            for index in range(task.num_workers)])

    run_in_own_graph(server, task, every_worker_done)
