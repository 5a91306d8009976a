"""The `thesis` report: Hermans' AGN/AEASGD grid (n workers x window λ,
benchmarks/anchors/) side by side with the same grid measured here, with
this collection's model and with the thesis's own for the cells that carry
its findings; DOWNPOUR at 10 and 20 workers; and each of the thesis's
findings stated against the measured figures.

The suite takes many hours, so it spans code changes (SPANS_CODE).
"""

import csv
import math
import os

from . import common

SPANS_CODE = True
SNIPPETS = {"findings": 0, "grid": 1}
TITLE = "The AGN thesis's grid, side by side"
ANCHOR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "anchors", "hermans-thesis-agn-aeasgd-grid.csv")
SCHEMES = {"AGN": "agn", "AEASGD": "aeasgd"}
# A finding's accuracy "holds" within, and "falls" by more than, a point.
POINT = 0.01


def thesis_grid():
    """{(scheme, n, λ): {"time_s", "train", "test"}} from the thesis's table,
    accuracies as fractions (its validation set is MNIST's test set)."""
    grid = {}
    with open(ANCHOR, newline="") as stream:
        for row in csv.DictReader(stream):
            for scheme, prefix in SCHEMES.items():
                grid[scheme, int(row["workers"]), int(row["window"])] = {
                    "time_s": float(row[f"{prefix}_time_s"]),
                    "train": float(row[f"{prefix}_train_acc_pct"]) / 100,
                    "test": float(row[f"{prefix}_val_acc_pct"]) / 100}
    return grid


def measured(group, table):
    """{(scheme, n, λ): measures} of the table's runs that finished; a
    diverged run's accuracies as they were (at chance)."""
    cells = {}
    for record in group:
        run = record["run"]
        if table in run["tables"] and record["status"] == "ok":
            cells[run["scheme"], run["workers"], run.get("window", 1)] = \
                record["measures"]
    return cells


def failed(group, table):
    return [record for record in group if table in record["run"]["tables"]
            and record["status"] != "ok"]


def pct(value, digits=2):
    return "–" if value is None else f"{100 * value:.{digits}f}"


def cell(figures, key, thesis=None):
    """"measured (thesis)" in percent; "diverged" where it did."""
    if figures is None:
        text = "–"
    elif figures.get("diverged"):
        text = "diverged"
    else:
        text = pct(figures.get(key))
    return text if thesis is None else f"{text} ({pct(thesis)})"


def with_unit(text):
    """A percentage with its sign; a word ("diverged", "–") as it is."""
    return f"{text}%" if text[:1].isdigit() else text


def grid_table(scheme, cells, key="test_accuracy", thesis_key="test"):
    thesis = thesis_grid()
    workers = sorted({n for (_, n, _) in thesis})
    windows = sorted({window for (_, _, window) in thesis})
    return common.table(
        ["n \\ λ"] + [str(window) for window in windows],
        [[str(n)] + [cell(cells.get((scheme, n, window)), key,
                          thesis[scheme, n, window][thesis_key])
                     for window in windows] for n in workers])


def mean(values):
    values = [value for value in values if value is not None]
    return sum(values) / len(values) if values else None


def accuracy(cells, scheme, n, window, key="test_accuracy"):
    figures = cells.get((scheme, n, window))
    if figures is None:
        return None
    if figures.get("diverged"):
        return figures.get(key) or 0.0
    return figures.get(key)


def by_workers(cells, scheme, key, windows=None):
    """{n: the mean over the windows of `key`}, where measured."""
    found = {}
    for (name, n, window) in cells:
        if name == scheme and (windows is None or window in windows):
            found.setdefault(n, []).append(accuracy(cells, scheme, n, window, key))
    return {n: mean(values) for n, values in sorted(found.items())}


def verdict(holds):
    if holds is None:
        return "not measured yet"
    return "**reproduces**" if holds else "**does not reproduce**"


def thesis_mean(scheme, key, workers, windows=range(10, 45, 5)):
    """The thesis's `key` averaged over its cells with these workers and
    windows."""
    thesis = thesis_grid()
    return mean(thesis[scheme, n, window][key] for n in workers for window in windows)


