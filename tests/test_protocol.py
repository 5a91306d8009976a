"""Distributed-Setup writes the start/stop protocol out in plain TensorFlow;
every other example calls the shared helpers. Both must speak the same
protocol: the same queues, on the same tasks, built in the same order.

Each task of a run records the queue operations it builds
(tests/protocol_trace/sitecustomize.py). That hook runs when a task's
Python starts, so these runs take the exec path, a new Python per task."""

import json
import os

from conftest import PRELOAD, REPO, Running, env_without_tf_config, read_result

TRACER = os.path.join(REPO, "tests", "protocol_trace")
TASKS = ("ps-0", "worker-0", "worker-1")


def read_trace(folder):
    """{task: [(operation, queue, capacity, task it lives on), ...]}."""
    records = {}
    for task in TASKS:
        with open(os.path.join(folder, f"{task}.jsonl")) as stream:
            records[task] = [tuple(json.loads(line).values()) for line in stream]
    return records


def test_distributed_setup_speaks_the_shared_protocol(run_dir):
    runs = {}
    for example in ("Distributed-Setup", "Hogwild"):
        trace = run_dir / f"{example}-trace"
        trace.mkdir()
        env = env_without_tf_config(**{PRELOAD: "0", "PROTOCOL_TRACE": str(trace),
                                       "PYTHONPATH": TRACER})
        command = ["bash", os.path.join(REPO, example, "run.sh"), "--workers", "2",
                   "--train_steps", "20", "--logdir", str(run_dir / example)]
        runs[example] = (Running(command, env=env), trace)
    try:
        for job, _ in runs.values():
            code, output = job.finish(timeout=120)
            assert code == 0, output[-3000:]
    finally:
        for job, _ in runs.values():
            job.kill()

    inline = read_trace(runs["Distributed-Setup"][1])
    shared = read_trace(runs["Hogwild"][1])
    assert inline == shared
    # The protocol itself, so that two empty records cannot agree: the ps
    # waits on each worker's "done"; the chief says the model is ready,
    # waits for worker 1 to finish, says it has finished, then that it is
    # done; worker 1 waits for the chief, says it has finished, waits for
    # the chief to finish, then says it is done.
    queues = {task: [record[1] for record in records]
              for task, records in shared.items()}
    assert set(queues["ps-0"]) == {"done_0_0", "done_0_1"}
    assert queues["worker-0"].index("chief_ready") < \
        queues["worker-0"].index("training_finished_1") < \
        queues["worker-0"].index("chief_finished") < \
        queues["worker-0"].index("done_0_0") == len(queues["worker-0"]) - 1
    assert queues["worker-1"].index("chief_ready") < \
        queues["worker-1"].index("training_finished_1") < \
        queues["worker-1"].index("chief_finished") < \
        queues["worker-1"].index("done_0_1")
    assert all(record[3] == "/job:ps/task:0"
               for records in shared.values() for record in records)
    for example in runs:
        assert read_result(run_dir / example)["workers"] == 2
