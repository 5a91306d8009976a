"""The suites: each a table of runs in `suites/NAME.toml`, read and expanded
here into one dict per run.

A suite file names its report and what a run costs, sets parameters for
every run (`dataset`, `examples`, `batch`, `worker_batch`, `window`,
`evaluations`, `eval_every_examples`, `train_steps`, `eval_every`,
`network`, `timeout`, `flags`), and lists `[[runs]]`: each a matrix of
`schemes` x `workers` x `ps` x `rates` x `windows` x repeats x `preload`,
with the `tables` of the report it belongs to, and any parameter of its
own. A run given as a `command` (with a
`name`) runs that command instead of an example; a run that says
`simulate = true` is the simulator's play of the example's run, with the
same flags (`python -m simulator SCHEME --machine this`). The same run
listed twice belongs to both tables and runs once.

A suite of many hours says `spans_code = true`: a run recorded with
earlier code then counts as done, so the suite can be resumed after the
code changed, and its report tables each run's newest record whatever its
code, naming each row's commit (reports/__init__.py).
"""

import dataclasses
import itertools
import json
import os
import tomllib

from guide import examples

from .errors import UsageError

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suites")
REPORTS = ("compare", "defaults", "network", "startup", "steps", "scale",
           "thesis", "validation")
DATASETS = ("synthetic", "mnist")
# Every example that reports an accuracy curve: all but the Supervisor variant.
SCHEMES = [example.name for example in examples.EXAMPLES if example.hooks]
CLUSTER = [example.name for example in examples.EXAMPLES
           if example.hooks and example.cluster and example.run_sh == "run.sh"]
GROUPS = {"all": SCHEMES, "cluster": CLUSTER}
# What a run may set, with the type each value must have.
PARAMETERS = {"dataset": str, "examples": int, "batch": int, "worker_batch": int,
              "window": int, "evaluations": int, "eval_every_examples": int,
              "train_steps": int, "eval_every": int, "network": str,
              "timeout": int, "limited_margin": float, "flags": list,
              "simulate": bool}
MATRIX = {"schemes": (list, str), "workers": list, "ps": list, "rates": list,
          "windows": list, "preload": list, "repeats": int}
OTHER = {"tables": list, "name": str, "command": list}
TOP = {"description": str, "minutes": (int, float), "report": str}
OPTIONAL_TOP = {"spans_code": bool}


@dataclasses.dataclass
class Suite:
    name: str
    description: str
    minutes: float
    report: str
    runs: list
    # Whether runs of earlier code count as done (the module's docstring).
    spans_code: bool = False

    @property
    def schemes(self):
        return list(dict.fromkeys(run["scheme"] for run in self.runs
                                  if run.get("scheme")))


def names():
    return sorted(name[:-5] for name in os.listdir(FOLDER) if name.endswith(".toml"))


def load(name):
    """The suite `name`, its runs expanded; UsageError for an unknown suite
    or a malformed file."""
    path = os.path.join(FOLDER, f"{name}.toml")
    if name not in names():
        raise UsageError(f"there is no suite {name!r}; choose one of "
                         f"{', '.join(names())} (`python -m benchmarks --help` "
                         f"says what each runs)")
    try:
        with open(path, "rb") as stream:
            data = tomllib.load(stream)
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"suites/{name}.toml is not valid TOML ({error}); "
                         f"fix the file") from None
    return parse(name, data)


def check_types(where, table, allowed):
    for key, value in table.items():
        if key not in allowed:
            raise UsageError(f"{where}: unknown key {key!r}; the keys are "
                             f"{', '.join(allowed)}")
        wanted = allowed[key]
        if wanted is float:
            wanted = (int, float)
        if not isinstance(value, wanted) or isinstance(value, bool) and \
                wanted not in (list, bool):
            raise UsageError(f"{where}: {key} = {value!r} has the wrong type")


