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

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np

from guide.distributed import tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: add --steps_per_execution; the cluster comes from TF_CONFIG.
    parser = flags.make_parser(__doc__, __file__, cluster_flags=False)
    parser.add_argument("--steps_per_execution", type=flags.positive_int,
                        default=10,
                        help="minibatches a worker trains on per function "
                             "the coordinator schedules")
    args = flags.parse(parser)
    # --epochs sets --train_steps: a global step trains on one minibatch.
    flags.set_train_steps(args, examples_per_step=args.batch_size)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: find this task's place in the cluster, from TF_CONFIG only.
    task = tf_config.resolve_coordinated_task(os.environ)
    # Distributed: the coordinator reads the data; every shard must hold a batch.
    if task.is_chief:
        dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
        smallest_shard = len(data.shard(dataset.train_images,
                                        dataset.train_labels,
                                        task.num_workers - 1,
                                        task.num_workers)[0])
        if smallest_shard < args.batch_size:
            raise flags.UsageError(f"--batch_size {args.batch_size} is larger "
                                   f"than a worker's {smallest_shard} training "
                                   f"examples; use a smaller batch or fewer "
                                   f"workers")
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: import the helpers that let the servers exit when done.
    from guide.distributed import ps_strategy

    # --- The cluster: workers and parameter servers only serve ---
    # Distributed: read the cluster from TF_CONFIG for the servers and the strategy.
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    # Distributed: a worker or ps only serves, until the coordinator is done.
    if task.job_name in ("worker", "ps"):
        server = tf.distribute.Server(
            resolver.cluster_spec(), job_name=task.job_name,
            task_index=task.task_index, protocol="grpc", start=True)
        ps_strategy.serve_until_coordinator_done(server, task.job_name,
                                                 task.task_index)
        return

    # Distributed: the coordinator trains, then lets the workers and ps go.
    coordinate(args, logdir, resolver, dataset, task)
    ps_strategy.release_coordinator()
    ps_strategy.tell_servers_done(task.cluster)


# Distributed: the coordinator's part: the only training loop.
def coordinate(args, logdir, resolver, dataset, task):
    """Trains, evaluates, prints the RESULT line and writes result.json."""
    import tensorflow as tf

    from guide.training import model, report

    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings

    # --- The cluster: the strategy places the variables on the ps ---
    # Distributed: connect to every worker and ps, and schedule functions on them.
    experimental = tf.distribute.experimental
    strategy = experimental.ParameterServerStrategy(resolver)
    coordinator = experimental.coordinator.ClusterCoordinator(strategy)
    # Distributed: create the variables on the ps, round robin over them.
    with strategy.scope():
        mlp = model.MLP(args.seed, args.hidden_layers)
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                  name="global_step")

    # --- The data: each worker reads its own shard, as a tf.data pipeline ---
    # Distributed: each worker builds a pipeline over its own shard, in its own order.
    def dataset_fn(context):
        images, labels = data.shard(
            dataset.train_images, dataset.train_labels,
            context.input_pipeline_id, context.num_input_pipelines)
        real = args.dataset != "synthetic"
        if real:
            # Ship bytes, a quarter of the floats' size (see README.md).
            images = np.rint(images * 255).astype(np.uint8)
        batches = (tf.data.Dataset.from_tensor_slices((images, labels))
                   .shuffle(len(images), seed=args.seed + context.input_pipeline_id)
                   .repeat().batch(args.batch_size))
        return batches.map(lambda pixels, labels: (
            tf.cast(pixels, tf.float32) / 255.0, labels)) if real else batches

    # Distributed: make one iterator per worker, on that worker.
    per_worker_batches = iter(coordinator.create_per_worker_dataset(
        lambda: strategy.distribute_datasets_from_function(dataset_fn)))

    # --- The graph: the update rule, θ ← θ − η g, on the ps ---
    # Distributed: compute the loss in a function that workers and coordinator call.
    def loss_of(images, labels):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=mlp.logits(images)))

    # Distributed: evaluate eagerly on the coordinator, reading the ps.
    def test_loss_and_accuracy():
        test_logits = mlp.logits(dataset.test_images)
        test_loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=dataset.test_labels, logits=test_logits))
        return float(test_loss), np.mean(
            np.argmax(test_logits.numpy(), axis=1) == dataset.test_labels)

    # Distributed: run `count` steps on a worker per scheduled function.
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
        for _ in tf.range(count):
            loss = strategy.run(step, args=next(batches))
        return loss

    # --- Train: schedule steps; the coordinator hands them to free workers ---
    # Distributed: track test accuracy on the coordinator, as no hooks run.
    curve = report.AccuracyCurve(logdir, args.eval_every, args.batch_size)
    if curve.every:
        curve.measure(0, lambda: test_loss_and_accuracy()[1])
    start = time.perf_counter()
    # Distributed: schedule --steps_per_execution steps at a time on free workers;
    # fetch a loss only for the progress lines and the curve.
    scheduled = 0
    while scheduled < args.train_steps:
        count = min(args.steps_per_execution, args.train_steps - scheduled)
        loss = coordinator.schedule(
            train_steps, args=(per_worker_batches, tf.constant(count)))
        logged = scheduled // args.log_every
        scheduled += count
        if scheduled // args.log_every > logged:
            value = loss.fetch()
            rate = scheduled * args.batch_size / (time.perf_counter() - start)
            print(f"global_step {global_step.numpy()} loss {value:.4f} "
                  f"examples/s {rate:.0f} (scheduled {scheduled})", flush=True)
            report.record_progress(logdir, global_step.numpy())
            report.write_scalars(logdir, scheduled,
                                 {"loss": value, "examples_per_sec": rate})
        if curve.due(scheduled):
            loss.fetch()
            curve.measure(global_step.numpy(), lambda: test_loss_and_accuracy()[1])
    # Distributed: wait until every scheduled step has run.
    coordinator.join()
    wall_s = time.perf_counter() - start

    # --- Evaluate and report: on the coordinator, reading the ps ---
    # Distributed: evaluate the variables on the ps.
    if curve.every:
        curve.write()
    test_loss, test_accuracy = test_loss_and_accuracy()
    # Distributed: save on this task's disk (by default each ps saves its own part).
    tf.train.Checkpoint(variables=mlp.variables, global_step=global_step).save(
        os.path.join(logdir, "model.ckpt"), options=tf.train.CheckpointOptions(
            experimental_io_device="/job:chief/replica:0/task:0/device:CPU:0"))
    report.write_result(
        logdir, flags.run_settings(args), "parameter-server-strategy",
        int(global_step.numpy()), test_loss, test_accuracy, wall_s,
        workers=task.num_workers, ps=task.num_ps,
        train_accuracy=report.eager_train_accuracy(mlp, dataset))


if __name__ == "__main__":
    sys.exit(flags.run_main(main))


# What launch.sh reads of this script (docs/launcher.md): the step it runs
# before any task starts, the files the chief writes in --logdir, and the
# memory a task takes, more than the launcher's figures for TensorFlow 1's
# graphs (618 MiB a task as new Pythons, 8 workers on MNIST; plus 16%).
# /// launch
# prepare = ["-m", "guide.training.download"]
# progress = "progress.jsonl"
# result = "result.json"
# chief_disk = ["evaluator"]
# memory_mib = 720
# ///
