"""Running ops in a MonitoredSession without its hooks seeing them."""


def run_without_hooks(session, fetches, feed_dict=None):
    """`session.run`, but a MonitoredSession's hooks do not see it: for the
    final evaluation, and for a window's local steps and exchanges but one,
    which must not pay for the hooks' read of the global step on the ps."""
    if hasattr(session, "run_step_fn"):  # a MonitoredSession
        def step(step_context):
            return step_context.session.run(fetches, feed_dict)
        try:
            return session.run_step_fn(step)
        except RuntimeError as error:
            # When the session was rebuilt during the call (a restarted ps),
            # TensorFlow hands the step the old, closed one; the next call
            # gets the new one.
            if "closed Session" not in str(error):
                raise
            return session.run_step_fn(step)
    return session.run(fetches, feed_dict)
