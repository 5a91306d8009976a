"""Checks of the distributed schemes' own flags against the cluster and the
run, made before TensorFlow loads. No TensorFlow here."""

from guide.training.flags import UsageError


def replicas_to_aggregate(requested, num_workers):
    """R, the gradients (or commits) each synchronous update averages:
    `requested` (--replicas_to_aggregate), else every worker; UsageError if
    it is more than there are workers, for an update could never complete."""
    replicas = requested or num_workers
    if replicas > num_workers:
        raise UsageError(f"--replicas_to_aggregate {replicas} is more than the "
                         f"{num_workers} workers; use at most {num_workers}")
    return replicas


def check_window(communication_window, train_steps):
    """UsageError if one --communication_window is longer than the whole run,
    which would then overshoot --train_steps."""
    if communication_window > train_steps:
        raise UsageError(f"--communication_window {communication_window} is "
                         f"longer than the run (--train_steps {train_steps}); "
                         f"use at most {train_steps}")
