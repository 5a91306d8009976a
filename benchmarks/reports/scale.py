"""The `scale` report: every scheme at 2 to 40 workers on one machine, and
the windowed schemes at 16 workers with windows of 1 to 40: accuracy,
staleness, examples to 97% and what many workers cost two cores (start-up,
memory per task, examples per second against the 2-worker job's).

The suite takes hours, so it spans code changes (SPANS_CODE): each run's
newest record is tabled, whatever its code.
"""

import math
import os

from . import common

SPANS_CODE = True
SNIPPETS = {"pick": 0, "short": 0, "cost": 0, "staleness": 0}
TITLE = "Every scheme at 2 to 40 workers"
# The Hogwild runs the targets are read from.
REFERENCE = "Hogwild"
# E[tau] = n - 1 is checked at these worker counts, within this share.
STALENESS_CHECKED, STALENESS_TOLERANCE = (8, 16, 40), 0.15
# A run holds if its late accuracy is at least this close to the same
# scheme's best at any worker count (table "workers") or window.
HOLDS_WITHIN = 0.01


def ok(record):
    return record["status"] == "ok"


def of_table(group, name):
    return [record for record in group if name in record["run"]["tables"]]


def schemes_of(records):
    return list(dict.fromkeys(record["run"]["scheme"] for record in records))


def accuracy_order(record):
    """A run's place among its repeats: by late accuracy, a diverged or
    failed run the lowest."""
    if not ok(record) or record["measures"].get("diverged"):
        return -math.inf
    accuracy = record["measures"].get("late_accuracy")
    return -math.inf if accuracy is None else accuracy


def cells(records, key):
    """Per scheme, its runs by `key` (workers or window), in order:
    [(scheme, value, [the runs of that cell, the suite's repeats])]."""
    grouped = {}
    for record in records:
        run = record["run"]
        grouped.setdefault((run["scheme"], run.get(key)), []).append(record)
    order = {scheme: index for index, scheme in enumerate(schemes_of(records))}
    return [(scheme, value, runs) for (scheme, value), runs in sorted(
        grouped.items(), key=lambda item: (order[item[0][0]], item[0][1] or 0))]


