"""The `network` report: what the network costs each scheme, every task on
a link of its own, at no limit and at limited rates: seconds to 97%,
examples per second, bytes per example, the busiest link's bound, where
the time goes, and the targets."""

import os

from guide import examples
from launcher.shaping import bits_per_second

from .. import measures
from . import common
from .common import BASELINE

# The docs' generated blocks this report gives (benchmarks/docs.py): each
# snippet's name and how many arguments it takes.
SNIPPETS = {}
TITLE = "What the network costs"
TARGET = 0.97
NO_LIMIT = "none"
WINDOWED = (examples.WINDOW, examples.SYNC_WINDOW)
# What the targets allow at no limit, as a multiple of the baseline's time
# to 97%, by how a scheme talks to the ps.
NO_LIMIT_TARGETS = {examples.WINDOW: 2.0, examples.SYNC_WINDOW: 2.0,
                    examples.EVERY_STEP: 3.0, examples.SYNC: 4.0,
                    examples.ALLREDUCE: 4.0}
WINDOWED_SPEED_UP, BOUND_FACTOR, SLOW_LINK = 4.0, 1.5, "100mbit"


def rows_of(group):
    """One dict of figures per run on a link (the baseline apart), with the
    bounds and the comparisons with the baseline added."""
    rows = []
    for record in group:
        run = record["run"]
        if run.get("scheme") == BASELINE:
            continue
        row = {"scheme": run["scheme"], "workers": run["workers"],
               "rate": run["rate"], **record["measures"]}
        if record["status"] != "ok":
            row["error"] = record["error"]
        rows.append(row)
    for row in rows:
        busiest = row.get("busiest_bytes_per_example")
        if row["rate"] != NO_LIMIT and busiest and "error" not in row:
            bound = bits_per_second(row["rate"]) / 8 / busiest
            row["bound_examples_per_s"] = round(bound)
            row["share_of_bound"] = round(row["examples_per_training_s"] / bound, 2)
    with_compute_bounds(rows)
    baseline = next((record for record in group
                     if record["run"].get("scheme") == BASELINE
                     and record["status"] == "ok"), None)
    if baseline:
        against_baseline(rows, baseline)
    return rows, baseline


def with_compute_bounds(rows):
    """Each limited run's bound if its computation and its link take turns:
    the unlimited run's time per example plus the link's; and its share."""
    unlimited = {(row["scheme"], row["workers"]): row for row in rows
                 if row["rate"] == NO_LIMIT}
    for row in rows:
        free = unlimited.get((row["scheme"], row["workers"]), {})
        if row.get("bound_examples_per_s") and free.get("examples_per_training_s"):
            serial = 1 / (1 / free["examples_per_training_s"]
                          + 1 / row["bound_examples_per_s"])
            row["serial_bound_examples_per_s"] = round(serial)
            row["share_of_serial_bound"] = round(
                row["examples_per_training_s"] / serial, 2)
    return rows


def against_baseline(rows, baseline):
    """Each unlimited run's time to 97% against the baseline's, its examples
    to 97% against the baseline's, and its training split into the
    baseline's time for as many examples and the rest."""
    figures = baseline["measures"]
    baseline_examples = measures.examples_to(baseline.get("curve", []), TARGET)
    if not (figures.get("s_to_97") and baseline_examples):
        return rows
    baseline_rate = figures["examples"] / figures["training_s"]
    for row in rows:
        if row["rate"] == NO_LIMIT and row.get("s_to_97") and "error" not in row:
            compute_s = row["examples_to_97"] / baseline_rate
            row.update({
                "times_baseline": round(row["s_to_97"] / figures["s_to_97"], 2),
                "examples_times_baseline": round(
                    row["examples_to_97"] / baseline_examples, 2),
                "baseline_compute_s": round(compute_s, 1),
                "beyond_compute_s": round(row["s_to_97"] - compute_s, 1)})
    return rows


def verdicts(rows):
    """The targets, met or missed, one line each."""
    kinds = {name: example.kind for name, example in examples.BY_NAME.items()}
    by_key = {(row["scheme"], row["workers"], row["rate"]): row for row in rows}
    lines = []
    for (scheme, workers, rate), row in by_key.items():
        hogwild = by_key.get(("Hogwild", workers, rate), {})
        windowed = rate == SLOW_LINK and kinds.get(scheme) in WINDOWED
        if windowed and not row.get("s_to_97"):
            lines.append(f"- {scheme}, {workers} workers, {rate}: did not reach "
                         f"97%: missed")
        elif windowed and hogwild.get("s_to_97"):
            speed_up = hogwild["s_to_97"] / row["s_to_97"]
            lines.append(f"- {scheme}, {workers} workers, {rate}: reached 97% "
                         f"{speed_up:.1f}x sooner than Hogwild (target "
                         f"{WINDOWED_SPEED_UP:g}x): "
                         f"{'met' if speed_up >= WINDOWED_SPEED_UP else 'missed'}")
        free = by_key.get((scheme, workers, NO_LIMIT), {})
        if (row.get("share_of_bound") and free.get("examples_per_training_s")
                and row["bound_examples_per_s"] < free["examples_per_training_s"]):
            share = row["share_of_bound"]
            lines.append(f"- {scheme}, {workers} workers, {rate}: {share} of "
                         f"the link's bound (target {1 / BOUND_FACTOR:.2f}): "
                         f"{'met' if share * BOUND_FACTOR >= 1 else 'missed'}; "
                         f"{row.get('share_of_serial_bound')} of the bound "
                         "with compute")
        if "times_baseline" in row and kinds.get(scheme) in NO_LIMIT_TARGETS:
            allowed = NO_LIMIT_TARGETS[kinds[scheme]]
            times = row["times_baseline"]
            lines.append(f"- {scheme}, {workers} workers, no limit: {times}x "
                         f"the baseline's time to 97% (target {allowed:g}x): "
                         f"{'met' if times <= allowed else 'missed'}")
    return lines


