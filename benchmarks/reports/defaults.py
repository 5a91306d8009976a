"""The `defaults` report: every example as a user runs it, with its own
defaults, beside the baseline: final and late test accuracy, the whole
command's seconds, and the seconds of training to 97% and 98%."""

import os

from .. import measures
from ..errors import UsageError
from . import common
from .common import BASELINE, topology

# The docs' generated blocks this report gives (benchmarks/docs.py): each
# snippet's name and how many arguments it takes.
SNIPPETS = {"table": 0, "short": 0, "example": 1}
TITLE = "Every example with its defaults"
COLUMNS = ["example", "topology", "test accuracy", "− baseline", "late",
           "− baseline's", "steps", "examples", "seconds", "to 97%", "to 98%"]


def seconds(value):
    """A whole command's seconds, to the tenth: it varies by more from run
    to run."""
    return f"{value:.1f}"


def reached(value):
    return "not reached" if value is None else f"{value} s"


def rows_of(group):
    """(scheme, record) per run, the baseline's first."""
    return sorted(group, key=lambda record: record["run"].get("scheme") != BASELINE)


def baseline_of(group):
    """The baseline's finished run, or None."""
    return next((record for record in group
                 if record["run"].get("scheme") == BASELINE
                 and record["status"] == "ok"), None)


def late(record):
    figures = record["measures"]
    if "late_accuracy" in figures:
        return figures["late_accuracy"]
    return measures.late_accuracy(record["curve"]) if record.get("curve") else None


def row(record, baseline, baseline_late):
    figures = record["measures"]
    name, where = record["run"].get("scheme"), topology(record["run"])
    if record["status"] != "ok":
        return [name, where, f"failed: {record['error']}", "", "", "", "", "",
                seconds(figures["command_s"]), "", ""]
    gap = figures["test_accuracy"] - (baseline or figures)["test_accuracy"]
    mean = late(record)
    late_gap = mean - (mean if baseline_late is None else baseline_late)
    return [name, where, f"{figures['test_accuracy']:.4f}", f"{gap:+.4f}",
            f"{mean:.4f}", f"{late_gap:+.4f}", f"{figures['train_steps']:,}",
            f"{figures['examples']:,}", seconds(figures["command_s"]),
            reached(figures.get("s_to_97")), reached(figures.get("s_to_98"))]


def table(group):
    """The table's lines, for results.md and the docs that show it."""
    baseline = baseline_of(group)
    figures = baseline and baseline["measures"]
    baseline_late = late(baseline) if baseline else None
    return common.table(COLUMNS, [row(record, figures, baseline_late)
                                  for record in rows_of(group)])


def section(group):
    every = {record["run"].get("eval_every_examples") for record in group}
    return ["Each example ran as a user runs it, `bash run.sh --dataset mnist` "
            "with its defaults (the baseline: `python Non-Distributed_Setup.py "
            "--dataset mnist`), one at a time, with the tasks in *topology*. "
            "*Seconds* is the whole command, start-up and shut-down included; "
            "*to 97%* and *to 98%* are seconds of training (evaluations left "
            "out) until the test accuracy, measured every "
            f"{', '.join(f'{value:,}' for value in every if value) or '?'} "
            "examples, first reached them. *Late*: the mean test accuracy over "
            "the evaluations in the last tenth of the examples, which moves less "
            "from run to run than the last one.", "", *table(group), ""]


