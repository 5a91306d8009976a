"""How the tasks of a cluster start and stop together, with no sleep and no poll.

TensorFlow's parameter servers never return from `server.join()`, and its
non-chief workers poll for the chief every 30 seconds. Four pairs of
blocking queue operations on the parameter servers replace both:
`announce_chief_ready` / `wait_for_chief` (the examples' workers wait
through `recovery.scaffold_waiting_for_chief` instead),
`report_training_finished` / `wait_for_workers_to_finish`, the chief's
"finished" / the other workers' `wait_for_chief_to_finish`, `signal_done` /
`serve_until_workers_done`.
Every signal is a state, not a message used up: a queue that holds a token
once it is given, read by `peek`, so a task that starts late or again reads
the same state, and one that signals twice just adds a token.

The waits at the end of a run, for peers that have nothing left to do but
signal, each end within PEER_TIMEOUT_S; one that ends without its signal says
so in one line. Those at the start, and a ps's wait for the chief, last as
long as the peer takes: a task started by hand may come much later, and a
run as long as it trains.
"""

import contextlib

import tensorflow as tf

from guide.distributed.placement import session_config
from guide.training.flags import EXIT_TRY_AGAIN, Failure

# The longest a task waits at the end of a run for a peer's signal, counted
# from the last one it received: the signals take milliseconds, and a task
# the launcher restarts is back in seconds.
PEER_TIMEOUT_S = 20
# The exit code of a task that gave up on a peer: a restart may succeed.
EXIT_PEER_LOST = EXIT_TRY_AGAIN
# What a run raises when a ps it uses is lost (MonitoredSession recovers
# from the same two).
PS_LOST = (tf.errors.UnavailableError, tf.errors.AbortedError)


class PeerLost(Failure):
    """A wait that ended without the signal it waited for."""

    exit_code = EXIT_PEER_LOST


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


def run_in_own_graph(server, task, build, timeout=None):
    """Runs the op `build()` makes, in a graph and session of its own; with
    a `timeout` (s), for that long at most. Returns whether it ran."""
    with tf.Graph().as_default():
        op = build()
        config = session_config(task) if task else None
        options = tf.compat.v1.RunOptions(
            timeout_in_ms=round(timeout * 1000)) if timeout else None
        with tf.compat.v1.Session(server.target, config=config) as session:
            try:
                session.run(op, options=options)
            except tf.errors.DeadlineExceededError:
                return False
    return True


def chief_ready(task):
    """The chief's "model ready" signal: a state on every ps, so that a ps
    that restarts has lost it too, and the other workers then wait for the
    chief to put the model back on it."""
    return [state("chief_ready", index) for index in range(task.num_ps)]


def announce_chief_ready(server, task):
    """Chief: tell every other worker that the variables are initialised
    (`recovery.ChiefStart` says it again to a restarted ps)."""
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


# How many failed calls in a row the chief's final wait takes from a ps 0
# that kept its state (calls that failed under load) before it gives up.
FAILED_CALLS_TAKEN = 10


def ps_0_restarted(server, task):
    """Whether ps 0 lost its state since the chief said the model was ready:
    a restarted ps 0 holds no "chief_ready" (or does not answer); one whose
    call only failed, as a call can under load, still does."""
    try:
        return not run_in_own_graph(server, task,
                                    lambda: peek(chief_ready(task)[0]),
                                    PEER_TIMEOUT_S)
    except PS_LOST:
        return True


