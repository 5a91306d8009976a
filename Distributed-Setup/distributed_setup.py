"""Distributed Setup: the smallest distributed training job, step by step.

The model's variables live on a parameter server (ps); a worker reads them,
computes a gradient on its minibatch and sends the update back. This is the
skeleton every other example builds on: cluster, server, device placement,
session, clean shutdown. It prints where each variable was placed, and it
writes out in plain TensorFlow the start/stop protocol (shared queues on the
ps) that the other examples call from guide/distributed/protocol.py.

Topology: 1 ps + 1 worker by default (more workers or ps work too); asynchronous.

Run:  bash run.sh                          # or: bash run.sh --workers 2
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python distributed_setup.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223 --job_name=ps --task_index=0
      python distributed_setup.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223 --job_name=worker --task_index=0
"""

import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide.distributed import tf_config
from guide.training import data, flags, logdirs

# Distributed: room for every token restarts and repeated signals could add.
SIGNAL_CAPACITY = 1 << 16


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

    # Distributed: an evaluator task's loop, the chief's restart logic, staleness.
    from guide.distributed import counters, evaluator, recovery
    from guide.training import model, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        return evaluator.run(
            logdir, train_steps=args.train_steps, hidden_layers=args.hidden_layers,
            dataset=data.load(args.dataset, args.data_dir, args.seed, args.validation))

    # --- The cluster: every task runs a server; a ps only serves ---
    # Distributed: let a ps see only itself, a worker the ps and itself.
    own_device = f"/job:{task.job_name}/task:{task.task_index}"
    visible = [own_device] if task.job_name == "ps" else ["/job:ps", own_device]
    session_config = tf.compat.v1.ConfigProto(device_filters=visible)
    # Distributed: name every task, and run this task's server in the cluster.
    cluster_spec = tf.train.ClusterSpec(task.cluster)
    server = tf.distribute.Server(cluster_spec, job_name=task.job_name,
                                  task_index=task.task_index, config=session_config)

    # Distributed: a signal is a queue on a ps that every task finds by name.
    def signal(name, ps_index=0):
        with tf.compat.v1.device(f"/job:ps/task:{ps_index}"):
            return tf.queue.FIFOQueue(SIGNAL_CAPACITY, [tf.int32], shapes=[[]],
                                      shared_name=name, name=name)

    # Distributed: wait until a signal is given, and leave it given.
    def wait_for(queue):
        return queue.enqueue(queue.dequeue())

    # Distributed: run one signal op through this task's server, on its own.
    def run_alone(build):
        with tf.Graph().as_default():
            op = build()
            with tf.compat.v1.Session(server.target, config=session_config) as once:
                once.run(op)

    # Distributed: a ps serves until every worker has signalled "done".
    if task.job_name == "ps":
        run_alone(lambda: tf.group(*[
            wait_for(signal(f"done_{task.task_index}_{worker}", task.task_index))
            for worker in range(task.num_workers)]))
        print("all workers are done; parameter server exiting", flush=True)
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
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        # Distributed: compute the gradient here, apply it on the ps.
        gradients = optimizer.compute_gradients(classifier.loss)
        train_op = optimizer.apply_gradients(gradients, global_step=global_step)
    # Distributed: print where each variable and its gradient were placed.
    for gradient, variable in gradients:
        print(f"{variable.op.name:15} lives on {variable.device}; its gradient "
              f"is computed on {gradient.device}", flush=True)
    # Distributed: count each step's staleness on the ps, the commits that
    # landed between its read of the parameters and its update.
    with tf.compat.v1.device(device_setter):
        staleness = counters.StalenessHistogram(task)
        train_op = staleness.count_steps(train_op, classifier.loss)

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: the chief initialises the ps's variables, or resumes them.
    if task.is_chief:
        chief = recovery.ChiefStart(task, global_step, logdir,
                                    os.path.basename(__file__))
        scaffold = chief.scaffold
    # Distributed: the others check the model only once the chief says ready.
    else:
        with tf.control_dependencies([wait_for(signal("chief_ready", ps_index))
                                      for ps_index in range(task.num_ps)]):
            model_ready = tf.compat.v1.report_uninitialized_variables(
                tf.compat.v1.global_variables())
        scaffold = tf.compat.v1.train.Scaffold(ready_for_local_init_op=model_ready)
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
    # Distributed: run through this task's server; the chief owns checkpoints.
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=task.is_chief,
            config=session_config, scaffold=scaffold,
            checkpoint_dir=logdir, hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        # Distributed: the chief signals the others that the model is ready.
        if task.is_chief and task.num_workers > 1:
            run_alone(lambda: tf.group(*[signal("chief_ready", ps_index).enqueue(0)
                                         for ps_index in range(task.num_ps)]))
        start = time.perf_counter()
        while not session.should_stop():
            batch_images, batch_labels = batches.next()
            session.run(train_op, classifier.feed(batch_images, batch_labels))
        # Distributed: the chief waits until every other worker has finished.
        if task.is_chief and task.num_workers > 1:
            run_alone(lambda: tf.group(*[
                wait_for(signal(f"training_finished_{worker}"))
                for worker in range(1, task.num_workers)]))
        # Distributed: the others signal that they have finished training.
        elif not task.is_chief:
            run_alone(lambda: signal(f"training_finished_{task.task_index}")
                      .enqueue(task.task_index))
        wall_s = time.perf_counter() - start

        # --- Evaluate and report (the chief only) ---
        # Distributed: only the chief evaluates and writes the result, staleness too.
        if task.is_chief:
            report.evaluate_and_write(
                session, logdir, flags.run_settings(args), "distributed-setup",
                classifier, dataset, global_step, wall_s, workers=task.num_workers,
                ps=task.num_ps, start_step=chief.start_step,
                **staleness.results(session))
    # Distributed: the chief says it has finished; the others wait until it has.
    if task.is_chief and task.num_workers > 1:
        run_alone(lambda: signal("chief_finished").enqueue(0))
    elif not task.is_chief:
        run_alone(lambda: wait_for(signal("chief_finished")))
    # Distributed: signal "done" to every ps; one that has gone needs no telling.
    with contextlib.suppress(tf.errors.UnavailableError):
        run_alone(lambda: tf.group(*[
            signal(f"done_{ps_index}_{task.task_index}", ps_index)
            .enqueue(task.task_index) for ps_index in range(task.num_ps)]))


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
