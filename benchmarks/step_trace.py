#!/usr/bin/env python3
"""Where a training step's time goes when the variables live on a ps.

    python benchmarks/step_trace.py [--batch_size 100] [--steps 300]
                                    [--result PATH]

Runs SGD steps of the examples' classifier on one batch in one process,
three ways one after the other, --steps steps each, and prints the wall time
and the CPU time (all threads) per step side by side:

- local: variables and computation in one plain session (the baseline's step);
- local, through a server: the same, but in a session on the worker's server,
  as the windowed schemes run their local steps;
- ps: variables on a parameter server, computation on a worker, both servers
  in this process and talking gRPC over loopback (a Hogwild step with one
  worker);
- window 8: not run, but computed from the two rows above it: seven local
  steps through the server and one with the ps, as in the windowed schemes
  at T = 8;
- loop, hooked run: the examples' own loop around the ps step, as a worker
  that is not the chief runs it: a MonitoredTrainingSession on the worker's
  server with StopAtStepHook and report.ProgressHook, each step drawing its
  minibatch from data.Batches and feeding it with classifier.feed
  (Hogwild's and Synchronous-SGD's step, a window's pull);
- loop, run without hooks: the same loop around the local step through the
  server, run by monitored.run_without_hooks (a window's local step).

What the two loop rows cost beyond the tight rows of the same op (the ps
step's, the local step's through the server) is the step's cost outside
its session.run: the hooks, the feed, the next minibatch, the Python loop.

Then it traces three ps steps (RunOptions FULL_TRACE) and, for the fullest
trace, sums per device the time spent in the model's ops and in receiving
tensors, which shows how much of the step is the exchange. On a machine of
C cores, no set of tasks can process more examples per second than
C × 1000 / (CPU ms per step) × batch: that bound is printed too.

--result writes the same figures as JSON (the `steps` suite's runs do, for
its report: `python -m benchmarks run steps`): the batch size, the steps,
the cores, the window; per kind of step its wall and CPU ms, both against
the local step's, and the examples per second the cores allow; the loop's
wall and CPU ms per run beyond the tight rows' (`loop_overhead`); the traced
ps step's sums per job; and the bytes of each parameter tensor.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from guide.training import model  # noqa: E402
from launcher.options import free_ports  # noqa: E402

WINDOW = 8
TRACED_STEPS = 3


# Rows in each shard the loop rows draw their minibatches from: many
# batches, so that Batches reshuffles as seldom as in a run.
LOOP_EXAMPLES = 30_000


def time_calls(call, steps):
    """(wall ms, CPU ms) per call of `call`, after a warm-up."""
    for _ in range(20):
        call()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        call()
    return (1000 * (time.perf_counter() - wall) / steps,
            1000 * (time.process_time() - cpu) / steps)


def time_steps(session, train_op, feed, steps):
    """(wall ms, CPU ms) per step of a tight loop of session.run."""
    return time_calls(lambda: session.run(train_op, feed), steps)


def batch(size):
    rng = np.random.default_rng(0)
    return (rng.random((size, model.IMAGE_SIZE), dtype=np.float32),
            rng.integers(0, 10, size))


def local_step(args):
    with tf.Graph().as_default():
        classifier = model.Classifier(0, summaries=False)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            classifier.loss)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return time_steps(session, train_op,
                              classifier.feed(*batch(args.batch_size)), args.steps)


def ps_and_worker():
    """A ps and a worker server in this process, on free ports of loopback:
    (their ClusterSpec, the worker's server)."""
    ps_port, worker_port = free_ports(2)
    cluster = tf.train.ClusterSpec({"ps": [f"127.0.0.1:{ps_port}"],
                                    "worker": [f"127.0.0.1:{worker_port}"]})
    tf.distribute.Server(cluster, job_name="ps", task_index=0)
    return cluster, tf.distribute.Server(cluster, job_name="worker", task_index=0)


def remote_steps(args):
    """((wall, CPU) ms per step: local through the server, ps, window 8;
    trace sums; {parameter: bytes})."""
    cluster, worker = ps_and_worker()
    with tf.Graph().as_default():
        setter = tf.compat.v1.train.replica_device_setter(
            worker_device="/job:worker/task:0", cluster=cluster)
        with tf.compat.v1.device(setter):
            classifier = model.Classifier(0, summaries=False)
            train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
                classifier.loss)
        with tf.compat.v1.device("/job:worker/task:0"):
            local = model.Classifier(1, summaries=False)
            local_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
                local.loss)
        images, labels = batch(args.batch_size)
        with tf.compat.v1.Session(worker.target) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            ps_ms = time_steps(session, train_op, classifier.feed(images, labels),
                               args.steps)
            local_ms = time_steps(session, local_op, local.feed(images, labels),
                                  args.steps)
            options = tf.compat.v1.RunOptions(
                trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
            # The RPC layer's records of the tensors a task received can miss
            # a step's trace on a busy machine: trace three steps, and keep
            # the one whose jobs each show the most.
            traces = []
            for _ in range(TRACED_STEPS):
                metadata = tf.compat.v1.RunMetadata()
                session.run(train_op, classifier.feed(images, labels),
                            options=options, run_metadata=metadata)
                traces.append(trace_sums(metadata))
    window_ms = tuple(((WINDOW - 1) * local + ps) / WINDOW
                      for local, ps in zip(local_ms, ps_ms))
    fullest = max(traces, key=lambda sums: min(
        [received for _, _, received in sums.values()], default=0))
    sizes = {variable.op.name: variable.shape.num_elements()
             * variable.dtype.base_dtype.size
             for variable in classifier.mlp.variables}
    return local_ms, ps_ms, window_ms, fullest, sizes


def loop_steps(args):
    """(wall ms, CPU ms) per step of the examples' loop on the worker's
    server, variables on a ps: a hooked run of the ps step, then a run of
    the local step without the hooks; each draws and feeds a minibatch."""
    from guide.training import data, monitored, report

    cluster, worker = ps_and_worker()
    with tf.Graph().as_default():
        setter = tf.compat.v1.train.replica_device_setter(
            worker_device="/job:worker/task:0", cluster=cluster)
        with tf.compat.v1.device(setter):
            global_step = tf.compat.v1.train.get_or_create_global_step()
            classifier = model.Classifier(0, summaries=False)
            train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
                classifier.loss, global_step=global_step)
        with tf.compat.v1.device("/job:worker/task:0"):
            local = model.Classifier(1, summaries=False)
            local_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
                local.loss)
        rng = np.random.default_rng(0)
        batches = data.Batches(
            rng.random((LOOP_EXAMPLES, model.IMAGE_SIZE), dtype=np.float32),
            rng.integers(0, 10, LOOP_EXAMPLES), args.batch_size, seed=0)
        # A worker's hooks, as the scripts build them: never stopping nor
        # printing within the timed steps (a run prints a line a tenth of
        # its steps apart) and no summaries (only the chief writes them).
        never = 2 ** 62
        hooks = [tf.compat.v1.train.StopAtStepHook(last_step=never),
                 report.ProgressHook(global_step, classifier.loss, never,
                                     examples_per_step=args.batch_size)]
        with tf.compat.v1.train.MonitoredTrainingSession(
                master=worker.target, is_chief=True, hooks=hooks) as session:
            hooked = time_calls(lambda: session.run(
                train_op, classifier.feed(*batches.next())), args.steps)
            unhooked = time_calls(lambda: monitored.run_without_hooks(
                session, local_op, local.feed(*batches.next())), args.steps)
    return hooked, unhooked