def median_run(runs):
    """The cell's median run by late accuracy (of two, the lower), whose
    figures stand for the cell: a single run can be a point or more off the
    next, as the same DOWNPOUR job at 16 workers was."""
    return sorted(runs, key=accuracy_order)[(len(runs) - 1) // 2]


def median(values):
    return common.median(values, digits=None)


def accuracy_cell(figures, runs=()):
    """The late test accuracy, or "diverged"; with repeats, their range
    and count after it."""
    cell = ("diverged" if figures.get("diverged")
            else common.shown(percent(figures.get("late_accuracy")), 2, "%"))
    if len(runs) > 1:
        shown = ["diverged" if value == -math.inf else f"{100 * value:.2f}"
                 for value in sorted(map(accuracy_order, runs))]
        cell += f" ({shown[0]}–{shown[-1]}, {len(runs)} runs)"
    return cell


def percent(value):
    return None if value is None else round(100 * value, 2)


def staleness_cell(figures):
    if figures.get("staleness_mean") is None:
        return "–"
    return (f"{figures['staleness_mean']:.1f} / {figures['staleness_p95']:g} / "
            f"{figures['staleness_max']:g}")


def baseline_rate(records, scheme):
    """The scheme's examples per second with 2 workers (the median of
    its runs), if measured."""
    return median(record["measures"].get("examples_per_s")
                  for record in records if ok(record)
                  and record["run"]["scheme"] == scheme
                  and record["run"].get("workers") == 2)


def row_cells(record, records, runs=()):
    figures = record["measures"]
    if not ok(record):
        return [f"failed: {record['error'][:80]}"] + ["–"] * 7
    base = baseline_rate(records, record["run"]["scheme"])
    rate = figures.get("examples_per_s")
    ratio = f"{rate / base:.2f}" if base and rate else "–"
    to_97 = figures.get("examples_to_97")
    return [accuracy_cell(figures, runs),
            common.shown(percent(figures.get("train_accuracy")), 2, "%"),
            common.shown(percent(figures.get("test_accuracy")), 2, "%"),
            "–" if to_97 is None else f"{to_97:,}",
            staleness_cell(figures), common.shown(rate, 0), ratio]


def workers_table(records):
    rows = [[scheme, workers] + row_cells(median_run(runs), records, runs)
            for scheme, workers, runs in cells(records, "workers")]
    return common.table(["scheme", "workers", "late test acc", "train acc",
                         "final test acc", "examples to 97%",
                         "staleness mean / p95 / max", "examples/s",
                         "× 2 workers"], rows)


def windows_table(records):
    rows = [[scheme, "–" if window is None else window]
            + row_cells(median_run(runs), records, runs)[:6]
            for scheme, window, runs in cells(records, "window")]
    return common.table(["scheme", "window", "late test acc", "train acc",
                         "final test acc", "examples to 97%",
                         "staleness mean / p95 / max", "examples/s"], rows)


def cost_rows(records):
    """The reference scheme's runs, by workers: start-up, memory per task
    and examples per second against its 2-worker run."""
    rows = []
    for _, workers, runs in cells([record for record in records if ok(record)
                                   and record["run"]["scheme"] == REFERENCE],
                                  "workers"):
        def of_runs(name, runs=runs):  # the median over the cell's repeats
            return median(record["measures"].get(name) for record in runs)

        rows.append({"workers": workers, "startup_s": of_runs("startup_s"),
                     "memory_mib": of_runs("memory_mib_per_task"),
                     "rate": of_runs("examples_per_s")})
    base = next((row for row in rows if row["workers"] == 2), None)
    for row in rows if base else []:
        if row["startup_s"] and base["startup_s"]:
            row["startup_ratio"] = round(row["startup_s"] / base["startup_s"], 2)
        if row["rate"] and base["rate"]:
            row["rate_ratio"] = round(row["rate"] / base["rate"], 2)
    return rows


def cost_table(records):
    return common.table(
        ["workers", "start-up", "× 2 workers",
         "memory per task", "examples/s", "× 2 workers"],
        [(row["workers"], common.shown(row["startup_s"], 1, " s"),
          common.shown(row.get("startup_ratio")),
          common.shown(row["memory_mib"], 0, " MiB"), common.shown(row["rate"], 0),
          common.shown(row.get("rate_ratio"))) for row in cost_rows(records)])


def staleness_checks(records):
    """Per checked worker count: the reference scheme's measured mean
    staleness against n - 1, and whether it is within the tolerance."""
    checks = []
    for workers in STALENESS_CHECKED:
        mean = median(record["measures"].get("staleness_mean")
                      for record in records if ok(record)
                      and record["run"]["scheme"] == REFERENCE
                      and record["run"]["workers"] == workers)
        if mean is None:
            continue
        expected = workers - 1
        checks.append({"workers": workers, "mean": mean, "expected": expected,
                       "within": abs(mean - expected) <= STALENESS_TOLERANCE
                       * expected})
    return checks


def holds(records, key, best_of=None):
    """Per scheme, the values of `key` (workers or window) where the late
    accuracy is within HOLDS_WITHIN of the scheme's best (at any value, or
    `best_of[scheme]` if given), and the first (smallest) where it is not:
    [(scheme, held, first broken, best, {value: accuracy})]."""
    verdicts = []
    by_scheme = {}
    for scheme, value, runs in cells(list(filter(ok, records)), key):
        accuracy = accuracy_order(median_run(runs))
        if value is not None:
            by_scheme.setdefault(scheme, {})[value] = (
                None if accuracy == -math.inf else accuracy)
    for scheme, accuracies in by_scheme.items():
        finite = [value for value in accuracies.values() if value is not None]
        if not finite:
            continue
        best = (best_of or {}).get(scheme, max(finite))
        held = [value for value, accuracy in accuracies.items()
                if accuracy is not None and accuracy >= best - HOLDS_WITHIN]
        broken = [value for value, accuracy in accuracies.items()
                  if accuracy is None or accuracy < best - HOLDS_WITHIN]
        verdicts.append((scheme, held, broken[0] if broken else None, best,
                         accuracies))
    return verdicts


def not_run(records, scheme):
    """The worker counts at which every run of `scheme` failed, and why in
    a few words."""
    counts, memory = [], False
    for name, workers, runs in cells(records, "workers"):
        if name == scheme and not any(map(ok, runs)):
            counts.append(workers)
            memory = memory or all("GiB" in run.get("error", "") for run in runs)
    if not counts:
        return ""
    why = ("the launcher refused them, short of memory on this machine"
           if memory else "they failed (the table gives the error)")
    return f" Not run at {', '.join(map(str, counts))} workers: {why}."


def windows_named(windows):
    return (f"window{'s' if len(windows) > 1 else ''} "
            f"{', '.join(map(str, windows))}")


def pick_lines(group):
    """What to pick at which scale: per scheme, where it holds and where it
    first breaks, from both tables; a window holds if it keeps the scheme
    within a point of its best at any worker count."""
    lines = []
    workers = of_table(group, "workers")
    verdicts = holds(workers, "workers")
    best_of = {scheme: best for scheme, _, _, best, _ in verdicts}
    windows = {scheme: (held, accuracies) for scheme, held, _, _, accuracies
               in holds(of_table(group, "windows"), "window", best_of)}
    for scheme, held, broken, best, _ in verdicts:
        text = (f"- **{scheme}**: best late accuracy {100 * best:.2f}%; within "
                f"{100 * HOLDS_WITHIN:g} point of it at "
                f"{', '.join(map(str, held))} workers")
        text += (f"; first below at {broken} workers." if broken
                 else f"; none below up to {max(held)}, the most run.")
        text += not_run(workers, scheme)
        if scheme in windows:
            window_held, accuracies = windows[scheme]
            finite = {window: accuracy for window, accuracy in accuracies.items()
                      if accuracy is not None}
            top = max(finite, key=finite.get) if finite else None
            best_window = (f" (best: window {top}, {100 * finite[top]:.2f}%)"
                           if top is not None else "")
            others = [window for window in accuracies if window not in window_held]
            if window_held:
                text += (f" At 16 workers, {windows_named(window_held)} "
                         f"{'keeps' if len(window_held) == 1 else 'keep'} it "
                         f"within a point of that"
                         + (f"; {windows_named(others)} "
                            f"{'does' if len(others) == 1 else 'do'} not."
                            if others else "."))
            else:
                text += (f" At 16 workers, no window keeps it within a point of "
                         f"that{best_window}.")
        lines.append(text)
    return lines


def short_lines(group):
    """The schemes grouped by the most workers they hold at, every count
    from 2 up to it holding: the front page's answer."""
    reach = {}
    for scheme, held, broken, _, accuracies in holds(of_table(group, "workers"),
                                                     "workers"):
        counts = sorted(accuracies)
        upto = [count for count in counts if broken is None or count < broken]
        if upto and set(upto) <= set(held):
            reach.setdefault(max(upto), []).append(scheme)
    lines = []
    for count in sorted(reach, reverse=True):
        lines.append(f"- **up to {count} workers**: {', '.join(reach[count])}")
    return lines


def targets_lines(group):
    records = of_table(group, "workers")
    lines = []
    rows = {row["workers"]: row for row in cost_rows(records)}
    top = rows.get(max(rows)) if rows else None
    if top and top["workers"] > 2 and "startup_ratio" in top:
        lines.append(f"- Start-up at {top['workers']} workers: "
                     f"{top['startup_ratio']}× the 2-worker job's (target: at "
                     f"most 5×).")
    if top and top["workers"] > 2 and "rate_ratio" in top:
        lines.append(f"- Examples per second at {top['workers']} workers: "
                     f"{top['rate_ratio']}× the 2-worker job's (target: at "
                     f"least 0.7×).")
    for check in staleness_checks(records):
        share = (check["mean"] - check["expected"]) / check["expected"]
        lines.append(f"- {REFERENCE}'s mean staleness at {check['workers']} "
                     f"workers: {check['mean']:.2f} commits against n − 1 = "
                     f"{check['expected']} ({100 * share:+.0f}%; target: "
                     f"within {100 * STALENESS_TOLERANCE:.0f}%).")
    return lines


def section(group):
    workers, windows = of_table(group, "workers"), of_table(group, "windows")
    parts = ["MNIST, each worker's minibatch 128, every scheme with its own "
             "defaults but for the window where stated. *Late test acc*: the "
             "mean of the evaluations in the run's last tenth of examples; "
             "*diverged*: a loss that is not finite, or a test accuracy at "
             "chance. *Staleness*: commits that reached the central copy "
             "between a worker's pull and its commit, over the run's commits "
             "(mean / 95th percentile / max). *× 2 workers*: the job's "
             "examples per second against the same scheme's 2-worker run; "
             "the two cores bound both. A cell the suite ran more than once shows "
             "its median run (of two, the lower) and, in brackets, the range "
             "of its runs' late test accuracy.", ""]
    if workers:
        parts += ["## Workers", ""] + workers_table(workers) + [""]
        parts += [f"## What many workers cost: {REFERENCE}", "",
                  "*Start-up*: the launch to the chief's RESULT line, less "
                  "its training and its first and last evaluations; *memory "
                  "per task*: the job's peak proportional set size over its "
                  "tasks; *examples/s*: the job's, over the chief's training "
                  "time.", ""] + cost_table(workers) + [""]
    if windows:
        parts += ["## Windows, at 16 workers", ""] + windows_table(windows) + [""]
    if workers:
        parts += ["## What to pick at which scale", ""] + pick_lines(group) + [""]
        parts += ["## Targets", ""] + targets_lines(group) + [""]
    return parts


def plotted_accuracy(record):
    """The late accuracy a plot shows: 0 for a run that diverged, a gap
    where none was measured."""
    if record["measures"].get("diverged"):
        return 0.0
    return record["measures"].get("late_accuracy") or math.nan


def plots(group, folder):
    plt = common.pyplot()
    written = []
    workers = [record for record in of_table(group, "workers") if ok(record)]
    if workers:
        figure, (accuracy_axes, staleness_axes) = plt.subplots(
            1, 2, figsize=(13, 5.5))
        colours = plt.get_cmap("tab20").colors
        for index, scheme in enumerate(schemes_of(workers)):
            runs = [median_run(runs) for name, _, runs in cells(workers, "workers")
                    if name == scheme]
            counts = [record["run"]["workers"] for record in runs]
            accuracy = [plotted_accuracy(record) for record in runs]
            style = {"color": colours[index % len(colours)], "marker": "o",
                     "linewidth": 1.2}
            accuracy_axes.plot(counts, accuracy, label=scheme, **style)
            staleness = [record["measures"].get("staleness_mean") for record in runs]
            if any(value is not None for value in staleness):
                staleness_axes.plot(counts, [math.nan if value is None else value
                                             for value in staleness], **style)
        counts = sorted({record["run"]["workers"] for record in workers})
        staleness_axes.plot(counts, [count - 1 for count in counts], color="black",
                            linestyle=":", label="n − 1")
        accuracy_axes.set(xscale="log", xlabel="workers",
                          ylabel="late MNIST test accuracy",
                          title="Accuracy against workers (0: diverged)")
        accuracy_axes.set_ylim(0.9, 0.99)
        staleness_axes.set(xscale="log", yscale="log", xlabel="workers",
                           ylabel="mean staleness (commits)",
                           title="Staleness against workers")
        for axes in (accuracy_axes, staleness_axes):
            axes.set_xticks(counts, [str(count) for count in counts])
            axes.grid(alpha=0.3)
        staleness_axes.legend(fontsize=8, frameon=False)
        figure.legend(loc="lower center", ncol=5, fontsize=8, frameon=False)
        figure.tight_layout(rect=(0, 0.12, 1, 1))
        common.save(figure, os.path.join(folder, "scale-workers.png"), 80)
        written.append("scale-workers.png")
    windows = [record for record in of_table(group, "windows") if ok(record)]
    if windows:
        figure, axes = plt.subplots(figsize=(7, 5))
        for scheme in schemes_of(windows):
            runs = [median_run(runs) for name, _, runs in cells(windows, "window")
                    if name == scheme]
            axes.plot([record["run"]["window"] for record in runs],
                      [plotted_accuracy(record) for record in runs],
                      marker="o", label=scheme)
        axes.set(xscale="log", xlabel="communication window (local steps)",
                 ylabel="late MNIST test accuracy",
                 title="16 workers: accuracy against the window (0: diverged)")
        axes.set_ylim(0.9, 0.99)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8, frameon=False)
        figure.tight_layout()
        common.save(figure, os.path.join(folder, "scale-windows.png"), 80)
        written.append("scale-windows.png")
    return written


def snippet(name, args, source, link):
    """The docs' blocks: `pick` (what to pick at which scale), `short` (the
    schemes by the most workers each holds at), `cost` (what
    many workers cost two cores) and `staleness` (the E[τ] = n − 1 check)."""
    group = source.records
    results = link(os.path.join("benchmarks", "results", source.folder, "results.md"))
    if name == "pick":
        lines = pick_lines(group)
    elif name == "short":
        lines = short_lines(group)
    elif name == "cost":
        lines = cost_table(of_table(group, "workers"))
    elif name == "staleness":
        lines = [line for line in targets_lines(group) if "staleness" in line]
    else:
        raise KeyError(name)
    return "\n".join(lines + ["", f"From [the scale suite's results]({results})."])
