"""Parameter-Server-Strategy: the same training with TensorFlow 2's own API.

A coordinator process builds the model under
tf.distribute.experimental.ParameterServerStrategy, which puts the variables
on the parameter servers, and a ClusterCoordinator schedules training steps
on whichever worker is free. Workers and parameter servers only serve.

Topology: 1 coordinator + 1 ps + 2 workers by default; asynchronous.

Run:  bash run.sh                          # or: bash run.sh --workers 4
By hand, one shell per task, with TF_CONFIG (see README.md): the cluster has
"chief" (the coordinator), "worker" and "ps" entries, and each task its own
"task" entry.
"""

import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np

from guide import cli, config, data


def task_from_tf_config(environ):
    """(cluster dict, job, index) from TF_CONFIG, which this example needs."""
    if not environ.get("TF_CONFIG"):
        raise cli.UsageError("TF_CONFIG is not set; this example takes its "
                             "cluster from TF_CONFIG only: start it with "
                             "bash run.sh, or set TF_CONFIG as README.md shows")
    try:
        tf_config = json.loads(environ["TF_CONFIG"])
        job = tf_config["task"]["type"]
        index = config.task_index_of(tf_config["task"]["index"])
        hosts = tf_config["cluster"]
    except KeyError as missing:
        raise cli.UsageError(f"TF_CONFIG lacks {missing}; this example needs a "
                             f"TF_CONFIG with chief, worker and ps entries "
                             f"(bash run.sh sets one)") from None
    except (ValueError, TypeError) as error:
        raise cli.UsageError(f"TF_CONFIG is not valid: {error}; set it as "
                             f"README.md shows") from None
    if not {"chief", "worker", "ps"} <= set(hosts) or job not in hosts:
        raise cli.UsageError("TF_CONFIG needs chief, worker and ps entries, "
                             "and a task of one of those types")
    if not 0 <= index < len(hosts[job]):
        raise cli.UsageError(f"TF_CONFIG task index {index} is out of range: "
                             f"job {job!r} has {len(hosts[job])} task(s)")
    config.check_port_free(hosts[job][index])
    return hosts, job, index


def main():
    parser = cli.make_parser(__doc__, __file__, cluster_flags=False)
    # Each scheduled function is one round trip from the coordinator, which
    # costs more than the step itself: run several steps per round trip, as
    # Keras's `steps_per_execution` does (the measurements are in README.md).
    parser.add_argument("--steps_per_execution", type=cli.positive_int,
                        default=10,
                        help="minibatches a worker trains on per function "
                             "the coordinator schedules")
    args = cli.parse(parser)
    hosts, job, index = task_from_tf_config(os.environ)  # Distributed:
    if job == "chief":
        dataset = data.load(args)
        workers = len(hosts["worker"])
        # Distributed: the smallest worker's shard must hold one batch, as in
        # the other examples (data.Batches); checked before anything starts.
        smallest_shard = len(data.shard(dataset.train_images,
                                        dataset.train_labels, workers - 1,
                                        workers)[0])
        if smallest_shard < args.batch_size:
            raise cli.UsageError(f"--batch_size {args.batch_size} is larger "
                                 f"than a worker's {smallest_shard} training "
                                 f"examples; use a smaller batch or fewer "
                                 f"workers")
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    from guide import cluster, report

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()

    # --- Workers and parameter servers only serve ---
    if job in ("worker", "ps"):  # Distributed:
        server = tf.distribute.Server(  # Distributed:
            resolver.cluster_spec(), job_name=job, task_index=index,
            protocol="grpc", start=True)
        cluster.serve_until_coordinator_done(server, job, index)  # Distributed:
        return

    step, test_loss, test_accuracy, wall_s = coordinate(args, resolver, dataset)
    # Distributed: what the coordinator left on the workers was released when
    # coordinate() returned; collect it while they are up, then let them go.
    gc.collect()
    report.write_result(args, "parameter-server-strategy", step, test_loss,
                        test_accuracy, wall_s, workers=len(hosts["worker"]),
                        ps=len(hosts["ps"]))
    cluster.tell_servers_done(hosts)  # Distributed: workers and ps exit


