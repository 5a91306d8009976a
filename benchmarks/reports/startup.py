"""The `startup` report: the start-up of a job with each task a new Python
against tasks forked from a launcher that imported TensorFlow once, side
by side; a bare `import tensorflow` for scale."""

from . import common

# The docs' generated blocks this report gives (benchmarks/docs.py): each
# snippet's name and how many arguments it takes.
SNIPPETS = {}
TITLE = "Start-up, with and without preloading TensorFlow"
WAYS = {False: "a new Python per task", True: "forked from a preloaded launcher"}


def summary(group):
    """Per worker count: each way's medians, and the ratio of the two."""
    rows = []
    runs = [record for record in group if "preload" in record["run"]]
    for workers in dict.fromkeys(record["run"]["workers"] for record in runs):
        medians = {}
        for preload, way in WAYS.items():
            finished = [record["measures"] for record in runs
                        if record["run"]["workers"] == workers
                        and record["run"]["preload"] == preload
                        and record["status"] == "ok"]
            if finished:
                medians[way] = {key: common.median(figures.get(key)
                                                   for figures in finished)
                                for key in ("startup_s", "command_s")}
        missing = [way for way in WAYS.values() if way not in medians]
        if missing:
            rows.append({"workers": workers, "error": f"every run {missing[0]} "
                                                      f"failed"})
            continue
        new, forked = (medians[way] for way in WAYS.values())
        rows.append({"workers": workers, "medians": medians,
                     "startup_ratio": round(new["startup_s"] / forked["startup_s"],
                                            2)})
    return rows


def section(group):
    bare = [record["measures"]["command_s"] for record in group
            if "command" in record["run"] and record["status"] == "ok"]
    repeats = max((record["run"]["repeat"] for record in group), default=1)
    rows = summary(group)
    parts = [f"A bare `import tensorflow`: {common.median(bare)} s. *Start-up*: "
             "the launcher's start to the chief's RESULT line, less its training "
             "(so start-up and one final evaluation); *command*: the whole "
             f"`bash run.sh`. Medians of {repeats} runs.", ""]
    parts += common.table(["workers", "way", "start-up", "command"], [
        (row["workers"], way, f"{median['startup_s']} s", f"{median['command_s']} s")
        for row in rows for way, median in row.get("medians", {}).items()])
    parts += [""] + [f"- {row['workers']} workers: " + (
        row["error"] if "error" in row else
        f"preloading makes start-up {row['startup_ratio']}x shorter")
        for row in rows] + [""]
    return parts


def plots(group, folder):
    return []


def snippet(name, args, source, link):
    raise KeyError(name)
