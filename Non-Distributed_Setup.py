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

from guide.training import data, flags, logdirs


def main():
    args = flags.parse(flags.make_parser(__doc__, __file__, cluster_flags=False))
    # --epochs sets --train_steps: a global step trains on one minibatch.
    flags.set_train_steps(args, examples_per_step=args.batch_size)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    from guide.training import model, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings

    # --- The data ---
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    batches = data.Batches(dataset.train_images, dataset.train_labels,
                           args.batch_size, seed=args.seed)

    # --- The graph ---
    global_step = tf.compat.v1.train.get_or_create_global_step()
    classifier = model.Classifier(args.seed, hidden_layers=args.hidden_layers)
    # The update rule: theta <- theta - learning_rate * gradient.
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
    train_op = optimizer.minimize(classifier.loss, global_step=global_step)

    # --- Train ---
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, classifier.loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 summary_dir=logdir)]
    # Test accuracy as training goes, with --eval_every.
    hooks.append(report.AccuracyCurveHook(
        logdir, args.eval_every, global_step, classifier, dataset,
        examples_per_step=args.batch_size))
    with tf.compat.v1.train.MonitoredTrainingSession(
            checkpoint_dir=logdir, hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        start = time.perf_counter()
        while not session.should_stop():
            batch_images, batch_labels = batches.next()
            session.run(train_op, classifier.feed(batch_images, batch_labels))
        wall_s = time.perf_counter() - start

        # --- Evaluate and report ---
        report.evaluate_and_write(
            session, logdir, flags.run_settings(args), "non-distributed_setup",
            classifier, dataset, global_step, wall_s, workers=1, ps=0)


if __name__ == "__main__":
    sys.exit(flags.run_main(main))