def coordinate(args, resolver, dataset):
    """Trains and evaluates; returns (global step, test loss, test accuracy,
    seconds of training)."""
    import tensorflow as tf

    from guide import model, report

    # Marks a summary as a scalar for TensorBoard's "scalars" dashboard.
    scalar = tf.compat.v1.SummaryMetadata(
        plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))

    # --- The coordinator: the strategy places the variables on the ps ---
    experimental = tf.distribute.experimental
    strategy = experimental.ParameterServerStrategy(resolver)  # Distributed:
    coordinator = experimental.coordinator.ClusterCoordinator(  # Distributed:
        strategy)
    with strategy.scope():  # Distributed: variables go to the ps, round robin
        mlp = model.MLP(args.seed)
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                  name="global_step")

    # --- The data: each worker reads its own shard, as a tf.data pipeline ---

    def dataset_fn(context):  # runs on each worker
        images, labels = data.shard(  # Distributed:
            dataset.train_images, dataset.train_labels,
            context.input_pipeline_id, context.num_input_pipelines)
        return (tf.data.Dataset.from_tensor_slices((images, labels))
                .shuffle(len(images), seed=args.seed + context.input_pipeline_id)
                .repeat().batch(args.batch_size))

    per_worker_batches = iter(coordinator.create_per_worker_dataset(  # Distributed:
        lambda: strategy.distribute_datasets_from_function(dataset_fn)))

    def loss_of(images, labels):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=mlp.logits(images)))

    def test_loss_and_accuracy():  # on the coordinator, reading the ps
        test_logits = mlp.logits(dataset.test_images)
        test_loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=dataset.test_labels, logits=test_logits))
        return float(test_loss), np.mean(
            np.argmax(test_logits.numpy(), axis=1) == dataset.test_labels)

    # --- The update rule: θ ← θ − η g, on the ps, as each worker's step ends ---
    @tf.function
    def train_steps(batches, count):
        def step(images, labels):
            with tf.GradientTape() as tape:
                loss = loss_of(images, labels)
            gradients = tape.gradient(loss, mlp.variables)
            for variable, gradient in zip(mlp.variables, gradients):
                variable.assign_sub(args.learning_rate * gradient)
            global_step.assign_add(1)
            return loss
        loss = tf.constant(0.0)
        # Distributed: `count` steps per scheduled function, so that the
        # coordinator's round trip is paid once for all of them; the strategy
        # runs each on this worker, with the variables on the ps.
        for _ in tf.range(count):
            loss = strategy.run(step, args=next(batches))
        return loss

    # --- Train: schedule steps; the coordinator hands them to free workers ---
    writer = tf.summary.create_file_writer(args.logdir)
    curve = report.AccuracyCurve(args)  # test accuracy with --eval_every
    if curve.every:
        curve.measure(0, lambda: test_loss_and_accuracy()[1])
    start = time.perf_counter()
    scheduled = 0
    while scheduled < args.train_steps:
        count = min(args.steps_per_execution, args.train_steps - scheduled)
        loss = coordinator.schedule(  # Distributed: on a free worker
            train_steps, args=(per_worker_batches, tf.constant(count)))
        logged = scheduled // args.log_every
        scheduled += count
        if scheduled // args.log_every > logged:
            value = loss.fetch()  # waits for that step only
            rate = scheduled * args.batch_size / (time.perf_counter() - start)
            print(f"global_step {global_step.numpy()} loss {value:.4f} "
                  f"examples/s {rate:.0f} (scheduled {scheduled})", flush=True)
            with writer.as_default():  # tf.summary.scalar needs TensorBoard
                tf.summary.write("loss", value, step=scheduled,
                                 metadata=scalar)
                tf.summary.write("examples_per_sec", rate, step=scheduled,
                                 metadata=scalar)
        if curve.due(scheduled):
            loss.fetch()  # waits for that step, then reads the ps
            curve.measure(global_step.numpy(), lambda: test_loss_and_accuracy()[1])
    coordinator.join()  # Distributed: every scheduled step has run
    wall_s = time.perf_counter() - start
    writer.close()

    # --- Evaluate and save ---
    if curve.every:
        curve.write()
    test_loss, test_accuracy = test_loss_and_accuracy()
    tf.train.Checkpoint(variables=mlp.variables, global_step=global_step).save(
        os.path.join(args.logdir, "model.ckpt"))
    return int(global_step.numpy()), test_loss, test_accuracy, wall_s


if __name__ == "__main__":
    cli.run_main(main)
