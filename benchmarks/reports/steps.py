"""The `steps` report: where a training step's time goes when the variables
live on a ps, from benchmarks/step_trace.py's result.json (its --result):
per kind of step, its wall and CPU time, its CPU against a local step's and
the examples per second the cores allow; and one traced ps step's time per
job."""

from ..errors import UsageError
from . import common

# The docs' generated blocks this report gives (benchmarks/docs.py): each
# snippet's name and how many arguments it takes.
SNIPPETS = {"table": 1}
TITLE = "Where a step's time goes"
# step_trace.py's kinds of step, in words.
LABELS = {"local": "local, plain session (the baseline's)",
          "local, through a server": "local, through the worker's server",
          "ps": "variables on the ps (a Hogwild step)",
          "loop, hooked run": "the examples' loop: the ps step, hooked, its "
                              "minibatch fed",
          "loop, run without hooks": "the examples' loop: the local step without the "
                                     "hooks, its minibatch fed"}


def runs_of(group):
    """{batch size: [step_trace.py's result of each run that finished]}."""
    runs = {}
    for record in group:
        if record["status"] == "ok" and "kinds" in record.get("result", {}):
            runs.setdefault(record["result"]["batch_size"], []).append(
                record["result"])
    return dict(sorted(runs.items()))


def ps_times_local(result):
    return kind(result, "ps")["cpu_times_local"]


def results_of(group):
    """{batch size: the result of its median run}: of the runs at that
    batch, the one whose ps step's CPU against the local step's is the
    median (the upper one of an even number), tabled whole, so that every
    figure of a table comes from one run."""
    return {batch: sorted(results, key=ps_times_local)[len(results) // 2]
            for batch, results in runs_of(group).items()}


def kind(result, name):
    """One kind of step's figures."""
    return next(row for row in result["kinds"] if row["kind"] == name)


def label(result, name):
    if name == "window":
        window = result["window"]
        return f"window of {window} ({window - 1} local, 1 with the ps; computed)"
    return LABELS.get(name, name)


def allowed(value):
    """Examples per second, to the thousand: a bound, not a measurement."""
    return f"{round(value, -3):,}"


def table(result):
    return common.table(
        ["step", "wall ms", "CPU ms", "× local CPU",
         f"examples/s {result['cores']} cores allow"],
        [(label(result, row["kind"]), f"{row['wall_ms']:.2f}", f"{row['cpu_ms']:.2f}",
          f"{row['cpu_times_local']:.2f}", allowed(row["examples_per_s_allowed"]))
         for row in result["kinds"]])


def overhead_line(result):
    """What a run of the loop costs beyond the tight run of the same op;
    nothing for a run from before the loop rows."""
    extra = result.get("loop_overhead")
    if not extra:
        return []
    parts = [f"{name}: {figures['cpu_ms']:.2f} ms CPU, {figures['wall_ms']:.2f} ms wall"
             for name, figures in extra.items()]
    return ["Beyond the tight run of the same op, per run of the loop (outside "
            "its session.run): " + "; ".join(parts) + ".", ""]


def trace_table(result):
    return common.table(
        ["job", "ms in ops", "ms receiving tensors", "tensors received"],
        [(job, f"{sums['ops_ms']:.2f}", f"{sums['receive_ms']:.2f}",
          sums["tensors_received"])
         for job, sums in result["traced_ps_step"].items()])


def section(group):
    parts = ["SGD steps of the examples' classifier on one batch, in one "
             "process: *wall ms* and *CPU ms* (all threads, worker and ps "
             "included) per step, after a warm-up; *× local CPU*: CPU against "
             "the plain local step's; the last column: the examples per second "
             "that the cores allow at that CPU per step, to the thousand, "
             "whatever the tasks. The window's row is computed from the two "
             "above it. The loop's rows run the examples' own loop on the "
             "worker's server (a MonitoredTrainingSession with their hooks, "
             "each step drawing and feeding its minibatch). Then one "
             "traced ps step (the fullest of three): per "
             "job, the time in the model's ops and in receiving tensors. Of "
             "several runs at a batch size, the table is the run whose ps step "
             "has the median × local CPU.", ""]
    failed = [record for record in group if record["status"] != "ok"]
    runs, median = runs_of(group), results_of(group)
    for batch, result in median.items():
        spread = ", ".join(f"{ps_times_local(run):.2f}" for run in runs[batch])
        parts += [f"### Batch {batch}, {result['steps']} steps each", "",
                  f"Runs: {len(runs[batch])}; the ps step's × local CPU in each: "
                  f"{spread}.", ""]
        parts += table(result) + [""] + overhead_line(result)
        parts += ["One traced ps step:", ""]
        parts += trace_table(result) + [""]
    parts += [f"- {record['label']}: failed ({record['error']})" for record in failed]
    return parts + ([""] if failed else [])


def plots(group, folder):
    return []


def snippet(name, args, source, link):
    """Generated text for the docs (see benchmarks/docs.py): `table BATCH`,
    the steps' table at that batch size."""
    if name != "table":
        raise KeyError(name)
    results = results_of(source.records)
    batch = int(args[0]) if args and args[0].isdigit() else None
    if batch not in results:
        raise UsageError(f"benchmarks/results/{source.folder}: `table BATCH` "
                         f"takes a batch size it has a run of: "
                         f"{', '.join(map(str, results))}")
    return "\n".join(table(results[batch]))
