"""Converts the results the earlier benchmark scripts wrote (runs.json, one
file per invocation) into runs.jsonl records, once.

    python -m benchmarks.convert

What the earlier scripts stored is kept as it was: their figures (for the
synthetic suite, the medians of each configuration's runs, which is all
they kept), their commands and curves. What they did not store is said:
the commit is the one their results were committed on top of (the runs
were made on that tree, perhaps with changes not yet committed, so `dirty`
is unknown), the machine and versions are read from their header, NumPy's
version was not recorded, and the date has no time. All of one file's runs
form one group, as the earlier script tabled them together.
"""

import json
import os
import re
import subprocess

from . import provenance

REPO = provenance.REPO
RESULTS = os.path.join(REPO, "benchmarks", "results")


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True,
                          text=True, check=True, timeout=60).stdout


def versions_of(path):
    """[(commit, parsed file)] for every committed version of `path`, oldest
    first."""
    relative = os.path.relpath(path, REPO)
    commits = git("log", "--diff-filter=AM", "--format=%H", "--",
                  relative).split()[::-1]
    return [(commit, json.loads(git("show", f"{commit}:{relative}")))
            for commit in commits]


def parent(commit):
    return git("rev-parse", f"{commit}^").strip()


def machine_of(meta):
    match = re.match(r"(\d+) cores \((.*)\), (\d+) GiB, (\w+)", meta["hardware"])
    cores, cpu, memory, system = match.groups()
    return {"cores": int(cores), "cpu": cpu, "memory_gib": float(memory),
            "system": system}


def versions_from(meta):
    python, tensorflow = re.match(r"Python (\S+), TensorFlow (\S+)",
                                  meta["software"]).groups()
    return {"python": python, "tensorflow": tensorflow, "numpy": None}


def base_record(suite, report, path, commit, meta, file_commit):
    """The provenance of a run first committed in `commit`, converted from
    the version of `path` committed in `file_commit`."""
    return {"suite": suite, "report": report, "commit": parent(commit),
            "dirty": None, "code": f"converted-{parent(file_commit)[:10]}",
            "versions": versions_from(meta), "machine": machine_of(meta),
            "started": meta["date"],
            "converted_from": f"`{os.path.relpath(path, REPO)}` as committed in "
                              f"{file_commit[:10]}, written by the earlier script "
                              f"(`{meta['command']}`)"}


def example_run(scheme, workers, ps, **settings):
    from guide import examples

    example = examples.BY_NAME[scheme]
    run = dict(settings, scheme=scheme, repeat=1)
    if example.cluster:
        run["workers"] = workers or example.workers
        if example.ps:
            run["ps"] = ps or example.ps
    elif example.towers:
        run["workers"] = workers or example.towers
    return run


def label_of(run):
    from .suites import label
    return label(run)


def finish(record, run, command, status_error=None):
    record.update(run=run, label=label_of(run), command=command,
                  status="failed" if status_error else "ok")
    if status_error:
        record["error"] = status_error
    return record


def compare_file(relative, suite):
    """compare.py's runs.json: one record per configuration (its medians),
    and the two start-up measurements."""
    path = os.path.join(RESULTS, relative)
    commit, data = versions_of(path)[-1]
    meta, out = data["meta"], []
    by_key = {}
    for old in data["runs"]:
        tables = [name for name, flag in (("main", "main"), ("sweep", "sweep"),
                                          ("batch", "batch_study")) if old.get(flag)]
        run = example_run(old["scheme"], old["workers"], old["ps"],
                          dataset=meta["dataset"], examples=meta["examples"],
                          batch=old["global_batch"], window=meta["window"],
                          evaluations=10, timeout=600, tables=tables)
        figures = {key: old[key] for key in (
            "test_accuracy", "examples_per_s", "wall_s", "examples", "eval_s",
            "time_to_target_s", "rounds_per_1000_examples", "mean_staleness",
            "communication_window", "runs", "test_accuracy_each_run",
            "examples_per_s_each_run") if old.get(key) is not None}
        figures["command_s"] = old.get("elapsed_s")
        record = base_record(suite, "compare", path, commit, meta, commit)
        record.update(measures=figures, curve=old.get("curve", []))
        finish(record, run, old["command"], old.get("error"))
        key = json.dumps({k: v for k, v in run.items() if k != "tables"},
                         sort_keys=True)
        if key in by_key:  # the main table's run, also in the sweep
            by_key[key]["run"]["tables"] += tables
            continue
        by_key[key] = record
        out.append(record)
    startup = data.get("startup")
    if startup:
        for name, command, shown, seconds in (
                ("import tensorflow", ["python", "-c", "import tensorflow"],
                 "python -c 'import tensorflow'", startup["import_tensorflow_s"]),
                ("run.sh, 5 steps", ["bash", "Hogwild/run.sh", "--train_steps", "5",
                                     "--logdir", "{logdir}"],
                 startup["command"], startup["run_sh_s"])):
            run = {"name": name, "command": command, "repeat": 1,
                   "tables": ["startup"], "timeout": 600}
            record = base_record(suite, "compare", path, commit, meta, commit)
            record["measures"] = {"command_s": seconds, "runs": startup["repeats"]}
            out.append(finish(record, run, shown))
    return out


