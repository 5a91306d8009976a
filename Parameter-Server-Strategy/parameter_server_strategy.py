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
    # Distributed: one flag of the example's own, --steps_per_execution.
    # Each function the coordinator schedules is one round trip to a worker,
    # which costs more than the step itself, so a worker runs several steps
    # per function, as Keras's `steps_per_execution` does (the measurements
    # are in README.md). The cluster comes from TF_CONFIG, not from flags.
    parser = flags.make_parser(__doc__, __file__, cluster_flags=False)
    parser.add_argument("--steps_per_execution", type=flags.positive_int,
                        default=10,
                        help="minibatches a worker trains on per function "
                             "the coordinator schedules")
    args = flags.parse(parser)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: this task's place in the cluster, from TF_CONFIG only, as
    # TensorFlow's strategy reads it: "chief" is the coordinator, which runs
    # the training loop, and "worker" and "ps" tasks only serve.
    task = tf_config.resolve_coordinated_task(os.environ)
    # Distributed: only the coordinator reads the data, and it checks that
    # the smallest worker's shard holds one batch, as data.Batches does in
    # the other examples, before TensorFlow loads and any task waits on it.
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

    # Distributed: `ps_strategy` lets the workers and the ps exit when the
    # coordinator is done.
    from guide.distributed import ps_strategy

    # --- The cluster: workers and parameter servers only serve ---
    # Distributed: TensorFlow's resolver reads the same TF_CONFIG, for the
    # servers and the strategy.
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    # Distributed: a worker or ps runs a Server and no code of its own: the
    # coordinator sends it functions to run (a worker) or variables to hold
    # (a ps). Unlike server.join(), this returns once the coordinator says
    # the job is done.
    if task.job_name in ("worker", "ps"):
        server = tf.distribute.Server(
            resolver.cluster_spec(), job_name=task.job_name,
            task_index=task.task_index, protocol="grpc", start=True)
        ps_strategy.serve_until_coordinator_done(server, task.job_name,
                                                 task.task_index)
        return

    # Distributed: the coordinator trains, evaluates and reports in a
    # function of its own, so that what it left on the workers (datasets,
    # functions, remote values) is released when the function returns;
    # collected, and the coordinator's threads ended, while the workers are
    # still up; then they are let go.
    coordinate(args, logdir, resolver, dataset, task)
    ps_strategy.release_coordinator()
    ps_strategy.tell_servers_done(task.cluster)


# Distributed: the coordinator's part, the whole training loop; the steps it
# schedules run on the workers, against the variables on the ps.
def coordinate(args, logdir, resolver, dataset, task):
    """Trains, evaluates, prints the RESULT line and writes result.json."""
    import tensorflow as tf

    from guide.training import model, report

    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings

    # --- The cluster: the strategy places the variables on the ps ---
    # Distributed: the strategy connects to every worker and ps named by the
    # resolver, and the ClusterCoordinator schedules functions on them.
    experimental = tf.distribute.experimental
    strategy = experimental.ParameterServerStrategy(resolver)
    coordinator = experimental.coordinator.ClusterCoordinator(strategy)
    # Distributed: the variables made in the strategy's scope go to the ps,
    # round robin over them; the steps on every worker read and update them.
    with strategy.scope():
        mlp = model.MLP(args.seed)
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                  name="global_step")

    # --- The data: each worker reads its own shard, as a tf.data pipeline ---
    # Distributed: this function runs on each worker, which builds its own
    # pipeline over its own shard and its own shuffle order, so that no two
    # workers train on the same minibatch.
    def dataset_fn(context):
        images, labels = data.shard(
            dataset.train_images, dataset.train_labels,
            context.input_pipeline_id, context.num_input_pipelines)
        real = args.dataset != "synthetic"
        if real:
            # The shard travels to the worker inside the pipeline's graph:
            # the real data sets' pixels go as the bytes they were read
            # from, a quarter of the floats' size, and the worker scales
            # them to the very same floats (bytes / 255).
            images = np.rint(images * 255).astype(np.uint8)
        batches = (tf.data.Dataset.from_tensor_slices((images, labels))
                   .shuffle(len(images), seed=args.seed + context.input_pipeline_id)
                   .repeat().batch(args.batch_size))
        return batches.map(lambda pixels, labels: (
            tf.cast(pixels, tf.float32) / 255.0, labels)) if real else batches

    # Distributed: one iterator per worker, created on the workers; a step
    # scheduled on a worker takes its next batch from that worker's own.
    per_worker_batches = iter(coordinator.create_per_worker_dataset(
        lambda: strategy.distribute_datasets_from_function(dataset_fn)))

    # --- The graph: the update rule, θ ← θ − η g, on the ps ---
    # Distributed: the strategy has no v1 graph nor Classifier; the loss is
    # a function that a worker's step and the coordinator's evaluation call.
    def loss_of(images, labels):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=mlp.logits(images)))

    # Distributed: the coordinator evaluates eagerly, reading the variables
    # from the ps, since there is no session to run the baseline's ops in.
    def test_loss_and_accuracy():
        test_logits = mlp.logits(dataset.test_images)
        test_loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=dataset.test_labels, logits=test_logits))
        return float(test_loss), np.mean(
            np.argmax(test_logits.numpy(), axis=1) == dataset.test_labels)

    # Distributed: the training step is a tf.function because the
    # coordinator ships it to a worker to run there. Each step reads θ from
    # the ps, computes g on the worker's next minibatch and applies
    # θ ← θ − η g and global_step += 1 on the ps, with no lock against the
    # other workers' steps. `count` steps run per scheduled function, so the
    # coordinator's round trip is paid once for all of them.
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
    # Distributed: the coordinator tracks test accuracy itself (--eval_every),
    # as there are no hooks without a session.
    curve = report.AccuracyCurve(logdir, args.eval_every, args.batch_size)
    if curve.every:
        curve.measure(0, lambda: test_loss_and_accuracy()[1])
    start = time.perf_counter()
    # Distributed: the coordinator's loop schedules functions of
    # --steps_per_execution steps until --train_steps are scheduled. Each
    # returns at once with a RemoteValue and runs on whichever worker is
    # free; fetch() waits for that function only, for the progress lines
    # and summaries (written here, as there are no hooks) and the accuracy
    # curve.
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
            report.write_scalars(logdir, scheduled,
                                 {"loss": value, "examples_per_sec": rate})
        if curve.due(scheduled):
            loss.fetch()
            curve.measure(global_step.numpy(), lambda: test_loss_and_accuracy()[1])
    # Distributed: waits until every scheduled step has run on its worker.
    coordinator.join()
    wall_s = time.perf_counter() - start

    # --- Evaluate and report: on the coordinator, reading the ps ---
    # Distributed: without a session and its hooks, the coordinator writes
    # the accuracy curve, evaluates the variables on the ps, saves them in a
    # checkpoint of its own, and reports the cluster it ran on.
    if curve.every:
        curve.write()
    test_loss, test_accuracy = test_loss_and_accuracy()
    tf.train.Checkpoint(variables=mlp.variables, global_step=global_step).save(
        os.path.join(logdir, "model.ckpt"))
    settings = dict(
        dataset=args.dataset, train_steps=args.train_steps,
        batch_size=args.batch_size, learning_rate=args.learning_rate,
        seed=args.seed, validation=args.validation)
    report.write_result(
        logdir, settings, "parameter-server-strategy", int(global_step.numpy()),
        test_loss, test_accuracy, wall_s, workers=task.num_workers, ps=task.num_ps)


if __name__ == "__main__":
    sys.exit(flags.run_main(main))
