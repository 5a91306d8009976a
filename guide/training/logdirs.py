"""The one rule for a --logdir: which folders can be one, and what reusing
one means. The launcher and every example ask here, so they refuse the same
folders with the same one-line errors (`UsageError`: exit code 2).

- `new_run_folder`: the default, a new folder under the example's runs/.
- `check`: a logdir is a folder, or a path that can become one, that this
  user may write to.
- `make`: creates it, or a folder inside it (the launcher's `logs/`).
- `claim`: reusing a logdir means resuming from its checkpoint, so the
  chief refuses one that holds another example's or another model's, and
  marks the folder as its example's. A reused logdir's task logs and
  results are written anew.

Only `claim` needs TensorFlow, and imports it when called: flag errors stay
fast, and the launcher needs none.
"""

import os
import time

from guide.training.flags import UsageError


def new_run_folder(script_file):
    """A new folder's path, under runs/ beside `script_file`, named for the
    time and this process (not created here)."""
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
    """Creates `folder` (default: `logdir` itself, else a folder inside it);
    UsageError if it is not a folder this user may write to, or cannot be
    created."""
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
    """Chief: refuse a `logdir` that holds another example's or another
    model's checkpoint (resuming from it would fail or mislead), and mark
    this one as `script`'s (a file name). Call it once the graph is built."""
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
