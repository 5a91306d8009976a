"""docs/real-data.md's figures: every example on MNIST (benchmarks/results/
mnist), its second run the same day (mnist/repeat), and a ps against a
ring (allreduce). Each row's figures are the cells of the report's table
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
    base = next(record for record in group if record["status"] == "ok"
                and record["run"].get("scheme") == BASELINE)
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


def ring_machine():
    same = machines(RING) == machines(MAIN)
    return {"same": "the same" if same else "a", "cores": cores(RING)}


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
    return {f"{prefix}_{key}": cells[scheme][column]
            for prefix, scheme in (("sync", SYNC), ("ring", MIRRORED))
            for key, column in (("accuracy", "test accuracy"),
                                ("seconds", "seconds"), ("to97", "to 97%"))}


def gaps():
    cells = rows(MAIN)
    return {"gap": points(cells, "− baseline"), "late": points(cells, "− baseline's")}


def second_run():
    main, repeat = rows(MAIN), rows(REPEAT)
    synchronous = [name for name in main if examples.BY_NAME[name].synchronous]
    repeated = all(main[name]["test accuracy"] == repeat[name]["test accuracy"]
                   for name in synchronous)
    return {"day": "the same day" if dates(MAIN) == dates(REPEAT) else "later",
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
            "epochs": " and ".join(dict.fromkeys(
                epochs(name) for name in ("DOWNPOUR", "Dynamic-SGD")))}


def targets():
    cells = rows(MAIN)
    none = all(row["to 98%"] == "not reached" for row in cells.values())
    return {"base97": cells[BASELINE]["to 97%"],
            "none98": "no example reaches 98%" if none
            else "some examples reach 98%",
            "cores": spelled(cores(MAIN))}


def longest():
    main, repeat = rows(MAIN), rows(REPEAT)
    slowest = sorted(main, key=lambda name: -main[name]["seconds"])[:3]
    every = [row["seconds"] for cells in (main, repeat) for row in cells.values()]
    figures = {"within": "in under a minute" if max(every) < 60
               else "in more than a minute",
               "again": f"{repeat[slowest[0]]['seconds']:.1f}",
               "cores": spelled(cores(MAIN))}
    for index, name in enumerate(slowest):
        figures[f"name{index}"] = name
        figures[f"seconds{index}"] = f"{main[name]['seconds']:.1f}"
    return figures


QUOTES = [
    Quote(DOC, "the chief measuring test accuracy every {every} examples. The "
               "latest run, on {date} on {machine}.", latest_run),
    Quote(DOC, "the three side by side in one run on {same} {cores}-core "
               "machine", ring_machine),
    Quote(DOC, "The same arithmetic (the same global batch of 2 × 100 and rate, "
               "then the earlier {rate}; {agree} to the digit, {again} at "
               "{main_rate} in the benchmark above), in {time} of the time, and "
               "to 97% in {to97}:", ring),
    Quote(DOC, "In the main run above, Synchronous-SGD, the same arithmetic "
               "through a ps, measured {sync_accuracy}, {sync_seconds} s and "
               "{sync_to97} to 97%, and Multi-Worker-Mirrored-Strategy "
               "{ring_accuracy}, {ring_seconds} s and {ring_to97}:", main_run),
    Quote(DOC, "With its defaults every example ends within {gap} points of the "
               "baseline ({late} by the late mean)", gaps),
    Quote(DOC, "A second run {day} ([results](../benchmarks/results/mnist/repeat/"
               "results.md)) put every example within {gap} ({late} late); the "
               "synchronous examples {repeat} to the digit.", second_run),
    Quote(DOC, "ended {downpour} and {downpour_again} (DOWNPOUR) and {dynamic} and "
               "{dynamic_again} (Dynamic-SGD) behind at {epochs}.", longer_schemes),
    Quote(DOC, "The baseline reaches 97% after {base97} of training; {none98}, "
               "the baseline included. A distributed run on one {cores}-core "
               "machine", targets),
    Quote(DOC, "Every example finishes {within}, start-up included: the longest "
               "are {name0} ({seconds0} s; {again} s in the second run), {name1} "
               "({seconds1} s) and {name2} ({seconds2} s). Run to run, the times "
               "on this {cores}-core machine vary", longest),
]
