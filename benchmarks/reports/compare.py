"""The `compare` report: every scheme on the same work, side by side with
the baseline measured in the same suite. Repeated runs are reported by
their medians; each ratio is to the baseline's."""

from .. import measures
from . import common
from .common import BASELINE, shown, topology

# The docs' generated blocks this report gives (benchmarks/docs.py): each
# snippet's name and how many arguments it takes.
SNIPPETS = {"table": 0}
TITLE = "Every scheme on the same work"
# The targets the schemes are held to, as ratios to the baseline.
EVERY_STEP_TARGET = ("Hogwild", "Synchronous-SGD")
WINDOW_TARGET = ("DOWNPOUR", "AGN", "SAGN", "Dynamic-SGD", "AEASGD", "AEAMSGD")
EVERY_STEP_MIN_RATIO, WINDOW_MIN_RATIO = 0.5, 0.8
ACCURACY_MAX_GAP = 0.01
STARTUP_MAX_RATIO = 2.0
# Below the baseline's final accuracy, the accuracy whose time is compared.
TARGET_BELOW_BASELINE = 0.02

COLUMNS = [("test_accuracy", "test accuracy", 4), ("examples_per_s", "examples/s", 0),
           ("throughput_ratio", "× baseline throughput", 2),
           ("time_to_target_s", "s to target", 2),
           ("time_to_target_ratio", "× baseline time to target", 2),
           ("rounds_per_1000_examples", "ps rounds / 1000 examples", 1),
           ("mean_staleness", "mean staleness (minibatches; Dynamic-SGD: commits)", 2)]
BATCH_COLUMNS = COLUMNS[:3] + COLUMNS[5:6]