def shown(value, suffix=""):
    return common.shown(value, suffix=suffix)


def section(group):
    rows, baseline = rows_of(group)
    parts = ["Every task on a link of its own (`--network hosts`), limited to the "
             "rate each way. *To 97%*: seconds of training, evaluations left "
             "out. *Bytes/example*: all that the tasks sent, per training "
             "example; *busiest link*: the busiest link's (the ps's, where there "
             "is one), each way; *bound*: the examples per second that link lets "
             "through at its rate. *With compute*: the bound if the exchanges "
             "and the computation take turns, from the unlimited run's time per "
             "example plus the link's.", ""]
    parts += common.table(
        ["example", "topology", "link", "to 97%", "examples/s", "bytes/example",
         "busiest link bytes/example", "bound (examples/s)", "measured / bound",
         "bound with compute", "measured / that"],
        [(row["scheme"], topology_of(row), row["rate"],
          shown(row.get("s_to_97"), " s"), shown(row.get("examples_per_training_s")),
          shown(row.get("bytes_per_example")),
          shown(row.get("busiest_bytes_per_example")),
          shown(row.get("bound_examples_per_s")), shown(row.get("share_of_bound")),
          shown(row.get("serial_bound_examples_per_s")),
          shown(row.get("share_of_serial_bound"))
          + (f" ({row['error']})" if "error" in row else ""))
         for row in rows])
    base = baseline["measures"].get("s_to_97") if baseline else None
    parts += ["", "### Where the time goes with no limit", "",
              "From the launch to 97%: *start-up* until the chief's first step "
              "(its first evaluation left out), the chief's *evaluations* until "
              "97%, and *training* until 97%. Training is then split into what "
              "the baseline took for as many examples, and the rest: the "
              "exchanges and the tasks sharing the cores. *× baseline*: time to "
              f"97% against the baseline's ({shown(base, ' s')}), and the "
              "examples needed against the baseline's.", ""]
    parts += common.table(
        ["example", "topology", "start-up", "evaluations", "training",
         "of which the baseline's compute", "the rest", "× baseline (time)",
         "× baseline (examples)"],
        [(row["scheme"], topology_of(row),
          shown(row.get("startup_s"), " s"),
          shown(row.get("evaluations_to_97_s"), " s"), shown(row.get("s_to_97"), " s"),
          shown(row.get("baseline_compute_s"), " s"),
          shown(row.get("beyond_compute_s"), " s"), shown(row.get("times_baseline")),
          shown(row.get("examples_times_baseline")))
         for row in rows if row["rate"] == NO_LIMIT])
    parts += ["", "### Targets", "", *verdicts(rows), ""]
    return parts


def topology_of(row):
    example = examples.BY_NAME[row["scheme"]]
    return common.topology({"scheme": row["scheme"], "workers": row["workers"],
                            **({"ps": example.ps} if example.ps else {})})


def plots(group, folder):
    """network.png: seconds to 97% per scheme, a bar per link rate, a panel
    per worker count; a scheme that did not get there has no bar."""
    plt = common.pyplot()
    rows, _ = rows_of(group)
    if not rows:
        return []
    schemes = list(dict.fromkeys(row["scheme"] for row in rows))
    rates = list(dict.fromkeys(row["rate"] for row in rows))
    worker_counts = sorted({row["workers"] for row in rows})
    figure, panels = plt.subplots(len(worker_counts), 1, squeeze=False,
                                  figsize=(max(8, len(schemes) * 1.1),
                                           3.5 * len(worker_counts)))
    width = 0.8 / len(rates)
    for panel, workers in zip(panels[:, 0], worker_counts):
        for offset, rate in enumerate(rates):
            seconds = {row["scheme"]: row.get("s_to_97") for row in rows
                       if row["workers"] == workers and row["rate"] == rate}
            panel.bar([index + offset * width for index in range(len(schemes))],
                      [seconds.get(scheme) or 0 for scheme in schemes], width,
                      label=rate if rate != NO_LIMIT else "no limit")
        panel.set_xticks([index + 0.4 - width / 2 for index in range(len(schemes))])
        panel.set_xticklabels(schemes, rotation=30, ha="right", fontsize=8)
        panel.set(ylabel="seconds to 97%", title=f"{workers} workers")
        panel.set_yscale("log")
        panel.grid(alpha=0.3, axis="y")
        panel.legend(fontsize=8)
    figure.tight_layout()
    common.save(figure, os.path.join(folder, "network.png"), 80)
    return ["network.png"]


def snippet(name, args, source, link):
    raise KeyError(name)
