"""benchmarks/README.md's figures on start-up and the synthetic data, to
"Why some targets are missed" (bench_targets.py has the rest):
results/startup, results/synthetic and results/allreduce-synthetic.

A figure the reports' tables show is quoted as they show it (`shown`);
one the page works out from them is rounded as a decimal, halves up
(`rounded`, in bench_format.py). A native record is one run, its repeat in
`run["repeat"]`; a converted one holds a configuration's medians, with
each run's figure in a list (`each_run` reads both)."""

import statistics

from guide import examples

from ..docs import results
from ..provenance import described
from ..reports import compare, startup
from ..reports.common import by_config, shown
from . import Quote
from .bench_format import (
    DOC,
    MIRRORED,
    WORDS,
    beside_target,
    listed,
    machine,
    rounded,
    spread,
)


def on_machine_of(folder, other):
    """How `folder`'s machine stands to `other`'s, in words."""
    if machine(folder) == machine(other):
        return f"the {other} suite's machine too"
    return f"a different machine from the {other} suite's"


# Start-up: benchmarks/results/startup, through its report's summary.

def startup_figures():
    records = results("startup").records
    new, forked = startup.WAYS.values()
    bare = [record["measures"]["command_s"] for record in records
            if "command" in record["run"] and record["status"] == "ok"]
    figures = {"repeats": WORDS[max(record["run"]["repeat"] for record in records)],
               "bare": rounded(statistics.median(bare), 1),
               "machine": machine("startup"),
               "other": on_machine_of("startup", "network")}
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


def main_runs(schemes):
    """{scheme: its main-table configuration's successful records, in the
    order of their repeats}: three native records, or one converted."""
    chosen = [record for record in results("synthetic").records
              if record["status"] == "ok" and record["run"].get("scheme") in schemes
              and "main" in record["run"]["tables"]]
    return {records[0]["run"]["scheme"]: sorted(
                records, key=lambda record: record["run"].get("repeat", 1))
            for records in by_config(chosen).values()}


def each_run(records, key):
    """Each run's `key`: a native record's figure, or the list a converted
    record keeps of its runs' (`KEY_each_run`)."""
    values = []
    for record in records:
        figures = record["measures"]
        values += figures.get(f"{key}_each_run") or [figures[key]]
    return values


def runs_differ():
    """The widest gap between the runs of one asynchronous scheme: in
    accuracy points, and in throughput (the higher over the lower)."""
    asynchronous = [name for name, example in examples.BY_NAME.items()
                    if example.kind in (examples.EVERY_STEP, examples.WINDOW)]
    runs = main_runs(asynchronous).values()
    points = max(100 * (max(accuracy) - min(accuracy)) for accuracy in
                 (each_run(records, "test_accuracy") for records in runs))
    faster = max(max(speeds) / min(speeds) for speeds in
                 (each_run(records, "examples_per_s") for records in runs))
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
            "other": on_machine_of("synthetic", "network"),
            "met": sum(met for *_, met in judged), "targets": len(judged)}


def within_line(points):
    return points <= 100 * compare.ACCURACY_MAX_GAP


def accuracy_gaps():
    missed = [name for name in main_rows() if name != compare.BASELINE
              and not within_line(gap(name))]
    [dynamic] = main_runs(["Dynamic-SGD"]).values()
    inside = sum(within_line(100 * (main_rows()[compare.BASELINE]["test_accuracy"]
                                    - accuracy))
                 for accuracy in each_run(dynamic, "test_accuracy"))
    return {"missed": WORDS[len(missed)],
            "easy": rounded(gap("DOWNPOUR-Easy"), 1),
            "dynamic": beside_target(gap("Dynamic-SGD"), within_line, 1),
            "dynamic_inside": WORDS.get(inside, "none"),
            "dynamic_runs": WORDS[len(each_run(dynamic, "test_accuracy"))],
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
    names = [name for name in compare.WINDOW_TARGET
             if examples.BY_NAME[name].kind == examples.WINDOW]
    windowed = [rows[name]["throughput_ratio"] for name in names]
    line = compare.WINDOW_MIN_RATIO
    above = [name for name in names if rows[name]["throughput_ratio"] >= line]
    return {"every": spread(every, 2, form=shown),
            "windowed": spread(windowed, 2, form=lambda value, digits: beside_target(
                value, lambda ratio: ratio >= line, digits)),
            "above": listed(above) if above else "none",
            "easy": shown(rows["DOWNPOUR-Easy"]["throughput_ratio"], 2),
            "sagn": shown(rows["SAGN"]["throughput_ratio"], 2)}


def synthetic_startup():
    figures = compare.startup_figures(tables()["startup"])
    [cores] = {record["machine"]["cores"] for record in results("synthetic").records}
    hogwild = examples.BY_NAME["Hogwild"]
    tasks = hogwild.ps + hogwild.workers
    bound = tasks / cores * figures["import_s"]
    bare = [record["measures"]["command_s"] for record in results("startup").records
            if "command" in record["run"] and record["status"] == "ok"]
    return {"run_sh": rounded(figures["run_sh_s"], 2),
            "ratio": rounded(figures["ratio"], 2),
            "bare": rounded(figures["import_s"], 1), "tasks": WORDS[tasks],
            "cores": WORDS[cores], "times": rounded(tasks / cores, 1),
            "bound": rounded(bound, 1),
            "than": "longer" if bound > figures["run_sh_s"] else "no longer",
            "startup_bare": rounded(statistics.median(bare), 1),
            "same": "the same kind of machine" if machine("startup")
            == machine("synthetic") else "another machine"}


QUOTES = [
    # Start-up.
    Quote(DOC, "alternately, {repeats} times each. In the [latest run](results/"
               "startup/results.md), start-up (the launcher's start to the "
               "chief's first step, plus one final evaluation) was {new2} s "
               "against {forked2} s with 2 workers, and {new4} s against "
               "{forked4} s with 4 ({ratio4} times shorter); a bare `import "
               "tensorflow` takes {bare} s. The machine: {machine}, {other}.",
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
    Quote(DOC, "{date}, on {machine} ({other}). [`results/synthetic/results.md`]"
               "(results/synthetic/results.md) has every table, [`runs.jsonl`]"
               "(results/synthetic/runs.jsonl) every number. {met} of {targets} "
               "targets met.", latest_synthetic),
    Quote(DOC, "all but {missed} end within a point of the baseline: DOWNPOUR-Easy "
               "overshoots with its unscaled sums ({easy} points below), and "
               "Dynamic-SGD ends {dynamic} points below, though {dynamic_inside} "
               "of its {dynamic_runs} runs ended within it", accuracy_gaps),
    Quote(DOC, "AGN and SAGN end {agn} below and {sagn} above", accuracy_gaps),
    Quote(DOC, "Multi-Worker-Mirrored-Strategy (allreduce, no ps) ends where "
               "Synchronous-SGD does, {same}, at {times} times its throughput "
               "({ring} against {sync}).", mirrored_against_sync),
    Quote(DOC, "reach {every} of the baseline's throughput. The windowed schemes "
               "exchange once in eight steps: DOWNPOUR, AGN, Dynamic-SGD, AEASGD "
               "and AEAMSGD reach {windowed} (DOWNPOUR-Easy {easy}; SAGN, which is "
               "synchronous, {sagn})", throughput_ratios),
    Quote(DOC, "Start-up: `bash Hogwild/run.sh --train_steps 5` takes {run_sh} s, "
               "{ratio} times a bare `python -c \"import tensorflow\"` ({bare} s).",
          synthetic_startup),
]
