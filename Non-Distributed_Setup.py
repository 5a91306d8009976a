"""Non-Distributed Setup: the baseline every distributed scheme is compared with.

One process trains the shared classifier (784 -> 128 -> 10) with plain SGD on
minibatches of --batch_size. No cluster, no parameter server: every line of
the distributed examples that is marked `# Distributed:` is what they add.

Topology: one process, synchronous by construction.

Run:  python Non-Distributed_Setup.py
      python Non-Distributed_Setup.py --dataset mnist --data_dir ~/data/mnist
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf

from guide import cli, data, model, report


def main():
    args = cli.parse(cli.make_parser(__doc__, __file__, distributed=False))
    dataset = data.load(args)
    batches = data.Batches(dataset.train_images, dataset.train_labels,
                           args.batch_size, seed=args.seed)

    # --- Build the graph ---
    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    global_step = tf.compat.v1.train.get_or_create_global_step()
    images, labels = model.placeholders()
    mlp = model.MLP(args.seed)
    loss, accuracy = model.loss_and_accuracy(mlp.logits(images), labels)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
    train_op = optimizer.minimize(loss, global_step=global_step)
    tf.compat.v1.summary.scalar("loss", loss)
    tf.compat.v1.summary.scalar("accuracy", accuracy)

    # --- Train ---
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 summary_dir=args.logdir)]
    with tf.compat.v1.train.MonitoredTrainingSession(
            checkpoint_dir=args.logdir, hooks=hooks) as session:
        start = time.perf_counter()
        while not session.should_stop():
            batch_images, batch_labels = batches.next()
            session.run(train_op, {images: batch_images, labels: batch_labels})
        wall_s = time.perf_counter() - start

        # --- Evaluate and report ---
        test_loss, test_accuracy, step = report.run_without_hooks(
            session, [loss, accuracy, global_step],
            {images: dataset.test_images, labels: dataset.test_labels})
    report.write_result(args, "non-distributed_setup", workers=1, ps=0,
                        global_step=step, test_loss=test_loss,
                        test_accuracy=test_accuracy, wall_s=wall_s,
                        examples=step * args.batch_size)


if __name__ == "__main__":
    cli.run_main(main)
