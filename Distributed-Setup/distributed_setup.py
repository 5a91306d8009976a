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

from guide.distributed import tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: the parser adds the classic cluster flags, --ps_hosts,
    # --worker_hosts, --job_name and --task_index.
    args = flags.parse(flags.make_parser(__doc__, __file__))
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: this task's place in the cluster, from TF_CONFIG if it is
    # set, else from the cluster flags.
    task = tf_config.resolve_task(os.environ, args.ps_hosts, args.worker_hosts,
                                  args.job_name, args.task_index)
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: guide.distributed holds what the cluster adds: `evaluator`
    # the evaluator task's loop, `placement` where each task computes,
    # `protocol` how the tasks start and stop, `recovery` restarts.
    from guide.distributed import evaluator, placement, protocol, recovery
    from guide.training import model, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
        return evaluator.run(logdir, dataset, args.train_steps)

    # --- The cluster: every task runs a server; a ps only serves ---
    # Distributed: a ClusterSpec names every task, and each process runs a
    # Server for its own task, through which the others reach its devices.
    cluster_spec = tf.train.ClusterSpec(task.cluster)
    server = tf.distribute.Server(
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=placement.session_config(task))
    # Distributed: a ps only serves the variables placed on it; unlike
    # server.join(), this returns once every worker has said it is done.
    if task.job_name == "ps":
        protocol.serve_until_workers_done(server, task)
        print("all workers are done; parameter server exiting", flush=True)
        return

    # --- The data: each worker trains on its own shard ---
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    # Distributed: each worker takes its own slice of the training set, and
    # its own batch order, so no two workers train on the same minibatch.
    shard = data.shard(dataset.train_images, dataset.train_labels,
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size,
                           seed=args.seed + task.task_index)

    # --- The graph: variables on the ps, computation on this worker ---
    # Distributed: replica_device_setter puts every variable made in this
    # block on a ps (round robin over them) and every op on this worker.
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=f"/job:worker/task:{task.task_index}", cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        classifier = model.Classifier(args.seed)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        # Distributed: minimize() in its two halves, to show where each runs:
        # the gradient is computed on this worker, and the update
        # theta <- theta - learning_rate * gradient is applied on the ps,
        # beside each variable.
        gradients = optimizer.compute_gradients(classifier.loss)
        train_op = optimizer.apply_gradients(gradients, global_step=global_step)
    # Distributed: prints the placement the device setter chose, so a reader
    # sees each variable on the ps and its gradient on the worker.
    for gradient, variable in gradients:
        print(f"{variable.op.name:15} lives on {variable.device}; its gradient "
              f"is computed on {gradient.device}", flush=True)

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: the chief (worker 0) initialises the variables on the ps,
    # or resumes them after a restart; the others wait for its signal, with
    # no 30 s poll (guide/distributed/recovery.py).
    resume = recovery.Resume(task, global_step, logdir, os.path.basename(__file__))
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, classifier.loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 # Distributed: only the chief writes summaries.
                                 summary_dir=logdir if task.is_chief else None)]
    # Distributed: only the chief tracks test accuracy, with --eval_every.
    if task.is_chief:
        hooks.append(report.AccuracyCurveHook(
            logdir, args.eval_every, global_step, classifier, dataset,
            examples_per_step=args.batch_size))
    with tf.compat.v1.train.MonitoredTrainingSession(
            # Distributed: the session runs through this task's server; only
            # the chief initialises, restores and writes checkpoints.
            master=server.target, is_chief=task.is_chief,
            config=placement.session_config(task), scaffold=resume.scaffold,
            checkpoint_dir=logdir, hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        # Distributed: the chief tells the other workers the model is ready.
        if task.is_chief:
            protocol.announce_chief_ready(server, task)
        start = time.perf_counter()
        while not session.should_stop():
            batch_images, batch_labels = batches.next()
            session.run(train_op, classifier.feed(batch_images, batch_labels))
        # Distributed: the other workers say they have stopped, and the chief
        # waits for them, so its time and its result cover the whole run.
        if task.is_chief:
            protocol.wait_for_workers_to_finish(server, task)
        else:
            protocol.report_training_finished(server, task)
        wall_s = time.perf_counter() - start

        # --- Evaluate and report (the chief only) ---
        # Distributed: only the chief evaluates, and its result names the
        # cluster it ran on.
        if task.is_chief:
            settings = dict(
                dataset=args.dataset, train_steps=args.train_steps,
                batch_size=args.batch_size, learning_rate=args.learning_rate,
                seed=args.seed, validation=args.validation)
            report.evaluate_and_write(
                session, logdir, settings, "distributed-setup", classifier,
                dataset, global_step, wall_s, workers=task.num_workers,
                ps=task.num_ps, start_step=resume.start_step)
    # Distributed: tells the ps this worker is done, so that it can exit.
    protocol.signal_done(server, task)


if __name__ == "__main__":
    sys.exit(flags.run_main(main))
