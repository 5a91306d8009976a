"""Distributed Setup with tf.compat.v1.train.Supervisor, the older way.

The same job as distributed_setup.py, managed by a `Supervisor` instead of a
`MonitoredTrainingSession`, as in TensorFlow 1.x tutorials. Supervisor is
deprecated; it is here so readers of older code can map it onto the new API:
`sv.managed_session` plays the part of MonitoredTrainingSession, and the loop
checks `sv.should_stop()` and the step count itself instead of using hooks.

Topology: 1 ps + 1 worker by default (more work too); asynchronous.

Run:  bash run_sup.sh                      # or: bash run_sup.sh --workers 2
By hand: as distributed_setup.py, with this script's name.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide.distributed import tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: the parser adds the classic cluster flags, --ps_hosts etc.
    args = flags.parse(flags.make_parser(__doc__, __file__))
    # --epochs sets --train_steps: a global step trains on one minibatch.
    flags.set_train_steps(args, examples_per_step=args.batch_size)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: find this task's place in the cluster (TF_CONFIG or flags).
    task = tf_config.resolve_task(os.environ, args.ps_hosts, args.worker_hosts,
                                  args.job_name, args.task_index)
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: the evaluator's loop, device filters, start/stop signals.
    from guide.distributed import evaluator, placement, protocol
    from guide.training import model, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        return evaluator.run(
            logdir, train_steps=args.train_steps, hidden_layers=args.hidden_layers,
            dataset=data.load(args.dataset, args.data_dir, args.seed, args.validation))

    # --- The cluster: every task runs a server; a ps only serves ---
    # Distributed: name every task, and run this task's server in the cluster.
    cluster_spec = tf.train.ClusterSpec(task.cluster)
    server = tf.distribute.Server(
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=placement.session_config(task))
    # Distributed: a ps serves until every worker has signalled "done".
    if task.job_name == "ps":
        protocol.serve_until_workers_done(server, task)
        return

    # --- The data: each worker trains on its own shard ---
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    # Distributed: take this worker's own slice and batch order.
    shard = data.shard(dataset.train_images, dataset.train_labels,
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size,
                           seed=args.seed + task.task_index)

    # --- The graph: variables on the ps, computation on this worker ---
    # Distributed: put the variables on the ps and the ops on this worker.
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=f"/job:worker/task:{task.task_index}", cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        classifier = model.Classifier(args.seed, hidden_layers=args.hidden_layers)
        # The update rule: theta <- theta - learning_rate * gradient.
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        train_op = optimizer.minimize(classifier.loss, global_step=global_step)
        # Distributed: read the global step that every worker advances.
        with tf.control_dependencies([train_op]):
            step_after_update = global_step.read_value()
        # Distributed: one summary op, which the chief's loop writes.
        summary_op = tf.compat.v1.summary.merge_all()

    # --- Train: the Supervisor initialises (the chief) or waits (the others) ---
    # Distributed: the chief's Supervisor initialises the ps and checkpoints.
    supervisor = tf.compat.v1.train.Supervisor(
        is_chief=task.is_chief,
        logdir=logdir if task.is_chief else None,
        global_step=global_step, summary_op=None,
        saver=tf.compat.v1.train.Saver())
    # Distributed: the other workers wait for the chief's "model ready".
    if not task.is_chief:
        protocol.wait_for_chief(server, task)
    # Distributed: run through this task's server, initialised by the chief.
    with supervisor.managed_session(
            server.target, config=placement.session_config(task)) as session:
        # Distributed: the chief signals the others that the model is ready.
        if task.is_chief:
            protocol.announce_chief_ready(server, task)
        start = time.perf_counter()
        # Distributed: stop once the shared global step reaches the end.
        step = session.run(global_step)
        local_step = 0
        while not supervisor.should_stop() and step < args.train_steps:
            batch_images, batch_labels = batches.next()
            feed = classifier.feed(batch_images, batch_labels)
            step, batch_loss = session.run([step_after_update, classifier.loss],
                                           feed)
            # Distributed: print progress; only the chief writes summaries.
            local_step += 1
            if local_step % args.log_every == 0:
                rate = step * args.batch_size / (time.perf_counter() - start)
                print(f"global_step {step} loss {batch_loss:.4f} examples/s "
                      f"{rate:.0f} (local step {local_step})", flush=True)
                if task.is_chief:
                    report.record_progress(logdir, step)
                    supervisor.summary_computed(session,
                                                session.run(summary_op, feed))
        # Distributed: the chief waits until every other worker has finished.
        if task.is_chief:
            protocol.wait_for_workers_to_finish(server, task)
        else:
            protocol.report_training_finished(server, task)
        wall_s = time.perf_counter() - start

        # --- Evaluate and report (the chief only) ---
        # Distributed: the chief saves the last checkpoint and evaluates.
        if task.is_chief:
            supervisor.saver.save(session, supervisor.save_path,
                                  global_step=global_step)
            report.evaluate_and_write(
                session, logdir, flags.run_settings(args),
                "distributed-setup-supervisor", classifier, dataset, global_step,
                wall_s, workers=task.num_workers, ps=task.num_ps)
    # Distributed: signal "done" to every ps, so that it can exit.
    protocol.signal_done(server, task)


if __name__ == "__main__":
    sys.exit(flags.run_main(main))


# What launch.sh reads of this script (docs/launcher.md): the step it runs
# before any task starts, and the files the chief writes in --logdir.
# /// launch
# prepare = ["-m", "guide.training.download"]
# progress = "progress.jsonl"
# result = "result.json"
# chief_disk = ["evaluator"]
# ///
