"""The `validation` report: the simulator against real runs. Each run of
the `simulator` suite (`python -m simulator SCHEME --machine this` with an
example run's flags) is set beside the measured runs of the same settings
in results/scale, the median of each figure where there are several:
examples per second and mean staleness as simulated over measured, the
final test accuracy as the difference in points, each against its target.
"""

import json
import os

from .. import store, suites
from . import common

SNIPPETS = {"table": 0, "summary": 0}
TITLE = "The simulator against measured runs"
# The measured runs, a folder under benchmarks/results.
MEASURED = "scale"
RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "results")
# The targets: simulated over measured within these shares, the accuracy
# within these points.
RATE_WITHIN, STALENESS_WITHIN, ACCURACY_POINTS = 0.15, 0.15, 1.0
# What a simulated run's settings have that its measured twin's do not.
NOT_PAIRED = ("tables", "repeat", "simulate", "timeout")
FIGURES = ("examples_per_s", "staleness_mean", "test_accuracy")


def setting(run):
    """What pairs a simulated run with measured ones: every setting but
    those of NOT_PAIRED."""
    return suites.run_key({key: value for key, value in run.items()
                           if key not in NOT_PAIRED})


def measured_records(folder=None):
    """The measured runs: each run's newest record (the scale suite spans
    code changes)."""
    return store.newest(store.read(folder or os.path.join(RESULTS, MEASURED)))


def median(values):
    return common.median(values, digits=None)


def medians(records):
    """Each figure's median over the successful `records`."""
    good = [record["measures"] for record in records if record["status"] == "ok"]
    return {key: median(figures.get(key) for figures in good) for key in FIGURES}


def ratio_check(simulated, measured, within):
    """(simulated / measured, whether within the share of 1); (None, None)
    where either is missing: that figure cannot be checked."""
    if simulated is None or measured is None:
        return None, None
    if measured == 0:
        return None, simulated == 0
    ratio = simulated / measured
    return ratio, abs(ratio - 1) <= within


def rows(simulated, measured):
    """One row per simulated setting with a measured twin, in the order the
    simulated runs first appear: the figures of both sides and the checks."""
    by_setting = {}
    for record in measured:
        by_setting.setdefault(setting(record["run"]), []).append(record)
    configs = {}
    for record in simulated:
        configs.setdefault(setting(record["run"]), []).append(record)
    table = []
    for key, records in configs.items():
        twins = [record for record in by_setting.get(key, [])
                 if record["status"] == "ok"]
        if not twins or not any(record["status"] == "ok" for record in records):
            continue
        run, sim, real = records[0]["run"], medians(records), medians(twins)
        rate, rate_ok = ratio_check(sim["examples_per_s"], real["examples_per_s"],
                                    RATE_WITHIN)
        tau, tau_ok = ratio_check(sim["staleness_mean"], real["staleness_mean"],
                                  STALENESS_WITHIN)
        points = accuracy_ok = None
        if sim["test_accuracy"] is not None and real["test_accuracy"] is not None:
            points = 100 * (sim["test_accuracy"] - real["test_accuracy"])
            accuracy_ok = abs(points) <= ACCURACY_POINTS + 1e-9
        table.append({"scheme": run["scheme"], "workers": run.get("workers"),
                      "window": run.get("window"), "tables": run["tables"],
                      "measured": real, "simulated": sim, "runs": len(twins),
                      "rate": rate, "rate_ok": rate_ok, "tau": tau,
                      "tau_ok": tau_ok, "points": points,
                      "accuracy_ok": accuracy_ok})
    return table


def mark(within):
    return {True: " ✓", False: " ✗", None: ""}[within]


def ratio_cell(value, within):
    if value is None:
        return "–" if within is None else ("0" + mark(within))
    return f"{value:.2f}{mark(within)}"


def table(pairs):
    lines = common.table(
        ["scheme", "workers", "window", "examples/s measured", "simulated", "×",
         "mean τ measured", "simulated", "×", "final acc measured", "simulated",
         "Δ points"],
        [(row["scheme"], row["workers"], common.shown(row["window"]),
          common.shown(row["measured"]["examples_per_s"], 0),
          common.shown(row["simulated"]["examples_per_s"], 0),
          ratio_cell(row["rate"], row["rate_ok"]),
          common.shown(row["measured"]["staleness_mean"], 2),
          common.shown(row["simulated"]["staleness_mean"], 2),
          ratio_cell(row["tau"], row["tau_ok"]),
          percent(row["measured"]["test_accuracy"]),
          percent(row["simulated"]["test_accuracy"]),
          "–" if row["points"] is None else
          f"{row['points']:+.2f}{mark(row['accuracy_ok'])}")
         for row in pairs])
    return lines


def percent(value):
    return common.shown(None if value is None else 100 * value, 2, "%")


