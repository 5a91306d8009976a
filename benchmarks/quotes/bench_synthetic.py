"""benchmarks/README.md's figures, from "Start-up" on: results/startup,
results/synthetic, results/allreduce-synthetic and results/steps.

A figure the reports' tables show is quoted as they show it (`shown`);
one the page works out from them is rounded as a decimal, halves up
(`rounded`, in bench_format.py)."""

import statistics

from guide import examples

from ..docs import results
from ..provenance import described
from ..reports import compare, startup, steps
from ..reports.common import shown
from . import Quote
from .bench_format import (
    DOC,
    MIRRORED,
    TIMES,
    WORDS,
    beside_target,
    listed,
    rounded,
    spread,
)

# Start-up: benchmarks/results/startup, through its report's summary.

def startup_figures():
    records = results("startup").records
    new, forked = startup.WAYS.values()
    bare = [record["measures"]["command_s"] for record in records
            if "command" in record["run"] and record["status"] == "ok"]
    figures = {"repeats": WORDS[max(record["run"]["repeat"] for record in records)],
               "bare": rounded(statistics.median(bare), 1)}
    for row in startup.summary(records):
        workers = row["workers"]
        figures[f"new{workers}"] = rounded(row["medians"][new]["startup_s"], 1)
        figures[f"forked{workers}"] = rounded(row["medians"][forked]["startup_s"], 1)
        figures[f"ratio{workers}"] = rounded(row["startup_ratio"], 1)
    return figures


# On the synthetic data: benchmarks/results/synthetic and allreduce-synthetic,
# through the compare report's rows.

def tables(folder="synthetic"):
    return compare.rows_of(results(folder).records)[0]


def main_rows():
    return {row["scheme"]: row for row in tables()["main"] if "error" not in row}


def row_of(table, scheme, **run):
    [row] = [row for row in tables()[table] if row["scheme"] == scheme
             and all(row["run"].get(key) == value for key, value in run.items())]
    return row


def ratio(table, scheme, **run):
    return shown(row_of(table, scheme, **run)["throughput_ratio"], 2)


def verdicts():
    """The compare report's targets: (what, measured, bound, met)."""
    rows, records = tables(), results("synthetic").records
    return compare.targets(rows, compare.startup_figures(rows["startup"]),
                           records[0]["run"]["window"])


def gap(scheme):
    """Points below the baseline's final accuracy (negative: above)."""
    rows = main_rows()
    return 100 * (rows[compare.BASELINE]["test_accuracy"]
                  - rows[scheme]["test_accuracy"])


def main_records(schemes):
    """The main table's records of `schemes`."""
    return [record for record in results("synthetic").records
            if record["status"] == "ok" and record["run"].get("scheme") in schemes
            and "main" in record["run"]["tables"]]


def runs_differ():
    """The widest gap between the runs of one asynchronous scheme: in
    accuracy points, and in throughput (the higher over the lower)."""
    asynchronous = [name for name, example in examples.BY_NAME.items()
                    if example.kind in (examples.EVERY_STEP, examples.WINDOW)]
    each = [record["measures"] for record in main_records(asynchronous)]
    points = max(100 * (max(figures["test_accuracy_each_run"])
                        - min(figures["test_accuracy_each_run"])) for figures in each)
    faster = max(max(figures["examples_per_s_each_run"])
                 / min(figures["examples_per_s_each_run"]) for figures in each)
    return {"points": rounded(points, 1), "percent": rounded(100 * (faster - 1))}


def ps_against_ring():
    records = results("allreduce-synthetic").records
    rows = tables("allreduce-synthetic")
    main = {row["scheme"]: row for row in rows["main"]}
    sync, ring = main["Synchronous-SGD"], main[MIRRORED]
    [two_ps] = [row for row in rows["sweep"] if row["scheme"] == "Synchronous-SGD"
                and row["run"].get("ps") == 2]
    accuracy = (f"the same final accuracy ({sync['test_accuracy']:.4f})"
                if sync["test_accuracy"] == ring["test_accuracy"] else
                f"final accuracies {sync['test_accuracy']:.4f} and "
                f"{ring['test_accuracy']:.4f}")
    return {"cores": records[0]["machine"]["cores"],
            "repeats": max(row["runs"] for row in rows["main"]),
            "batch": sync["run"]["batch"], "accuracy": accuracy,
            "sync": shown(sync["examples_per_s"], 0),
            "ring": shown(ring["examples_per_s"], 0),
            "times": rounded(ring["examples_per_s"] / sync["examples_per_s"], 1),
            "sync_s": shown(sync["time_to_target_s"], 2),
            "ring_s": shown(ring["time_to_target_s"], 2),
            "two_ps": shown(two_ps["examples_per_s"], 0)}


