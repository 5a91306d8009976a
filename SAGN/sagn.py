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

from guide.distributed import scheme_flags, tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: the parser adds the cluster flags and SAGN's own: T, the
    # local steps between two exchanges (--communication_window), and R, how
    # many commits each update averages (--replicas_to_aggregate). A global
    # step here is one synchronous update, made of T minibatches from every
    # worker: 250 of them with T = 4 and 2 workers are the 2000 minibatches
    # of Synchronous-SGD's default 1000 steps (750 on the real data sets, its
    # 3000 steps). Each commit is a / T, as in AGN, so the rate there is
    # T × 0.2 (see README.md).
    parser = flags.make_parser(
        __doc__, __file__,
        train_steps=flags.ByDataset(synthetic=250, real=750),
        learning_rate=flags.ByDataset(synthetic=0.2, real=0.8))
    parser.add_argument("--communication_window", type=flags.positive_int, default=4,
                        help="local steps between two exchanges with the ps (T)")
    parser.add_argument("--replicas_to_aggregate", type=flags.positive_int,
                        help="commits averaged into each update (default: one "
                             "per worker); the others are dropped as stale")
    args = flags.parse(parser)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: this task's place in the cluster, from TF_CONFIG if it is
    # set, else from the cluster flags.
    task = tf_config.resolve_task(os.environ, args.ps_hosts, args.worker_hosts,
                                  args.job_name, args.task_index)
    # Distributed: R is every worker by default, and at most that many, or no
    # update would ever complete.
    replicas = scheme_flags.replicas_to_aggregate(args.replicas_to_aggregate,
                                                  task.num_workers)
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: guide.distributed holds what the cluster adds: `counters`
    # tallies kept on the ps, `evaluator` the evaluator task's loop,
    # `placement` where each task computes, `protocol` how the tasks start and
    # stop, `recovery` restarts, `sync` SyncReplicasOptimizer's helpers.
    from guide.distributed import (
        counters,
        evaluator,
        placement,
        protocol,
        recovery,
        sync,
    )
    from guide.training import model, monitored, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
        return evaluator.run(logdir, dataset, args.train_steps)

    # --- The cluster: every task runs a server; a ps only serves ---
    # Distributed: a ClusterSpec names every task, and each process runs a
    # Server for its own task, through which the others reach its devices.
    cluster_spec = tf.train.ClusterSpec(task.cluster)
    server = tf.distribute.Server(
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=placement.session_config(task))
    # Distributed: a ps only serves the central copy placed on it, and
    # aggregates the commits; unlike server.join(), this returns once every
    # worker has said it is done.
    if task.job_name == "ps":
        protocol.serve_until_workers_done(server, task)
        return

    # --- The data: each worker trains on its own shard ---
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    # Distributed: each worker takes its own slice of the training set, and
    # its own batch order, so no two workers train on the same minibatch.
    shard = data.shard(dataset.train_images, dataset.train_labels,
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size,
                           seed=args.seed + task.task_index)

    # --- The graph: the central copy on the ps, a local copy on this worker ---
    # Distributed: replica_device_setter puts every variable made in its
    # blocks on a ps (round robin over them) and every op on this worker.
    window = args.communication_window
    worker_device = f"/job:worker/task:{task.task_index}"
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=worker_device, cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        # Distributed: θ̃, the central copy, is the global state on the ps
        # that the synchronous updates change and every window starts from;
        # the chief initialises it, and evaluates it at the end.
        central = model.MLP(args.seed)
        evaluation = model.Classifier(mlp=central, summaries=False)
    # Distributed: θ, this worker's own copy (overwritten by every pull), and
    # a = −η Σ g, its update summed over the window, live on its own device and
    # out of the checkpoints (guide/distributed/placement.py); θ trains alone
    # within a window, so its loss is kept in a variable that the progress
    # lines read once per window.
    with placement.local_variables(worker_device):
        local = model.MLP(args.seed)
        accumulated = [
            tf.compat.v1.Variable(tf.zeros(variable.shape), trainable=False,
                                  name="accumulated_update")
            for variable in local.variables]
        classifier = model.Classifier(mlp=local, summaries=False)
        last_loss = tf.compat.v1.Variable(0.0, trainable=False, name="last_loss")
        tf.compat.v1.summary.scalar("loss", last_loss)

        # Distributed: one local step, on this worker only: θ ← θ − η g, and
        # the same step summed into a ← a − η g, for the commit; it keeps its
        # loss for the progress lines.
        gradients = tf.gradients(classifier.loss, local.variables)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        local_step = tf.group(
            optimizer.apply_gradients(zip(gradients, local.variables)),
            *[update.assign_sub(args.learning_rate * gradient)
              for update, gradient in zip(accumulated, gradients)],
            last_loss.assign(classifier.loss))

    # Distributed: the exchange with the ps, every T local steps; its ops
    # read and change the central copy there.
    with tf.compat.v1.device(device_setter):
        # Distributed: the update rule: SyncReplicasOptimizer averages one
        # commit −a / T from each of R workers (all W by default) and applies
        # it with a unit step, θ̃ ← θ̃ + (1/R) Σ_w a_w / T; commits made on an
        # older θ̃ are dropped as stale. The global step counts these updates.
        averager = tf.compat.v1.train.SyncReplicasOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(1.0),
            replicas_to_aggregate=replicas,
            total_num_replicas=task.num_workers)
        # Distributed: the commit sends −a / T to the accumulators on the ps,
        # and counts it there, per worker, so the report can tell how many
        # commits were dropped as stale.
        commits = counters.WorkerCounter(task, "commits")
        commit = tf.group(
            averager.apply_gradients(
                [(-update.read_value() / window, central_variable)
                 for update, central_variable
                 in zip(accumulated, central.variables)],
                global_step=global_step),
            commits.increment)
        # Distributed: the pull starts the next window from the central copy,
        # θ ← θ̃, a ← 0.
        pull = tf.group(
            *[local_variable.assign(central_variable.read_value())
              for local_variable, central_variable
              in zip(local.variables, central.variables)],
            *[update.assign(tf.zeros_like(update)) for update in accumulated])
    # Distributed: as a worker stops, it hands a token to every other one, so
    # that none stays blocked waiting for a round that will never come.
    release_waiters = sync.release_token_waiters(averager, global_step, task)
    # Distributed: how many commits wait in the accumulator unused, which the
    # count of dropped commits leaves out.
    left_over = sync.pending_gradient_count(accumulator_of=central.hidden_weights)
    # Distributed: with every worker's commit in every round (R = W), a
    # barrier after each commit keeps a fast worker from committing twice to
    # one round. With backups (R < W) it would make each round wait for the
    # slowest worker after all, so there is none.
    barrier = (sync.step_barrier(task, averager, args.train_steps, commits)
               if replicas == task.num_workers else None)

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: the chief initialises the central copy on the ps, or
    # resumes it after a restart; the others wait for its signal, with no
    # 30 s poll (guide/distributed/recovery.py).
    resume = recovery.Resume(task, global_step, logdir, os.path.basename(__file__))
    # Distributed: the chief's hook starts the thread that applies the
    # averaged updates, and hands out tokens, one per worker after each
    # update; a worker's commit takes one and so returns once the update is
    # applied.
    sync_hook = sync.SyncReplicasHook(averager, task.is_chief)
    # Distributed: one global step averages R commits of T minibatches each.
    examples_per_step = replicas * window * args.batch_size
    hooks = [sync_hook,
             tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             # Distributed: the hooks see one run per round (the commit), so
             # progress counts T local steps a run; --log_every counts rounds
             # here, T local steps each, and reports the last local step's
             # loss.
             report.ProgressHook(global_step, last_loss, args.log_every * window,
                                 examples_per_step=examples_per_step,
                                 steps_per_run=window,
                                 # Distributed: only the chief writes summaries,
                                 # among them how many commits were dropped as
                                 # stale.
                                 summary_dir=logdir if task.is_chief else None,
                                 summaries=[commits.dropped_summaries(
                                     global_step, left_over, replicas)])]
    # Distributed: only the chief tracks test accuracy, with --eval_every, of
    # the central copy.
    if task.is_chief:
        hooks.append(report.AccuracyCurveHook(
            logdir, args.eval_every, global_step, evaluation, dataset,
            examples_per_step=examples_per_step))
    with tf.compat.v1.train.MonitoredTrainingSession(
            # Distributed: the session runs through this task's server; only
            # the chief initialises, restores and writes checkpoints.
            master=server.target, is_chief=task.is_chief,
            config=placement.session_config(task), scaffold=resume.scaffold,
            checkpoint_dir=logdir, hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps,
            # Distributed: the chief's update thread is blocked waiting for
            # commits that will not come, until the session's close ends it:
            # do not wait for it first (the default waits 120 s).
            stop_grace_period_secs=0) as session:
        # Distributed: the chief tells the other workers the model is ready.
        if task.is_chief:
            protocol.announce_chief_ready(server, task)
        start = time.perf_counter()
        # Distributed: the first window starts from the central copy, θ ← θ̃.
        monitored.run_without_hooks(session, pull)
        while not session.should_stop():
            # Distributed: T local steps on this worker's copy; they bypass
            # the hooks, whose read of the global step would cost each one a
            # round trip to the ps.
            for _ in range(window):
                batch_images, batch_labels = batches.next()
                monitored.run_without_hooks(
                    session, local_step, classifier.feed(batch_images, batch_labels))
            # Distributed: the commit pushes a / T and returns once the
            # synchronous update is applied; it alone goes through the hooks
            # (stop at step, progress), once per round.
            session.run(commit)
            # Distributed: with R = W, one commit per worker per round.
            if barrier is not None:
                monitored.run_without_hooks(session, barrier)
            # Distributed: the next window starts from the updated central
            # copy, θ ← θ̃, a ← 0.
            monitored.run_without_hooks(session, pull)
        # Distributed: let any worker still waiting for a token finish.
        monitored.run_without_hooks(session, release_waiters)
        # Distributed: the other workers say they have stopped, and the chief
        # waits for them, so its time and its result cover the whole run.
        if task.is_chief:
            protocol.wait_for_workers_to_finish(server, task)
        else:
            protocol.report_training_finished(server, task)
        wall_s = time.perf_counter() - start

        # --- Evaluate and report: the central copy (the chief only) ---
        # Distributed: only the chief evaluates, the central copy θ̃; its
        # result names the cluster, T, R, the commits each worker made, and
        # how many were never averaged into an update, dropped as stale (an
        # upper bound if a round averaged more than R).
        if task.is_chief:
            made, dropped = commits.read_with_dropped(
                session, global_step, left_over, replicas)
            settings = dict(
                dataset=args.dataset, train_steps=args.train_steps,
                batch_size=args.batch_size, learning_rate=args.learning_rate,
                seed=args.seed, validation=args.validation)
            report.evaluate_and_write(
                session, logdir, settings, "sagn", evaluation, dataset,
                global_step, wall_s, workers=task.num_workers, ps=task.num_ps,
                start_step=resume.start_step, examples_per_step=examples_per_step,
                communication_window=window, replicas_to_aggregate=replicas,
                commits=made, commits_dropped=dropped)
    # Distributed: tells the ps this worker is done, so that it can exit.
    protocol.signal_done(server, task)


if __name__ == "__main__":
    sys.exit(flags.run_main(main))
