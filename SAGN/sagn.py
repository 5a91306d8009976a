"""SAGN: Synchronous Accumulated Gradient Normalization.

Each worker takes --communication_window (T) local SGD steps from the central
parameters, summing its updates; the ps averages the normalised sums (sum / T)
of all workers and applies them as one synchronous step; every worker then
pulls the new central parameters.

Topology: 1 ps + 2 workers by default (any number of either); synchronous.

Run:  bash run.sh                          # or: bash run.sh --workers 4
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python sagn.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223,127.0.0.1:12224 --job_name=ps --task_index=0
      python sagn.py ...same hosts... --job_name=worker --task_index=0
      python sagn.py ...same hosts... --job_name=worker --task_index=1
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide import cli, config, data


def main():
    # A global step here is one synchronous update, made of T minibatches
    # from every worker: 250 of them with T = 4 and 2 workers are the 2000
    # minibatches of Synchronous-SGD's default 1000 steps (750 on the real
    # data sets, its 3000 steps). Each commit is a / T, as in AGN, so the
    # rate there is T × 0.2 (see README.md).
    parser = cli.make_parser(__doc__, __file__, train_steps=(250, 750),
                             learning_rate=(0.2, 0.8))
    parser.add_argument("--communication_window", type=cli.positive_int, default=4,
                        help="local steps between two exchanges with the ps (T)")
    parser.add_argument("--replicas_to_aggregate", type=cli.positive_int,
                        help="commits averaged into each update (default: one "
                             "per worker); the others are dropped as stale")
    args = cli.parse(parser)
    task = config.resolve(args, os.environ)  # Distributed: TF_CONFIG or flags
    replicas = cli.replicas_to_aggregate(args, task.num_workers)  # Distributed:
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
    window = args.communication_window
    worker_device = f"/job:worker/task:{task.task_index}"  # Distributed:
    device_setter = tf.compat.v1.train.replica_device_setter(  # Distributed:
        worker_device=worker_device, cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):  # Distributed: global state, on the ps
        global_step = tf.compat.v1.train.get_or_create_global_step()
        central = model.MLP(args.seed)  # θ̃, initialised once, by the chief
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

    with tf.compat.v1.device(device_setter):  # Distributed: the exchange with the ps
        # Commit: SyncReplicasOptimizer averages one −a / T from each of R
        # workers (all W by default) and applies it with a unit step:
        # θ̃ ← θ̃ + (1/R) Σ_w a_w / T. The global step counts these updates.
        averager = tf.compat.v1.train.SyncReplicasOptimizer(  # Distributed:
            tf.compat.v1.train.GradientDescentOptimizer(1.0),
            replicas_to_aggregate=replicas,  # Distributed:
            total_num_replicas=task.num_workers)  # Distributed:
        commits = counters.WorkerCounter(task, "commits")  # Distributed: for the report
        commit = tf.group(  # Distributed:
            averager.apply_gradients(
                [(-update.read_value() / window, central_variable)
                 for update, central_variable
                 in zip(accumulated, central.variables)],
                global_step=global_step),
            commits.increment)  # Distributed:
        # Pull: start the next window from the central copy, θ ← θ̃, a ← 0.
        pull = tf.group(  # Distributed:
            *[local_variable.assign(central_variable.read_value())
              for local_variable, central_variable
              in zip(local.variables, central.variables)],
            *[update.assign(tf.zeros_like(update)) for update in accumulated])
    release_waiters = cluster.release_token_waiters(  # Distributed:
        averager, global_step, task)
    left_over = cluster.gradients_waiting(central.hidden_weights)  # Distributed:
    # Distributed: with every worker's commit in every round (R = W), a
    # barrier after each commit keeps a fast worker from committing twice to
    # one round. With backups (R < W) it would make each round wait for the
    # slowest worker after all, so there is none.
    barrier = (cluster.step_barrier(task, averager, args.train_steps, commits)
               if replicas == task.num_workers else None)

    # --- Train: the chief initialises, the others wait for it ---
    # Distributed: the chief initialises or resumes, the others wait for its
    # signal (no 30 s poll); restarted tasks resume (guide/cluster.py).
    scaffold = cluster.resumable_scaffold(task, args, global_step)
    # Distributed: the chief's hook applies the updates and hands out tokens.
    sync_hook = cluster.SyncReplicasHook(averager, task.is_chief)  # Distributed:
    examples_per_step = replicas * window * args.batch_size
    hooks = [sync_hook,  # Distributed:
             tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             # --log_every counts rounds here, T local steps each.
             report.ProgressHook(global_step, last_loss, args.log_every * window,
                                 examples_per_step=examples_per_step,
                                 steps_per_run=window,  # Distributed: one window
                                 summary_dir=args.logdir if task.is_chief else None,
                                 # Distributed: it also writes how many commits
                                 # were dropped as stale.
                                 summaries=[commits.dropped_summaries(
                                     global_step, left_over, replicas)])]
    if task.is_chief:  # the chief tracks test accuracy (--eval_every)
        hooks.append(report.AccuracyCurveHook(
            args, global_step, evaluation, dataset,
            examples_per_step=examples_per_step))
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=task.is_chief,  # Distributed:
            config=cluster.session_config(task),  # Distributed:
            checkpoint_dir=args.logdir, hooks=hooks, scaffold=scaffold,
            save_checkpoint_steps=args.save_checkpoint_steps,
            stop_grace_period_secs=0) as session:  # Distributed: see Synchronous-SGD
        if task.is_chief:
            cluster.announce_chief_ready(server, task)  # Distributed:
        start = time.perf_counter()
        # Only the commit goes through the hooks (stop at step, progress):
        # it returns once the synchronous update is applied. Local steps,
        # which must not talk to the ps, bypass them, and so do the pulls.
        cluster.run_without_hooks(session, pull)  # Distributed: start from θ̃
        while not session.should_stop():
            for _ in range(window):
                batch_images, batch_labels = batches.next()
                cluster.run_without_hooks(
                    session, local_step, classifier.feed(batch_images, batch_labels))
            session.run(commit)  # Distributed: push a / T, wait for the update
            if barrier is not None:  # Distributed: one commit per worker per round
                cluster.run_without_hooks(session, barrier)
            cluster.run_without_hooks(session, pull)  # Distributed: θ ← θ̃
        # Distributed: let any worker still waiting for a token finish.
        cluster.run_without_hooks(session, release_waiters)
        cluster.training_finished(server, task)  # Distributed: chief waits for all
        wall_s = time.perf_counter() - start  # until the last worker stopped

        # --- Evaluate the central copy and report (the chief only) ---
        if task.is_chief:
            # Distributed: commits never averaged into an update, dropped
            # as stale; an upper bound if a round averaged more than R.
            made, dropped = commits.read_with_dropped(  # Distributed:
                session, global_step, left_over, replicas)
            report.evaluate_and_write(
                session, args, "sagn", evaluation, dataset, global_step, wall_s,
                workers=task.num_workers, ps=task.num_ps,
                examples_per_step=examples_per_step,
                communication_window=window,  # Distributed:
                replicas_to_aggregate=replicas,  # Distributed:
                commits=made,  # Distributed:
                commits_dropped=dropped)  # Distributed:
    cluster.signal_done(server, task)  # Distributed: lets the ps exit


if __name__ == "__main__":
    cli.run_main(main)
