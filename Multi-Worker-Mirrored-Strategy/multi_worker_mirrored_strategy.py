"""Multi-Worker-Mirrored-Strategy: synchronous SGD by allreduce, with no ps.

Every worker holds a copy of the model under TensorFlow 2's
tf.distribute.MultiWorkerMirroredStrategy. Each step, every worker computes
a gradient on its own minibatch, an allreduce (a ring over the workers) sums
them, and every worker applies the same update to its copy.

Topology: 2 workers by default (any number), no ps; synchronous.

Run:  bash run.sh                          # or: bash run.sh --workers 4
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python multi_worker_mirrored_strategy.py --job_name=worker --task_index=0 \\
          --worker_hosts=127.0.0.1:12223,127.0.0.1:12224
      python multi_worker_mirrored_strategy.py ...same hosts... --task_index=1
"""

import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide.distributed import tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: add the cluster flags; a step is W minibatches, hence the
    # real data sets' steps and rate (see README.md).
    parser = flags.make_parser(
        __doc__, __file__,
        train_steps=flags.ByDataset(synthetic=1000, real=3000),
        learning_rate=flags.ByDataset(synthetic=0.2, real=0.28))
    args = flags.parse(parser)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: find this task's place in a cluster of workers only
    # (TF_CONFIG or flags).
    task = tf_config.resolve_task(os.environ, args.ps_hosts, args.worker_hosts,
                                  args.job_name, args.task_index, ps=False)
    # Distributed: a step trains on one minibatch from every worker, the global
    # batch; --epochs sets --train_steps by it.
    global_batch = args.batch_size * task.num_workers
    flags.set_train_steps(args, examples_per_step=global_batch)
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: import the evaluator task's loop.
    from guide.distributed import evaluator
    from guide.training import model, report

    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        return evaluator.run(
            logdir, train_steps=args.train_steps, hidden_layers=args.hidden_layers,
            dataset=data.load(args.dataset, args.data_dir, args.seed, args.validation))

    # --- The cluster: every worker joins one allreduce; there is no ps ---
    # Distributed: join the other workers, one replica each, and sum over them
    # by a ring allreduce (NCCL where there are GPUs).
    collectives = tf.distribute.experimental.CommunicationImplementation
    communication = tf.distribute.experimental.CommunicationOptions(
        implementation=collectives.NCCL if tf.config.list_physical_devices("GPU")
        else collectives.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver=tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(task.cluster), task_type="worker",
            task_id=task.task_index, rpc_layer="grpc"),
        communication_options=communication)
    # Distributed: let SIGTERM stop this worker; the strategy's preemption
    # handler would catch it and go on.
    if threading.current_thread() is threading.main_thread():
        # Only a main thread may; Ray Train runs main() in another, and stops
        # its workers itself (ray_train.py).
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    # --- The data: each worker's own shard ---
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    # Distributed: each worker draws minibatches from its own shard, in its own
    # order; a step trains on one minibatch from every worker.
    shard = data.shard(dataset.train_images, dataset.train_labels,
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size, seed=args.seed + task.task_index)

    # --- The graph: a copy of the model on every worker ---
    # Distributed: mirror the variables: every worker holds a copy, which the
    # same updates keep equal.
    with strategy.scope():
        mlp = model.MLP(args.seed, args.hidden_layers)
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                  name="global_step")

    # Distributed: one step on every worker at once: the gradient of its share
    # of the global batch's mean loss, summed over the workers by the allreduce.
    @tf.function
    def train_step(images, labels):
        def replica_step(images, labels):
            with tf.GradientTape() as tape:
                losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=labels, logits=mlp.logits(images))
                share = tf.nn.compute_average_loss(
                    losses, global_batch_size=global_batch)
            gradients = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, tape.gradient(share, mlp.variables))
            # The update rule: theta <- theta - learning_rate * gradient.
            for variable, gradient in zip(mlp.variables, gradients):
                variable.assign_sub(args.learning_rate * gradient)
            return tf.reduce_mean(losses)
        loss = strategy.run(replica_step, args=(images, labels))
        global_step.assign_add(1)
        return strategy.experimental_local_results(loss)[0]

    # Distributed: the chief tests its copy, which every worker's equals.
    def test_loss_and_accuracy():
        logits = mlp.logits(dataset.test_images)
        test_loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=dataset.test_labels, logits=logits))
        correct = tf.argmax(logits, axis=1).numpy() == dataset.test_labels
        return float(test_loss), float(correct.mean())

    # Distributed: every replica takes the chief's copy: the others' values
    # count zero in the sum.
    @tf.function
    def take_the_chiefs_copy():
        def replica_take():
            weight = tf.constant(1.0 if task.is_chief else 0.0)
            summed = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM,
                [variable * weight for variable in mlp.variables]
                + [tf.cast(global_step, tf.float32) * weight])
            for variable, value in zip(mlp.variables, summed):
                variable.assign(value)
            global_step.assign(tf.cast(summed[-1], tf.int64))
        strategy.run(replica_take)

    # --- Train: every worker resumes from the chief's last checkpoint ---
    # Distributed: only the chief keeps checkpoints, on its own disk; after a
    # restart it restores the last and every worker takes its copy.
    checkpoint = tf.train.Checkpoint(variables=mlp.variables,
                                     global_step=global_step)
    checkpoints = tf.train.CheckpointManager(checkpoint, logdir, max_to_keep=3,
                                             checkpoint_name="model.ckpt")
    resumed_from = checkpoints.latest_checkpoint if task.is_chief else None
    if resumed_from:
        try:
            checkpoint.restore(resumed_from).assert_existing_objects_matched()
        except AssertionError:
            raise flags.UsageError(
                f"--logdir {logdir} holds a checkpoint of another example or "
                f"model; give this run a new --logdir") from None
    elif task.is_chief:
        checkpoints.save(checkpoint_number=0)
    take_the_chiefs_copy()
    start_step = step = saved_step = int(global_step.numpy())
    if start_step:
        source = f"checkpoint {resumed_from}" if task.is_chief else \
            "the chief's checkpoint"
        print(f"resuming at global step {start_step} from {source}", flush=True)
    # Distributed: go on with the minibatches the lost steps had not used yet.
    batches.skip(start_step)
    # Distributed: only the chief tracks test accuracy and writes summaries.
    curve = report.AccuracyCurve(logdir, args.eval_every if task.is_chief else 0,
                                 global_batch)
    if curve.every:
        curve.measure(step, test_loss_and_accuracy)
    start = time.perf_counter()
    # Distributed: every worker takes every step, the allreduce keeping them in
    # step; the chief checkpoints every --save_checkpoint_steps.
    last_line = (step, start)
    while step < args.train_steps:
        batch_images, batch_labels = batches.next()
        loss = train_step(batch_images, batch_labels)
        step += 1
        if step % args.log_every == 0:
            now = time.perf_counter()
            rate = (step - last_line[0]) * global_batch / (now - last_line[1])
            last_line = (step, now)
            print(f"global_step {step} loss {float(loss):.4f} examples/s "
                  f"{rate:.0f}", flush=True)
            if task.is_chief:
                report.record_progress(logdir, step)
                report.write_scalars(logdir, step, {"loss": loss,
                                                    "examples_per_sec": rate})
        if task.is_chief and step % args.save_checkpoint_steps == 0:
            checkpoints.save(checkpoint_number=step)
            saved_step = step
        if curve.due(step):
            curve.measure(step, test_loss_and_accuracy)
    wall_s = time.perf_counter() - start

    # --- Evaluate and report (the chief only) ---
    # Distributed: only the chief writes the last checkpoint, evaluates and
    # reports, for every worker.
    if task.is_chief:
        if saved_step != step:
            checkpoints.save(checkpoint_number=step)
        if curve.every:
            curve.write()
        test_loss, test_accuracy = test_loss_and_accuracy()
        report.write_result(
            logdir, flags.run_settings(args), "multi-worker-mirrored-strategy",
            step, test_loss, test_accuracy, wall_s, workers=task.num_workers, ps=0,
            start_step=start_step, examples_per_step=global_batch,
            train_accuracy=report.eager_train_accuracy(mlp, dataset))


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