def defaults_file(relative):
    """real_data.py's runs.json: one record per example."""
    from . import measures

    path = os.path.join(RESULTS, relative)
    commit, data = versions_of(path)[-1]
    meta, out = data["meta"], []
    for old in data["runs"]:
        run = example_run(old["scheme"], None, None, dataset="mnist",
                          eval_every_examples=30_000, timeout=300, tables=["main"])
        record = base_record("mnist", "defaults", path, commit, meta, commit)
        figures = {key: old[key] for key in (
            "test_accuracy", "train_steps", "learning_rate", "examples",
            "training_s", "command_s", "s_to_97", "s_to_98") if key in old}
        if old.get("curve"):
            figures["late_accuracy"] = measures.late_accuracy(old["curve"])
        record.update(measures=figures, curve=old.get("curve", []))
        out.append(finish(record, run, old["command"], old.get("error")))
    return out


def network_file():
    """network.py's runs.json, written by three invocations: each record's
    commit is the one below the version of the file it first appeared in."""
    path = os.path.join(RESULTS, "network", "runs.json")
    history = versions_of(path)
    commit, data = history[-1]
    meta, out = data["meta"], []
    meta = dict(meta, command=meta["command"].replace("`, then `", "; then "))
    for old in data["runs"]:
        first = next(version for version, content in history
                     if old in content["runs"])
        timeout = int(re.search(r"--timeout (\d+)", old["command"])[1])
        run = example_run(old["scheme"], old["workers"], None, dataset="mnist",
                          eval_every_examples=30_000, network="hosts", window=8,
                          timeout=timeout, rate=old["rate"], tables=["main"])
        if old["rate"] != "none":
            run["limited_margin"] = 1.25
        record = base_record("network", "network", path, first, meta, commit)
        figures = {key: old[key] for key in (
            "test_accuracy", "examples", "s_to_97", "examples_to_97", "command_s",
            "bytes_per_example", "busiest_link", "busiest_bytes_per_example",
            "startup_s", "evaluations_to_97_s", "times_baseline",
            "examples_times_baseline", "baseline_compute_s", "beyond_compute_s")
            if old.get(key) is not None}
        if "examples_per_s" in old:
            # network.py's examples per second of training, evaluations left out.
            figures["examples_per_training_s"] = old["examples_per_s"]
        record["measures"] = figures
        record["converted_from"] += (f"; the baseline's time to 97% in its three "
                                     f"invocations: {meta['baseline_s_to_97']} s")
        out.append(finish(record, run, old["command"], old.get("error")))
    return out


def startup_file():
    path = os.path.join(RESULTS, "startup", "runs.json")
    commit, data = versions_of(path)[-1]
    meta, out = data["meta"], []
    run = {"name": "import tensorflow", "command": ["python", "-c",
                                                    "import tensorflow"],
           "repeat": 1, "tables": ["import"], "timeout": 300}
    record = base_record("startup", "startup", path, commit, meta, commit)
    record["measures"] = {"command_s": meta["import_tensorflow_s"],
                          "runs": meta["repeats"]}
    out.append(finish(record, run, "python -c 'import tensorflow'"))
    for old in data["runs"]:
        preload = old["way"] != "a new Python per task"
        run = example_run("Hogwild", old["workers"], None, dataset="synthetic",
                          network="private", train_steps=200, eval_every=0,
                          timeout=300, preload=preload, tables=["main"])
        run["repeat"] = old["repeat"] + 1
        record = base_record("startup", "startup", path, commit, meta, commit)
        record["measures"] = {key: old[key] for key in ("startup_s", "command_s")
                              if key in old}
        command = (f"LAUNCH_PRELOAD_TENSORFLOW={int(preload)} bash Hogwild/run.sh "
                   f"--workers {old['workers']} --network private --timeout 300 "
                   f"--train_steps 200 --eval_every 0")
        out.append(finish(record, run, command, old.get("error")))
    return out


def write(folder, records):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "runs.jsonl"), "w", encoding="utf-8") as stream:
        for record in records:
            stream.write(json.dumps(record, sort_keys=True, ensure_ascii=False)
                         + "\n")


def main():
    write(os.path.join(RESULTS, "synthetic"), compare_file("runs.json", "synthetic"))
    write(os.path.join(RESULTS, "allreduce-synthetic"),
          compare_file("allreduce-synthetic/runs.json", "synthetic"))
    write(os.path.join(RESULTS, "mnist"), defaults_file("mnist/runs.json"))
    write(os.path.join(RESULTS, "mnist", "repeat"),
          defaults_file("mnist/repeat/runs.json"))
    write(os.path.join(RESULTS, "allreduce"), defaults_file("allreduce/runs.json"))
    write(os.path.join(RESULTS, "network"), network_file())
    write(os.path.join(RESULTS, "startup"), startup_file())


if __name__ == "__main__":
    main()
