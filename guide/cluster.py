"""The start-up and shut-down handshakes every distributed example needs.

TensorFlow's parameter servers never return from `server.join()`, and its
non-chief workers poll for the chief every 30 seconds. These helpers replace
both with blocking queue operations on the parameter servers, so nothing here
sleeps or polls:

- `wait_for_chief` / `announce_chief_ready`: a non-chief worker blocks on a
  queue on ps 0 until the chief has initialised the variables, so that its
  session starts at once, without the 30-second poll.
- `training_finished`: the chief waits until every other worker has stopped
  training before it evaluates, so the result counts every worker's updates.
- `signal_done` / `serve_until_workers_done`: each ps owns a "done" queue per
  worker; every worker puts a token into its own when it has finished, and a
  ps exits once every worker's queue holds one.

Every one of these signals is a state, not a message used up by whoever
reads it: a queue that holds a token once the signal is given, read by
`_peek` (take the token and put it back, in one step). A worker that starts
late or again, or a chief that restarts, reads the same state; a worker
that signals twice just adds a token. The waits still block on a queue,
with no polling.

`resumable_scaffold` is the chief's side of recovery: it restores the last
checkpoint when the ps has lost the model, carries on from the ps when it
has not, says which, and refuses a logdir that holds another model.

`local_variables` is the other piece the local-copy schemes need: variables
that belong to one worker and that no other task sees.

The synchronous examples' pieces around `SyncReplicasOptimizer` are in
`guide/sync.py`.
"""

import contextlib
import gc
import os
import sys
import threading
import time

import tensorflow as tf

from guide import cli, logdirs


def session_config(task):
    """Session options for this task: see only the devices it talks to.

    Without device filters a worker's session waits for every other worker to
    be up, and a worker that has finished would stall the others.
    """
    if task.job_name == "ps":
        filters = [f"/job:ps/task:{task.task_index}"]
    else:
        filters = ["/job:ps", f"/job:worker/task:{task.task_index}"]
    return tf.compat.v1.ConfigProto(device_filters=filters)


@contextlib.contextmanager
def local_variables(worker_device):
    """Variables created inside are this worker's own, on its own device.

    They go into the LOCAL_VARIABLES collection instead of GLOBAL_VARIABLES,
    optimizer slots included, so the chief neither initialises nor
    checkpoints them; every worker initialises its own (MonitoredSession's
    local init op). A variable creator scope does this, instead of editing
    TensorFlow's collections after the fact.
    """
    def make_local(next_creator, **kwargs):
        kwargs["collections"] = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
        return next_creator(**kwargs)

    with tf.compat.v1.device(worker_device), \
            tf.compat.v1.variable_creator_scope(make_local):
        yield


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


def _state(name, ps_index=0):
    """A signal that, once given, stays given: a queue on a ps holding one
    token per time it was given (`_STATE_CAPACITY` leaves room for all)."""
    return shared_queue(name, _STATE_CAPACITY, "ps", ps_index)


def _peek(queue):
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
    model, before the others start: pass it to `resumable_scaffold` as its
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


def _run_in_own_graph(server, task, build):
    """Runs the op `build()` makes, in a graph and session of its own."""
    with tf.Graph().as_default():
        op = build()
        config = session_config(task) if task else None
        with tf.compat.v1.Session(server.target, config=config) as session:
            session.run(op)


def announce_chief_ready(server, task):
    """Chief: tell every other worker that the variables are initialised.

    Adds a token to the `chief_ready` state on ps 0; `resumable_scaffold`
    does the same for every later session the chief creates, so that a
    restarted ps hears it again.
    """
    if task.num_workers > 1:
        _run_in_own_graph(server, task,
                          lambda: _state("chief_ready").enqueue(0))


def wait_for_chief(server, task):
    """Non-chief: block until the chief has initialised the variables.

    Reads the state without using it up, so a worker that starts late or
    again passes at once.
    """
    print(f"worker {task.task_index} waits for the chief (worker 0) to "
          f"initialise the variables", flush=True)
    _run_in_own_graph(server, task, lambda: _peek(_state("chief_ready")))


