"""Synchronous SGD where every worker has its own learning rate.

Like Synchronous-SGD, but worker i scales its gradient by its own rate
(--learning_rates, one per worker) before the ps averages them, so slower or
noisier workers can count for less. The optimizer (--optimizer) is any of the
ones offered; the ps applies it to the average of the scaled gradients.

Topology: 1 ps + 2 workers by default (any number of either); synchronous.

Run:  bash run.sh --learning_rates 0.3,0.1     # or: bash run.sh --workers 4
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python synchronous_sgd_different_learning_rates.py \\
          --ps_hosts=127.0.0.1:12222 --worker_hosts=127.0.0.1:12223,127.0.0.1:12224 \\
          --learning_rates 0.3,0.1 --job_name=ps --task_index=0
      python synchronous_sgd_different_learning_rates.py ...same flags... \\
          --job_name=worker --task_index=0
      python synchronous_sgd_different_learning_rates.py ...same flags... \\
          --job_name=worker --task_index=1
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
    parser.add_argument("--learning_rates", type=cli.positive_floats,
                        help="comma-separated rates, one per worker, in task "
                             "order (default: --learning_rate for every worker)")
    parser.add_argument("--optimizer", choices=("adam", "momentum", "sgd"),
                        default="sgd",
                        help="the update the ps applies to the averaged, "
                             "scaled gradients")
    args = cli.parse(parser)
    task = config.resolve(args, os.environ)  # Distributed: TF_CONFIG or flags
    replicas = cli.replicas_to_aggregate(args, task.num_workers)  # Distributed:
    # Distributed: one rate per worker, each task picking its own below.
    rates = args.learning_rates or [args.learning_rate] * task.num_workers
    if len(rates) != task.num_workers:
        raise cli.UsageError(
            f"--learning_rates gives {len(rates)} rates for {task.num_workers} "
            f"workers; give one per worker")
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    from guide import cluster, counters, evaluator, model, report

    # The optimizers the ps can apply; each takes the base rate --learning_rate.
    optimizers = {
        "sgd": tf.compat.v1.train.GradientDescentOptimizer,
        "momentum": lambda rate: tf.compat.v1.train.MomentumOptimizer(rate, 0.9),
        "adam": tf.compat.v1.train.AdamOptimizer,
    }

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
        # The update rule: worker i sends (η_i / η) g_i; the ps averages R of
        # them and applies its optimizer with rate η. With SGD that is
        # θ ← θ − (1/R) Σ_i η_i g_i; with momentum or Adam, the same average
        # feeds the optimizer's state, so each worker still counts as η_i;
        # Adam normalises its steps, so there the η_i are relative weights.
        optimizer = tf.compat.v1.train.SyncReplicasOptimizer(  # Distributed:
            optimizers[args.optimizer](args.learning_rate),
            replicas_to_aggregate=replicas,  # Distributed:
            total_num_replicas=task.num_workers)  # Distributed:
        my_rate = rates[task.task_index]  # Distributed: this worker's η_i
        scaled = [(gradient * (my_rate / args.learning_rate), variable)  # Distributed:
                  for gradient, variable
                  in optimizer.compute_gradients(classifier.loss)]
        gradients_computed = counters.WorkerCounter(  # Distributed: for the report
            task, "gradients_computed")
        train_op = tf.group(
            optimizer.apply_gradients(scaled, global_step=global_step),
            gradients_computed.increment)  # Distributed:
    release_waiters = cluster.release_token_waiters(  # Distributed:
        optimizer, global_step, task)
    left_over = cluster.gradients_waiting(  # Distributed: for the report
        classifier.mlp.hidden_weights)

    # --- Train: the chief initialises, the others wait for it ---
    # Distributed: the chief initialises or resumes, the others wait for its
    # signal (no 30 s poll); restarted tasks resume (guide/cluster.py).
    scaffold = cluster.resumable_scaffold(task, args, global_step)
    # Distributed: the chief's hook applies the updates and hands out tokens.
    sync_hook = cluster.SyncReplicasHook(optimizer, task.is_chief)  # Distributed:
    examples_per_step = replicas * args.batch_size
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
            stop_grace_period_secs=0) as session:  # Distributed: see Synchronous-SGD
        if task.is_chief:
            cluster.announce_chief_ready(server, task)  # Distributed:
        start = time.perf_counter()
        while not session.should_stop():
            batch_images, batch_labels = batches.next()
            session.run(train_op, classifier.feed(batch_images, batch_labels))
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
                session, args, "synchronous-sgd-different-learning-rates",
                classifier, dataset, global_step, wall_s,
                workers=task.num_workers, ps=task.num_ps,
                examples_per_step=examples_per_step,
                optimizer=args.optimizer, learning_rates=rates,  # Distributed:
                replicas_to_aggregate=replicas,  # Distributed:
                gradients_computed=computed,  # Distributed:
                gradients_dropped=dropped)  # Distributed:
    cluster.signal_done(server, task)  # Distributed: lets the ps exit


if __name__ == "__main__":
    cli.run_main(main)
