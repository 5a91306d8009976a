"""How the tasks of a cluster start and stop together, with no sleep and no poll.

TensorFlow's parameter servers never return from `server.join()`, and its
non-chief workers poll for the chief every 30 seconds. These functions
replace both with blocking queue operations on the parameter servers, in
three pairs: `announce_chief_ready` / `wait_for_chief`,
`report_training_finished` / `wait_for_workers_to_finish`, `signal_done` /
`serve_until_workers_done`.

Every signal is a state, not a message used up by whoever reads it: a queue
that holds a token once the signal is given, read by `peek`. A worker that
starts late or again, or a chief that restarts, reads the same state; a
worker that signals twice just adds a token.
"""

import contextlib

import tensorflow as tf

from guide.distributed.placement import session_config


def shared_queue(name, capacity, job="ps", index=0, dtypes=(tf.int32,)):
    """A FIFO queue on task `job:index`, shared by name: every task that
    makes one with the same name reaches the same queue. Its elements are
    scalars of `dtypes` (int32 tokens by default)."""
    with tf.compat.v1.device(f"/job:{job}/task:{index}"):
        return tf.queue.FIFOQueue(capacity, list(dtypes),
                                  shapes=[[]] * len(dtypes),
                                  shared_name=name, name=name)


# Room in a state queue for every token that restarts and repeated signals
# could put there: a token is added per (re)start, never a token per step.
_STATE_CAPACITY = 1 << 16


def state(name, ps_index=0):
    """A signal that, once given, stays given: a queue on a ps holding one
    token per time it was given (`_STATE_CAPACITY` leaves room for all)."""
    return shared_queue(name, _STATE_CAPACITY, "ps", ps_index)


def peek(queue):
    """Op: block until `queue` holds a token, and leave it there.

    Takes a token and puts it back in one step, so any number of readers,
    one after another or again after a restart, all see the signal.
    """
    return queue.enqueue(queue.dequeue())


class PsLock:
    """A lock every worker shares: a queue on ps 0 that holds one token.

    `around(build)` returns an op that takes the token, runs the ops that
    `build()` makes, and puts the token back, so no two workers run them at
    once. The chief runs `initialize` whenever a ps 0 starts without the
    model, before the others start: pass it to `recovery.Resume` as its
    `ps_init_op`, so that a restarted chief does not add a second token.
    """

    def __init__(self, name):
        self._queue = shared_queue(name, 1)
        self.initialize = self._queue.enqueue(0)

    def around(self, build):
        token = self._queue.dequeue()
        with tf.control_dependencies([token]):
            done = build()
        with tf.control_dependencies([done]):
            return self._queue.enqueue(token)


def run_in_own_graph(server, task, build):
    """Runs the op `build()` makes, in a graph and session of its own."""
    with tf.Graph().as_default():
        op = build()
        config = session_config(task) if task else None
        with tf.compat.v1.Session(server.target, config=config) as session:
            session.run(op)


def announce_chief_ready(server, task):
    """Chief: tell every other worker that the variables are initialised.

    Adds a token to the `chief_ready` state on ps 0; `recovery.Resume` does
    the same for every later session the chief creates, so that a restarted
    ps hears it again.
    """
    if task.num_workers > 1:
        run_in_own_graph(server, task, lambda: state("chief_ready").enqueue(0))


def wait_for_chief(server, task):
    """Non-chief: block until the chief has initialised the variables.

    Reads the state without using it up, so a worker that starts late or
    again passes at once.
    """
    print(f"worker {task.task_index} waits for the chief (worker 0) to "
          f"initialise the variables", flush=True)
    run_in_own_graph(server, task, lambda: peek(state("chief_ready")))


def report_training_finished(server, task):
    """Non-chief: give this worker's `training_finished_<i>` signal on ps 0,
    which `wait_for_workers_to_finish` waits for, and go on. A worker that
    finished twice (it died and came back) counts once."""
    run_in_own_graph(server, task, lambda: state(
        f"training_finished_{task.task_index}").enqueue(task.task_index))


def wait_for_workers_to_finish(server, task):
    """Chief: block until every other worker has given its
    `report_training_finished` signal, so that they have all stopped
    updating the model and the chief's evaluation sees their last updates.
    A restarted chief finds the signals already given."""
    if task.num_workers > 1:
        run_in_own_graph(server, task, lambda: tf.group(*[
            peek(state(f"training_finished_{index}"))
            for index in range(1, task.num_workers)]))


def signal_done(server, task):
    """Worker: tell every ps that this worker will send no more requests.

    A ps that is gone needs no telling: the last worker's token lets a ps
    exit, which it may do before its reply reaches the worker."""
    with contextlib.suppress(tf.errors.UnavailableError):
        run_in_own_graph(server, task, lambda: tf.group(*[
            state(f"done_{ps_index}_{task.task_index}", ps_index).enqueue(
                task.task_index) for ps_index in range(task.num_ps)]))


def serve_until_workers_done(server, task):
    """Ps: serve variables until every worker has signalled that it is done.

    Returns instead of blocking forever like `server.join()`, so a parameter
    server started by hand exits on its own at the end of training. Let it
    exit through `sys.exit` (Python's full teardown), not `os._exit`: the
    workers may still be closing their sessions on it.
    """
    def every_worker_done():
        # One state per worker: a worker that signals twice counts once.
        return tf.group(*[
            peek(state(f"done_{task.task_index}_{index}", task.task_index))
            for index in range(task.num_workers)])

    run_in_own_graph(server, task, every_worker_done)