def latest_synthetic():
    records = results("synthetic").records
    judged = verdicts()
    return {"date": listed(sorted({record["started"][:10] for record in records})),
            "machine": listed(sorted({described(record) for record in records})),
            "met": sum(met for *_, met in judged), "targets": len(judged)}


def accuracy_gaps():
    missed = [name for name in main_rows() if name != compare.BASELINE
              and gap(name) > 100 * compare.ACCURACY_MAX_GAP]
    mgsm = gap("Multiple-GPUs-Single-Machine")
    return {"missed": WORDS[len(missed)],
            "easy": rounded(gap("DOWNPOUR-Easy"), 1),
            "downpour": rounded(gap("DOWNPOUR"), 1),
            "mgsm_by": rounded(mgsm - 100 * compare.ACCURACY_MAX_GAP, 2),
            "mgsm": rounded(mgsm, 2),
            "agn": rounded(gap("AGN"), 1), "sagn": rounded(-gap("SAGN"), 1)}


def mirrored_against_sync():
    rows = main_rows()
    sync, ring = rows["Synchronous-SGD"], rows[MIRRORED]
    return {"same": "to the digit" if sync["test_accuracy"] == ring["test_accuracy"]
            else "not to the digit",
            "times": rounded(ring["examples_per_s"] / sync["examples_per_s"], 1),
            "ring": shown(ring["throughput_ratio"], 2),
            "sync": shown(sync["throughput_ratio"], 2)}


def throughput_ratios():
    rows = main_rows()
    every = [row["throughput_ratio"] for name, row in rows.items()
             if examples.BY_NAME[name].kind in (examples.EVERY_STEP, examples.SYNC)]
    windowed = [rows[name]["throughput_ratio"] for name in compare.WINDOW_TARGET
                if examples.BY_NAME[name].kind == examples.WINDOW]
    return {"every": spread(every, 2, form=shown),
            "windowed": spread(windowed, 3, form=shown),
            "easy": shown(rows["DOWNPOUR-Easy"]["throughput_ratio"], 2),
            "sagn": shown(rows["SAGN"]["throughput_ratio"], 2)}


def synthetic_startup():
    figures = compare.startup_figures(tables()["startup"])
    [cores] = {record["machine"]["cores"] for record in results("synthetic").records}
    hogwild = examples.BY_NAME["Hogwild"]
    tasks = hogwild.ps + hogwild.workers
    return {"run_sh": rounded(figures["run_sh_s"], 2),
            "ratio": rounded(figures["ratio"], 2),
            "bare": rounded(figures["import_s"], 1), "tasks": WORDS[tasks],
            "cores": WORDS[cores], "times": rounded(tasks / cores, 1),
            "rest": rounded(figures["run_sh_s"] - tasks / cores * figures["import_s"],
                            1)}


# Why some targets are missed: the compare report's targets, and
# benchmarks/results/steps.

def targets():
    window = results("synthetic").records[0]["run"]["window"]
    gap_points = 100 * compare.ACCURACY_MAX_GAP
    return {"every": compare.EVERY_STEP_MIN_RATIO, "window": window,
            "windowed": compare.WINDOW_MIN_RATIO,
            "gap": WORDS.get(gap_points, f"{gap_points:g}"),
            "startup": TIMES.get(compare.STARTUP_MAX_RATIO,
                                 f"{compare.STARTUP_MAX_RATIO:g} times")}


def targets_met_and_missed():
    judged = verdicts()
    throughput = [(what.split(" throughput")[0], value, float(bound.split()[-1]), met)
                  for what, value, bound, met in judged if " throughput, " in what]
    accuracy = [(what.split(" accuracy")[0], 100 * value) for what, value, _, met
                in judged if " accuracy below " in what and not met]
    [start_ratio] = [value for what, value, _, _ in judged
                     if what.startswith("start-up")]
    line = 100 * compare.ACCURACY_MAX_GAP
    return {
        "met": listed(name for name, _, _, met in throughput if met),
        "met_ratios": spread([value for _, value, _, met in throughput if met], 2),
        "accuracy_missed": WORDS[len(accuracy)],
        "missed": listed(
            f"{name} ({beside_target(value, lambda x, b=bound: x >= b, 2)})"
            for name, value, bound, met in throughput if not met),
        "missed_accuracy": listed(
            f"{name} ({beside_target(points, lambda x: x <= line, 1)}"
            + (" points below)" if index == 0 else ")")
            for index, (name, points) in enumerate(accuracy)),
        "startup": rounded(start_ratio, 2)}