def parse(name, data):
    where = f"suites/{name}.toml"
    top = {key: value for key, value in data.items() if key != "runs"}
    check_types(where, top, TOP | OPTIONAL_TOP | PARAMETERS)
    for key in TOP:
        if key not in top:
            raise UsageError(f"{where}: {key} is missing")
    if top["report"] not in REPORTS:
        raise UsageError(f"{where}: report {top['report']!r} is not one of "
                         f"{', '.join(REPORTS)}")
    shared = {key: value for key, value in top.items() if key in PARAMETERS}
    runs = {}
    for index, entry in enumerate(data.get("runs", []), 1):
        check_types(f"{where}, run {index}", entry, PARAMETERS | MATRIX | OTHER)
        for run in expand(where, shared | entry):
            key = run_key(run)
            if key in runs:
                runs[key]["tables"] = list(dict.fromkeys(
                    runs[key]["tables"] + run["tables"]))
            else:
                runs[key] = run
    if not runs:
        raise UsageError(f"{where}: no [[runs]]")
    return Suite(name, top["description"], top["minutes"], top["report"],
                 list(runs.values()), top.get("spans_code", False))


def expand(where, entry):
    """One dict per run of a [[runs]] entry."""
    fixed = {key: value for key, value in entry.items() if key in PARAMETERS}
    fixed.setdefault("dataset", "synthetic")
    tables = entry.get("tables", ["main"])
    repeats = range(1, entry.get("repeats", 1) + 1)
    if "command" in entry:
        if "name" not in entry:
            raise UsageError(f"{where}: a run given as a command needs a name")
        for repeat in repeats:
            yield {"name": entry["name"], "command": entry["command"],
                   "repeat": repeat, "tables": tables,
                   "timeout": fixed.get("timeout", 600)}
        return
    schemes = entry.get("schemes", [])
    schemes = GROUPS.get(schemes, schemes) if isinstance(schemes, str) else schemes
    if isinstance(entry.get("schemes"), str) and entry["schemes"] not in GROUPS:
        raise UsageError(f"{where}: schemes = {entry['schemes']!r}: give a list "
                         f"or one of {', '.join(GROUPS)}")
    for scheme in schemes:
        if scheme not in examples.BY_NAME:
            raise UsageError(f"{where}: unknown scheme {scheme!r}")
    if fixed.get("simulate"):
        from simulator.schemes import SCHEMES as SIMULATED

        missing = [scheme for scheme in schemes if scheme not in SIMULATED]
        if missing:
            raise UsageError(f"{where}: the simulator does not play "
                             f"{missing[0]}; it plays {', '.join(SIMULATED)}")
    for scheme, workers, ps, rate, window, repeat, preload in itertools.product(
            schemes, entry.get("workers", [None]), entry.get("ps", [None]),
            entry.get("rates", [None]), entry.get("windows", [None]), repeats,
            entry.get("preload", [None])):
        example = examples.BY_NAME[scheme]
        if not example.cluster:
            # One process: its towers, or nothing to count; no ps, no link.
            workers = (workers or example.towers) if example.towers else None
            ps = rate = None
        else:
            workers = workers or example.workers
            # An allreduce has no ps to sweep over.
            ps = None if example.ps == 0 else example.ps if ps is None else ps
        run = dict(fixed, scheme=scheme, workers=workers, ps=ps, rate=rate,
                   repeat=repeat, preload=preload, tables=tables)
        if window is not None:
            run["window"] = window
        if rate in (None, "none"):
            run.pop("limited_margin", None)
        yield {key: value for key, value in run.items() if value is not None}


def run_key(run):
    """What identifies a run within its suite: every setting but its tables."""
    return json.dumps({key: value for key, value in run.items() if key != "tables"},
                      sort_keys=True)


def label(run):
    """A short name for a run, for progress lines, logs and logdirs."""
    if "command" in run:
        return f"{run['name']}, run {run['repeat']}"
    parts = [run["scheme"]]
    if "workers" in run:
        parts.append(f"{run['workers']} worker{'s' if run['workers'] != 1 else ''}")
    if "ps" in run:
        parts.append(f"{run['ps']} ps")
    if "batch" in run:
        parts.append(f"batch {run['batch']}")
    if "worker_batch" in run:
        parts.append(f"batch {run['worker_batch']} per worker")
    if "window" in run:
        parts.append(f"window {run['window']}")
    if run.get("flags"):
        parts.append(" ".join(run["flags"]))
    if "rate" in run:
        parts.append("no limit" if run["rate"] == "none" else run["rate"])
    if "preload" in run:
        parts.append("preloaded" if run["preload"] else "a new Python per task")
    if run.get("simulate"):
        parts.append("simulated")
    if run["repeat"] > 1:
        parts.append(f"run {run['repeat']}")
    return ", ".join(parts)


def slug(run):
    """`label` as a file name."""
    return "".join(char if char.isalnum() or char in "-." else "_"
                   for char in label(run).replace(", ", "-"))
