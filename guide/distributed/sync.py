"""The pieces the synchronous examples add around `SyncReplicasOptimizer`."""

import tensorflow as tf

from guide.distributed.protocol import shared_queue


class SyncReplicasHook(tf.compat.v1.train.SessionRunHook):
    """`optimizer.make_session_run_hook(is_chief, num_tokens)`, but the
    chief's update thread, cancelled by the session's close, just stops
    (TensorFlow's own hook shows a traceback, after a 120 s grace period);
    it never closes the token queue; and `num_tokens` defaults to 0, since a
    token given out before the first update lets a worker compute a second
    gradient that is dropped as stale.

    TensorFlow's runner closes the token queue on the ps when its session
    stops. When MonitoredSession recreates the chief's session after an
    error it recovers from, that close could reach the ps before the old
    session closed: every worker's next token then raised OutOfRangeError,
    which MonitoredSession's exit swallows, and the job ended with no
    result. Workers waiting for a token at the end are released by
    `release_token_waiters` instead.
    """

    def __init__(self, optimizer, is_chief, num_tokens=0):
        self._optimizer = optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens

    def begin(self):
        optimizer = self._optimizer
        if self._is_chief:
            self._init_ops = [optimizer.chief_init_op,
                              optimizer.get_init_tokens_op(self._num_tokens)]
            updates = optimizer.get_chief_queue_runner()
            keep_queue_open = tf.no_op(name="keep_token_queue_open")
            self._update_runner = tf.compat.v1.train.QueueRunner(
                updates.queue, updates.enqueue_ops,
                close_op=keep_queue_open, cancel_op=keep_queue_open,
                queue_closed_exception_types=(tf.errors.OutOfRangeError,
                                              tf.errors.CancelledError))
        else:
            self._init_ops = [optimizer.local_step_init_op]
            self._update_runner = None

    def after_create_session(self, session, coord):
        not_ready = session.run(self._optimizer.ready_for_local_init_op)
        if len(not_ready):
            raise RuntimeError(f"variables not initialised: {not_ready}")
        for op in self._init_ops:
            session.run(op)
        if self._update_runner:
            self._update_runner.create_threads(session, coord=coord, daemon=True,
                                               start=True)


def release_token_waiters(optimizer, global_step, task):
    """Op every worker runs as it stops: one token per other worker into the
    token queue, so one blocked waiting for a token for a step that will
    never come finishes it and stops, instead of hanging."""
    tokens = optimizer.get_chief_queue_runner().queue
    return tokens.enqueue_many(
        tf.fill([max(task.num_workers - 1, 0)], global_step.read_value()))


def pending_gradient_count(*, accumulator_of):
    """Op: how many gradients no update has used yet, read from the
    accumulator of the trained variable `accumulator_of` (any one will do:
    each gets one gradient per commit)."""
    variable = accumulator_of
    with tf.compat.v1.device(variable.device):
        return tf.compat.v1.ConditionalAccumulator(
            variable.dtype.base_dtype, shape=variable.shape,
            shared_name=variable.name + "/grad_accum").num_accumulated()


def _barrier_inbox(index):
    """Worker `index`'s inbox of (sender, round) pairs on ps 0, with room
    for far more than any sender can send ahead, so an arrival never blocks."""
    return shared_queue(f"step_barrier_rounds_{index}", 1 << 16,
                        dtypes=(tf.int32, tf.int64))


def step_barrier(task, optimizer, last_step, commits):
    """Op: one commit per worker per round of SyncReplicasOptimizer
    `optimizer`, for rounds below `last_step`; run it after every commit
    (`commits` is the `counters.WorkerCounter` that each commit increments).

    Round L is the commit made with local step L, the global step L that
    its gradient belongs to. After committing to round L a worker:

    1. Takes optimizer tokens until it holds one of update L (worth more
       than L), and sets its local step to it. A token worth L or less was
       left by a worker killed between its commit and taking its token; it
       lets its taker's commit return before the update, so it is thrown
       away, and then the worker waits for its own token of update L.
    2. Puts (itself, L) into every other worker's inbox on ps 0.
    3. Takes (sender, round) pairs from its own inbox until every other
       worker has sent a round of L or more. Older rounds were sent by an
       earlier life of the worker, or for a round it skipped; a sender that
       sent twice counts once.

    So no worker takes two tokens of one update. Each step is a state
    reached, not a message used up, so a worker (or, after a ps restart,
    every worker) restarted at any point carries on: each new session first
    sends round G - 1 (G the global step then) and commits to round G; one
    that runs the barrier again before committing passes at once. Past
    `last_step` a worker whose last commit returned early commits once more,
    and passes. Left as SyncReplicasOptimizer has it: a worker killed after
    its commit and back before that round's update commits to it twice; the
    update then drops another worker's commit as stale, and no round hangs.
    """
    others = task.num_workers - 1
    if not others:
        return tf.no_op()
    me = task.task_index
    inboxes = [_barrier_inbox(index) for index in range(task.num_workers)]

    def arrive(round_, times=1):
        return tf.group(*[
            inbox.enqueue_many((tf.fill([times], me), tf.fill([times], round_)))
            for index, inbox in enumerate(inboxes) if index != me])

    # Every new session of this worker: send G - 1, commit next to round G.
    start = tf.compat.v1.train.get_global_step().read_value()
    with tf.control_dependencies([arrive(start - 1)]):
        start = tf.identity(start)
    count = commits.counts[me]
    never = start.dtype.max  # this worker's own entry in `seen`
    local = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
    with tf.compat.v1.device(f"/job:worker/task:{me}"):
        next_round = tf.compat.v1.Variable(
            start, trainable=False, name="step_barrier_round", collections=local)
        seen = tf.compat.v1.Variable(  # the highest round from each sender
            [never if index == me else -1 for index in range(task.num_workers)],
            dtype=start.dtype, trainable=False, name="step_barrier_seen",
            collections=local)
        counted = tf.compat.v1.Variable(  # this worker's commits, so far
            count, trainable=False, name="step_barrier_commits",
            collections=local)

    round_ = next_round.read_value()
    committed = count > counted.read_value()
    active = tf.logical_and(committed, round_ < last_step)
    tokens = optimizer.get_chief_queue_runner().queue
    local_step = optimizer._local_step  # the round of this worker's next commit
    # 1. A token of update L, the one the commit took or a later one.
    [token] = tf.while_loop(lambda token: tf.logical_and(active, token <= round_),
                            lambda token: [tokens.dequeue()],
                            [local_step.read_value()])
    caught_up = local_step.assign(token)
    # 2. Arrive at round L.
    with tf.control_dependencies([caught_up]):
        arrived = arrive(round_, tf.cast(committed, tf.int32))
    # 3. Wait for every other worker's round L or later.
    with tf.control_dependencies([arrived]):
        known = seen.read_value()
    senders = tf.range(task.num_workers)

    def take(known):
        sender, sent = inboxes[me].dequeue()
        return [tf.where(tf.equal(senders, sender), tf.maximum(known, sent), known)]

    [known] = tf.while_loop(
        lambda known: tf.logical_and(active, tf.reduce_min(known) < round_),
        take, [known])
    # Only then (`counted` was read for `committed`): the next round.
    with tf.control_dependencies([known]):
        return tf.group(
            seen.assign(known), counted.assign(count),
            next_round.assign(round_ + tf.cast(committed, round_.dtype)))
