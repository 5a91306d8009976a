"""docs/real-data.md's figures: every example on MNIST (benchmarks/results/
mnist), another run of it (mnist/repeat, which the page names by its day
and machine against the main run's), and a ps against a ring (allreduce,
likewise). Each row's figures are the cells of the report's table
(reports/defaults.py), so the page reads them as results.md shows them."""

from guide import examples

from .. import provenance
from ..docs import results
from ..reports import defaults
from . import Quote

DOC = "docs/real-data.md"
MAIN, REPEAT, RING = "mnist", "mnist/repeat", "allreduce"
SYNC, MIRRORED = "Synchronous-SGD", "Multi-Worker-Mirrored-Strategy"
BASELINE = examples.BASELINE.name
# MNIST's training set: an epoch, for the examples a run trained on.
EPOCH = 60_000
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 10: "ten",
         15: "fifteen", 20: "twenty"}


def spelled(count):
    """A small count as the pages write it, in words."""
    return WORDS.get(count, f"{count:,}")


def rows(folder):
    """{scheme: {column: cell}} of the folder's table, each finished run's
    cells as the report writes them, and its record under "record"."""
    group = results(folder).records
    base = defaults.baseline_of(group)
    return {record["run"]["scheme"]: dict(
        zip(defaults.COLUMNS, defaults.row(record, base["measures"],
                                           defaults.late(base))), record=record)
        for record in defaults.rows_of(group) if record["status"] == "ok"}


def points(cells, column):
    """The largest gap to the baseline in `column` ("− baseline" or
    "− baseline's"), in points, as the page writes it."""
    return f"{-min(float(row[column]) for row in cells.values()) * 100:.2f}"


def behind(cells, scheme):
    return f"{-float(cells[scheme]['− baseline']) * 100:.2f}"


def cores(folder):
    """The cores of the machine the folder's runs ran on."""
    counts = {record["machine"]["cores"] for record in results(folder).records}
    return counts.pop() if len(counts) == 1 else "several"


def dates(folder):
    days = sorted({record["started"][:10] for record in results(folder).records})
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"


def machines(folder):
    return "; ".join(dict.fromkeys(provenance.described(record)
                                   for record in results(folder).records))


def latest_run():
    every = sorted({record["run"].get("eval_every_examples")
                    for record in results(MAIN).records})
    return {"every": ", ".join(f"{value:,}" for value in every),
            "date": dates(MAIN), "machine": machines(MAIN)}


def same_machine(folder):
    """Whether the folder's runs ran on the main run's machine (its cores,
    processor, memory and system; the software may differ)."""
    def hardware(name):
        return {tuple(sorted(record["machine"].items()))
                for record in results(name).records}

    return hardware(folder) == hardware(MAIN)


def cpus(folder):
    return " and ".join(sorted({record["machine"].get("cpu") or "?"
                                for record in results(folder).records}))


def where(folder):
    """Where and when the folder's runs ran, said against the main run: on
    its machine, or on another (named, with the day)."""
    if same_machine(folder):
        return f"on the same {cores(folder)}-core machine as the main run above"
    return (f"on {dates(folder)}, on a different {cores(folder)}-core machine "
            f"from the main run above ({cpus(folder)})")


def other_run(folder):
    """The folder's run as the page names it beside the main run: a second
    run the same day on the same machine, or an earlier or later run on
    its own day and machine."""
    day, main_day = dates(folder), dates(MAIN)
    same = same_machine(folder)
    if day == main_day and same:
        return "a second run the same day, on the same machine"
    when = "an earlier" if day < main_day else "a later"
    machine = ("the same machine" if same else
               f"another {spelled(cores(folder))}-core machine ({cpus(folder)})")
    return f"{when} run, on {day} on {machine}"


def the_other_run(folder, noun="run", machine=True):
    """other_run(folder) once named: "the earlier run on the other machine",
    or with `noun` and without the machine, "the earlier one"."""
    day, main_day = dates(folder), dates(MAIN)
    same = same_machine(folder)
    if day == main_day and same:
        return f"the second {noun}"
    when = "the earlier" if day < main_day else "the later"
    return f"{when} {noun}" + ("" if same or not machine else " on the other machine")


def ring_machine():
    return {"where": where(RING)}


def ring():
    here, main = rows(RING), rows(MAIN)
    sync, mirrored = here[SYNC]["record"], here[MIRRORED]["record"]

    def rate(cells):
        return " and ".join(dict.fromkeys(
            f"{cells[name]['record']['measures']['learning_rate']:g}"
            for name in (SYNC, MIRRORED)))

    def ratio(key):
        return f"{mirrored['measures'][key] / sync['measures'][key]:.2f}"

    agree = here[SYNC]["test accuracy"] == here[MIRRORED]["test accuracy"]
    again = main[SYNC]["test accuracy"] == main[MIRRORED]["test accuracy"]
    return {"rate": rate(here), "main_rate": rate(main),
            "agree": "the same accuracy" if agree else "not the same accuracy",
            "again": "as again" if again else "unlike",
            "time": ratio("command_s"), "to97": ratio("s_to_97")}