def middle(values):
    """The median of an odd number of values (the upper one of an even
    number); None counts as larger than any number: never reached."""
    ordered = sorted(values, key=lambda value: (value is None, value or 0))
    return ordered[len(ordered) // 2] if ordered else None


def attempt(record, target):
    """One run's figures, its time to the target among them."""
    figures = dict(record["measures"], curve=record.get("curve", []))
    if "time_to_target_s" not in figures:  # converted runs carry their own
        figures["time_to_target_s"] = measures.seconds_to(figures["curve"], target)
    return figures


def combine(records, target):
    """One row for the runs of one configuration: each figure's median, and
    the accuracy curve of the run with the median throughput. A failed run
    makes it a failure."""
    run = records[0]["run"]
    row = {"scheme": run.get("scheme"), "run": run}
    failed = [record for record in records if record["status"] != "ok"]
    if failed:
        return dict(row, error=f"{len(failed)} of {len(records)} runs failed: "
                               f"{failed[0]['error']}" if len(records) > 1
                    else failed[0]["error"])
    attempts = [attempt(record, target) for record in records]
    ordered = sorted(attempts, key=lambda figures: figures["examples_per_s"])
    row["curve"] = ordered[len(ordered) // 2]["curve"]
    for key in ("test_accuracy", "examples_per_s", "wall_s", "time_to_target_s",
                "rounds_per_1000_examples", "mean_staleness"):
        row[key] = middle([figures.get(key) for figures in attempts])
    row["runs"] = sum(figures.get("runs", 1) for figures in attempts)
    return row


def ratio(value, reference):
    """value / reference, or None when either is missing or zero."""
    if value is None or not reference:
        return None
    return round(value / reference, 3)


def rows_of(group):
    """The tables' rows: {"main", "sweep", "batch", "startup"} and the
    target accuracy."""
    configs = list(common.by_config(group).values())
    baseline_runs = [records for records in configs
                     if records[0]["run"].get("scheme") == BASELINE
                     and "main" in records[0]["run"]["tables"]]
    finished = [record["measures"]["test_accuracy"] for records in baseline_runs[:1]
                for record in records if record["status"] == "ok"]
    target = round(middle(finished) - TARGET_BELOW_BASELINE, 4) if finished else None
    rows = {"main": [], "sweep": [], "batch": [], "startup": []}
    baselines = {}
    for records in configs:
        run = records[0]["run"]
        if "command" in run:
            rows["startup"].append(records)
            continue
        row = combine(records, target)
        if row["scheme"] == BASELINE and "error" not in row:
            baselines.setdefault(run.get("batch"), row)
        for table in run["tables"]:
            rows.setdefault(table, []).append(row)
    for table in ("main", "sweep", "batch"):
        for row in rows[table]:
            base = baselines.get(row["run"].get("batch"), {})
            row["throughput_ratio"] = ratio(row.get("examples_per_s"),
                                            base.get("examples_per_s"))
            row["time_to_target_ratio"] = ratio(row.get("time_to_target_s"),
                                                base.get("time_to_target_s"))
    rows["sweep"].sort(key=lambda row: (row["scheme"], row["run"].get("ps", 0),
                                        row["run"].get("workers", 1)))
    return rows, target


def startup_figures(groups):
    """A bare import against run.sh: medians, and their ratio."""
    if len(groups) < 2:
        return None
    bare, run_sh = ([record["measures"]["command_s"] for record in records
                     if record["status"] == "ok"] for records in groups[:2])
    if not bare or not run_sh:
        return None
    figures = {"import_s": common.median(bare), "run_sh_s": common.median(run_sh),
               "runs": max(sum(record["measures"].get("runs", 1)
                               for record in records) for records in groups[:2]),
               "command": groups[1][0]["command"].split(" --logdir")[0]}
    figures["ratio"] = round(figures["run_sh_s"] / figures["import_s"], 3)
    return figures


def targets(rows, startup, window):
    """One row per target: what, the measured value, the bound, met or not."""
    main = {row["scheme"]: row for row in rows["main"] if "error" not in row}
    lines = [(f"{row['scheme']} ran", row["error"], "no error", False)
             for row in rows["main"] if "error" in row]
    for names, label, bound in (
            (EVERY_STEP_TARGET, "2 workers", EVERY_STEP_MIN_RATIO),
            (WINDOW_TARGET, f"window {window}", WINDOW_MIN_RATIO)):
        for name in names:
            if name in main and main[name]["throughput_ratio"] is not None:
                measured = main[name]["throughput_ratio"]
                lines.append((f"{name} throughput, {label}", measured,
                              f">= {bound}", measured >= bound))
    baseline = main.get(BASELINE)
    for name, row in main.items():
        if name == BASELINE or baseline is None:
            continue
        gap = round(baseline["test_accuracy"] - row["test_accuracy"], 4)
        lines.append((f"{name} accuracy below the baseline's", gap,
                      f"<= {ACCURACY_MAX_GAP}", gap <= ACCURACY_MAX_GAP))
    if startup:
        lines.append(("start-up: run.sh over import tensorflow", startup["ratio"],
                      f"<= {STARTUP_MAX_RATIO}", startup["ratio"] <= STARTUP_MAX_RATIO))
    return lines


def row_cells(row, columns):
    cells = [row["scheme"], topology(row["run"])]
    if "error" in row:
        return cells + [f"failed: {row['error']}"] + [""] * (len(columns) - 1)
    return cells + [shown(row.get(key), digits) for key, _, digits in columns]


def section(group):
    rows, target = rows_of(group)
    run = group[0]["run"]
    startup = startup_figures(rows["startup"])
    settings = next((record["run"] for record in group if "examples" in
                     record["run"]), run)
    window = settings.get("window")
    repeats = max((row.get("runs", 1) for row in rows["main"]), default=1)
    parts = [f"Work per run: {settings.get('examples', 0):,} training examples, "
             f"global batch {settings.get('batch')}, {settings.get('dataset')} "
             f"data; windowed schemes use T = {window}. Target accuracy for the "
             f"time ratio: {shown(target, 4)} (the baseline's less "
             f"{TARGET_BELOW_BASELINE}).", "",
             "### Every scheme", "",
             "Each row: the medians of its runs" + (
                 f" (up to {repeats})." if repeats > 1 else ", one each."), ""]
    header = ["scheme", "topology"] + [title for _, title, _ in COLUMNS]
    parts += common.table(header, [row_cells(row, COLUMNS) for row in rows["main"]])
    if rows["sweep"]:
        parts += ["", "### Workers and parameter servers", ""]
        parts += common.table(header, [row_cells(row, COLUMNS)
                                       for row in rows["sweep"]])
    if rows["batch"]:
        batch = rows["batch"][0]["run"].get("batch")
        parts += ["", f"### A larger global batch: {batch}", "",
                  "Each ratio is to the baseline at the same batch.", ""]
        parts += common.table(["scheme", "topology"] + [title for _, title, _
                                                        in BATCH_COLUMNS],
                              [row_cells(row, BATCH_COLUMNS) for row in rows["batch"]])
    if startup:
        parts += ["", "### Start-up and shut-down", "",
                  f"`{startup['command']}`: {startup['run_sh_s']} s; bare "
                  f"`python -c \"import tensorflow\"`: {startup['import_s']} s; "
                  f"ratio {startup['ratio']} (medians of {startup['runs']})."]
    parts += ["", "### Targets", ""]
    parts += common.table(["target", "measured", "bound", "met"],
                          [(what, value, bound, "yes" if met else "**no**")
                           for what, value, bound, met in targets(rows, startup,
                                                                  window)])
    parts += ["", "Why a target is missed, measured: [the benchmarks' README]"
                  f"({common.README_LINK}#why-some-targets-are-missed).", ""]
    return parts


def plots(group, folder):
    """accuracy.png (test accuracy against time and against examples, every
    scheme of the main table) and throughput.png (examples/s against
    workers, one line per swept scheme and ps count)."""
    import os

    plt = common.pyplot()
    rows, _ = rows_of(group)
    main = [row for row in rows["main"] if "error" not in row and row["curve"]]
    written = []
    if main:
        figure, (by_time, by_examples) = plt.subplots(1, 2, figsize=(13, 5.5),
                                                      sharey=True)
        colours = plt.get_cmap("tab20").colors
        for index, row in enumerate(main):
            style = {"linewidth": 2.5, "color": "black"} if row["scheme"] == BASELINE \
                else {"linewidth": 1.2, "color": colours[index % len(colours)],
                      "linestyle": "-" if index % 2 else "--"}
            accuracy = [point["test_accuracy"] for point in row["curve"]]
            by_time.plot([point["wall_s"] for point in row["curve"]], accuracy,
                         marker=".", label=row["scheme"], **style)
            by_examples.plot([point["examples"] for point in row["curve"]],
                             accuracy, marker=".", **style)
        by_time.set(xlabel="seconds of training", ylabel="test accuracy",
                    title="Test accuracy over time")
        by_examples.set(xlabel="training examples seen", title="… and over examples")
        # The first evaluations are near chance; the differences are at the top.
        by_time.set_ylim(max(0.0, main[0]["test_accuracy"] - 0.25), None)
        for axes in (by_time, by_examples):
            axes.grid(alpha=0.3)
        figure.legend(loc="lower center", ncol=4, fontsize=8, frameon=False)
        figure.tight_layout(rect=(0, 0.16, 1, 1))
        common.save(figure, os.path.join(folder, "accuracy.png"), 100)
        written.append("accuracy.png")
    sweep = [row for row in rows["sweep"] if "error" not in row]
    if sweep:
        figure, axes = plt.subplots(figsize=(7, 4.5))
        for key in sorted({(row["scheme"], row["run"].get("ps", 0)) for row in sweep}):
            points = sorted((row["run"]["workers"], row["examples_per_s"])
                            for row in sweep
                            if (row["scheme"], row["run"].get("ps", 0)) == key)
            axes.plot(*zip(*points), marker="o", label=f"{key[0]}, {key[1]} ps")
        baseline = [row for row in rows["main"] if row["scheme"] == BASELINE
                    and "error" not in row]
        if baseline:
            axes.axhline(baseline[0]["examples_per_s"], color="black",
                         linestyle="--", label=BASELINE)
        axes.set(xlabel="workers", ylabel="examples/s (all workers)",
                 title="Throughput against workers")
        axes.set_xticks(sorted({row["run"]["workers"] for row in sweep}))
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
        figure.tight_layout()
        common.save(figure, os.path.join(folder, "throughput.png"), 100)
        written.append("throughput.png")
    return written


def snippet(name, args, source, link):
    """Generated text for the docs (see benchmarks/docs.py): `table`, the
    main table."""
    if name != "table":
        raise KeyError(name)
    rows, _ = rows_of(source.records)
    header = ["scheme", "topology"] + [title for _, title, _ in COLUMNS]
    return "\n".join(common.table(header, [row_cells(row, COLUMNS)
                                           for row in rows["main"]]))
