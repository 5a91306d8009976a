"""Restarts that work: the chief's and the other workers' side of recovery."""

import logging
import time

import tensorflow as tf

from guide.distributed.protocol import chief_ready, peek
from guide.training import logdirs
from guide.training.flags import EXIT_TRY_AGAIN, Failure


class _ResumingSaver(tf.compat.v1.train.Saver):
    """The chief's Saver: restores a checkpoint only when the parameter
    servers have lost the model. When only the chief restarted, the ps holds
    a newer one, which the other workers kept training."""

    def __init__(self, chief_start, **kwargs):
        super().__init__(**kwargs)
        self._chief_start = chief_start

    def restore(self, sess, save_path):
        if self._chief_start.model_on_ps(sess):
            return self._chief_start.carry_on(sess, "the parameter servers' "
                                                    "current values")
        super().restore(sess, save_path)
        return self._chief_start.carry_on(sess, f"checkpoint {save_path}")


class SessionsRecreatedTooOften(Failure):
    """MonitoredSession retries forever: one error after another would keep
    a task recreating its session, at full speed, with nothing to show."""

    exit_code = EXIT_TRY_AGAIN


class _SayWhenSessionsAreRecreated(logging.Filter):
    """A filter for TensorFlow's logger that drops everything below ERROR
    (the v1 APIs' deprecation warnings) but MonitoredSession's word that it
    recreates a session after an error it recovers from (AbortedError,
    UnavailableError), which it gives at INFO; that one it prints as one
    line naming the error, so a recreated session is never silent. The
    `most`-th recreation within `seconds` raises SessionsRecreatedTooOften
    instead, from inside MonitoredSession's retry, which it ends."""

    def __init__(self, most=10, seconds=600):
        super().__init__()
        self._most, self._seconds = most, seconds
        self._times = []

    def filter(self, record):
        if record.levelno >= logging.ERROR:
            return True
        if record.getMessage().startswith("An error was raised"):
            error = record.args[-1] if record.args else None
            # The error's first line of its own: the session's run adds a
            # heading line before it, and gRPC may frame it in a rule of '='.
            lines = [line.strip() for line
                     in str(getattr(error, "message", error)).splitlines()
                     if any(char.isalnum() for char in line)
                     and line.strip() != "Graph execution error:"]
            said = f"{type(error).__name__}: {(lines or [''])[0][:300]}"
            now = time.monotonic()
            self._times = [t for t in self._times if now - t < self._seconds]
            self._times.append(now)
            if len(self._times) >= self._most:
                raise SessionsRecreatedTooOften(
                    f"the session was recreated {len(self._times)} times "
                    f"within {self._seconds / 60:g} minutes, the last after "
                    f"{said}; the task gives up rather than retry forever")
            print(f"session recreated after {said}", flush=True)
        return False


def say_when_sessions_are_recreated():
    """Makes TensorFlow's logger print a line each time MonitoredSession
    recreates this task's session, and nothing else below ERROR."""
    logger = tf.get_logger()
    if not any(isinstance(f, _SayWhenSessionsAreRecreated) for f in logger.filters):
        logger.addFilter(_SayWhenSessionsAreRecreated())
    logger.setLevel(logging.INFO)