def step_figures():
    records = results("steps").records
    by_batch = steps.results_of(records)
    small, large = by_batch[100], by_batch[1000]
    local, server, ps, window = (steps.kind(small, name) for name in
                                 ("local", "local, through a server", "ps", "window"))
    large_local, large_ps = steps.kind(large, "local"), steps.kind(large, "ps")
    traced = small["traced_ps_step"]
    big = [size for size in small["parameter_bytes"].values() if size >= 100_000]
    [machine] = {(record["machine"]["cores"], record["machine"]["cpu"])
                 for record in records}
    return {
        "ps": rounded(ps["cpu_times_local"], 1),
        "ps2": rounded(ps["cpu_times_local"], 2),
        "machine": f"{machine[0]} cores ({machine[1]})",
        "runs": WORDS[len(steps.runs_of(records)[100])],
        "allowed": steps.allowed(local["examples_per_s_allowed"]),
        "tensors": WORDS[sum(job["tensors_received"] for job in traced.values())],
        "parameters": WORDS[traced["worker"]["tensors_received"]],
        "gradients": WORDS[traced["ps"]["tensors_received"] - 1],
        # Each large parameter goes to the worker, and its gradient back.
        "large": WORDS[2 * len(big)],
        "megabytes": spread([size / 1e6 for size in big], 1),
        "ps_receive": rounded(traced["ps"]["receive_ms"], 2),
        "ps_ops": rounded(traced["ps"]["ops_ms"], 2),
        "worker_receive": rounded(traced["worker"]["receive_ms"], 2),
        "worker_ops": rounded(traced["worker"]["ops_ms"], 2),
        "local_cpu": rounded(local["cpu_ms"], 2),
        "large_local_cpu": rounded(large_local["cpu_ms"], 2),
        "exchange": rounded(ps["cpu_ms"] - local["cpu_ms"], 2),
        "large_exchange": rounded(large_ps["cpu_ms"] - large_local["cpu_ms"], 2),
        "ps_cpu": rounded(ps["cpu_ms"], 2),
        "large_ps_cpu": rounded(large_ps["cpu_ms"], 2),
        "large_ps2": rounded(large_ps["cpu_times_local"], 2),
        "server": rounded(server["cpu_times_local"], 2),
        "window": rounded(window["cpu_times_local"], 2),
        "busy": rounded(local["cpu_ms"] / local["wall_ms"], 2)}


def sweeps_and_batch():
    return {
        **{f"hogwild{workers}": ratio("sweep", "Hogwild", workers=workers, ps=1)
           for workers in (1, 2, 4)},
        "hogwild_large": ratio("batch", "Hogwild"),
        "sync_large": ratio("batch", "Synchronous-SGD"),
        "baseline": shown(main_rows()[compare.BASELINE]["examples_per_s"], 0),
        "baseline_large": shown(row_of("batch", compare.BASELINE)["examples_per_s"], 0),
        "downpour1": ratio("sweep", "DOWNPOUR", workers=2, ps=1),
        "downpour2": ratio("sweep", "DOWNPOUR", workers=2, ps=2),
        "sync": shown(main_rows()["Synchronous-SGD"]["throughput_ratio"], 2),
        "sagn": shown(main_rows()["SAGN"]["throughput_ratio"], 2)}


def widest_windowed_runs():
    """The windowed scheme whose runs' throughputs differ most."""
    each = [(record["run"]["scheme"], record["measures"]["examples_per_s_each_run"])
            for record in main_records(compare.WINDOW_TARGET)]
    scheme, throughputs = max(each, key=lambda item: max(item[1]) / min(item[1]))
    return {"scheme": scheme, "low": rounded(min(throughputs)),
            "high": rounded(max(throughputs))}


