"""Reports: results.md and the plots of a results folder, written from its
runs.jsonl alone, the same bytes every time for the same runs.

Runs are tabled by code version (see provenance.py), the latest first:
runs of another code are kept, in a section of their own, never in the
same table. Only the latest code's runs are plotted. A report of a suite
of many hours (SPANS_CODE) tables and plots each run's newest record
instead, whatever its code, and names the commits.
"""

import os

from .. import store
from ..errors import UsageError
from . import (
    common,
    compare,
    defaults,
    network,
    scale,
    startup,
    steps,
    thesis,
    validation,
)

KINDS = {"compare": compare, "defaults": defaults, "network": network,
         "startup": startup, "steps": steps, "scale": scale, "thesis": thesis,
         "validation": validation}


def check(kind):
    """Fails now if the report cannot be written later: matplotlib."""
    common.pyplot()
    return KINDS[kind]


def write(folder, must_exist=False, plots=True):
    """Writes `folder`'s report (results.md, and the plots unless told not
    to); the names of the files written."""
    records = store.read(folder)
    if not records:
        if must_exist:
            raise UsageError(f"{folder} holds no runs.jsonl; run a suite into it "
                             f"first: python -m benchmarks run SUITE --out "
                             f"{folder}")
        return []
    store.check_suite(records, records[0]["suite"], folder)
    kind = records[0].get("report")
    if kind not in KINDS:
        raise UsageError(f"{store.path_of(folder)} names no known report "
                         f"({kind!r}); it was written by another version of this "
                         f"tool")
    module = KINDS[kind]
    parts, written = [f"# {module.TITLE}: the suite `{records[0]['suite']}`", ""], \
        ["results.md"]
    groups = [store.newest(records)] if getattr(module, "SPANS_CODE", False) \
        else store.latest(records).values()
    for index, group in enumerate(groups):
        if index == 1:
            parts += ["# Earlier code", "",
                      "Runs of code that has changed since: each group is "
                      "tabled apart, and not plotted.", ""]
        parts += common.header(group, level=2 if index == 0 else 3)
        parts += module.section(group)
        if index == 0 and plots:
            written += module.plots(group, folder)
        parts += common.commands(group)
    text = "\n".join(parts).rstrip("\n") + "\n"
    text = text.replace(common.README_LINK, os.path.relpath(common.README, folder))
    with open(os.path.join(folder, "results.md"), "w", encoding="utf-8") as stream:
        stream.write(text)
    return written