def count(pairs, key):
    checked = [row[key] for row in pairs if row[key] is not None]
    return sum(checked), len(checked)


def headline(pairs):
    rate, tau, accuracy = (count(pairs, key) for key in
                           ("rate_ok", "tau_ok", "accuracy_ok"))
    unchecked = len(pairs) - tau[1]
    return (f"Of {len(pairs)} cells: examples/s within {RATE_WITHIN:.0%} in "
            f"{rate[0]} of {rate[1]}; mean staleness within "
            f"{STALENESS_WITHIN:.0%} in {tau[0]} of {tau[1]}"
            + (f" ({unchecked} cells of synchronous schemes, whose runs count "
               f"no staleness, not checked)" if unchecked else "")
            + f"; final test accuracy within {ACCURACY_POINTS:g} point in "
              f"{accuracy[0]} of {accuracy[1]}.")


def span(values, digits=2):
    low, high = min(values), max(values)
    return f"{low:.{digits}f}" if round(low, digits) == round(high, digits) \
        else f"{low:.{digits}f} to {high:.{digits}f}"


def missed(rows_of, ok_key, value_key, what, suffix=""):
    """Where `rows_of` miss one target: at which cells, by how much."""
    out = [row for row in rows_of if row[ok_key] is False]
    if not out:
        return None
    where = ", ".join(str(row["workers"]) if row["window"] is None
                      else f"{row['workers']} (window {row['window']})"
                      for row in out)
    values = [row[value_key] for row in out if row[value_key] is not None]
    return f"{what} {span(values)}{suffix} at {where}" if values else \
        f"{what} at {where}"


def scheme_lines(pairs):
    """A line per scheme: the cells where it misses each target."""
    lines = []
    for scheme in dict.fromkeys(row["scheme"] for row in pairs):
        mine = [row for row in pairs if row["scheme"] == scheme]
        misses = [text for text in (
            missed(mine, "rate_ok", "rate", "examples/s ×"),
            missed(mine, "tau_ok", "tau", "mean τ ×"),
            missed(mine, "accuracy_ok", "points", "accuracy", " points"))
            if text]
        checked = count(mine, "rate_ok")[1]
        lines.append(f"- {scheme}: " + ("; ".join(misses) if misses else
                                        f"every target met in its {checked} "
                                        f"cell{'s' if checked != 1 else ''}")
                     + ".")
    return lines


def machines(records):
    return "; ".join(dict.fromkeys(
        json.dumps(record.get("machine", {}).get("cpu")).strip('"')
        for record in records))


def timings(records):
    """Where the simulated runs' step and exchange costs came from."""
    return "; ".join(dict.fromkeys(
        str(record.get("result", {}).get("settings", {}).get("timing"))
        for record in records))


def section(group, measured=None):
    measured = measured_records() if measured is None else measured
    pairs = rows(group, measured)
    parts = [f"Each simulated run beside the measured runs of the same settings "
             f"in [results/{MEASURED}](../{MEASURED}/results.md) (the median of "
             f"each figure where there are several). *×*: simulated over "
             f"measured, ✓ within {RATE_WITHIN:.0%} (examples/s) or "
             f"{STALENESS_WITHIN:.0%} (mean staleness τ, in commits); *Δ "
             f"points*: simulated minus measured final test accuracy, ✓ within "
             f"{ACCURACY_POINTS:g} point. A measured examples/s is the chief's "
             f"examples over its wall time, evaluations included; a simulated "
             f"one, over simulated seconds. –: not measured, so not checked.",
             "",
             f"Simulated on: {machines(group)}, its step costs: "
             f"{timings(group)}; measured on: {machines(measured)}.", ""]
    if not pairs:
        return parts + ["No simulated run has a measured twin.", ""]
    parts += [headline(pairs), ""]
    for name, title in (("workers", "Workers"), ("windows", "Windows")):
        chosen = [row for row in pairs if name in row["tables"]]
        if chosen:
            parts += [f"## {title}", ""] + table(chosen) + [""]
    parts += ["## Where each scheme misses", ""] + scheme_lines(pairs) + [""]
    return parts


def plots(group, folder):
    return []


def snippet(name, args, source, link):
    """The docs' blocks, of the workers table's cells: `table`, and
    `summary` (the headline and a line per scheme)."""
    pairs = [row for row in rows(source.records, measured_records())
             if "workers" in row["tables"]]
    results = link(os.path.join("benchmarks", "results", source.folder, "results.md"))
    if name == "table":
        lines = table(pairs)
    elif name == "summary":
        lines = [headline(pairs), ""] + scheme_lines(pairs)
    else:
        raise KeyError(name)
    return "\n".join(lines + ["", f"From [the simulator suite's results]({results})."])