def accuracy_runs():
    rows = main_rows()

    def final(scheme):
        return f"{rows[scheme]['test_accuracy']:.4f}"

    def runs(scheme):
        [record] = main_records([scheme])
        return ", ".join(rounded(value, 3)
                         for value in record["measures"]["test_accuracy_each_run"])

    [sagn] = main_records(["SAGN"])
    same = {f"{value:.4f}" for value in sagn["measures"]["test_accuracy_each_run"]}
    four = [row for row in tables()["sweep"] if row["scheme"] == "DOWNPOUR"
            and row["run"]["workers"] == 4]
    return {"baseline": final(compare.BASELINE),
            "agn": final("AGN"), "agn_runs": runs("AGN"),
            "sagn": final("SAGN") + (" in all three" if same == {final("SAGN")}
                                     else "; runs: " + runs("SAGN")),
            "easy": final("DOWNPOUR-Easy"), "easy_runs": runs("DOWNPOUR-Easy"),
            "easy_stale": rounded(rows["DOWNPOUR-Easy"]["mean_staleness"]),
            "downpour": final("DOWNPOUR"), "downpour_runs": runs("DOWNPOUR"),
            "downpour_below": rounded(gap("DOWNPOUR"), 1),
            "downpour_stale": shown(rows["DOWNPOUR"]["mean_staleness"], 2),
            "four_stale": spread([row["mean_staleness"] for row in four]),
            "four": listed(rounded(row["test_accuracy"], 2) for row in four),
            "mgsm": final("Multiple-GPUs-Single-Machine"),
            "mgsm_runs": runs("Multiple-GPUs-Single-Machine"),
            "hogwild_runs": runs("Hogwild"),
            "mgsm_by": rounded(gap("Multiple-GPUs-Single-Machine")
                               - 100 * compare.ACCURACY_MAX_GAP, 2)}


