"""Running ops in a MonitoredSession without its hooks seeing them."""


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
            # When the session was rebuilt during the call (a restarted ps),
            # TensorFlow hands the step the old, closed one; the next call
            # gets the new one.
            if "closed Session" not in str(error):
                raise
            return session.run_step_fn(step)
    return session.run(fetches, feed_dict)
