"""Writing the benchmark's results: the line printed after each
configuration, results.md, runs.csv and the plots."""

import csv
import os
import sys

from plan import BASELINE


def shown(value, digits=None):
    if value is None:
        return "–"
    if digits is not None:
        return f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


MAIN_COLUMNS = [
    ("scheme", "scheme", None), ("workers", "workers", None), ("ps", "ps", None),
    ("test_accuracy", "test accuracy", 4), ("examples_per_s", "examples/s", 0),
    ("throughput_ratio", "× baseline throughput", 2),
    ("time_to_target_s", "s to target", 2),
    ("time_to_target_ratio", "× baseline time to target", 2),
    ("rounds_per_1000_examples", "ps rounds / 1000 examples", 1),
    ("mean_staleness", "mean staleness", 2)]


BATCH_COLUMNS = [
    ("scheme", "scheme", None), ("workers", "workers", None), ("ps", "ps", None),
    ("test_accuracy", "test accuracy", 4), ("examples_per_s", "examples/s", 0),
    ("throughput_ratio", "× baseline throughput", 2),
    ("rounds_per_1000_examples", "ps rounds / 1000 examples", 1)]


def markdown_table(records, columns=MAIN_COLUMNS):
    lines = ["| " + " | ".join(title for _, title, _ in columns) + " |",
             "|" + "---|" * len(columns)]
    for record in records:
        if "error" in record:
            cells = [record["scheme"], shown(record["workers"]), shown(record["ps"]),
                     f"failed: {record['error']}"] + [""] * (len(columns) - 4)
        else:
            cells = [shown(record.get(key), digits) for key, _, digits in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_markdown(path, meta, records, startup, targets):
    main = [record for record in records if record.get("main")]
    batch_study = [record for record in records if record.get("batch_study")]
    sweep = sorted((record for record in records if record.get("sweep")),
                   key=lambda record: (record["scheme"], record["ps"],
                                       record["workers"]))
    parts = [
        f"# Benchmark results ({meta['date']})", "",
        f"Command: `{meta['command']}`  ",
        f"Hardware: {meta['hardware']}  ",
        f"Software: {meta['software']}  ",
        f"Work per run: {meta['examples']:,} training examples, global batch "
        f"{meta['batch_size']}, {meta['dataset']} data; windowed schemes use "
        f"T = {meta['window']}. Target accuracy for the time ratio: "
        f"{meta['target_accuracy']:.4f}.", "",
        "## Every scheme, 1 ps", "",
        f"Each row: the medians of {meta['repeats']} runs (every run's accuracy "
        f"and examples/s are in runs.csv).", "", markdown_table(main), ""]
    if sweep:
        parts += ["## Workers and parameter servers", "", markdown_table(sweep), ""]
    if batch_study:
        parts += [f"## A larger global batch: {batch_study[0]['global_batch']}", "",
                  "Each ratio is to the baseline at the same batch.", "",
                  markdown_table(batch_study, BATCH_COLUMNS), ""]
    if startup:
        parts += ["## Start-up and shut-down", "",
                  f"`{startup['command']}`: {startup['run_sh_s']} s; bare "
                  f"`python -c \"import tensorflow\"`: "
                  f"{startup['import_tensorflow_s']} s; ratio "
                  f"{startup['ratio']} (medians of {startup['repeats']}).", ""]
    parts += ["## Targets", "", "| target | measured | bound | met |",
              "|---|---|---|---|"]
    parts += [f"| {what} | {value} | {bound} | {'yes' if met else '**no**'} |"
              for what, value, bound, met in targets]
    # The README is benchmarks/README.md, wherever --results put this file.
    readme = os.path.relpath(os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "README.md"),
        os.path.dirname(os.path.abspath(path)))
    parts += ["", "Why a target is missed, measured: [the benchmark's README]"
              f"({readme}#why-some-targets-are-missed)."]
    with open(path, "w") as stream:
        stream.write("\n".join(parts) + "\n")


