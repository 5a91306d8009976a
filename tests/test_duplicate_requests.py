"""A request that reached a worker twice is recovered from as a lost one:
its CancelledError becomes an AbortedError, which MonitoredSession (and a
queue runner's coordinator) recovers from, whether the session ran the op
with `run` or through a callable, as queue runners do."""

import pytest

DUPLICATE = "The same RunGraph (Worker) request was received twice. step_id: 7"


@pytest.fixture
def tf_with_recovery(monkeypatch):
    import tensorflow as tf
    from tensorflow.python.client import session as session_module

    from guide.distributed import recovery

    # Undone after the test: the patched methods, then what raises.
    monkeypatch.setattr(session_module.BaseSession, "_call_tf_sessionrun",
                        session_module.BaseSession._call_tf_sessionrun)
    monkeypatch.setattr(session_module.BaseSession._Callable, "__call__",
                        session_module.BaseSession._Callable.__call__)
    recovery.recover_from_duplicate_requests()
    return tf, session_module


@pytest.mark.parametrize("message, raised", [
    (DUPLICATE, "AbortedError"),
    ("Cancelled by the session's close", "CancelledError")])
def test_a_duplicate_request_is_an_aborted_error(tf_with_recovery, monkeypatch,
                                                 message, raised):
    tf, session_module = tf_with_recovery

    def cancelled(*args, **kwargs):
        raise tf.errors.CancelledError(None, None, message)

    with tf.Graph().as_default():
        op = tf.no_op()
        with tf.compat.v1.Session() as session:
            # A queue runner's callable, and one that takes options.
            simple = session.make_callable(op)
            with_options = session.make_callable(op, accept_options=True)
            monkeypatch.setattr(session_module.tf_session,
                                "TF_SessionRun_wrapper", cancelled)
            monkeypatch.setattr(session_module.tf_session,
                                "TF_SessionRunCallable", cancelled)
            for run in (lambda: session.run(op), simple, with_options):
                with pytest.raises(tf.errors.OpError) as error:
                    run()
                assert type(error.value).__name__ == raised
                assert message in error.value.message
