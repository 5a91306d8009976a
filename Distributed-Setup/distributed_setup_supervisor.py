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

from guide import cli, config, data


def main():
    args = cli.parse(cli.make_parser(__doc__, __file__))
    task = config.resolve(args, os.environ)  # Distributed: TF_CONFIG or flags
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    from guide import cluster, evaluator, model, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        return evaluator.run(args)

    # --- The cluster ---
    cluster_spec = tf.train.ClusterSpec(task.cluster)  # Distributed:
    server = tf.distribute.Server(  # Distributed:
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=cluster.session_config(task))
    if task.job_name == "ps":  # Distributed: serve until the workers are done
        cluster.serve_until_workers_done(server, task)
        return

    # --- The data: each worker trains on its own shard ---
    dataset = data.load(args)
    shard = data.shard(dataset.train_images, dataset.train_labels,  # Distributed:
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size,
                           seed=args.seed + task.task_index)

    # --- The graph: variables on the ps, computation on this worker ---
    device_setter = tf.compat.v1.train.replica_device_setter(  # Distributed:
        worker_device=f"/job:worker/task:{task.task_index}", cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):  # Distributed:
        global_step = tf.compat.v1.train.get_or_create_global_step()
        classifier = model.Classifier(args.seed)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        train_op = optimizer.minimize(classifier.loss, global_step=global_step)
        with tf.control_dependencies([train_op]):
            step_after_update = global_step.read_value()  # for the loop's test
        summary_op = tf.compat.v1.summary.merge_all()

    # --- The session: the Supervisor initialises (chief) or waits (others) ---
    # summary_op=None: the Supervisor's background summary thread cannot feed
    # the placeholders, so the loop writes summaries itself.
    supervisor = tf.compat.v1.train.Supervisor(
        is_chief=task.is_chief,  # Distributed:
        logdir=args.logdir if task.is_chief else None,
        global_step=global_step, summary_op=None,
        saver=tf.compat.v1.train.Saver())
    if not task.is_chief:
        cluster.wait_for_chief(server, task)  # Distributed: no 30 s poll
    with supervisor.managed_session(
            server.target,  # Distributed:
            config=cluster.session_config(task)) as session:  # Distributed:
        if task.is_chief:
            cluster.announce_chief_ready(server, task)  # Distributed:
        start = time.perf_counter()
        step = session.run(global_step)
        local_step = 0
        while not supervisor.should_stop() and step < args.train_steps:
            batch_images, batch_labels = batches.next()
            feed = classifier.feed(batch_images, batch_labels)
            step, batch_loss = session.run([step_after_update, classifier.loss],
                                           feed)
            local_step += 1
            if local_step % args.log_every == 0:
                rate = step * args.batch_size / (time.perf_counter() - start)
                print(f"global_step {step} loss {batch_loss:.4f} examples/s "
                      f"{rate:.0f} (local step {local_step})", flush=True)
                if task.is_chief:
                    supervisor.summary_computed(session,
                                                session.run(summary_op, feed))
        cluster.training_finished(server, task)  # Distributed: chief waits for all
        wall_s = time.perf_counter() - start  # until the last worker stopped

        # --- Evaluate and report (the chief only) ---
        if task.is_chief:
            supervisor.saver.save(session, supervisor.save_path,
                                  global_step=global_step)
            report.evaluate_and_write(session, args,
                                      "distributed-setup-supervisor", classifier,
                                      dataset, global_step, wall_s,
                                      workers=task.num_workers, ps=task.num_ps)
    cluster.signal_done(server, task)  # Distributed: lets the ps exit


if __name__ == "__main__":
    cli.run_main(main)