CSV_FIELDS = ["scheme", "workers", "ps", "global_batch", "test_accuracy",
              "wall_s", "examples", "examples_per_s", "throughput_ratio",
              "time_to_target_s", "time_to_target_ratio",
              "rounds_per_1000_examples", "mean_staleness", "communication_window",
              "test_accuracy_each_run", "examples_per_s_each_run", "main", "sweep",
              "batch_study", "error", "command"]


def write_csv(path, records):
    with open(path, "w", newline="") as stream:
        writer = csv.DictWriter(stream, CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)


def pyplot():
    """matplotlib.pyplot for files, no display. `make venv` installs
    matplotlib apart from the examples' packages, in the environment's
    benchmark-packages folder (see benchmarks/requirements.txt), so that the
    TensorFlow processes do not load it."""
    try:
        import matplotlib
    except ImportError:
        sys.path.append(os.path.join(sys.prefix, "benchmark-packages"))
        try:
            import matplotlib
        except ImportError:
            raise SystemExit("compare.py: error: the plots need matplotlib; run "
                             "`make venv`, or `pip install -r "
                             "benchmarks/requirements.txt`") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot
    return matplotlib.pyplot


def write_plots(folder, records):
    """accuracy.png (test accuracy against time and against examples, every
    scheme of the main table) and throughput.png (examples/s against
    workers, one line per swept scheme and ps count)."""
    plt = pyplot()
    main = [record for record in records if record.get("main") and "curve" in record]
    figure, (by_time, by_examples) = plt.subplots(1, 2, figsize=(13, 5.5),
                                                  sharey=True)
    colours = plt.get_cmap("tab20").colors  # enough for every scheme
    for index, record in enumerate(main):
        style = {"linewidth": 2.5, "color": "black"} if record["scheme"] == BASELINE \
            else {"linewidth": 1.2, "color": colours[index % len(colours)],
                  "linestyle": "-" if index % 2 else "--"}
        times = [point["wall_s"] for point in record["curve"]]
        examples = [point["examples"] for point in record["curve"]]
        accuracy = [point["test_accuracy"] for point in record["curve"]]
        by_time.plot(times, accuracy, marker=".", label=record["scheme"], **style)
        by_examples.plot(examples, accuracy, marker=".", **style)
    by_time.set(xlabel="seconds of training", ylabel="test accuracy",
                title="Test accuracy over time")
    by_examples.set(xlabel="training examples seen", title="… and over examples")
    # The first evaluations are near chance; the differences are at the top.
    by_time.set_ylim(max(0.0, main[0]["test_accuracy"] - 0.25), None)
    for axes in (by_time, by_examples):
        axes.grid(alpha=0.3)
    figure.legend(loc="lower center", ncol=4, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.16, 1, 1))
    figure.savefig(os.path.join(folder, "accuracy.png"), dpi=100)
    plt.close(figure)

    sweep = [record for record in records
             if record.get("sweep") and "error" not in record]
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for key in sorted({(record["scheme"], record["ps"]) for record in sweep}):
        points = sorted((record["workers"], record["examples_per_s"])
                        for record in sweep if (record["scheme"], record["ps"]) == key)
        axes.plot(*zip(*points), marker="o", label=f"{key[0]}, {key[1]} ps")
    baseline = [record for record in records if record["scheme"] == BASELINE
                and "error" not in record]
    if baseline:
        axes.axhline(baseline[0]["examples_per_s"], color="black", linestyle="--",
                     label="Non-Distributed_Setup")
    axes.set(xlabel="workers", ylabel="examples/s (all workers)",
             title="Throughput against workers")
    axes.set_xticks(sorted({record["workers"] for record in sweep}) or [1])
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(os.path.join(folder, "throughput.png"), dpi=100)
    plt.close(figure)


def summary_line(record):
    if "error" in record:
        return f"    FAILED ({record['error']}); see its log"
    parts = [f"accuracy {record['test_accuracy']:.4f}",
             f"{record['examples_per_s']:,.0f} examples/s"]
    if record["scheme"] != BASELINE:
        parts.append(f"throughput {shown(record['throughput_ratio'])}× baseline")
    if "time_to_target_ratio" in record and record["scheme"] != BASELINE:
        parts.append(f"time to target {shown(record['time_to_target_ratio'])}× "
                     f"baseline")
    return "    " + ", ".join(parts)