def wait_for_workers_to_finish(server, task, timeout=PEER_TIMEOUT_S):
    """Chief: block until every other worker has finished training, so that
    the chief's evaluation sees their last updates. They all stop once the
    global step reaches the end: raises PeerLost if one has not said so
    within `timeout` s of the one before, or if ps 0 is lost meanwhile (a
    restarted chief resumes from the last checkpoint). A call that fails
    while ps 0 keeps its state is made again."""
    for index in range(1, task.num_workers):
        for failed in range(FAILED_CALLS_TAKEN + 1):
            try:
                finished = run_in_own_graph(server, task, lambda index=index: peek(
                    state(f"training_finished_{index}")), timeout)
                break
            except PS_LOST as error:
                if ps_0_restarted(server, task):
                    raise PeerLost(
                        f"ps 0 was lost while the chief waited for worker "
                        f"{index} to finish training; restarted, the chief "
                        f"resumes from the last checkpoint") from None
                if failed == FAILED_CALLS_TAKEN:
                    raise PeerLost(
                        f"the chief's wait for worker {index} failed "
                        f"{failed + 1} times in a row ({type(error).__name__}) "
                        f"while ps 0 answered; restarted, the chief resumes "
                        f"from the parameter servers' values") from None
                print(f"the chief's wait for worker {index} failed "
                      f"({type(error).__name__}), but ps 0 kept its state: it "
                      f"waits again", flush=True)
        if not finished:
            raise PeerLost(f"worker {index} did not say it had finished "
                           f"training within {timeout:g} s of the chief; the "
                           f"chief gives up rather than wait for it forever")


def wait_for_chief_to_finish(server, task, timeout=PEER_TIMEOUT_S):
    """Non-chief, once it has finished training: stay until the chief has
    finished (evaluated, written its result and last checkpoint), to say
    again that it finished training if ps 0 restarts meanwhile, which loses
    that signal. After `timeout` s with no word from the chief (counted
    again from each ps 0 lost), it goes: its signal is there to be read."""
    me = task.task_index
    print(f"worker {me} has finished training; it waits for the chief "
          f"(worker 0) to finish", flush=True)
    while True:
        try:
            if not run_in_own_graph(server, task, lambda: peek(
                    state("chief_finished")), timeout):
                print(f"worker {me}: no word from the chief (worker 0) within "
                      f"{timeout:g} s; its \"training finished\" is on ps 0 "
                      f"for the chief to read, so it goes", flush=True)
            return
        except PS_LOST:
            print(f"worker {me}: ps 0 was lost, and with it this worker's "
                  f"\"training finished\": it says it again", flush=True)
            with contextlib.suppress(*PS_LOST):  # lost again: the next loop
                report_training_finished(server, task)


def signal_done(server, task, timeout=PEER_TIMEOUT_S):
    """Worker: tell every ps that this worker will send no more requests (a
    ps may exit before its reply arrives: it then needs no telling). The
    chief first says it has finished; the others first wait for that
    (`wait_for_chief_to_finish`)."""
    if task.is_chief and task.num_workers > 1:
        with contextlib.suppress(*PS_LOST):
            run_in_own_graph(server, task,
                             lambda: state("chief_finished").enqueue(0))
    elif not task.is_chief:
        wait_for_chief_to_finish(server, task, timeout)
    with contextlib.suppress(tf.errors.UnavailableError):
        run_in_own_graph(server, task, lambda: tf.group(*[
            state(f"done_{ps_index}_{task.task_index}", ps_index).enqueue(
                task.task_index) for ps_index in range(task.num_ps)]))


def serve_until_workers_done(server, task, timeout=PEER_TIMEOUT_S):
    """Ps: serve until every worker has said it is done, then return (unlike
    `server.join()`): the chief first, however long training takes, then
    each other worker within `timeout` s of the one before, since once the
    chief is done they have nothing left but to say so. Exit through
    `sys.exit`, not `os._exit`: the workers may still be closing their
    sessions on it."""
    ps = task.task_index
    # One state per worker: a worker that signals twice counts once.
    run_in_own_graph(server, task, lambda: peek(state(f"done_{ps}_0", ps)))
    for index in range(1, task.num_workers):
        if not run_in_own_graph(server, task, lambda index=index: peek(
                state(f"done_{ps}_{index}", ps)), timeout):
            print(f"ps {ps}: worker {index} did not say it was done within "
                  f"{timeout:g} s of the chief; the ps exits without it",
                  flush=True)
            return
