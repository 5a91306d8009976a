"""Synchronous SGD: each global step averages the gradients of several workers.

W workers each compute a gradient on their own minibatch; SyncReplicasOptimizer
collects --replicas_to_aggregate of them on the ps, averages them and applies
one update per global step. Asking for fewer than W makes the rest backups:
the slowest gradients of a step are dropped as stale.

Topology: 1 ps + 2 workers by default (any number of either); synchronous.

Run:  bash run.sh                          # or: bash run.sh --workers 4
      bash run.sh --workers 2 --exact      # step for step the same as one process
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python synchronous_sgd.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223,127.0.0.1:12224 --job_name=ps --task_index=0
      python synchronous_sgd.py ...same hosts... --job_name=worker --task_index=0
      python synchronous_sgd.py ...same hosts... --job_name=worker --task_index=1
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide import cli, config, data


def main():
    # A global step here is one update from a minibatch of every worker, so
    # the real data sets' 3000 steps are the baseline's 6000 minibatches; and
    # it averages two gradients, so the rate there is 2 × 0.2, as for a
    # batch twice as large (see README.md).
    parser = cli.make_parser(__doc__, __file__, train_steps=(1000, 3000),
                             learning_rate=(0.2, 0.4))
    parser.add_argument("--replicas_to_aggregate", type=cli.positive_int,
                        help="gradients averaged into each update (default: "
                             "one per worker)")
    parser.add_argument("--exact", action="store_true",
                        help="every update averages exactly one gradient per "
                             "worker, each from its slice of the same global "
                             "batch of --batch_size examples: the run then "
                             "follows Non-Distributed_Setup.py step for step")
    args = cli.parse(parser)
    task = config.resolve(args, os.environ)  # Distributed: TF_CONFIG or flags
    replicas = cli.replicas_to_aggregate(args, task.num_workers)  # Distributed:
    if args.exact and (replicas != task.num_workers
                       or args.batch_size % task.num_workers):
        raise cli.UsageError(
            f"--exact needs --replicas_to_aggregate equal to the number of "
            f"workers and a --batch_size divisible by it, got {replicas} and "
            f"{args.batch_size} for {task.num_workers} workers")
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    from guide import cluster, counters, evaluator, model, report

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

    # --- The data ---
    dataset = data.load(args)
    if args.exact:
        # Distributed: every worker draws the same global batches as one
        # process would, and takes its own slice of each.
        global_batches = data.Batches(dataset.train_images, dataset.train_labels,
                                      args.batch_size, seed=args.seed)
        slice_size = args.batch_size // task.num_workers  # Distributed:
        offset = task.task_index * slice_size  # Distributed:

        def next_batch():
            images, labels = global_batches.next()
            return (images[offset:offset + slice_size],
                    labels[offset:offset + slice_size])
    else:
        # Each worker trains on its own shard.
        shard = data.shard(dataset.train_images, dataset.train_labels,  # Distributed:
                           task.task_index, task.num_workers)
        next_batch = data.Batches(*shard, args.batch_size,
                                  seed=args.seed + task.task_index).next
    examples_per_step = replicas * (slice_size if args.exact else args.batch_size)

    # --- The graph: variables on the ps, computation on this worker ---
    device_setter = tf.compat.v1.train.replica_device_setter(  # Distributed:
        worker_device=f"/job:worker/task:{task.task_index}", cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):  # Distributed:
        global_step = tf.compat.v1.train.get_or_create_global_step()
        classifier = model.Classifier(args.seed)
        # The update rule: θ ← θ − η · mean of the gradients computed on the
        # θ of this step, once R = --replicas_to_aggregate of them are in
        # (more, if more arrived before the update thread took them);
        # gradients computed on an older θ are dropped as stale.
        optimizer = tf.compat.v1.train.SyncReplicasOptimizer(  # Distributed:
            tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate),
            replicas_to_aggregate=replicas,  # Distributed:
            total_num_replicas=task.num_workers)  # Distributed:
        gradients_computed = counters.WorkerCounter(  # Distributed: for the report
            task, "gradients_computed")
        train_op = tf.group(
            optimizer.minimize(classifier.loss, global_step=global_step),
            gradients_computed.increment)  # Distributed:
    release_waiters = cluster.release_token_waiters(  # Distributed:
        optimizer, global_step, task)
    left_over = cluster.gradients_waiting(  # Distributed: for the report
        classifier.mlp.hidden_weights)
    barrier = cluster.step_barrier(  # Distributed:
        task, optimizer, args.train_steps, gradients_computed) if args.exact else None

    # --- Train: the chief initialises, the others wait for it ---
    # Distributed: the chief initialises or resumes, the others wait for its
    # signal (no 30 s poll); restarted tasks resume (guide/cluster.py).
    scaffold = cluster.resumable_scaffold(task, args, global_step)
    # Distributed: the chief's hook applies the updates and hands out tokens,
    # a token per worker after each update.
    sync_hook = cluster.SyncReplicasHook(optimizer, task.is_chief)  # Distributed:
    hooks = [sync_hook,  # Distributed:
             tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, classifier.loss, args.log_every,
                                 examples_per_step=examples_per_step,
                                 summary_dir=args.logdir if task.is_chief else None,
                                 # Distributed: it also writes how many
                                 # gradients were dropped as stale.
                                 summaries=[gradients_computed.dropped_summaries(
                                     global_step, left_over, replicas)])]
    if task.is_chief:  # the chief tracks test accuracy (--eval_every)
        hooks.append(report.AccuracyCurveHook(
            args, global_step, classifier, dataset,
            examples_per_step=examples_per_step))
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=task.is_chief,  # Distributed:
            config=cluster.session_config(task),  # Distributed:
            checkpoint_dir=args.logdir, hooks=hooks, scaffold=scaffold,
            save_checkpoint_steps=args.save_checkpoint_steps,
            # Distributed: the chief's update thread is blocked waiting for
            # gradients that will not come, until the session's close ends
            # it: do not wait for it first (the default waits 120 s).
            stop_grace_period_secs=0) as session:
        if task.is_chief:
            cluster.announce_chief_ready(server, task)  # Distributed:
        start = time.perf_counter()
        while not session.should_stop():
            batch_images, batch_labels = next_batch()
            session.run(train_op, classifier.feed(batch_images, batch_labels))
            if barrier is not None:  # Distributed: one gradient per worker per step
                cluster.run_without_hooks(session, barrier)
        # Distributed: let any worker still waiting for a token finish.
        cluster.run_without_hooks(session, release_waiters)
        cluster.training_finished(server, task)  # Distributed: chief waits for all
        wall_s = time.perf_counter() - start  # until the last worker stopped

        # --- Evaluate and report (the chief only) ---
        if task.is_chief:
            # Distributed: gradients computed but never averaged into an
            # update, dropped as stale (computed on an older θ than the
            # step's); an upper bound if a step averaged more than R.
            computed, dropped = gradients_computed.read_with_dropped(  # Distributed:
                session, global_step, left_over, replicas)
            report.evaluate_and_write(
                session, args, "synchronous-sgd", classifier, dataset,
                global_step, wall_s, workers=task.num_workers, ps=task.num_ps,
                examples_per_step=examples_per_step,
                replicas_to_aggregate=replicas, exact=args.exact,  # Distributed:
                gradients_computed=computed,  # Distributed:
                gradients_dropped=dropped)  # Distributed:
    cluster.signal_done(server, task)  # Distributed: lets the ps exit


if __name__ == "__main__":
    cli.run_main(main)
