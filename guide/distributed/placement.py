"""Which devices a task talks to, and where a worker's own variables live."""

import contextlib

import tensorflow as tf


def session_config(task):
    """Session options: see only the devices this task talks to, so that a
    worker neither waits for every other to be up nor stalls them when done."""
    if task.job_name == "ps":
        filters = [f"/job:ps/task:{task.task_index}"]
    else:
        filters = ["/job:ps", f"/job:worker/task:{task.task_index}"]
    return tf.compat.v1.ConfigProto(device_filters=filters)


@contextlib.contextmanager
def local_variables(worker_device):
    """Variables created inside, optimizer slots included, are this worker's
    own, on its device and in LOCAL_VARIABLES: the chief neither initialises
    nor checkpoints them; each worker's local init op does."""
    def make_local(next_creator, **kwargs):
        kwargs["collections"] = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
        return next_creator(**kwargs)

    with tf.compat.v1.device(worker_device), \
            tf.compat.v1.variable_creator_scope(make_local):
        yield