def _duplicates_aborted(method):
    """`method`, which runs ops, but a duplicate request's CancelledError
    raised as an AbortedError."""
    def wrapped(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except tf.errors.CancelledError as error:
            if "request was received twice" not in (error.message or ""):
                raise
            raise tf.errors.AbortedError(error.node_def, error.op,
                                         error.message) from error

    wrapped.recovers_duplicates = True
    return wrapped


def recover_from_duplicate_requests():
    """Makes a request that reached a worker twice an AbortedError, which
    MonitoredSession (and, through its coordinator, a queue runner's thread)
    recovers from by recreating the session. gRPC retries a call that seems
    lost, which under load it may not be; the worker refuses the second
    copy as "The same RunGraph (Worker) request was received twice", which
    the client sees as a CancelledError. The first copy ran: the step is
    not lost, the session is. Both of a session's ways into the runtime are
    covered: that of `run` and of `make_callable`'s simple callables, which
    queue runners use, and that of its other callables."""
    from tensorflow.python.client import session as session_module

    base = session_module.BaseSession
    if getattr(base._call_tf_sessionrun, "recovers_duplicates", False):
        return
    base._call_tf_sessionrun = _duplicates_aborted(base._call_tf_sessionrun)
    base._Callable.__call__ = _duplicates_aborted(base._Callable.__call__)


def _say_and_recover_when_sessions_are_recreated():
    """What every task of a cluster does, chief or not: says in its log when
    MonitoredSession recreates its session, with the error, and recovers
    from a request that reached a worker twice as from a lost one."""
    say_when_sessions_are_recreated()
    recover_from_duplicate_requests()


def scaffold_waiting_for_chief(task):
    """The MonitoredTrainingSession `scaffold` of a worker other than the
    chief: every session it makes first waits for the chief's `chief_ready`
    signal on every ps, instead of TensorFlow's 30-second poll for the
    chief, and only then checks the model and initialises its local
    variables. A ps that restarted lost the signal, so the worker waits
    again until the chief has put the model back on it."""
    _say_and_recover_when_sessions_are_recreated()
    with tf.control_dependencies([peek(signal) for signal in chief_ready(task)]):
        ready_for_local_init = tf.compat.v1.report_uninitialized_variables(
            tf.compat.v1.global_variables())
    return tf.compat.v1.train.Scaffold(
        ready_for_local_init_op=ready_for_local_init)


class ChiefStart:
    """The chief's start-up: `scaffold`, the MonitoredTrainingSession
    scaffold whose first session initialises the model on the parameter
    servers, or restores it, and `start_step`, the global step this run's
    first session started from. Make it once the graph is built; `task` is
    None in a single process.

    Claims `logdir` for `script`. A restarted chief carries on from the
    parameter servers' values when they still hold the model, else from the
    last checkpoint, saying which; every session after its first gives the
    `chief_ready` signal again (on every ps: a restarted one lost it).
    """

    def __init__(self, task, global_step, logdir, script):
        self.start_step = 0
        _say_and_recover_when_sessions_are_recreated()
        logdirs.claim(logdir, script)
        self._global_step = global_step
        self._uninitialized = tf.compat.v1.report_uninitialized_variables(
            tf.compat.v1.global_variables())
        self._initialize = tf.compat.v1.global_variables_initializer()
        self._announce = tf.group(*[signal.enqueue(0) for signal in (
            chief_ready(task) if task and task.num_workers > 1 else [])])
        self._sessions = 0
        # The whole checkpoint on the chief's own disk: a sharded Saver would
        # write each ps's variables on that ps's (docs/multi-host.md).
        with tf.compat.v1.device(task and f"/job:{task.job_name}/task:"
                                          f"{task.task_index}/device:CPU:0"):
            saver = _ResumingSaver(self, sharded=False, allow_empty=True,
                                   max_to_keep=3)
        self.scaffold = tf.compat.v1.train.Scaffold(
            init_op=tf.no_op(), init_fn=self._initialize_fresh, saver=saver)

    def model_on_ps(self, session):
        """Whether every global variable is initialised: the ps kept it."""
        return not len(session.run(self._uninitialized))

    def carry_on(self, session, source):
        """Says where the model came from (unless it is a fresh start)."""
        step = int(session.run(self._global_step))
        self._sessions += 1
        if source:
            print(f"resuming at global step {step} from {source}", flush=True)
        if self._sessions == 1:
            # RESULT counts the steps this run made, not those it resumed.
            self.start_step = step
        else:  # a restarted ps, which lost the chief's signal
            session.run(self._announce)

    def _initialize_fresh(self, scaffold, session):
        """Scaffold init_fn, when there is no checkpoint to restore."""
        if self.model_on_ps(session):
            self.carry_on(session, "the parameter servers' current values "
                                   "(no checkpoint yet)")
        else:
            session.run(self._initialize)
            self.carry_on(session, None)