def trace_sums(metadata):
    """{device: (ms in ops, ms receiving tensors, tensors received)}."""
    sums = {}
    for device in metadata.step_stats.dev_stats:
        ops = receive = 0.0
        received = 0
        for node in device.node_stats:
            if node.node_name == "RecvTensor":
                receive += node.all_end_rel_micros / 1000
                received += 1
            else:
                ops += node.all_end_rel_micros / 1000
        job = device.device.split("/")[1]
        old = sums.get(job, (0.0, 0.0, 0))
        sums[job] = (old[0] + ops, old[1] + receive, old[2] + received)
    return sums


def allowed(cores, cpu_ms, batch_size):
    """The most examples per second `cores` cores can process at `cpu_ms`
    of CPU per step of `batch_size` examples."""
    return cores * 1000 / cpu_ms * batch_size


# Each loop row, and the tight row of the same op it is measured against.
LOOP_ROWS = {"loop, hooked run": "ps",
             "loop, run without hooks": "local, through a server"}


def loop_overhead(timed):
    """{loop row: {wall_ms, cpu_ms}}: what a run of the loop costs beyond
    the tight session.run of the same op."""
    times = dict(timed)
    return {kind: {"wall_ms": round(times[kind][0] - times[tight][0], 4),
                   "cpu_ms": round(times[kind][1] - times[tight][1], 4)}
            for kind, tight in LOOP_ROWS.items() if kind in times}