QUOTES = [
    # Start-up.
    Quote(DOC, "alternately, {repeats} times each. In the [latest run](results/"
               "startup/results.md), start-up (the launcher's start to the chief's "
               "first step, plus one final evaluation) was {new2} s against "
               "{forked2} s with 2 workers, and {new4} s against {forked4} s with 4 "
               "({ratio4} times shorter); a bare `import tensorflow` takes {bare} s.",
          startup_figures),
    # On the synthetic data.
    Quote(DOC, "two single runs of the same asynchronous scheme differed by up to "
               "{points} points of accuracy and {percent} % of throughput",
          runs_differ),
    Quote(DOC, "on {cores} cores, medians of {repeats} runs ([results.md](results/"
               "allreduce-synthetic/results.md)): the same global batch of {batch} "
               "and {accuracy}, Synchronous-SGD (1 ps) at {sync} examples/s and "
               "Multi-Worker-Mirrored-Strategy (ring allreduce, no ps) at {ring}, "
               "{times} times as many; to the target accuracy {sync_s} s against "
               "{ring_s} s. With 2 ps, Synchronous-SGD drops to {two_ps} examples/s.",
          ps_against_ring),
    Quote(DOC, "{date}, on {machine}. [`results/synthetic/results.md`](results/"
               "synthetic/results.md) has every table, [`runs.jsonl`](results/"
               "synthetic/runs.jsonl) every number. {met} of {targets} targets met.",
          latest_synthetic),
    Quote(DOC, "all but {missed} end within a point of the baseline: DOWNPOUR-Easy "
               "overshoots with its unscaled sums ({easy} points below), DOWNPOUR "
               "ends {downpour} points below, and Multiple-GPUs-Single-Machine "
               "misses by {mgsm_by} ({mgsm} below)", accuracy_gaps),
    Quote(DOC, "AGN and SAGN end {agn} below and {sagn} above", accuracy_gaps),
    Quote(DOC, "Multi-Worker-Mirrored-Strategy (allreduce, no ps) ends where "
               "Synchronous-SGD does, {same}, at {times} times its throughput "
               "({ring} against {sync}).", mirrored_against_sync),
    Quote(DOC, "A step that exchanges with the ps costs {ps} times the CPU of a "
               "local step", step_figures),
    Quote(DOC, "reach {every} of the baseline's throughput. The windowed schemes "
               "exchange once in eight steps: DOWNPOUR, AGN, Dynamic-SGD, AEASGD "
               "and AEAMSGD reach {windowed} (DOWNPOUR-Easy {easy}; SAGN, which is "
               "synchronous, {sagn})", throughput_ratios),
    Quote(DOC, "Start-up: `bash Hogwild/run.sh --train_steps 5` takes {run_sh} s, "
               "{ratio} times a bare `python -c \"import tensorflow\"` ({bare} s).",
          synthetic_startup),
    # Why some targets are missed.
    Quote(DOC, "The targets: schemes that talk to the ps every step at least "
               "{every} of the baseline's throughput with 2 workers; windowed "
               "schemes at T = {window} at least {windowed}; every scheme within "
               "{gap} point of the baseline's accuracy; `run.sh` start-up at most "
               "{startup} a bare `import tensorflow`.", targets),
    Quote(DOC, "In the latest run, met: the throughput of {met} ({met_ratios}), and "
               "the accuracy of every scheme but {accuracy_missed}. Missed: the "
               "throughput of {missed}; the accuracy of {missed_accuracy}; start-up "
               "({startup}).", targets_met_and_missed),
    Quote(DOC, "**Throughput: a step that exchanges with the ps costs {ps} times "
               "the CPU of a local one, and two cores are shared by all the "
               "tasks.**", step_figures),
    Quote(DOC, "At a global batch of 100, on {machine}, the run of {runs} whose ps "
               "step has the median × local CPU (the last column counts the steps "
               "alone", step_figures),
    Quote(DOC, "the synthetic suite's baseline measured {baseline} examples/s on "
               "its own machine", sweeps_and_batch),
    Quote(DOC, "and on this one its step alone allows {allowed})", step_figures),
    Quote(DOC, "A step with the variables on the ps sends {tensors} tensors over "
               "gRPC: the {parameters} parameter tensors to the worker, the "
               "{gradients} gradients and the learning rate to the ps; {large} of "
               "them are {megabytes} MB.", step_figures),
    Quote(DOC, "(in the traced step, {ps_receive} ms receiving against {ps_ops} ms "
               "in ops on the ps, {worker_receive} against {worker_ops} on the "
               "worker)", step_figures),
    Quote(DOC, "Hogwild reached {hogwild1} of the baseline with 1 worker, "
               "{hogwild2} with 2 and {hogwild4} with 4 (the sweep table).",
          sweeps_and_batch),
    Quote(DOC, "the local step's CPU grows from {local_cpu} to {large_local_cpu} "
               "ms, but the exchange does not grow: the ps step costs {exchange} ms "
               "more than a local one at 100 ({ps_cpu} ms) and {large_exchange} "
               "more at 1000 ({large_ps_cpu} ms), so {large_ps2} times a local "
               "step's CPU against {ps2} at 100.", step_figures),
    Quote(DOC, "Hogwild reaches {hogwild_large} of the baseline at that batch in "
               "the same benchmark run. The baseline itself is bound by its "
               "per-step cost at batch 100: {baseline} examples/s, against "
               "{baseline_large} at batch 1000.", sweeps_and_batch),
    Quote(DOC, "Synchronous-SGD ({sync}) pays more per update", sweeps_and_batch),
    Quote(DOC, "At a global batch of 1000 it reaches {sync_large}. SAGN ({sagn}) "
               "is synchronous too", sweeps_and_batch),
    Quote(DOC, "a local step through the worker's server costs {server} times the "
               "CPU of the baseline's, so a window of 8 costs {window} times the "
               "baseline's CPU per example (the table above), and two workers have "
               "two cores where the baseline's one process keeps {busy} busy",
          step_figures),
    Quote(DOC, "In the latest run of the synthetic suite, DOWNPOUR, AGN, "
               "Dynamic-SGD, AEASGD and AEAMSGD reached {windowed} (medians of "
               "three).", throughput_ratios),
    Quote(DOC, "DOWNPOUR with 2 workers reached {downpour1} with one ps and "
               "{downpour2} with two (the sweep table)", sweeps_and_batch),
    Quote(DOC, "{scheme}'s went from {low} to {high} examples/s",
          widest_windowed_runs),
    Quote(DOC, "Start-up: the job's {tasks} tasks each import TensorFlow, which "
               "took a bare Python {bare} s in the synthetic run, nearly all of it "
               "on one core: {tasks} on {cores} cores take at least {times} times "
               "as long. The launcher, the namespace, the sessions and the "
               "teardown add the rest, about {rest} s there;", synthetic_startup),
    # The accuracy bullets.
    Quote(DOC, "the baseline ends at {baseline}.", accuracy_runs),
    Quote(DOC, "AGN ({agn}; runs: {agn_runs}) and SAGN ({sagn})", accuracy_runs),
    Quote(DOC, "DOWNPOUR-Easy ({easy}; runs: {easy_runs}) applies the sum of 8 "
               "gradients as one step, 8 times as long, computed on a copy that "
               "misses about {easy_stale} of the other worker's minibatches",
          accuracy_runs),
    Quote(DOC, "DOWNPOUR ({downpour}; runs: {downpour_runs}) lets Adagrad on the "
               "ps damp the same sums, and still ends {downpour_below} points "
               "below: its commits at T = 8 are {downpour_stale} global steps "
               "stale", accuracy_runs),
    Quote(DOC, "they are {four_stale} global steps stale, with one ps as with two, "
               "and it ended at {four}.", accuracy_runs),
    Quote(DOC, "Multiple-GPUs-Single-Machine ({mgsm}; runs: {mgsm_runs}) updates "
               "the ps asynchronously, as Hogwild does ({hogwild_runs}): its "
               "median misses the one-point line by {mgsm_by}, within that "
               "spread.", accuracy_runs),
]
