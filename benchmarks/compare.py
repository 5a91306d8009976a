#!/usr/bin/env python3
"""Benchmark: every scheme on the same work, side by side with the baseline.

    python benchmarks/compare.py            # the full run, about 13 minutes
    python benchmarks/compare.py --quick    # four schemes, about 90 seconds
    python benchmarks/compare.py --dataset mnist --data_dir ~/data/mnist

Every run trains the same classifier on the same data for the same number of
training examples with the same global batch: each update of the central
parameters, or each minibatch of an asynchronous worker, uses --batch_size
examples. The synchronous schemes split that batch among their workers. Runs
go through the examples' own `run.sh`, so through the same launcher a user
starts, and the chief measures test accuracy ten times along the way
(`--eval_every`).

The single-process baseline runs first; every later run prints its ratios to
it, measured in this same benchmark: throughput over the baseline's, and time
to the target accuracy over the baseline's. Then come the worker sweeps (1,
2 and 4 workers, 8 with --workers 1,2,4,8; one ps and two) and the start-up
cost: `bash run.sh` with a handful of steps against a bare
`python -c "import tensorflow"`.

Written to --results (default benchmarks/results, or benchmarks/results-quick
with --quick): runs.json and runs.csv (every number), results.md (the tables
and the targets), accuracy.png and throughput.png, and each run's output in
logs/. Standard library and matplotlib only; TensorFlow runs in the
subprocesses, which never load matplotlib (see benchmarks/requirements.txt).

The modules beside this one do the jobs: plan.py (the flags, the schemes,
each run's flags), runner.py (running and measuring), summarise.py (medians,
ratios, targets), write.py (results.md, runs.csv, the plots) and machine.py
(the hardware and software).
"""

import datetime
import json
import os
import shlex
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine  # noqa: E402
import plan  # noqa: E402
import runner  # noqa: E402
import summarise  # noqa: E402
import write  # noqa: E402


def main(argv=None):
    args = plan.settings(argv)
    write.pyplot()  # before the runs: a missing matplotlib fails now, not at the end
    # SIGTERM ends the benchmark like Ctrl-C: the run going on is killed, and
    # its tasks with it (the launcher's tasks die with the launcher).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    os.makedirs(args.results, exist_ok=True)
    runs = plan.plan(args)
    for planned in runs:
        planned["repeats"] = args.repeats if planned.get("main") else 1
    repeats = args.repeats
    progress = runner.Progress(sum(planned["repeats"] for planned in runs) + 1)
    records, target = [], args.target_accuracy
    for planned in runs:
        scheme, workers, ps, batch = (planned["scheme"], planned["workers"],
                                      planned["ps"], planned["batch"])
        name = f"{scheme.name}-{workers}w-{ps}ps-b{batch}"
        attempts = []
        for attempt in range(1, planned["repeats"] + 1):
            progress.say(f"{scheme.name}, {workers} worker(s)"
                         + (f", {ps} ps" if scheme.cluster else "")
                         + f", global batch {batch}"
                         + (f", run {attempt} of {planned['repeats']}"
                            if planned["repeats"] > 1 else ""))
            attempts.append(runner.run_once(scheme, workers, ps, args,
                                     f"{name}-{attempt}", batch))
            progress.done += 1
        finished = [attempt for attempt in attempts if "error" not in attempt]
        if scheme.name == plan.BASELINE and target is None and finished:
            target = round(summarise.middle([attempt["test_accuracy"]
                                   for attempt in finished]) - 0.02, 4)
        record = summarise.combine(attempts, target)
        for table in ("main", "sweep", "batch_study"):
            record[table] = planned.get(table, False)
        if record["batch_study"]:
            # Compared with the baseline at the same batch, run just before.
            if scheme.name == plan.BASELINE:
                large_baseline = record
                record["throughput_ratio"] = 1.0
            else:
                record["throughput_ratio"] = summarise.ratio(
                    record.get("examples_per_s"),
                    large_baseline.get("examples_per_s"))
        elif scheme.name == plan.BASELINE:
            if "error" in record:
                print(write.summary_line(record))
                return 1  # nothing to compare with
            baseline = summarise.add_ratios(record, {})
            baseline["throughput_ratio"] = 1.0
            if baseline["time_to_target_s"] is not None:
                baseline["time_to_target_ratio"] = 1.0
        else:
            summarise.add_ratios(record, baseline)
        records.append(record)
        print(write.summary_line(record), flush=True)
    progress.say(f"start-up: bare import tensorflow and bash run.sh, "
                 f"{repeats} time(s) each")
    startup = runner.measure_startup(args, repeats)
    print(f"    run.sh {startup['run_sh_s']} s, import tensorflow "
          f"{startup['import_tensorflow_s']} s: ratio {startup['ratio']}")

    command = shlex.join(["python", "benchmarks/compare.py",
                          *(sys.argv[1:] if argv is None else argv)])
    meta = {"date": datetime.date.today().isoformat(), "command": command,
            "hardware": machine.hardware(), "software": machine.software(),
            "examples": args.examples, "batch_size": args.batch_size,
            "window": args.window, "dataset": args.dataset, "repeats": args.repeats,
            "target_accuracy": target}
    targets = summarise.check_targets(records, startup, args.window)
    with open(os.path.join(args.results, "runs.json"), "w") as stream:
        json.dump({"meta": meta, "startup": startup, "runs": records,
                   "targets": [dict(zip(("target", "measured", "bound", "met"), row))
                               for row in targets]}, stream, indent=1)
        stream.write("\n")
    write.write_csv(os.path.join(args.results, "runs.csv"), records)
    write.write_markdown(os.path.join(args.results, "results.md"), meta, records,
                   startup, targets)
    write.write_plots(args.results, records)
    missed = [row[0] for row in targets if not row[3]]
    print(f"results in {os.path.relpath(args.results)}: results.md, runs.json, "
          f"runs.csv, accuracy.png, throughput.png; "
          f"{len(targets) - len(missed)} of {len(targets)} targets met")
    return 1 if any("error" in record for record in records) else 0


if __name__ == "__main__":
    sys.exit(main())
