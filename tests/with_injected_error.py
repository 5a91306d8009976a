"""Runs a script with one error injected into its chief's training session,
where a remote call that failed under load raises it: the first
`session.run` after the chief's AT_RUN-th run with hooks (or, with AT_RUN
"wait", the first in its wait for the other workers to finish) raises
tf.errors.ERROR from inside TensorFlow's client, as if the runtime had
returned it. ERROR is AbortedError or UnavailableError (which
MonitoredSession recovers from by recreating the session), or
DuplicateRequest: the CancelledError a worker returns when gRPC retried a
RunGraph call under load and the retry arrived as a second copy. ERROR
ending in "+" is raised by every run from then on, not by one; ending in
"!", by every later run of the session that raised it, whose close fails
too: a session whose ps was lost mid-call.

With DELAY_CLOSE set, every session of the task closes that many seconds
late, so that every thread a session's stop wakes (the synchronous
examples' update thread among them) reaches the ps before the close: the
order that load produces now and then, here every time.

    python with_injected_error.py ERROR AT_RUN DELAY_CLOSE SCRIPT [ARG...]

Runs the script in this process, so that a task the fork server forked
keeps the TensorFlow it has loaded.
"""

import os
import runpy
import sys
import time

# The repository, for `guide` (a new Python starts with this folder alone).
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorflow as tf  # noqa: E402
from tensorflow.python.client import session as session_module  # noqa: E402

# What a worker answers to a second copy of one RunGraph request; the
# client sees it as a CancelledError.
DUPLICATE_REQUEST = ("The same RunGraph (Worker) request was received twice. "
                     "step_id: 1 (injected by with_injected_error.py)")


def error_to_raise(name):
    if name == "DuplicateRequest":
        return tf.errors.CancelledError(None, None, DUPLICATE_REQUEST)
    return getattr(tf.errors, name)(None, None,
                                    "injected by with_injected_error.py")


class ArmAtRun(tf.compat.v1.train.SessionRunHook):
    """Arms the injection after the chief's `at_run`-th run with hooks (a
    count of its own runs, not the global step, which the other workers
    may carry to the end before the chief has trained at all)."""

    def __init__(self, at_run, armed):
        self._runs_left = at_run
        self._armed = armed

    def after_run(self, run_context, run_values):
        self._runs_left -= 1
        if self._runs_left == 0:
            self._armed.add("armed")


def main():
    error_name, at_run, delay_close, script, *args = sys.argv[1:]
    armed = set()
    make_session = tf.compat.v1.train.MonitoredTrainingSession

    def with_the_hook(*positional, is_chief=True, hooks=None, **keywords):
        if is_chief:
            hooks = [*(hooks or []), ArmAtRun(int(at_run), armed)]
        return make_session(*positional, is_chief=is_chief, hooks=hooks,
                            **keywords)

    if at_run == "wait":
        from guide.distributed import protocol

        wait = protocol.wait_for_workers_to_finish

        def armed_wait(*positional, **keywords):
            armed.add("armed")
            return wait(*positional, **keywords)

        protocol.wait_for_workers_to_finish = armed_wait
    else:
        tf.compat.v1.train.MonitoredTrainingSession = with_the_hook
    call = session_module.BaseSession._call_tf_sessionrun

    forever, broken_for_good = error_name.endswith("+"), error_name.endswith("!")
    error_name = error_name.rstrip("+!")
    # Marked on the session itself: an id could be reused by a new one.
    def run_or_fail(session, *positional):
        if getattr(session, "_injected_broken", False):
            raise error_to_raise(error_name)
        if "armed" in armed:
            if not forever:
                armed.clear()
            if broken_for_good:
                session._injected_broken = True
            print(f"injecting {error_name}", flush=True)
            raise error_to_raise(error_name)
        return call(session, *positional)

    close_for_real = session_module.BaseSession.close

    def close_or_fail(session):
        if getattr(session, "_injected_broken", False) and not getattr(
                session, "_injected_close_tried", False):
            session._injected_close_tried = True  # it stays open, and broken
            raise tf.errors.UnavailableError(None, None, "injected: the ps "
                                             "is gone, so is the close")
        close_for_real(session)

    session_module.BaseSession.close = close_or_fail

    session_module.BaseSession._call_tf_sessionrun = run_or_fail
    if float(delay_close):
        close_now = session_module.Session.close

        def close_late(session):
            time.sleep(float(delay_close))
            close_now(session)

        session_module.Session.close = close_late
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