def downpour_finding(group, scheme, how):
    """DOWNPOUR at 10 and 20 workers, 5 epochs: as dist-keras ran it (AGN
    with a window of 1 committing the whole displacement) or as this
    collection's DOWNPOUR example runs it."""
    cells = measured(group, "downpour")
    ten, twenty = cells.get((scheme, 10, 1)), cells.get((scheme, 20, 1))
    holds = None
    if ten and twenty:
        holds = not ten.get("diverged") and bool(twenty.get("diverged"))
    return (f"DOWNPOUR converges with n = 10 and diverges with n = 20 (5 "
            f"epochs, the thesis's model; {how})", "a figure: converged; diverged",
            f"n = 10: {with_unit(cell(ten, 'test_accuracy'))}; n = 20: "
            f"{with_unit(cell(twenty, 'test_accuracy'))}", verdict(holds))


def agn_training_finding(cells, model):
    train = by_workers(cells, "AGN", "train_accuracy")
    early = mean(value for n, value in train.items() if n <= 20)
    late = mean(value for n, value in train.items() if n >= 25)
    holds = None if early is None or late is None else early - late > POINT / 2
    return (f"AGN's training accuracy falls from n = 25 ({model})",
            f"mean over λ, n ≤ 20: {pct(thesis_mean('AGN', 'train', (10, 15, 20)))}%, "
            f"n ≥ 25: {pct(thesis_mean('AGN', 'train', (25, 30, 35, 40)))}%",
            f"n ≤ 20: {pct(early)}%, n ≥ 25: {pct(late)}%", verdict(holds))


def agn_wide_window_finding(cells, model):
    wide = [accuracy(cells, "AGN", n, window) for (scheme, n, window) in cells
            if scheme == "AGN" and window >= 20]
    wide = [value for value in wide if value is not None]
    thesis = thesis_grid()
    thesis_wide = [thesis["AGN", n, window]["test"] for n in range(10, 45, 5)
                   for window in range(20, 45, 5)]
    holds = None if not wide else max(wide) - min(wide) <= POINT
    return (f"AGN's test accuracy holds up to n = 40 when λ ≥ 20 ({model})",
            f"{pct(min(thesis_wide))}% to {pct(max(thesis_wide))}%",
            f"{pct(min(wide))}% to {pct(max(wide))}%" if wide else "–",
            verdict(holds))


def agn_collapse_finding(cells, model):
    narrow, wide = accuracy(cells, "AGN", 40, 10), accuracy(cells, "AGN", 40, 40)
    thesis = thesis_grid()
    holds = None if narrow is None or wide is None else wide - narrow > POINT
    return (f"AGN collapses at n = 40 with λ = 10, not with λ = 40 ({model})",
            f"λ = 10: {pct(thesis['AGN', 40, 10]['test'])}%, λ = 40: "
            f"{pct(thesis['AGN', 40, 40]['test'])}%",
            f"λ = 10: {pct(narrow)}%, λ = 40: {pct(wide)}%", verdict(holds))


def aeasgd_finding(cells, model):
    test = by_workers(cells, "AEASGD", "test_accuracy")
    counts = [n for n, value in test.items() if value is not None]
    holds = None
    if len(counts) >= 2:
        holds = test[counts[0]] - test[counts[-1]] > POINT / 2
    return (f"AEASGD's test accuracy falls as n grows ({model})",
            f"mean over λ: n = 10: {pct(thesis_mean('AEASGD', 'test', (10,)))}%, "
            f"n = 40: {pct(thesis_mean('AEASGD', 'test', (40,)))}%",
            ", ".join(f"n = {n}: {pct(test[n])}%" for n in counts) or "–",
            verdict(holds))


def findings(group):
    """Each finding of the thesis, its figures there and here, and whether
    it reproduces: [(finding, the thesis's figures, measured, verdict)]."""
    models = (("this collection's model", measured(group, "grid")),
              ("the thesis's model", measured(group, "thesis-model")))
    rows = [downpour_finding(group, "AGN", "dist-keras's: AGN at λ = 1"),
            downpour_finding(group, "DOWNPOUR", "the DOWNPOUR example, window 1"),
            agn_training_finding(*models[0][::-1])]
    for finding in (agn_wide_window_finding, agn_collapse_finding, aeasgd_finding):
        rows += [finding(cells, model) for model, cells in models]
    return rows


def findings_table(group):
    return common.table(["the thesis finds", "its figures", "measured here", ""],
                        findings(group))