def plots(group, folder):
    """accuracy.png, every example; and one SCHEME.png per example against
    the baseline, which the examples' READMEs show."""
    plt = common.pyplot()
    finished = [record for record in rows_of(group)
                if record["status"] == "ok" and record.get("curve")]
    baseline = next((record for record in finished
                     if record["run"].get("scheme") == BASELINE), None)
    if baseline is None:
        return []

    def draw(axes_pair, record, style):
        by_time, by_examples = axes_pair
        curve = record["curve"]
        accuracy = [point["test_accuracy"] for point in curve]
        by_time.plot([point["wall_s"] for point in curve], accuracy,
                     marker=".", label=record["run"]["scheme"], **style)
        by_examples.plot([point["examples"] for point in curve], accuracy,
                         marker=".", **style)

    def finish(figure, axes_pair, name, legend_columns):
        by_time, by_examples = axes_pair
        by_time.set(xlabel="seconds (evaluations included)",
                    ylabel="MNIST test accuracy", title="Test accuracy over time")
        by_examples.set(xlabel="training examples seen", title="… and over examples")
        for axes in axes_pair:
            axes.set_ylim(0.90, 0.99)
            axes.grid(alpha=0.3)
            for target in measures.TARGETS:
                axes.axhline(target, color="grey", linewidth=0.8, linestyle=":")
        figure.legend(loc="lower center", ncol=legend_columns, fontsize=8,
                      frameon=False)
        figure.tight_layout(rect=(0, 0.14 if legend_columns > 2 else 0.08, 1, 1))
        common.save(figure, os.path.join(folder, name), 80)
        return name

    colours = plt.get_cmap("tab20").colors
    figure, axes_pair = plt.subplots(1, 2, figsize=(13, 5.5), sharey=True)
    for index, record in enumerate(finished):
        style = {"linewidth": 2.5, "color": "black"} if record is baseline else {
            "linewidth": 1.2, "color": colours[index % len(colours)],
            "linestyle": "-" if index % 2 else "--"}
        draw(axes_pair, record, style)
    written = [finish(figure, axes_pair, "accuracy.png", 4)]
    for record in finished:
        if record is baseline:
            continue
        figure, axes_pair = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
        draw(axes_pair, baseline, {"linewidth": 2, "color": "black"})
        draw(axes_pair, record, {"linewidth": 2, "color": "tab:red"})
        written.append(finish(figure, axes_pair, f"{record['run']['scheme']}.png", 2))
    return written


def linked(scheme, link):
    """The example's name, linked to its folder (the baseline to its script)."""
    from guide import examples

    example = examples.BY_NAME[scheme]
    if example.run_sh not in (None, "run.sh"):
        return scheme  # a second way of running a folder's script
    target = link(example.folder) + "/" if example.folder else link(example.script)
    return f"[{scheme}]({target})"


def snippet(name, args, source, link):
    """Generated text for the docs (see benchmarks/docs.py): `table`, every
    example linked; `short`, accuracy, seconds and 97% only; `example
    NAME`, the paragraph an example's README opens its MNIST section with."""
    group = source.records
    if name == "table":
        lines = table(group)
        for index, record in enumerate(rows_of(group), 2):
            scheme = record["run"]["scheme"]
            lines[index] = lines[index].replace(f"| {scheme} |",
                                                f"| {linked(scheme, link)} |", 1)
        return "\n".join(lines)
    if name == "short":
        return "\n".join(common.table(
            ["example", "topology", "test accuracy", "seconds", "to 97%"],
            [(record["run"]["scheme"], topology(record["run"]),
              f"{record['measures']['test_accuracy']:.4f}",
              seconds(record["measures"]["command_s"]),
              reached(record["measures"].get("s_to_97")))
             for record in rows_of(group) if record["status"] == "ok"]))
    if name == "example":
        return example_paragraph(args[0], group, link)
    raise KeyError(name)


def example_paragraph(scheme, group, link):
    import textwrap

    from guide import examples

    record = next((record for record in group if record["run"]["scheme"] == scheme
                   and record["status"] == "ok"), None)
    baseline = baseline_of(group)
    if record is None or baseline is None:
        raise UsageError(f"the latest runs of benchmarks/results/mnist have no "
                         f"finished run of {scheme if record is None else BASELINE}; "
                         f"run the suite to its end")
    figures, base = record["measures"], baseline["measures"]
    kind = examples.BY_NAME[scheme].kind
    steps = f"{figures['train_steps']:,} " + (
        "rounds" if kind == examples.SYNC_WINDOW else "steps")
    if kind == examples.ALLREDUCE:
        per_step = figures["examples"] // figures["train_steps"]
        workers = record["run"]["workers"]
        steps += f" of {workers} × {per_step // workers} examples"
    machine = record.get("machine", {}).get("cores")
    text = (f"With the real data sets' defaults ({steps}, {figures['examples']:,} "
            f"examples, η = {figures['learning_rate']:g}), measured on "
            f"{record['started'][:10]} on this repository's {machine}-core "
            f"machine ([benchmark]({link('benchmarks/results/mnist/results.md')})): "
            f"test accuracy **{figures['test_accuracy']:.4f}** (the baseline: "
            f"{base['test_accuracy']:.4f}), {seconds(figures['command_s'])} s for "
            f"the whole command. Seconds of training to 97%: "
            f"{reached(figures.get('s_to_97'))} (the baseline: "
            f"{reached(base.get('s_to_97'))}); to 98%: "
            f"{reached(figures.get('s_to_98'))} (the baseline: "
            f"{reached(base.get('s_to_98'))}).")
    return textwrap.fill(text, 100, break_on_hyphens=False, break_long_words=False)
