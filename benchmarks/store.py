"""`DIR/runs.jsonl`: one JSON line per run, appended as each ends, never
rewritten. Reading it checks every line, so that a damaged file is refused
before anything is added to it."""

import json
import os

from . import suites
from .errors import UsageError

RUNS = "runs.jsonl"
# Every record has these; the rest depends on the run.
REQUIRED = ("suite", "run", "label", "command", "status", "code", "commit",
            "started", "measures")


def path_of(folder):
    return os.path.join(folder, RUNS)


def read(folder):
    """Every record in `folder`'s runs.jsonl, in order; [] if it has none."""
    path = path_of(folder)
    if not os.path.exists(path):
        return []
    records = []
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise UsageError(
                    f"{path} line {number} is not valid JSON ({error.msg} at "
                    f"column {error.colno}); repair or delete that line, nothing "
                    f"was changed") from None
            problem = not_a_record(record)
            if problem:
                raise UsageError(
                    f"{path} line {number} is not a run record ({problem}); "
                    f"repair or delete that line, nothing was changed")
            records.append(record)
    return records


def not_a_record(record):
    """What is wrong with `record` as a run record, or None."""
    if not isinstance(record, dict):
        return "not a JSON object"
    missing = [key for key in REQUIRED if key not in record]
    if missing:
        return f"no {missing[0]!r}"
    for key in ("run", "measures"):
        if not isinstance(record[key], dict):
            return f"its {key!r} is not an object"
    if record["status"] not in ("ok", "failed"):
        return f"its status is {record['status']!r}, not 'ok' or 'failed'"
    if record["status"] == "failed" and not isinstance(record.get("error"), str):
        return "a failed run without its 'error'"
    return None


def check_suite(records, suite, folder):
    """UsageError if `folder` holds runs of another suite."""
    other = next((record["suite"] for record in records
                  if record["suite"] != suite), None)
    if other:
        raise UsageError(f"{folder} holds runs of the suite {other!r}, not "
                         f"{suite!r}; give each suite a folder of its own (--out)")


def key_of(record):
    return suites.run_key(record["run"])


def finished(records, code):
    """The keys of the runs that succeeded with this `code` (None: with any
    code, for a suite that spans code changes)."""
    return {key_of(record) for record in records
            if record["status"] == "ok" and code in (None, record["code"])}


def append(folder, record):
    """Adds `record` as one line, on disk before the next run starts."""
    os.makedirs(folder, exist_ok=True)
    with open(path_of(folder), "a", encoding="utf-8") as stream:
        stream.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
        stream.flush()
        os.fsync(stream.fileno())


def newest(records):
    """The last record of each run whatever its code, a failed run that
    succeeded later counting as the success: what a suite that spans code
    changes tables, as one group."""
    runs = {}
    for record in records:
        key = key_of(record)
        if record["status"] == "ok" or runs.get(key, {}).get("status") != "ok":
            runs[key] = record
    return list(runs.values())


def latest(records):
    """Per code version, the last record of each run: what the report
    tables. A failed run that succeeded later counts as the success. The
    versions come newest first (the one whose run started last), each's
    runs in the order they first appear."""
    groups = {}
    for record in records:
        runs = groups.setdefault(record["code"], {})
        key = key_of(record)
        if record["status"] == "ok" or runs.get(key, {}).get("status") != "ok":
            runs[key] = record
    newest_first = sorted(groups, reverse=True, key=lambda code: max(
        record["started"] for record in groups[code].values()))
    return {code: list(groups[code].values()) for code in newest_first}
