"""AGN: Accumulated Gradient Normalization (ADAG), asynchronous.

Each worker pulls the central parameters from the ps, takes
--communication_window (T) local SGD steps on its own copy while summing its
updates, then commits the sum divided by T, which the ps adds to its copy.

Topology: 1 ps + 2 workers by default (any number of either); asynchronous.

Run:  bash run.sh                          # or: bash run.sh --workers 4
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python agn.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223,127.0.0.1:12224 --job_name=ps --task_index=0
      python agn.py ...same hosts... --job_name=worker --task_index=0
      python agn.py ...same hosts... --job_name=worker --task_index=1
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide import cli, config, data


def main():
    # The commit a / T moves the central copy by η / T per minibatch, a T-th
    # of what SGD's η does: on the real data sets the rate is T × 0.2, so
    # that it learns per example as fast as the baseline (see README.md).
    parser = cli.make_parser(__doc__, __file__, learning_rate=(0.2, 0.8))
    # Dividing by T keeps each commit one step's size, so a wider window
    # costs little accuracy while it cuts the traffic (see README.md).
    parser.add_argument("--communication_window", type=cli.positive_int, default=4,
                        help="local steps between two exchanges with the ps (T)")
    args = cli.parse(parser)
    # Distributed: a window longer than the run would overshoot --train_steps.
    cli.check_window(args)
    task = config.resolve(args, os.environ)  # Distributed: TF_CONFIG or flags
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    from guide import cluster, counters, evaluator, model, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        return evaluator.run(args)

    # --- The cluster: every task runs a server; a ps only serves ---
    cluster_spec = tf.train.ClusterSpec(task.cluster)  # Distributed:
    server = tf.distribute.Server(  # Distributed:
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=cluster.session_config(task))
    if task.job_name == "ps":  # Distributed: serve until the workers are done
        cluster.serve_until_workers_done(server, task)
        return

    # --- The data: each worker trains on its own shard ---
    dataset = data.load(args)
    shard = data.shard(dataset.train_images, dataset.train_labels,  # Distributed:
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size,
                           seed=args.seed + task.task_index)

    # --- The graph: the central copy on the ps, a local copy on this worker ---
    worker_device = f"/job:worker/task:{task.task_index}"  # Distributed:
    device_setter = tf.compat.v1.train.replica_device_setter(  # Distributed:
        worker_device=worker_device, cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):  # Distributed: global state, on the ps
        global_step = tf.compat.v1.train.get_or_create_global_step()
        central = model.MLP(args.seed)  # θ̃, initialised once, by the chief
        commit_log = counters.CommitLog(task)  # commits and staleness per worker
        evaluation = model.Classifier(mlp=central, summaries=False)
    with cluster.local_variables(worker_device):  # Distributed: this worker's own
        local = model.MLP(args.seed)  # θ, overwritten by every pull
        accumulated = [  # a = −η Σ g over the window
            tf.compat.v1.Variable(tf.zeros(variable.shape), trainable=False,
                                  name="accumulated_update")
            for variable in local.variables]
        classifier = model.Classifier(mlp=local, summaries=False)
        last_loss = tf.compat.v1.Variable(0.0, trainable=False, name="last_loss")
        tf.compat.v1.summary.scalar("loss", last_loss)

        # One local step, on this worker only: θ ← θ − η g, and a ← a − η g.
        gradients = tf.gradients(classifier.loss, local.variables)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        local_step = tf.group(
            optimizer.apply_gradients(zip(gradients, local.variables)),
            *[update.assign_sub(args.learning_rate * gradient)
              for update, gradient in zip(accumulated, gradients)],
            last_loss.assign(classifier.loss))

    window = args.communication_window
    with tf.compat.v1.device(device_setter):  # Distributed: the exchange with the ps
        # Commit the normalised update: the ps applies θ̃ ← θ̃ + a / T; the
        # global step counts the window's minibatches.
        # The global step counts the window's minibatches. It advances only
        # after the commit's staleness is counted, which reads it.
        counted = commit_log.record_commit(global_step)
        with tf.control_dependencies([counted]):
            advance = global_step.assign_add(window)
        commit = tf.group(
            *[central_variable.assign_add(update / window)
              for central_variable, update in zip(central.variables, accumulated)],
            advance)
        # Pull: start the next window from the central copy, θ ← θ̃, a ← 0.
        pull = tf.group(
            *[local_variable.assign(central_variable.read_value())
              for local_variable, central_variable
              in zip(local.variables, central.variables)],
            *[update.assign(tf.zeros_like(update)) for update in accumulated],
            commit_log.record_pull(global_step))

    # --- Train: the chief initialises, the others wait for it ---
    # Distributed: the chief initialises or resumes, the others wait for its
    # signal (no 30 s poll); restarted tasks resume (guide/cluster.py).
    scaffold = cluster.resumable_scaffold(task, args, global_step)
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, last_loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 steps_per_run=window,  # Distributed: one window
                                 summary_dir=args.logdir if task.is_chief else None,
                                 # Distributed: it also writes the commits per
                                 # worker and their staleness.
                                 summaries=[commit_log])]
    if task.is_chief:  # the chief tracks test accuracy (--eval_every)
        hooks.append(report.AccuracyCurveHook(args, global_step, evaluation, dataset))
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=task.is_chief,  # Distributed:
            config=cluster.session_config(task),  # Distributed:
            checkpoint_dir=args.logdir, hooks=hooks, scaffold=scaffold,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        if task.is_chief:
            cluster.announce_chief_ready(server, task)  # Distributed:
        start = time.perf_counter()
        # Only the pull goes through the hooks (stop at step, progress), once
        # per window: it follows the commit, so the global step they read is
        # up to date. The hooks read it from the ps, so the local steps, which
        # must not talk to the ps, bypass them, and so does the commit.
        cluster.run_without_hooks(session, pull)  # Distributed: start from θ̃
        while not session.should_stop():
            for _ in range(window):
                batch_images, batch_labels = batches.next()
                cluster.run_without_hooks(
                    session, local_step, classifier.feed(batch_images, batch_labels))
            cluster.run_without_hooks(session, commit)  # Distributed: push a / T
            session.run(pull)  # Distributed: θ ← θ̃
        cluster.training_finished(server, task)  # Distributed: chief waits for all
        wall_s = time.perf_counter() - start  # until the last worker stopped

        # --- Evaluate the central copy and report (the chief only) ---
        if task.is_chief:
            report.evaluate_and_write(
                session, args, "agn", evaluation, dataset, global_step,
                wall_s, workers=task.num_workers, ps=task.num_ps,
                communication_window=window,  # Distributed:
                **commit_log.results(session))  # Distributed:
    cluster.signal_done(server, task)  # Distributed: lets the ps exit


if __name__ == "__main__":
    cli.run_main(main)
