"""Hogwild: asynchronous, lock-free SGD on a parameter server.

Every worker computes a gradient on its own minibatch and applies it to the
shared variables on the parameter server(s) as soon as it is ready, without
locks and without waiting for the other workers (Recht et al., NIPS 2011).

Topology: 1 ps + 2 workers by default (any number of either); asynchronous.

Run:  bash run.sh                          # or: bash run.sh --ps 2 --workers 4
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python hogwild.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223,127.0.0.1:12224 --job_name=ps --task_index=0
      python hogwild.py ...same hosts... --job_name=worker --task_index=0
      python hogwild.py ...same hosts... --job_name=worker --task_index=1
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

    # --- The cluster: every task runs a server; a ps only serves ---
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
        # The update rule: theta <- theta - learning_rate * gradient, applied
        # on the ps the moment this worker's gradient arrives, with no lock
        # against the other workers' updates (Hogwild's "lock-free").
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(
            args.learning_rate, use_locking=False)
        train_op = optimizer.minimize(classifier.loss, global_step=global_step)

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: no 30 s poll for the chief; restarts resume (cluster.py).
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
            checkpoint_dir=args.logdir, scaffold=scaffold, hooks=hooks,
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
            report.evaluate_and_write(session, args, "hogwild", classifier,
                                      dataset, global_step, wall_s,
                                      workers=task.num_workers, ps=task.num_ps)
    cluster.signal_done(server, task)  # Distributed: lets the ps exit


if __name__ == "__main__":
    cli.run_main(main)
