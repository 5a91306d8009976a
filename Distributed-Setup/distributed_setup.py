"""Distributed Setup: the smallest distributed training job, step by step.

The model's variables live on a parameter server (ps); a worker reads them,
computes a gradient on its minibatch and sends the update back. This is the
skeleton every other example builds on: cluster, server, device placement,
session, clean shutdown. It prints where each variable was placed.

Topology: 1 ps + 1 worker by default (more work too); asynchronous.

Run:  bash run.sh                          # or: bash run.sh --workers 2
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python distributed_setup.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223 --job_name=ps --task_index=0
      python distributed_setup.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223 --job_name=worker --task_index=0
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide import cli, config, data


def main():
    args = cli.parse(cli.make_parser(__doc__, __file__))
    # Distributed: who am I? From TF_CONFIG if set, else from the flags.
    task = config.resolve(args, os.environ)
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    from guide import cluster, evaluator, model, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        return evaluator.run(args)

    # --- The cluster ---
    # Distributed: a ClusterSpec names every task; each process runs a Server
    # for its own task, through which the others reach its devices.
    cluster_spec = tf.train.ClusterSpec(task.cluster)
    server = tf.distribute.Server(  # Distributed:
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=cluster.session_config(task))
    if task.job_name == "ps":
        # Distributed: a ps only serves its variables. Unlike server.join(),
        # this returns once every worker has said it is done.
        cluster.serve_until_workers_done(server, task)
        print("all workers are done; parameter server exiting", flush=True)
        return

    # --- The data: each worker trains on its own shard ---
    dataset = data.load(args)
    shard = data.shard(dataset.train_images, dataset.train_labels,  # Distributed:
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size,
                           seed=args.seed + task.task_index)

    # --- The graph ---
    # Distributed: replica_device_setter puts every variable on a ps (round
    # robin over the ps tasks) and every other op on this worker.
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=f"/job:worker/task:{task.task_index}", cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):  # Distributed:
        global_step = tf.compat.v1.train.get_or_create_global_step()
        classifier = model.Classifier(args.seed)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        gradients = optimizer.compute_gradients(classifier.loss)  # on this worker
        train_op = optimizer.apply_gradients(  # on the ps, beside each variable
            gradients, global_step=global_step)
    for gradient, variable in gradients:
        print(f"{variable.op.name:15} lives on {variable.device}; its gradient "
              f"is computed on {gradient.device}", flush=True)

    # --- The session ---
    # Distributed: the chief (worker 0) initialises the variables and writes
    # checkpoints and summaries; the others wait until it is done, then join.
    # Distributed: the chief initialises or resumes, the others wait for its
    # signal (no 30 s poll); restarted tasks resume (guide/cluster.py).
    scaffold = cluster.resumable_scaffold(task, args, global_step)
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, classifier.loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 summary_dir=args.logdir if task.is_chief else None)]
    if task.is_chief:  # the chief tracks test accuracy (--eval_every)
        hooks.append(report.AccuracyCurveHook(args, global_step, classifier, dataset))
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=task.is_chief,  # Distributed:
            config=cluster.session_config(task),  # Distributed:
            checkpoint_dir=args.logdir, hooks=hooks, scaffold=scaffold,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        if task.is_chief:
            cluster.announce_chief_ready(server, task)  # Distributed:
        start = time.perf_counter()
        while not session.should_stop():
            batch_images, batch_labels = batches.next()
            session.run(train_op, classifier.feed(batch_images, batch_labels))
        cluster.training_finished(server, task)  # Distributed: chief waits for all
        wall_s = time.perf_counter() - start  # until the last worker stopped

        # --- Evaluate and report (the chief only) ---
        if task.is_chief:
            report.evaluate_and_write(session, args, "distributed-setup", classifier,
                                      dataset, global_step, wall_s,
                                      workers=task.num_workers, ps=task.num_ps)
    # Distributed: tell the ps this worker is finished, so it can exit.
    cluster.signal_done(server, task)


if __name__ == "__main__":
    cli.run_main(main)