def main_run():
    cells = rows(MAIN)
    figures = {f"{prefix}_{key}": cells[scheme][column]
               for prefix, scheme in (("sync", SYNC), ("ring", MIRRORED))
               for key, column in (("accuracy", "test accuracy"),
                                   ("seconds", "seconds"), ("to97", "to 97%"))}
    sync, mirrored = (cells[name]["record"]["measures"] for name in (SYNC, MIRRORED))
    for key, measure in (("time", "command_s"), ("time97", "s_to_97")):
        figures[key] = f"{mirrored[measure] / sync[measure]:.2f}"
    return figures


def gaps():
    cells = rows(MAIN)
    return {"gap": points(cells, "− baseline"), "late": points(cells, "− baseline's")}


def second_run():
    main, repeat = rows(MAIN), rows(REPEAT)
    synchronous = [name for name in main if examples.BY_NAME[name].synchronous]
    repeated = all(main[name]["test accuracy"] == repeat[name]["test accuracy"]
                   for name in synchronous)
    run = other_run(REPEAT)
    return {"run": run[0].upper() + run[1:],
            "gap": points(repeat, "− baseline"),
            "late": points(repeat, "− baseline's"),
            "repeat": "repeat" if repeated else "do not repeat"}


def longer_schemes():
    main, repeat = rows(MAIN), rows(REPEAT)

    def epochs(scheme):
        return spelled(round(main[scheme]["record"]["measures"]["examples"]
                             / EPOCH))

    return {"downpour": behind(main, "DOWNPOUR"),
            "downpour_again": behind(repeat, "DOWNPOUR"),
            "dynamic": behind(main, "Dynamic-SGD"),
            "dynamic_again": behind(repeat, "Dynamic-SGD"),
            "other": the_other_run(REPEAT, "one", machine=False),
            "epochs": " and ".join(dict.fromkeys(
                epochs(name) for name in ("DOWNPOUR", "Dynamic-SGD")))}


def targets():
    cells = rows(MAIN)
    none = all(row["to 98%"] == "not reached" for row in cells.values())
    return {"base97": cells[BASELINE]["to 97%"],
            "none98": "no example reaches 98%" if none
            else "some examples reach 98%",
            "cores": spelled(cores(MAIN))}


def seconds(cells, name):
    return cells[name]["record"]["measures"]["command_s"]


def longest():
    """The three longest examples of the main run, those over a minute, and
    how its times stand to the other run's, example by example."""
    main, repeat = rows(MAIN), rows(REPEAT)
    ranked = sorted(main, key=lambda name: -seconds(main, name))
    slowest = ranked[:3]
    over = [name for name in ranked if seconds(main, name) >= 60]
    if len(over) == len(main):
        finish = "No example finishes in under a minute"
    elif over:
        names = ", ".join(over[:-1]) + " and " + over[-1] if len(over) > 1 else over[0]
        finish = f"Every example but {names} finishes in under a minute"
    else:
        finish = "Every example finishes in under a minute"
    longer = [name for name in main if name in repeat
              and seconds(main, name) > seconds(repeat, name)]
    lead = "Run to run" if same_machine(REPEAT) else "The machine counts"
    if len(longer) == len(main):
        slower = f"{lead}: every example took longer here than in"
    else:
        slower = (f"{lead}: {spelled(len(longer))} of the {spelled(len(main))} "
                  f"examples took longer here than in")
    figures = {"finish": finish, "slower": slower,
               "other": the_other_run(REPEAT),
               "again": f"{seconds(repeat, slowest[0]):.1f}"}
    for index, name in enumerate(slowest):
        figures[f"name{index}"] = name
        figures[f"seconds{index}"] = main[name]["seconds"]
    return figures


QUOTES = [
    Quote(DOC, "the chief measuring test accuracy every {every} examples. The "
               "latest run, on {date} on {machine}.", latest_run),
    Quote(DOC, "the three side by side in one run {where}", ring_machine),
    Quote(DOC, "The same arithmetic (the same global batch of 2 × 100 and rate, "
               "then the earlier {rate}; {agree} to the digit, {again} at "
               "{main_rate} in the benchmark above), in {time} of the time, and "
               "to 97% in {to97}:", ring),
    Quote(DOC, "In the main run above, Synchronous-SGD, the same arithmetic "
               "through a ps, measured {sync_accuracy}, {sync_seconds} s and "
               "{sync_to97} to 97%, and Multi-Worker-Mirrored-Strategy "
               "{ring_accuracy}, {ring_seconds} s and {ring_to97}, in {time} of "
               "the time and to 97% in {time97}:", main_run),
    Quote(DOC, "With its defaults every example ends within {gap} points of the "
               "baseline ({late} by the late mean)", gaps),
    Quote(DOC, "{run} ([results](../benchmarks/results/mnist/repeat/"
               "results.md)), put every example within {gap} ({late} late); the "
               "synchronous examples {repeat} its accuracies to the digit.",
          second_run),
    Quote(DOC, "ended {downpour} and {downpour_again} (DOWNPOUR) and {dynamic} and "
               "{dynamic_again} (Dynamic-SGD) behind at {epochs}, in this run and "
               "{other}.", longer_schemes),
    Quote(DOC, "The baseline reaches 97% after {base97} of training; {none98}, "
               "the baseline included. A distributed run on one {cores}-core "
               "machine", targets),
    Quote(DOC, "{finish}, start-up included: the longest are {name0} "
               "({seconds0} s), {name1} ({seconds1} s) and {name2} ({seconds2} s). "
               "{slower} {other} ({name0}: {again} s there)",
          longest),
]
