"""Which devices a task talks to, and where a worker's own variables live."""

import contextlib

import tensorflow as tf


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