def figures(args, cores, timed, sums, sizes):
    """What --result writes: `timed` is [(kind, (wall ms, CPU ms))], the
    local step's first."""
    local_wall, local_cpu = timed[0][1]
    return {
        "loop_overhead": loop_overhead(timed),
        "batch_size": args.batch_size, "steps": args.steps, "cores": cores,
        "window": WINDOW,
        "kinds": [{"kind": kind, "wall_ms": round(wall, 4), "cpu_ms": round(cpu, 4),
                   "wall_times_local": round(wall / local_wall, 3),
                   "cpu_times_local": round(cpu / local_cpu, 3),
                   "examples_per_s_allowed": round(allowed(cores, cpu,
                                                           args.batch_size))}
                  for kind, (wall, cpu) in timed],
        "traced_ps_step": {job.removeprefix("job:"): {
            "ops_ms": round(ops, 3), "receive_ms": round(receive, 3),
            "tensors_received": received}
            for job, (ops, receive, received) in sorted(sums.items())},
        "parameter_bytes": sizes}


def write_result(path, result):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as stream:
        json.dump(result, stream, indent=1, sort_keys=True)
        stream.write("\n")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.strip().splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch_size", type=int, default=100)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--result", metavar="PATH",
                        help="also write the figures to PATH as JSON")
    args = parser.parse_args()
    if args.batch_size < 1 or args.steps < 1:
        parser.error("--batch_size and --steps must be positive")
    tf.compat.v1.disable_eager_execution()
    tf.get_logger().setLevel("ERROR")
    local_ms = local_step(args)
    server_ms, ps_ms, window_ms, sums, sizes = remote_steps(args)
    hooked_ms, unhooked_ms = loop_steps(args)
    cores = len(os.sched_getaffinity(0))
    timed = [("local", local_ms), ("local, through a server", server_ms),
             ("ps", ps_ms), ("window", window_ms),
             ("loop, hooked run", hooked_ms), ("loop, run without hooks", unhooked_ms)]
    print(f"batch {args.batch_size}, per step: wall ms (× local), CPU ms (× local), "
          f"examples/s that {cores} cores allow at most:")
    for kind, (wall, cpu) in timed:
        name = f"window {WINDOW}" if kind == "window" else kind
        print(f"  {name:24} {wall:6.2f} ms ({wall / local_ms[0]:.2f}×)  "
              f"{cpu:6.2f} ms ({cpu / local_ms[1]:.2f}×)  "
              f"{allowed(cores, cpu, args.batch_size):9,.0f}")
    print("the loop's cost beyond the tight run of the same op, per run:")
    for kind, extra in loop_overhead(timed).items():
        print(f"  {kind:24} {extra['wall_ms']:6.2f} ms wall  "
              f"{extra['cpu_ms']:6.2f} ms CPU")
    print("one traced ps step, per job: ms in ops, ms receiving tensors "
          "(tensors received):")
    for job, (ops, receive, received) in sorted(sums.items()):
        print(f"  {job:24} {ops:6.2f} ms  {receive:6.2f} ms  ({received})")
    if args.result:
        write_result(args.result, figures(args, cores, timed, sums, sizes))


if __name__ == "__main__":
    main()
