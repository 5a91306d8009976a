"""The mean accuracy of a run's last three checkpoints, for carry_over.py.

A run at a constant rate ends wherever its last minibatches left it: on the
noisy-label sets of harder_data.py, checkpoints a few hundred steps apart
differ by up to three points. Each run's last three checkpoints (the
distributed examples keep three, saved every 5% of the run, so they span its
last tenth) are evaluated again on the same split, and their mean is
compared, which halves that noise for the cost of a few matrix products.
"""

import os
import re
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from guide.training import data  # noqa: E402

NAMES = ("hidden/weights", "hidden/biases", "output/weights", "output/biases")
LAST = 3
_datasets = {}


def checkpoint_steps(logdir):
    """The global steps of the checkpoints in `logdir`, oldest first."""
    steps = {int(match) for match in re.findall(
        r"model\.ckpt-(\d+)\.index", " ".join(os.listdir(logdir)))}
    return sorted(steps)


def parameters(path):
    """The MLP's four arrays from a checkpoint, saved by name or by object."""
    from guide.distributed.evaluator import read_variables  # loads TensorFlow

    return read_variables(path, NAMES)


def accuracy(params, images, labels):
    hidden = np.maximum(images @ params["hidden/weights"] + params["hidden/biases"], 0)
    logits = hidden @ params["output/weights"] + params["output/biases"]
    return float((logits.argmax(axis=1) == labels).mean())


def late_accuracy(logdir, data_dir, validation=True):
    """(mean accuracy of the last three checkpoints, their steps), or None
    when the run kept fewer than three."""
    steps = checkpoint_steps(logdir)[-LAST:] if os.path.isdir(logdir) else []
    if len(steps) < LAST:
        return None
    key = (data_dir, validation)
    if key not in _datasets:
        _datasets[key] = data.load("mnist", data_dir, 0, validation)
    dataset = _datasets[key]
    scores = [accuracy(parameters(os.path.join(logdir, f"model.ckpt-{step}")),
                       dataset.test_images, dataset.test_labels) for step in steps]
    return round(float(np.mean(scores)), 4), steps
