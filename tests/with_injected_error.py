"""Runs a script with one error injected into its chief's training session,
as a remote call failing under load would raise it: once the global step
reaches AT_STEP, the chief's next hooked `session.run` raises
tf.errors.ERROR (AbortedError or UnavailableError, the two that
MonitoredSession recovers from by recreating the session).

With DELAY_CLOSE set, the chief's old session closes that many seconds
late, so that every thread the session's stop wakes (the synchronous
examples' update thread among them) reaches the ps before the close: the
order that load produces now and then, here every time.

    python with_injected_error.py ERROR AT_STEP DELAY_CLOSE SCRIPT [ARG...]

Runs the script in this process, so that a task the fork server forked
keeps the TensorFlow it has loaded.
"""

import os
import runpy
import sys
import time

import tensorflow as tf
from tensorflow.python.client import session as session_module


class InjectOnce(tf.compat.v1.train.SessionRunHook):
    """Raises `error` once, after the first run that saw `at_step`."""

    def __init__(self, error, at_step):
        self._error = error
        self._at_step = at_step
        self._done = False

    def begin(self):
        self._global_step = tf.compat.v1.train.get_global_step()

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        if not self._done and run_values.results >= self._at_step:
            self._done = True
            print(f"injecting {self._error.__name__} at global step "
                  f"{run_values.results}", flush=True)
            raise self._error(None, None, "injected by with_injected_error.py")


def main():
    error_name, at_step, delay_close, script, *args = sys.argv[1:]
    hook = InjectOnce(getattr(tf.errors, error_name), int(at_step))
    make_session = tf.compat.v1.train.MonitoredTrainingSession

    def with_the_hook(*positional, is_chief=True, hooks=None, **keywords):
        if is_chief:
            hooks = [*(hooks or []), hook]
        return make_session(*positional, is_chief=is_chief, hooks=hooks,
                            **keywords)

    tf.compat.v1.train.MonitoredTrainingSession = with_the_hook
    if float(delay_close):
        close = session_module.Session.close

        def close_late(session):
            time.sleep(float(delay_close))
            close(session)

        session_module.Session.close = close_late
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
