"""benchmarks/README.md's figures under "Why some targets are missed": the
compare report's targets (results/synthetic), results/steps and
results/startup.

Rounded as bench_format.py says; each run's figures read as
bench_synthetic.py's `each_run` reads them, from native records or
converted ones."""

import statistics

from ..docs import results
from ..reports import compare, steps
from ..reports.common import shown
from . import Quote
from .bench_format import (
    DOC,
    TIMES,
    WORDS,
    beside_target,
    listed,
    machine,
    rounded,
    spread,
)
from .bench_synthetic import (
    each_run,
    gap,
    main_rows,
    main_runs,
    ratio,
    row_of,
    synthetic_startup,
    tables,
    throughput_ratios,
    verdicts,
    within_line,
)


def targets():
    window = results("synthetic").records[0]["run"]["window"]
    gap_points = 100 * compare.ACCURACY_MAX_GAP
    return {"every": compare.EVERY_STEP_MIN_RATIO, "window": window,
            "windowed": compare.WINDOW_MIN_RATIO,
            "gap": WORDS.get(gap_points, f"{gap_points:g}"),
            "startup": TIMES.get(compare.STARTUP_MAX_RATIO,
                                 f"{compare.STARTUP_MAX_RATIO:g} times")}


def targets_met_and_missed():
    """What was met and what missed, each a list of clauses."""
    judged = verdicts()
    throughput = [(what.split(" throughput")[0], value, float(bound.split()[-1]), met)
                  for what, value, bound, met in judged if " throughput, " in what]
    accuracy = [(what.split(" accuracy")[0], 100 * value) for what, value, _, met
                in judged if " accuracy below " in what and not met]
    [(start_ratio, start_met)] = [(value, met) for what, value, _, met in judged
                                  if what.startswith("start-up")]
    met, missed = [], []
    faster = [(name, value) for name, value, _, ok in throughput if ok]
    if faster:
        met.append(f"the throughput of {listed(name for name, _ in faster)} "
                   f"({spread([value for _, value in faster], 2)})")
    slower = [f"{name} ({beside_target(value, lambda x, b=bound: x >= b, 2)})"
              for name, value, bound, ok in throughput if not ok]
    if slower:
        missed.append(f"the throughput of {listed(slower)}")
    met.append("the accuracy of every scheme"
               + (f" but {WORDS[len(accuracy)]}" if accuracy else ""))
    if accuracy:
        missed.append("the accuracy of " + listed(
            f"{name} ({beside_target(points, within_line, 1)}"
            + (" points below)" if index == 0 else ")")
            for index, (name, points) in enumerate(accuracy)))
    (met if start_met else missed).append(f"start-up ({rounded(start_ratio, 2)})")
    return {"met": "; ".join(met), "missed": "; ".join(missed) or "nothing"}


