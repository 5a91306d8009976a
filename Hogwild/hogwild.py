"""Hogwild: asynchronous, lock-free SGD on a parameter server.

Every worker computes a gradient on its own minibatch and applies it to the
shared variables on the parameter server(s) as soon as it is ready, without
locks and without waiting for the other workers (Niu, Recht, Ré and Wright,
NIPS 2011).

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

from guide.distributed import tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: parse the cluster flags too (--ps_hosts, --job_name, ...).
    args = flags.parse(flags.make_parser(__doc__, __file__))
    # --epochs sets --train_steps: a global step trains on one minibatch.
    flags.set_train_steps(args, examples_per_step=args.batch_size)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: find this task's place in the cluster, from TF_CONFIG or the flags.
    task = tf_config.resolve_task(os.environ, args.ps_hosts, args.worker_hosts,
                                  args.job_name, args.task_index)
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: the helpers that start, stop, place and restore the tasks.
    from guide.distributed import counters, evaluator, placement, protocol, recovery
    from guide.training import model, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        return evaluator.run(
            logdir, train_steps=args.train_steps, hidden_layers=args.hidden_layers,
            dataset=data.load(args.dataset, args.data_dir, args.seed, args.validation))

    # --- The cluster: every task runs a server; a ps only serves ---
    # Distributed: run this task's server, through which the others reach it.
    cluster_spec = tf.train.ClusterSpec(task.cluster)
    server = tf.distribute.Server(
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=placement.session_config(task))
    # Distributed: a ps only serves, until every worker says it is done.
    if task.job_name == "ps":
        protocol.serve_until_workers_done(server, task)
        return

    # --- The data: each worker trains on its own shard ---
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    # Distributed: give each worker its own shard of the data and batch order.
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
        # Distributed: apply each gradient on the ps at once, without a lock.
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(
            args.learning_rate, use_locking=False)
        train_op = optimizer.minimize(classifier.loss, global_step=global_step)

    # Distributed: count each step's staleness on the ps, the commits that
    # landed between its read of the parameters and its update.
    with tf.compat.v1.device(device_setter):
        staleness = counters.StalenessHistogram(task)
        train_op = staleness.count_steps(train_op, classifier.loss)

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: the chief initialises or restores the ps; the others wait for it.
    if task.is_chief:
        chief = recovery.ChiefStart(task, global_step, logdir,
                                    os.path.basename(__file__))
        scaffold = chief.scaffold
    else:
        scaffold = recovery.scaffold_waiting_for_chief(task)
    # Distributed: only the chief writes summaries, the staleness among them.
    summary_dir = logdir if task.is_chief else None
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, classifier.loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 summary_dir=summary_dir,
                                 summaries=[staleness])]
    # Distributed: only the chief tracks test accuracy, with --eval_every.
    if task.is_chief:
        hooks.append(report.AccuracyCurveHook(
            logdir, args.eval_every, global_step, classifier, dataset,
            examples_per_step=args.batch_size))
    # Distributed: run through this task's server; only the chief saves checkpoints.
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=task.is_chief,
            config=placement.session_config(task), scaffold=scaffold,
            checkpoint_dir=logdir, hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        # Distributed: the chief tells the other workers the model is ready.
        if task.is_chief:
            protocol.announce_chief_ready(server, task)
        start = time.perf_counter()
        while not session.should_stop():
            batch_images, batch_labels = batches.next()
            session.run(train_op, classifier.feed(batch_images, batch_labels))
        # Distributed: the other workers report they have stopped; the chief waits.
        if task.is_chief:
            protocol.wait_for_workers_to_finish(server, task)
        else:
            protocol.report_training_finished(server, task)
        wall_s = time.perf_counter() - start

        # --- Evaluate and report (the chief only) ---
        # Distributed: only the chief evaluates, and reports the cluster and staleness.
        if task.is_chief:
            report.evaluate_and_write(
                session, logdir, flags.run_settings(args), "hogwild", classifier,
                dataset, global_step, wall_s, workers=task.num_workers,
                ps=task.num_ps, start_step=chief.start_step,
                **staleness.results(session))
    # Distributed: tell every ps this worker is done, so that it can exit.
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