def cost_table(group):
    """The runs with the thesis's model: what each cost here."""
    rows = []
    for record in group:
        run = record["run"]
        if not {"thesis-model", "downpour"} & set(run["tables"]):
            continue
        figures = record["measures"]
        rows.append((run["scheme"], run["workers"], run.get("window", 1),
                     cell(figures, "test_accuracy") if record["status"] == "ok"
                     else "failed",
                     cell(figures, "train_accuracy") if record["status"] == "ok"
                     else "–",
                     common.shown(figures.get("staleness_mean"), 1),
                     f"{figures['command_s'] / 60:.0f} min"))
    return common.table(["scheme", "n", "λ", "test acc %", "train acc %",
                         "mean staleness", "cost here"], rows)


def section(group):
    ours = measured(group, "grid")
    parts = ["MNIST, minibatch 128 per worker, 40 epochs of training examples "
             "split over the n workers (DOWNPOUR: 5), Adam on every worker "
             "(learning rate 0.001), AEASGD's elastic force α = 0.05: the "
             "thesis's settings (benchmarks/anchors/README.md). Each cell: "
             "the final test accuracy measured here, in percent, and in "
             "brackets the thesis's validation accuracy (MNIST's test set "
             "too); *diverged*: a loss that is not finite, or an accuracy at "
             "chance. The thesis's training times are a 15-node cluster's; "
             "this machine's two cores cannot give comparable ones.", ""]
    for scheme in SCHEMES:
        parts += [f"## {scheme}, this collection's model (784-128-10): test "
                  f"accuracy", ""] + grid_table(scheme, ours) + [""]
        parts += [f"## {scheme}, this collection's model: training accuracy",
                  ""] + grid_table(scheme, ours, "train_accuracy", "train") + [""]
    parts += ["## The thesis's model (784-1000-2000-1000-10), and DOWNPOUR", ""]
    parts += cost_table(group) + [""]
    parts += ["## The thesis's findings", ""] + findings_table(group) + [""]
    broken = failed(group, "grid") + failed(group, "thesis-model") + \
        failed(group, "downpour")
    if broken:
        parts += [f"{len(broken)} run(s) failed; see the header."]
    return parts


def plots(group, folder):
    """thesis-grid.png: the test accuracy over (n, λ), measured against the
    thesis's, one heat map each, on one colour scale."""
    cells = measured(group, "grid")
    if not cells:
        return []
    plt = common.pyplot()
    thesis = thesis_grid()
    workers = sorted({n for (_, n, _) in thesis})
    windows = sorted({window for (_, _, window) in thesis})
    figure, axes = plt.subplots(2, 2, figsize=(11, 9.5), sharex=True, sharey=True)
    image = None
    for row, scheme in enumerate(SCHEMES):
        for column, (title, grid) in enumerate((
                ("measured here", [[accuracy(cells, scheme, n, window)
                                    for window in windows] for n in workers]),
                ("the thesis", [[thesis[scheme, n, window]["test"]
                                 for window in windows] for n in workers]))):
            grid = [[math.nan if value is None else 100 * value for value in line]
                    for line in grid]
            image = axes[row][column].imshow(grid, origin="lower", cmap="viridis",
                                             vmin=95, vmax=99, aspect="auto")
            for i, line in enumerate(grid):
                for j, value in enumerate(line):
                    if not math.isnan(value):
                        axes[row][column].text(j, i, f"{value:.1f}", ha="center",
                                               va="center", fontsize=7,
                                               color="white")
            axes[row][column].set_title(f"{scheme}, {title}")
            axes[row][column].set_xticks(range(len(windows)), windows)
            axes[row][column].set_yticks(range(len(workers)), workers)
    for axes_row in axes:
        axes_row[0].set_ylabel("workers n")
    for axes_column in axes[-1]:
        axes_column.set_xlabel("window λ")
    figure.colorbar(image, ax=axes, label="MNIST test accuracy, % (below 95: "
                                          "the darkest)")
    common.save(figure, os.path.join(folder, "thesis-grid.png"), 80)
    return ["thesis-grid.png"]


def snippet(name, args, source, link):
    """The docs' blocks: `findings` (the findings table) and `grid SCHEME`
    (that scheme's test-accuracy grid beside the thesis's)."""
    group = source.records
    results = link(os.path.join("benchmarks", "results", source.folder, "results.md"))
    if name == "findings":
        lines = findings_table(group)
    elif name == "grid":
        if args[0] not in SCHEMES:
            raise KeyError(name)
        lines = grid_table(args[0], measured(group, "grid"))
    else:
        raise KeyError(name)
    return "\n".join(lines + ["", f"From [the thesis suite's results]({results})."])