def step_figures():
    records = results("steps").records
    by_batch = steps.results_of(records)
    small, large = by_batch[100], by_batch[1000]
    local, server, ps, window = (steps.kind(small, name) for name in
                                 ("local", "local, through a server", "ps", "window"))
    large_local, large_ps = steps.kind(large, "local"), steps.kind(large, "ps")
    traced = small["traced_ps_step"]
    big = [size for size in small["parameter_bytes"].values() if size >= 100_000]
    return {
        "ps": rounded(ps["cpu_times_local"], 1),
        "ps2": rounded(ps["cpu_times_local"], 2),
        "machine": machine("steps"),
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


def baseline_against_step():
    """The synthetic suite's baseline, and what its step alone allows."""
    same = machine("steps") == machine("synthetic")
    return {"baseline": sweeps_and_batch()["baseline"],
            "where": "on the same kind of machine, where" if same
            else "on its own machine, and on this one",
            "allowed": step_figures()["allowed"]}


def widest_windowed_runs():
    """The windowed scheme whose runs' throughputs differ most."""
    each = [(scheme, each_run(records, "examples_per_s"))
            for scheme, records in main_runs(compare.WINDOW_TARGET).items()]
    scheme, speeds = max(each, key=lambda item: max(item[1]) / min(item[1]))
    return {"scheme": scheme, "low": rounded(min(speeds)),
            "high": rounded(max(speeds)),
            "percent": rounded(100 * (max(speeds) / min(speeds) - 1))}


def why_startup():
    figures = synthetic_startup()
    return dict(figures, tasks_cap=figures["tasks"].capitalize())


def by_ps(rows, digits):
    """'0.8512, with one ps as with two', or each ps count's."""
    finals = [rounded(row["test_accuracy"], digits) for row in rows]
    if len(set(finals)) == 1:
        return f"{finals[0]}, with one ps as with two"
    each = [f"{final} with {WORDS[row['run']['ps']]}"
            for final, row in zip(finals, rows)]
    return listed([each[0] + " ps"] + each[1:])


def accuracy_runs():
    rows = main_rows()
    each = main_runs(["AGN", "SAGN", "DOWNPOUR-Easy", "DOWNPOUR", "Dynamic-SGD",
                      "Hogwild", "Multiple-GPUs-Single-Machine"])

    def final(scheme):
        return f"{rows[scheme]['test_accuracy']:.4f}"

    def runs(scheme):
        return ", ".join(rounded(value, 3)
                         for value in each_run(each[scheme], "test_accuracy"))

    def width(scheme):
        accuracy = each_run(each[scheme], "test_accuracy")
        return max(accuracy) - min(accuracy)

    same = {f"{value:.4f}" for value in each_run(each["SAGN"], "test_accuracy")}
    sweep = [row for row in tables()["sweep"] if row["scheme"] == "DOWNPOUR"]
    one = [row for row in sweep if row["run"]["workers"] == 1]
    four = [row for row in sweep if row["run"]["workers"] == 4]
    one_stale = [row["mean_staleness"] for row in one]
    every_step = ("Hogwild", "Multiple-GPUs-Single-Machine")
    peaks = [max(point["test_accuracy"] for point in record["curve"])
             for record in each["Dynamic-SGD"] if record.get("curve")]
    scales = [record["result"]["mean_commit_scale"] for record in each["Dynamic-SGD"]
              if "mean_commit_scale" in record.get("result", {})]
    return {"baseline": final(compare.BASELINE),
            "agn": final("AGN"), "agn_runs": runs("AGN"),
            "sagn": final("SAGN") + (" in all three" if same == {final("SAGN")}
                                     else "; runs: " + runs("SAGN")),
            "easy": final("DOWNPOUR-Easy"), "easy_runs": runs("DOWNPOUR-Easy"),
            "easy_stale": rounded(rows["DOWNPOUR-Easy"]["mean_staleness"]),
            "downpour": final("DOWNPOUR"), "downpour_runs": runs("DOWNPOUR"),
            "downpour_below": rounded(gap("DOWNPOUR"), 1),
            "downpour_line": "inside" if within_line(gap("DOWNPOUR")) else "outside",
            "downpour_stale": shown(rows["DOWNPOUR"]["mean_staleness"], 2),
            "one_stale": "are never stale" if not any(one_stale) else
            f"are {spread(one_stale, 2)} global steps stale",
            "one": by_ps(one, 4),
            "four_stale": spread([row["mean_staleness"] for row in four]),
            "four": by_ps(four, 2),
            "dynamic": final("Dynamic-SGD"), "dynamic_runs": runs("Dynamic-SGD"),
            "tau": shown(rows["Dynamic-SGD"]["mean_staleness"], 2),
            "scale": spread(scales, 2) if scales else "–",
            "peaks": listed(rounded(peak, 3) for peak in peaks),
            "last": "its last lower" if all(
                record["measures"]["test_accuracy"] < peak
                for record, peak in zip(each["Dynamic-SGD"], peaks))
            else "not every last lower",
            "dynamic_by": rounded(gap("Dynamic-SGD")
                                  - 100 * compare.ACCURACY_MAX_GAP, 2),
            "hogwild_runs": runs("Hogwild"),
            "mgsm_runs": runs("Multiple-GPUs-Single-Machine"),
            "widely": "as widely" if min(map(width, every_step))
            >= width("Dynamic-SGD") else "nearly as widely",
            "inside": "inside" if all(within_line(gap(name)) for name in every_step)
            else "not both inside"}


def evaluations():
    """What the chief's evaluations for the curves cost: one, after the
    first of a run (which builds the evaluation), and a run's share of its
    wall time; medians over every run of the synthetic suite."""
    finished = [record for record in results("synthetic").records
                if record["status"] == "ok" and record["measures"].get("eval_s")]
    each = [point["eval_s"] for record in finished
            for point in record.get("curve", [])[1:] if point.get("eval_s")]
    share = statistics.median(record["measures"]["eval_s"]
                              / record["measures"]["wall_s"] for record in finished)
    return {"ms": rounded(1000 * statistics.median(each)),
            "share": rounded(100 * share)}


QUOTES = [
    Quote(DOC, "The targets: schemes that talk to the ps every step at least "
               "{every} of the baseline's throughput with 2 workers; windowed "
               "schemes at T = {window} at least {windowed}; every scheme within "
               "{gap} point of the baseline's accuracy; `run.sh` start-up at most "
               "{startup} a bare `import tensorflow`.", targets),
    Quote(DOC, "In the latest run, met: {met}. Missed: {missed}.",
          targets_met_and_missed),
    Quote(DOC, "A step that exchanges with the ps costs {ps} times the CPU of a "
               "local step", step_figures),
    Quote(DOC, "**Throughput: a step that exchanges with the ps costs {ps} times "
               "the CPU of a local one, and two cores are shared by all the "
               "tasks.**", step_figures),
    Quote(DOC, "At a global batch of 100, on {machine}, the run of {runs} whose ps "
               "step has the median × local CPU (the last column counts the steps "
               "alone", step_figures),
    Quote(DOC, "the synthetic suite's baseline measured {baseline} examples/s "
               "{where} its step alone allows {allowed})", baseline_against_step),
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
               "three; at or above the line: {above}).",
          throughput_ratios),
    Quote(DOC, "DOWNPOUR with 2 workers reached {downpour1} with one ps and "
               "{downpour2} with two (the sweep table)", sweeps_and_batch),
    Quote(DOC, "the three runs of one configuration differ by up to {percent} %: "
               "{scheme}'s went from {low} to {high} examples/s",
          widest_windowed_runs),
    Quote(DOC, "Start-up: the job's {tasks} tasks each import TensorFlow, which "
               "took a bare Python {bare} s in the synthetic run. {tasks_cap} "
               "imports each keeping one core busy that long would take at least "
               "{times} times as long on {cores} cores ({bound} s), {than} than "
               "the whole `run.sh` took ({run_sh} s): the bare import's time there "
               "was not all one core's computation, or the tasks' imports took "
               "less. The start-up suite's bare import, on {same}, took "
               "{startup_bare} s.", why_startup),
    # The accuracy bullets.
    Quote(DOC, "the baseline ends at {baseline}.", accuracy_runs),
    Quote(DOC, "AGN ({agn}; runs: {agn_runs}) and SAGN ({sagn})", accuracy_runs),
    Quote(DOC, "DOWNPOUR-Easy ({easy}; runs: {easy_runs}) applies the sum of 8 "
               "gradients as one step, 8 times as long, computed on a copy that "
               "misses about {easy_stale} of the other worker's minibatches",
          accuracy_runs),
    Quote(DOC, "DOWNPOUR ({downpour}; runs: {downpour_runs}) lets Adagrad on the "
               "ps damp the same sums, and ends {downpour_below} points below, "
               "{downpour_line} the one-point line: its commits at T = 8 are "
               "{downpour_stale} global steps stale", accuracy_runs),
    Quote(DOC, "In the sweep table (one run each), with 1 worker its commits "
               "{one_stale} and it ended at {one}; with 4 they are {four_stale} "
               "global steps stale, with either ps count, and it ended at "
               "{four}.", accuracy_runs),
    Quote(DOC, "Dynamic-SGD ({dynamic}; runs: {dynamic_runs}) divides each commit "
               "by its staleness plus one (a mean τ of {tau} commits here), so the "
               "central copy moved by {scale} of the workers' displacements",
          accuracy_runs),
    Quote(DOC, "Yet each run's best evaluation was within a point of the baseline "
               "({peaks}), and {last}: the median misses the one-point "
               "line by {dynamic_by}. The runs of Hogwild ({hogwild_runs}) and "
               "Multiple-GPUs-Single-Machine ({mgsm_runs}), which update the ps "
               "asynchronously every step, spread {widely}, their medians "
               "{inside} the line.", accuracy_runs),
    Quote(DOC, "Each evaluation for the curves takes about {ms} ms, the first of "
               "a run longer (`eval_s` in runs.jsonl: {share} % of a run's wall "
               "time, at the median), and is inside the measured training time",
          evaluations),
]
