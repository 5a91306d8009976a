"""The one rule for a --logdir, which the launcher and every example ask, so
that they refuse the same folders with the same one-line `UsageError`s.
Reusing a logdir means resuming from its checkpoint. Only `claim` needs
TensorFlow, and imports it when called, so flag errors stay fast.
"""

import os
import time

from guide.training.flags import UsageError


def new_run_folder(script_file):
    """A new folder's path (not created) under runs/ beside `script_file`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join(os.path.dirname(os.path.abspath(script_file)), "runs",
                        f"{stamp}-{os.getpid()}")


def check(logdir):
    """Returns `logdir`; UsageError unless it is a folder, or can become
    one, that this user may write to. Creates nothing."""
    path = _nearest_existing(logdir)
    _refuse_a_file(logdir, path)
    _refuse_read_only(logdir, path)
    return logdir


def make(logdir, folder=None):
    """Creates `folder` (default: `logdir` itself, else a folder inside it,
    like the launcher's logs/); UsageError as `check`, or if it cannot be."""
    folder = folder or logdir
    _refuse_a_file(logdir, _nearest_existing(folder))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--logdir {logdir}: cannot create {error.filename} "
                             f"({error.strerror}); pass a folder you may write "
                             f"to") from None
    for path in {os.path.abspath(logdir), os.path.abspath(folder)}:
        _refuse_read_only(logdir, path)


def claim(logdir, script):
    """Chief, once the graph is built: refuse a `logdir` that holds another
    example's or model's checkpoint, and mark it as `script`'s."""
    import tensorflow as tf

    marker = os.path.join(logdir, "example.txt")
    checkpoint = tf.train.latest_checkpoint(logdir)
    if checkpoint and os.path.exists(marker):
        with open(marker) as stream:
            owner = stream.read().strip()
        if owner != script:
            raise UsageError(
                f"--logdir {logdir} holds a checkpoint of {owner}, not "
                f"{script}; give this run a new --logdir")
    if checkpoint:
        saved = dict(tf.train.list_variables(checkpoint))
        wanted = {variable.op.name: variable.shape.as_list()
                  for variable in tf.compat.v1.global_variables()}
        if saved != wanted:
            differ = sorted(name for name in set(saved) | set(wanted)
                            if saved.get(name) != wanted.get(name))
            raise UsageError(
                f"--logdir {logdir} holds a checkpoint of another model "
                f"({len(differ)} variable(s) differ, e.g. {differ[0]}); give "
                f"this run a new --logdir")
    os.makedirs(logdir, exist_ok=True)
    with open(marker, "w") as stream:
        stream.write(script + "\n")


def _nearest_existing(path):
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def _refuse_a_file(logdir, path):
    if not os.path.isdir(path):
        raise UsageError(f"--logdir {logdir}: {path} is a file, not a folder; "
                             f"pass a folder there")


def _refuse_read_only(logdir, path):
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--logdir {logdir}: {path} is not writable by this "
                             f"user; pass a folder you may write to")
