"""Multiple GPUs on one machine: one worker per GPU, or one tower per GPU.

--mode between_graph (run.sh): a worker process per GPU, each seeing only its
own GPU, training asynchronously against a ps that sees none.
--mode in_graph (run_towers.sh): one process builds a copy of the model (a
tower) on every device, averages the towers' gradients and applies them once.
Without GPUs, both run on CPU devices; in_graph then splits the CPU into
--towers logical devices, so that the towers are still separate devices.

Topology: between_graph, 1 ps + 2 workers (async); in_graph, one process.

Run:  bash run.sh                          # between-graph, a GPU per worker
      bash run_towers.sh                   # in-graph towers
By hand: as Hogwild/README.md shows, with CUDA_VISIBLE_DEVICES=i for worker i
and CUDA_VISIBLE_DEVICES= for the ps; or python multiple_gpus.py --mode in_graph.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide.distributed import tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: add the cluster flags, --mode and --towers.
    parser = flags.make_parser(__doc__, __file__)
    parser.add_argument("--mode", choices=("between_graph", "in_graph"),
                        default="between_graph",
                        help="a worker process per GPU, or a tower per device "
                             "in one process")
    parser.add_argument("--towers", type=flags.positive_int,
                        help="in_graph: towers, one per device (default: one "
                             "per visible GPU, or 2 CPU devices without GPUs)")
    args = flags.parse(parser)
    # --epochs sets --train_steps: a global step trains on one minibatch (in
    # in-graph mode, split over the towers).
    flags.set_train_steps(args, examples_per_step=args.batch_size)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: refuse a TF_CONFIG in in-graph mode, which is one process.
    if args.mode == "in_graph" and os.environ.get("TF_CONFIG"):
        raise flags.UsageError("--mode in_graph runs as one process, but "
                               "TF_CONFIG puts this one in a cluster (run.sh "
                               "starts one): use bash run_towers.sh instead")
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: build graphs on the GPUs this process sees, in the chosen --mode.
    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings
    gpus = len(tf.config.list_physical_devices("GPU"))
    if args.mode == "in_graph":
        return towers(args, logdir, gpus)
    return between_graph(args, logdir, gpus)


# Distributed: between-graph mode (run.sh): a worker per GPU, a ps with none.
def between_graph(args, logdir, gpus):
    """This task's part of the between-graph cluster: serve as the ps, or
    train as a worker on its own GPU."""
    import tensorflow as tf

    # Distributed: import the cluster protocol, recovery and staleness helpers.
    from guide.distributed import counters, evaluator, placement, protocol, recovery
    from guide.training import model, report

    # Distributed: find this task's place in the cluster (TF_CONFIG or flags).
    task = tf_config.resolve_task(os.environ, args.ps_hosts, args.worker_hosts,
                                  args.job_name, args.task_index)
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

    # --- The data: each worker trains on its own shard ---
    # Distributed: give each worker its own shard of the training set.
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    shard = data.shard(dataset.train_images, dataset.train_labels,
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size,
                           seed=args.seed + task.task_index)

    # --- The graph: variables on the ps, computation on this worker's GPU ---
    # Distributed: compute on this worker's one visible GPU, else its CPU, and say so.
    device = f"/job:worker/task:{task.task_index}/device:{'GPU' if gpus else 'CPU'}:0"
    print(f"worker {task.task_index} computes on {device}"
          f"{'' if gpus else ' (no GPU visible)'}; CUDA_VISIBLE_DEVICES="
          f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')!r}", flush=True)
    # Distributed: place the variables on the ps and the ops on this worker's device.
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=device, cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        classifier = model.Classifier(args.seed, hidden_layers=args.hidden_layers)
        # The update rule: asynchronous SGD, as in Hogwild, applied on the ps
        # as each worker's gradient arrives.
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        train_op = optimizer.minimize(classifier.loss, global_step=global_step)

    # Distributed: count each step's staleness on the ps, the commits that
    # landed between its read of the parameters and its update.
    with tf.compat.v1.device(device_setter):
        staleness = counters.StalenessHistogram(task)
        train_op = staleness.count_steps(train_op, classifier.loss)

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: the chief initialises or resumes the model; the others wait.
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
    # Distributed: only the chief tracks test accuracy as training goes.
    if task.is_chief:
        hooks.append(report.AccuracyCurveHook(
            logdir, args.eval_every, global_step, classifier, dataset,
            examples_per_step=args.batch_size))
    # Distributed: train through this task's server, the chief checkpointing.
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
        # Distributed: the chief waits until the other workers say they stopped.
        if task.is_chief:
            protocol.wait_for_workers_to_finish(server, task)
        else:
            protocol.report_training_finished(server, task)
        wall_s = time.perf_counter() - start

        # --- Evaluate and report (the chief only) ---
        # Distributed: only the chief evaluates; it reports its device and staleness.
        if task.is_chief:
            report.evaluate_and_write(
                session, logdir, flags.run_settings(args),
                "multiple-gpus-single-machine", classifier, dataset, global_step,
                wall_s, workers=task.num_workers, ps=task.num_ps,
                start_step=chief.start_step, mode="between_graph",
                devices=[device.rsplit("/", 1)[-1]], **staleness.results(session))
    # Distributed: tell the ps this worker is done, so that it can exit.
    protocol.signal_done(server, task)


# Distributed: in-graph mode (run_towers.sh): one process, a tower per device.
def towers(args, logdir, gpus):
    """In-graph replication: a tower per device, one averaged update."""
    import tensorflow as tf

    # Distributed: the towers reuse the baseline's model and reports.
    from guide.training import model, report

    # Distributed: build one tower per GPU, or per logical CPU device without one.
    count = args.towers or gpus or 2
    if gpus:
        if count > gpus:
            raise flags.UsageError(f"--towers {count} needs {count} GPUs; "
                                   f"{gpus} are visible")
        devices = [f"/device:GPU:{index}" for index in range(count)]
    else:
        devices = [f"/device:CPU:{index}" for index in range(count)]
    session_config = tf.compat.v1.ConfigProto(device_count={"CPU": count})
    # Distributed: give every tower an equal slice of the minibatch.
    if args.batch_size % count:
        raise flags.UsageError(f"--batch_size {args.batch_size} must divide by "
                               f"the {count} towers")
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    batches = data.Batches(dataset.train_images, dataset.train_labels,
                           args.batch_size, seed=args.seed)

    # Distributed: keep the variables on the CPU, where every tower reads them.
    with tf.device("/device:CPU:0"):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        classifier = model.Classifier(args.seed, hidden_layers=args.hidden_layers)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
    # Distributed: tower i computes the gradient of slice i on device i.
    tower_gradients = []
    slices = zip(tf.split(classifier.images, count), tf.split(classifier.labels, count))
    for device, (images, labels) in zip(devices, slices):
        with tf.device(device):
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=classifier.mlp.logits(images)))
            tower_gradients.append(tf.gradients(loss, classifier.mlp.variables))
    # Distributed: apply the towers' mean gradient once, on the CPU.
    with tf.device("/device:CPU:0"):
        mean_gradients = [tf.add_n(list(grads)) / count
                          for grads in zip(*tower_gradients)]
        train_op = optimizer.apply_gradients(
            zip(mean_gradients, classifier.mlp.variables), global_step=global_step)

    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, classifier.loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 summary_dir=logdir)]
    # Test accuracy as training goes, with --eval_every.
    hooks.append(report.AccuracyCurveHook(
        logdir, args.eval_every, global_step, classifier, dataset,
        examples_per_step=args.batch_size))
    # Distributed: open the session on the towers' logical devices.
    with tf.compat.v1.train.MonitoredTrainingSession(
            checkpoint_dir=logdir, hooks=hooks,
            config=session_config,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        start = time.perf_counter()
        # Distributed: trace the first step to learn where each tower ran.
        used = None
        while not session.should_stop():
            batch_images, batch_labels = batches.next()
            feed = classifier.feed(batch_images, batch_labels)
            if used is None:
                used = devices_that_ran(session, train_op, feed, tower_gradients)
                print(f"towers ran on {count} devices: {', '.join(used)}",
                      flush=True)
            else:
                session.run(train_op, feed)
        wall_s = time.perf_counter() - start

        # Distributed: report the towers and the devices they ran on.
        report.evaluate_and_write(
            session, logdir, flags.run_settings(args),
            "multiple-gpus-single-machine", classifier, dataset, global_step,
            wall_s, workers=1, ps=0, mode="in_graph", towers=count, devices=used)


# Distributed: check where each tower really ran, not where it was asked to.
def devices_that_ran(session, train_op, feed, tower_gradients):
    """Runs one step with tracing; returns, for each tower, the device on
    which its gradient ops actually ran (not where they were asked to)."""
    import tensorflow as tf
    options = tf.compat.v1.RunOptions(
        trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    metadata = tf.compat.v1.RunMetadata()
    session.run(train_op, feed, options=options, run_metadata=metadata)
    ran_on = {node.node_name: stats.device
              for stats in metadata.step_stats.dev_stats
              for node in stats.node_stats}
    devices = []
    for gradients in tower_gradients:
        name = gradients[0].op.name
        devices.append(ran_on.get(name, "?").rsplit("/", 1)[-1])
    return devices


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
