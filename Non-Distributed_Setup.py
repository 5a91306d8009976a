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

from guide import cli, data


def main():
    args = cli.parse(cli.make_parser(__doc__, __file__, cluster_flags=False))
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    from guide import model, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it

    # --- The data ---
    dataset = data.load(args)
    batches = data.Batches(dataset.train_images, dataset.train_labels,
                           args.batch_size, seed=args.seed)

    # --- The graph ---
    global_step = tf.compat.v1.train.get_or_create_global_step()
    classifier = model.Classifier(args.seed)
    # The update rule: theta <- theta - learning_rate * gradient.
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
    train_op = optimizer.minimize(classifier.loss, global_step=global_step)

    # --- Train ---
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, classifier.loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 summary_dir=args.logdir)]
    # Test accuracy as training goes, with --eval_every.
    hooks.append(report.AccuracyCurveHook(args, global_step, classifier, dataset))
    with tf.compat.v1.train.MonitoredTrainingSession(
            checkpoint_dir=args.logdir, hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        start = time.perf_counter()
        while not session.should_stop():
            batch_images, batch_labels = batches.next()
            session.run(train_op, classifier.feed(batch_images, batch_labels))
        wall_s = time.perf_counter() - start

        # --- Evaluate and report ---
        report.evaluate_and_write(session, args, "non-distributed_setup",
                                  classifier, dataset, global_step, wall_s,
                                  workers=1, ps=0)


if __name__ == "__main__":
    cli.run_main(main)