def training_finished(server, task):
    """Every worker calls this when its training loop ends.

    A non-chief gives its own `training_finished_<i>` signal on ps 0 and
    goes on; the chief blocks until every other worker's signal is given, so
    it returns only once they have all stopped updating the model. The
    chief's evaluation then sees every worker's last update. One state per
    worker: a worker that finished twice (it died and came back) counts
    once, and a restarted chief finds the signals already given.
    """
    if task.num_workers == 1:
        return
    if task.is_chief:
        _run_in_own_graph(server, task, lambda: tf.group(*[
            _peek(_state(f"training_finished_{index}"))
            for index in range(1, task.num_workers)]))
    else:
        _run_in_own_graph(server, task, lambda: _state(
            f"training_finished_{task.task_index}").enqueue(task.task_index))


class _ResumingSaver(tf.compat.v1.train.Saver):
    """The chief's Saver: writes checkpoints as usual, but restores one only
    when the parameter servers have lost the model.

    MonitoredTrainingSession's chief restores the last checkpoint whenever
    there is one. When only the chief was restarted, the ps still holds a
    newer model than that checkpoint, which the other workers kept training:
    restoring it would throw their progress away.
    """

    def __init__(self, resume, **kwargs):
        super().__init__(**kwargs)
        self._resume = resume

    def restore(self, sess, save_path):
        if self._resume.model_on_ps(sess):
            return self._resume.carry_on(sess, "the parameter servers' "
                                               "current values")
        super().restore(sess, save_path)
        sess.run(self._resume.ps_init_op)
        return self._resume.carry_on(sess, f"checkpoint {save_path}")


class _Resume:
    """What `resumable_scaffold` builds for the chief: the ops its session
    creation needs, made before MonitoredTrainingSession finalises the
    graph, and the one line that says how the run resumed."""

    def __init__(self, task, args, global_step, ps_init_op):
        self._args = args
        # Distributed: state on the ps that is not a variable (a lock's
        # token), set up whenever the ps starts without the model.
        self.ps_init_op = ps_init_op if ps_init_op is not None else tf.no_op()
        self._global_step = global_step
        self._uninitialized = tf.compat.v1.report_uninitialized_variables(
            tf.compat.v1.global_variables())
        self._initialize = tf.compat.v1.global_variables_initializer()
        # Distributed: the signal the other workers wait for, given again
        # by every session after the first, for a restarted ps.
        self._announce = (_state("chief_ready").enqueue(0)
                          if task and task.num_workers > 1 else tf.no_op())
        self._sessions = 0

    def model_on_ps(self, session):
        """Whether every global variable is initialised: the ps kept it."""
        return not len(session.run(self._uninitialized))

    def carry_on(self, session, source):
        """Says where the model came from (unless it is a fresh start) and
        lets the other workers in."""
        step = int(session.run(self._global_step))
        self._sessions += 1
        if source:
            print(f"resuming at global step {step} from {source}", flush=True)
        if self._sessions == 1:
            # RESULT counts the steps this run made, not those it resumed.
            self._args.start_step = step
        else:
            # Distributed: a new session means a restarted ps, which lost
            # the chief's signal; the first is given by the example itself,
            # once its hooks are set up.
            session.run(self._announce)

    def initialize(self, scaffold, session):
        """Scaffold init_fn, when there is no checkpoint to restore."""
        if self.model_on_ps(session):
            self.carry_on(session, "the parameter servers' current values "
                                   "(no checkpoint yet)")
        else:
            session.run([self._initialize, self.ps_init_op])
            self.carry_on(session, None)


