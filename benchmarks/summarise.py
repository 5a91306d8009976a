"""Summing the benchmark's runs up: exchanges with the ps, the medians of
repeated runs, the ratios to the baseline, and the targets."""

from plan import BASELINE

from guide.examples import ALLREDUCE, LOCAL, SYNC, SYNC_WINDOW, WINDOW

# The targets the schemes are held to, as ratios to the baseline.
EVERY_STEP_TARGET = ("Hogwild", "Synchronous-SGD")
WINDOW_TARGET = ("DOWNPOUR", "AGN", "SAGN", "Dynamic-SGD", "AEASGD", "AEAMSGD")
EVERY_STEP_MIN_RATIO, WINDOW_MIN_RATIO = 0.5, 0.8
ACCURACY_MAX_GAP = 0.01
STARTUP_MAX_RATIO = 2.0


def exchanges(scheme, result):
    """How many times a worker (or the coordinator) exchanged parameters or
    updates with the ps: one pull and one push each; with no ps, how many
    times a worker took part in an allreduce."""
    if scheme.kind == LOCAL:
        return 0
    if scheme.kind in (WINDOW, SYNC_WINDOW):
        return sum(result["commits"])
    if scheme.kind == SYNC:
        return sum(result["gradients_computed"])
    if scheme.kind == ALLREDUCE:
        return result["global_step"] * result["workers"]
    return result["global_step"]  # one per minibatch


def rounds_per_1000(scheme, result):
    return round(1000 * exchanges(scheme, result) / max(result["examples"], 1), 2)


def time_to_accuracy(curve, target):
    """Seconds until the first point of `curve` at or above `target`; None
    if it never got there."""
    for point in curve:
        if point["test_accuracy"] >= target:
            return point["wall_s"]
    return None


def ratio(value, reference):
    """value / reference, or None when either is missing or zero."""
    if value is None or not reference:
        return None
    return round(value / reference, 3)


def add_ratios(record, baseline):
    """Throughput and time-to-target, each over the baseline's."""
    record["throughput_ratio"] = ratio(record.get("examples_per_s"),
                                       baseline.get("examples_per_s"))
    record["time_to_target_ratio"] = ratio(record.get("time_to_target_s"),
                                           baseline.get("time_to_target_s"))
    return record


def middle(values):
    """The median of an odd number of values (the upper one of an even
    number); None counts as larger than any number: never reached."""
    ordered = sorted(values, key=lambda value: (value is None, value or 0))
    return ordered[len(ordered) // 2] if ordered else None


def combine(attempts, target):
    """One record for the repeated runs of one configuration: each measure's
    median, every run's accuracy and throughput, and the accuracy curve of
    the run with the median throughput. A failed run makes it a failure."""
    for attempt in attempts:
        if "error" not in attempt:
            attempt["time_to_target_s"] = time_to_accuracy(attempt["curve"], target)
    failed = [attempt for attempt in attempts if "error" in attempt]
    if failed:
        record = dict(failed[0])
        if len(attempts) > 1:
            record["error"] = (f"{len(failed)} of {len(attempts)} runs failed: "
                               f"{failed[0]['error']}")
        return record
    record = dict(middle_by(attempts, "examples_per_s"))
    for key in ("test_accuracy", "examples_per_s", "wall_s", "time_to_target_s",
                "rounds_per_1000_examples", "mean_staleness"):
        record[key] = middle([attempt.get(key) for attempt in attempts])
    record["runs"] = len(attempts)
    for key in ("test_accuracy", "examples_per_s"):
        record[f"{key}_each_run"] = [attempt[key] for attempt in attempts]
    return record


def middle_by(attempts, key):
    ordered = sorted(attempts, key=lambda attempt: attempt[key])
    return ordered[len(ordered) // 2]


def check_targets(records, startup, window):
    """One row per target: what, the measured value, the bound, met or not."""
    baseline = records[0]
    main = {record["scheme"]: record for record in records
            if record.get("main") and "error" not in record}
    rows = [(f"{record['scheme']} ran", record["error"], "no error", False)
            for record in records if record.get("main") and "error" in record]
    for names, label, bound in (
            (EVERY_STEP_TARGET, "2 workers", EVERY_STEP_MIN_RATIO),
            (WINDOW_TARGET, f"window {window}", WINDOW_MIN_RATIO)):
        for name in names:
            if name in main:
                measured = main[name]["throughput_ratio"]
                rows.append((f"{name} throughput, {label}", measured,
                             f">= {bound}", measured >= bound))
    for name, record in main.items():
        if name == BASELINE:
            continue
        gap = round(baseline["test_accuracy"] - record["test_accuracy"], 4)
        rows.append((f"{name} accuracy below the baseline's", gap,
                     f"<= {ACCURACY_MAX_GAP}", gap <= ACCURACY_MAX_GAP))
    if startup:
        rows.append(("start-up: run.sh over import tensorflow", startup["ratio"],
                     f"<= {STARTUP_MAX_RATIO}", startup["ratio"] <= STARTUP_MAX_RATIO))
    return rows
