"""Running ops in a MonitoredSession without its hooks seeing them."""


def run_without_hooks(session, fetches, feed_dict=None):
    """`session.run`, but a MonitoredSession's hooks do not see it: for the
    final evaluation, and for a window's local steps and exchanges but one,
    which must not pay for the hooks' read of the global step on the ps."""
    if hasattr(session, "run_step_fn"):  # a MonitoredSession
        def step(step_context):
            # The session MonitoredSession holds now: after recreating it,
            # MonitoredSession retries the step with the old one, which
            # fails again forever if closing it failed (a lost ps).
            current = getattr(session, "_tf_sess", None)
            raw_session = current() if current else step_context.session
            return raw_session.run(fetches, feed_dict)
        return session.run_step_fn(step)
    return session.run(fetches, feed_dict)