def resumable_scaffold(task, args, global_step, ps_init_op=None):
    """The Scaffold for MonitoredTrainingSession that makes restarts work.

    Chief: a restarted chief carries on from the parameter servers' values
    when they still hold the model (only the chief died), and from the last
    checkpoint when they lost it (a ps died), saying which in one line;
    every session after its first gives the `chief_ready` signal again
    (the example gives the first with `announce_chief_ready`).
    Non-chief: every session it creates (the first, and each after a ps
    restart) first waits for that signal, instead of TensorFlow's 30-second
    poll for the chief. Call it once the graph is built; `task` is None in a
    single process. `ps_init_op` sets up what else the ps holds (a
    `PsLock`): it runs once per ps that starts without the model, never
    again when a chief carries on from the ps.
    """
    if task is None or task.is_chief:
        logdirs.claim(args, os.path.basename(sys.argv[0]))
        resume = _Resume(task, args, global_step, ps_init_op)
        saver = _ResumingSaver(resume, sharded=True, allow_empty=True,
                               max_to_keep=3)
        return tf.compat.v1.train.Scaffold(
            init_op=tf.no_op(), init_fn=resume.initialize, saver=saver)
    # Distributed: check (and then initialise the local variables) only once
    # the chief has said the model is on the ps.
    with tf.control_dependencies([_peek(_state("chief_ready"))]):
        ready_for_local_init = tf.compat.v1.report_uninitialized_variables(
            tf.compat.v1.global_variables())
    return tf.compat.v1.train.Scaffold(
        ready_for_local_init_op=ready_for_local_init)


def signal_done(server, task):
    """Worker: tell every ps that this worker will send no more requests.

    A ps that is gone needs no telling: the last worker's token lets a ps
    exit, which it may do before its reply reaches the worker."""
    with contextlib.suppress(tf.errors.UnavailableError):
        _run_in_own_graph(server, task, lambda: tf.group(*[
            _state(f"done_{ps_index}_{task.task_index}", ps_index).enqueue(
                task.task_index) for ps_index in range(task.num_ps)]))


def serve_until_coordinator_done(server, job, index):
    """A worker or ps of a ParameterServerStrategy job: serve until the
    coordinator says the job is done (see `tell_servers_done`), instead of
    blocking forever in `server.join()`."""
    _run_in_own_graph(server, None, lambda: shared_queue(
        f"coordinator_done_{job}_{index}", 1, job, index).dequeue())
    cli.exit_with_teardown()  # the coordinator may still be closing sessions


# The threads of TensorFlow's ClusterCoordinator: one per worker, and its
# failure handler's.
COORDINATOR_THREADS = ("WorkerClosureProcessingLoop-", "WorkerPreemptionHandler")


def release_coordinator(timeout=30):
    """Coordinator, once its ClusterCoordinator is out of scope: collects it,
    which stops its threads, and waits (up to `timeout` seconds) for them to
    end. A thread still running holds the last step it ran, and so remote
    values on a worker; released after the workers were told to exit, each
    would be a call to a worker that has gone, whose error handling in the
    exiting coordinator can crash it (SIGSEGV)."""
    gc.collect()
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread.name.startswith(COORDINATOR_THREADS):
            thread.join(max(0.0, deadline - time.monotonic()))
    gc.collect()


def tell_servers_done(cluster):
    """Coordinator: let every worker and ps of `cluster` (a dict of host
    lists) return from `serve_until_coordinator_done`. Runs in a graph and
    session of its own, through the coordinator's own server, so it works
    from eager code, and closing the session needs no task that is exiting."""
    with tf.Graph().as_default():
        tokens = [shared_queue(f"coordinator_done_{job}_{index}", 1, job,
                               index).enqueue(0)
                  for job in ("worker", "ps")
                  for index in range(len(cluster.get(job, [])))]
        with tf.compat.v1.Session("grpc://" + cluster["chief"][0]) as session, \
                contextlib.suppress(tf.errors.UnavailableError):
            session.run(tokens)  # a told task may exit before it replies


def serve_until_workers_done(server, task):
    """Ps: serve variables until every worker has signalled that it is done.

    Returns instead of blocking forever like `server.join()`, so a parameter
    server started by hand exits on its own at the end of training.
    """
    def every_worker_done():
        # One state per worker: a worker that signals twice counts once.
        return tf.group(*[
            _peek(_state(f"done_{task.task_index}_{index}", task.task_index))
            for index in range(task.num_workers)])

    _run_in_own_graph(server, task, every_worker_done)
    cli.exit_with_teardown()  # the workers may still be closing sessions


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
