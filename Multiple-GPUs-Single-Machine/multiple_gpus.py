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

from guide import cli, config, data


def main():
    parser = cli.make_parser(__doc__, __file__)
    parser.add_argument("--mode", choices=("between_graph", "in_graph"),
                        default="between_graph",
                        help="a worker process per GPU, or a tower per device "
                             "in one process")
    parser.add_argument("--towers", type=cli.positive_int,
                        help="in_graph: towers, one per device (default: one "
                             "per visible GPU, or 2 CPU devices without GPUs)")
    args = cli.parse(parser)
    if args.mode == "in_graph" and os.environ.get("TF_CONFIG"):
        raise cli.UsageError("--mode in_graph runs as one process, but "
                             "TF_CONFIG puts this one in a cluster (run.sh "
                             "starts one): use bash run_towers.sh instead")
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    gpus = len(tf.config.list_physical_devices("GPU"))
    if args.mode == "in_graph":
        return towers(args, gpus)
    return between_graph(args, gpus)


def towers(args, gpus):
    """In-graph replication: a tower per device, one averaged update."""
    import tensorflow as tf

    from guide import model, report

    count = args.towers or gpus or 2
    if gpus:
        if count > gpus:
            raise cli.UsageError(f"--towers {count} needs {count} GPUs; "
                                 f"{gpus} are visible")
        devices = [f"/device:GPU:{index}" for index in range(count)]
    else:
        # Distributed: no GPU, so split the CPU into `count` logical devices;
        # each tower is then placed on a device of its own.
        devices = [f"/device:CPU:{index}" for index in range(count)]
    session_config = tf.compat.v1.ConfigProto(device_count={"CPU": count})
    if args.batch_size % count:
        raise cli.UsageError(f"--batch_size {args.batch_size} must divide by "
                             f"the {count} towers")
    dataset = data.load(args)
    batches = data.Batches(dataset.train_images, dataset.train_labels,
                           args.batch_size, seed=args.seed)

    # --- The graph: variables on the CPU, a tower on every device ---
    with tf.device("/device:CPU:0"):  # Distributed: variables where all can read
        global_step = tf.compat.v1.train.get_or_create_global_step()
        classifier = model.Classifier(args.seed)  # the whole batch, for reports
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
    tower_gradients = []
    slices = zip(tf.split(classifier.images, count), tf.split(classifier.labels, count))
    for device, (images, labels) in zip(devices, slices):
        with tf.device(device):  # Distributed: tower i on device i
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=classifier.mlp.logits(images)))
            tower_gradients.append(tf.gradients(loss, classifier.mlp.variables))
    with tf.device("/device:CPU:0"):
        # The update rule: θ ← θ − η · mean over towers of g_tower, once.
        mean_gradients = [tf.add_n(list(grads)) / count
                          for grads in zip(*tower_gradients)]  # Distributed:
        train_op = optimizer.apply_gradients(
            zip(mean_gradients, classifier.mlp.variables), global_step=global_step)

    # --- Train ---
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, classifier.loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 summary_dir=args.logdir),
             # test accuracy as training goes, with --eval_every
             report.AccuracyCurveHook(args, global_step, classifier, dataset)]
    with tf.compat.v1.train.MonitoredTrainingSession(
            checkpoint_dir=args.logdir, hooks=hooks,
            config=session_config,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        start = time.perf_counter()
        used = None
        while not session.should_stop():
            feed = classifier.feed(*batches.next())
            if used is None:  # Distributed: record where the first step ran
                used = devices_that_ran(session, train_op, feed, tower_gradients)
                print(f"towers ran on {count} devices: {', '.join(used)}",
                      flush=True)
            else:
                session.run(train_op, feed)
        wall_s = time.perf_counter() - start
        report.evaluate_and_write(session, args, "multiple-gpus-single-machine",
                                  classifier, dataset, global_step, wall_s,
                                  workers=1, ps=0, mode="in_graph",
                                  towers=count, devices=used)


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


def between_graph(args, gpus):
    """Between-graph replication: this process is one task of the cluster."""
    import tensorflow as tf

    from guide import cluster, evaluator, model, report

    task = config.resolve(args, os.environ)  # Distributed: TF_CONFIG or flags
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        return evaluator.run(args)
    cluster_spec = tf.train.ClusterSpec(task.cluster)  # Distributed:
    server = tf.distribute.Server(  # Distributed:
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=cluster.session_config(task))
    if task.job_name == "ps":  # Distributed: serve until the workers are done
        cluster.serve_until_workers_done(server, task)
        return

    dataset = data.load(args)
    shard = data.shard(dataset.train_images, dataset.train_labels,  # Distributed:
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size,
                           seed=args.seed + task.task_index)

    # Distributed: this worker computes on its GPU (the only one it sees),
    # or on its CPU when it sees none.
    device = f"/job:worker/task:{task.task_index}/device:{'GPU' if gpus else 'CPU'}:0"
    print(f"worker {task.task_index} computes on {device}"
          f"{'' if gpus else ' (no GPU visible)'}; CUDA_VISIBLE_DEVICES="
          f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')!r}", flush=True)
    device_setter = tf.compat.v1.train.replica_device_setter(  # Distributed:
        worker_device=device, cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):  # Distributed:
        global_step = tf.compat.v1.train.get_or_create_global_step()
        classifier = model.Classifier(args.seed)
        # The update rule: asynchronous SGD, as in Hogwild.
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        train_op = optimizer.minimize(classifier.loss, global_step=global_step)

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
        if task.is_chief:
            report.evaluate_and_write(
                session, args, "multiple-gpus-single-machine", classifier,
                dataset, global_step, wall_s, workers=task.num_workers,
                ps=task.num_ps, mode="between_graph",
                devices=[device.rsplit("/", 1)[-1]])
    cluster.signal_done(server, task)  # Distributed: lets the ps exit


if __name__ == "__main__":
    cli.run_main(main)
