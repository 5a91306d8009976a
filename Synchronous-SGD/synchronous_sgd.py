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

from guide.distributed import scheme_flags, tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: add the cluster flags, R (--replicas_to_aggregate) and --exact.
    parser = flags.make_parser(
        __doc__, __file__,
        train_steps=flags.ByDataset(synthetic=1000, real=3000),
        learning_rate=flags.ByDataset(synthetic=0.2, real=0.28))
    parser.add_argument("--replicas_to_aggregate", type=flags.positive_int,
                        help="gradients averaged into each update (default: "
                             "one per worker)")
    parser.add_argument("--exact", action="store_true",
                        help="every update averages exactly one gradient per "
                             "worker, each from its slice of the same global "
                             "batch of --batch_size examples: the run then "
                             "follows Non-Distributed_Setup.py step for step")
    args = flags.parse(parser)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: find this task's place in the cluster (TF_CONFIG or flags).
    task = tf_config.resolve_task(os.environ, args.ps_hosts, args.worker_hosts,
                                  args.job_name, args.task_index)
    # Distributed: average R gradients per update, one per worker by default.
    replicas = scheme_flags.replicas_to_aggregate(args.replicas_to_aggregate,
                                                  task.num_workers)
    if args.exact and (replicas != task.num_workers
                       or args.batch_size % task.num_workers):
        raise flags.UsageError(
            f"--exact needs --replicas_to_aggregate equal to the number of "
            f"workers and a --batch_size divisible by it, got {replicas} and "
            f"{args.batch_size} for {task.num_workers} workers")
    # Distributed: a global step trains on R workers' minibatches (with --exact,
    # one minibatch split over them); --epochs sets --train_steps by it.
    examples_per_step = args.batch_size if args.exact else replicas * args.batch_size
    flags.set_train_steps(args, examples_per_step)
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: import the cluster protocol, counters and sync helpers.
    from guide.distributed import (
        counters,
        evaluator,
        placement,
        protocol,
        recovery,
        sync,
    )
    from guide.training import model, monitored, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        return evaluator.run(
            logdir, train_steps=args.train_steps, hidden_layers=args.hidden_layers,
            dataset=data.load(args.dataset, args.data_dir, args.seed, args.validation))

    # --- The cluster: every task runs a server; a ps only serves ---
    # Distributed: run a server for this task, which the other tasks reach.
    cluster_spec = tf.train.ClusterSpec(task.cluster)
    server = tf.distribute.Server(
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=placement.session_config(task))
    # Distributed: a ps serves its variables until every worker is done.
    if task.job_name == "ps":
        protocol.serve_until_workers_done(server, task)
        return

    # --- The data: each worker's own shard, or its slice of the global batch ---
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    # Distributed: give each worker its own shard, or with --exact its own
    # rows of the baseline's global batches.
    if args.exact:
        batches = data.Batches(dataset.train_images, dataset.train_labels,
                               args.batch_size, seed=args.seed)
        slice_size = args.batch_size // task.num_workers
        rows = slice(task.task_index * slice_size,
                     (task.task_index + 1) * slice_size)
    else:
        shard = data.shard(dataset.train_images, dataset.train_labels,
                           task.task_index, task.num_workers)
        batches = data.Batches(*shard, args.batch_size,
                               seed=args.seed + task.task_index)
        rows = slice(None)

    # --- The graph: variables on the ps, computation on this worker ---
    # Distributed: place the variables on the ps and the ops on this worker.
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=f"/job:worker/task:{task.task_index}", cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        classifier = model.Classifier(args.seed, hidden_layers=args.hidden_layers)
        # Distributed: average R workers' gradients on the ps into one update.
        optimizer = tf.compat.v1.train.SyncReplicasOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate),
            replicas_to_aggregate=replicas,
            total_num_replicas=task.num_workers)
        # Distributed: count this worker's gradients on the ps, to report stale ones.
        gradients_computed = counters.WorkerCounter(task, "gradients_computed")
        train_op = tf.group(
            optimizer.minimize(classifier.loss, global_step=global_step),
            gradients_computed.increment)
    # Distributed: as this worker stops, release the workers waiting for a token.
    release_waiters = sync.release_token_waiters(optimizer, global_step, task)
    # Distributed: count the gradients left unused in the accumulator.
    left_over = sync.pending_gradient_count(
        accumulator_of=classifier.mlp.hidden_weights)
    # Distributed: with --exact, meet the other workers after each step.
    barrier = (sync.step_barrier(task, optimizer, args.train_steps,
                                    gradients_computed)
               if args.exact else None)

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: the chief initialises or resumes the model; the others wait.
    if task.is_chief:
        chief = recovery.ChiefStart(task, global_step, logdir,
                                    os.path.basename(__file__))
        scaffold = chief.scaffold
    else:
        scaffold = recovery.scaffold_waiting_for_chief(task)
    # Distributed: the chief applies the averaged updates and hands out tokens.
    sync_hook = sync.SyncReplicasHook(optimizer, task.is_chief)
    # Distributed: only the chief writes summaries, stale gradients among them.
    summary_dir = logdir if task.is_chief else None
    hooks = [sync_hook,
             tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, classifier.loss, args.log_every,
                                 examples_per_step=examples_per_step,
                                 summary_dir=summary_dir,
                                 summaries=[gradients_computed.dropped_summaries(
                                     global_step, left_over, replicas)])]
    # Distributed: only the chief tracks test accuracy as training goes.
    if task.is_chief:
        hooks.append(report.AccuracyCurveHook(
            logdir, args.eval_every, global_step, classifier, dataset,
            examples_per_step=examples_per_step))
    # Distributed: train through this task's server, the chief checkpointing;
    # close without waiting for the chief's blocked update thread.
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=task.is_chief,
            config=placement.session_config(task), scaffold=scaffold,
            checkpoint_dir=logdir, hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps,
            stop_grace_period_secs=0) as session:
        # Distributed: the chief tells the other workers the model is ready.
        if task.is_chief:
            protocol.announce_chief_ready(server, task)
        start = time.perf_counter()
        while not session.should_stop():
            batch_images, batch_labels = batches.next()
            # Distributed: train on this worker's rows of the minibatch.
            session.run(train_op, classifier.feed(batch_images[rows],
                                                  batch_labels[rows]))
            # Distributed: with --exact, wait until every worker sent this step.
            if barrier is not None:
                monitored.run_without_hooks(session, barrier)
        # Distributed: let any worker still waiting for a token finish.
        monitored.run_without_hooks(session, release_waiters)
        # Distributed: the chief waits until the other workers say they stopped.
        if task.is_chief:
            protocol.wait_for_workers_to_finish(server, task)
        else:
            protocol.report_training_finished(server, task)
        wall_s = time.perf_counter() - start

        # --- Evaluate and report (the chief only) ---
        # Distributed: only the chief evaluates, and reports R and stale gradients.
        if task.is_chief:
            computed, dropped = gradients_computed.read_with_dropped(
                session, global_step, left_over, replicas)
            report.evaluate_and_write(
                session, logdir, flags.run_settings(args), "synchronous-sgd",
                classifier, dataset, global_step, wall_s, train_back=False,
                workers=task.num_workers, ps=task.num_ps,
                start_step=chief.start_step, examples_per_step=examples_per_step,
                replicas_to_aggregate=replicas, exact=args.exact,
                gradients_computed=computed, gradients_dropped=dropped)
    # Distributed: tell the ps this worker is done, so that it can exit.
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
