"""What one finished run measured, from its result.json, the launcher's
launch.json and its accuracy curve: the figures every report reads."""

import math

from guide import examples
from guide.examples import ALLREDUCE, LOCAL, SYNC, SYNC_WINDOW, WINDOW

TARGETS = (0.97, 0.98)


def exchanges(example, result):
    """How many times a worker (or the coordinator) exchanged parameters or
    updates with the ps: one pull and one push each; with no ps, how many
    times a worker took part in an allreduce."""
    if example.kind == LOCAL:
        return 0
    if example.kind in (WINDOW, SYNC_WINDOW):
        return sum(result["commits"])
    if example.kind == SYNC:
        return sum(result["gradients_computed"])
    if example.kind == ALLREDUCE:
        return result["global_step"] * result["workers"]
    return result["global_step"]  # one per minibatch


def rounds_per_1000(example, result):
    return round(1000 * exchanges(example, result) / max(result["examples"], 1), 2)


def training_seconds_to(curve, target):
    """Seconds of training, evaluations left out, until the first point at
    or above `target`; None if none is."""
    evaluating = 0.0
    for point in curve:
        if point["test_accuracy"] >= target:
            return round(point["wall_s"] - evaluating, 1)
        evaluating += point.get("eval_s", 0.0)
    return None


def seconds_to(curve, target):
    """Seconds, evaluations included, until the first point at or above
    `target`; None if never."""
    return next((point["wall_s"] for point in curve
                 if point["test_accuracy"] >= target), None)


def examples_to(curve, target):
    """Training examples until the first point at or above `target`."""
    return next((point["examples"] for point in curve
                 if point["test_accuracy"] >= target), None)


def late_accuracy(curve):
    """The mean test accuracy over the evaluations in the run's last tenth
    of examples: a single evaluation moves by a few tenths of a point from
    one to the next, with the minibatches last seen."""
    last = curve[-1]["examples"]
    late = [point["test_accuracy"] for point in curve
            if point["examples"] >= 0.9 * last]
    return round(sum(late) / len(late), 4)


def evaluations_before(curve, target):
    """Seconds of the chief's evaluations before the first point at or above
    `target`, the one at the start included."""
    reached = next((index for index, point in enumerate(curve)
                    if point["test_accuracy"] >= target), None)
    if reached is None:
        return None
    return round(sum(point.get("eval_s", 0.0) for point in curve[:reached]), 1)


def with_final_point(result, curve):
    """The curve, ending with the final evaluation."""
    return list(curve) + [{"wall_s": result["wall_s"],
                           "global_step": result["global_step"],
                           "examples": result["examples"],
                           "test_accuracy": result["test_accuracy"]}]


# Ten classes: an accuracy at most 1.5 times chance is a run that learnt
# nothing, or lost what it had (a diverged one).
CHANCE_ACCURACY = 0.15


def diverged(result):
    """Whether the run diverged: its own verdict if it gives one, else a
    loss that is not finite or a test accuracy at chance."""
    if "diverged" in result:
        return bool(result["diverged"])
    loss = result.get("test_loss")
    return (loss is not None and not math.isfinite(loss)) or \
        result["test_accuracy"] <= CHANCE_ACCURACY


def scale_figures(result):
    """What the scale and thesis reports read besides the rest: training
    accuracy, divergence, the staleness distribution's statistics (in
    commits), the job's memory per task and its start-up to the first
    step, where the run measured them."""
    figures = {"train_accuracy": result.get("train_accuracy"),
               "diverged": diverged(result)}
    overall = result.get("staleness_in_commits", {}).get("overall", {})
    for key in ("mean", "p50", "p95", "max"):
        figures[f"staleness_{key}"] = overall.get(key)
    memory = result.get("memory", {})
    figures["memory_mib_per_task"] = memory.get("peak_pss_per_task_mib")
    figures["first_step_s"] = result.get("timeline", {}).get(
        "launch_to_first_progress_s")
    return figures


def of_example(scheme, result, curve):
    """An example run's figures; `curve` ends with the final evaluation."""
    example = examples.BY_NAME[scheme]
    eval_s = sum(point.get("eval_s", 0.0) for point in curve)
    training_s = max(result["wall_s"] - eval_s, 1e-9)
    network = result.get("network", {})
    figures = {
        "test_accuracy": result["test_accuracy"], "examples": result["examples"],
        "train_steps": result.get("train_steps"),
        "learning_rate": result.get("learning_rate"),
        "wall_s": result["wall_s"], "examples_per_s": result["examples_per_s"],
        "eval_s": round(eval_s, 3), "training_s": round(training_s, 1),
        "examples_per_training_s": round(result["examples"] / training_s),
        "late_accuracy": late_accuracy(curve),
        "rounds_per_1000_examples": rounds_per_1000(example, result),
        "mean_staleness": result.get("mean_staleness"),
        "communication_window": result.get("communication_window"),
        "bytes_per_example": network.get("bytes_per_example"),
        "busiest_link": network.get("busiest_link"),
        "busiest_bytes_per_example": network.get("busiest_link_bytes_per_example"),
    }
    figures.update(scale_figures(result))
    for target in TARGETS:
        percent = round(target * 100)
        figures[f"s_to_{percent}"] = training_seconds_to(curve, target)
        figures[f"examples_to_{percent}"] = examples_to(curve, target)
    figures["evaluations_to_97_s"] = evaluations_before(curve, 0.97)
    timeline = result.get("timeline", {})
    if "launch_to_result_s" in timeline:
        # Less the training, and the first and last evaluations.
        evaluations = 2 * curve[0].get("eval_s", 0.0)
        figures["startup_s"] = round(timeline["launch_to_result_s"]
                                     - result["wall_s"] - evaluations, 2)
    return {key: value for key, value in figures.items() if value is not None}


def of_simulation(result):
    """A simulated run's figures (the simulator's --json object), under the
    names an example run's have; its seconds are simulated ones."""
    keys = ("examples_per_s", "test_accuracy", "examples", "global_step",
            "staleness_mean", "staleness_p50", "staleness_p95", "staleness_max",
            "simulated_s")
    return {key: result[key] for key in keys if result.get(key) is not None}
