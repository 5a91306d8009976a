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
    # Distributed: add the cluster flags, T, the ps's rate η̃ and R; train twice as
    # long on the real data sets, as the centre moves by the workers' mean step.
    parser = flags.make_parser(
        __doc__, __file__,
        train_steps=flags.ByDataset(synthetic=250, real=1500), worker_optimizer="sgd")
    parser.add_argument("--communication_window", type=flags.positive_int, default=4,
                        help="local steps between two exchanges with the ps (T)")
    parser.add_argument("--central_learning_rate", type=flags.positive_float,
                        help="rate η̃ of the commits a = (η̃ / η) (θ − θ̃), "
                             "−η̃ Σ g with sgd (default: T × learning_rate, "
                             "README.md)")
    parser.add_argument("--replicas_to_aggregate", type=flags.positive_int,
                        help="commits averaged into each update (default: one "
                             "per worker); the others are dropped as stale")
    args = flags.parse(parser)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: find this task's place in the cluster (TF_CONFIG or flags).
    task = tf_config.resolve_task(os.environ, args.ps_hosts, args.worker_hosts,
                                  args.job_name, args.task_index)
    # Distributed: average R commits per update, one per worker by default.
    replicas = scheme_flags.replicas_to_aggregate(args.replicas_to_aggregate,
                                                  task.num_workers)
    # Distributed: a global step trains on R commits of T minibatches each;
    # --epochs sets --train_steps by it.
    examples_per_step = replicas * args.communication_window * args.batch_size
    flags.set_train_steps(args, examples_per_step)
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: import the cluster protocol, counters and sync helpers.
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
        return evaluator.run(
            logdir, train_steps=args.train_steps, hidden_layers=args.hidden_layers,
            dataset=data.load(args.dataset, args.data_dir, args.seed, args.validation))

    # --- The cluster: every task runs a server; a ps only serves ---
    # Distributed: run a server for this task, which the other tasks reach.
    cluster_spec = tf.train.ClusterSpec(task.cluster)
    server = tf.distribute.Server(
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=placement.session_config(task))
    # Distributed: a ps serves the central copy until every worker is done.
    if task.job_name == "ps":
        protocol.serve_until_workers_done(server, task)
        return

    # --- The data: each worker trains on its own shard ---
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    # Distributed: give each worker its own shard of the training set.
    shard = data.shard(dataset.train_images, dataset.train_labels,
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size,
                           seed=args.seed + task.task_index)

    # --- The graph: the central copy on the ps, a local copy on this worker ---
    # Distributed: a / T at η̃ = T η moves the centre by the workers' mean step.
    window = args.communication_window
    central_rate = args.central_learning_rate or window * args.learning_rate
    # Distributed: place the variables on the ps and the ops on this worker.
    worker_device = f"/job:worker/task:{task.task_index}"
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=worker_device, cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        # Distributed: keep the central copy θ̃ on the ps; the chief evaluates it.
        central = model.MLP(args.seed, args.hidden_layers)
        evaluation = model.Classifier(mlp=central, summaries=False)
    # Distributed: keep this worker's copy θ, its summed update a and its loss
    # on its own device, out of the checkpoints.
    with placement.local_variables(worker_device):
        local = model.MLP(args.seed, args.hidden_layers)
        accumulated = [
            tf.compat.v1.Variable(tf.zeros(variable.shape), trainable=False,
                                  name="accumulated_update")
            for variable in local.variables]
        classifier = model.Classifier(mlp=local, summaries=False)
        last_loss = tf.compat.v1.Variable(0.0, trainable=False, name="last_loss")
        tf.compat.v1.summary.scalar("loss", last_loss)

        # Distributed: take a local step θ ← θ + Δθ of --worker_optimizer (sgd:
        # Δθ = −η g), and sum it into a ← a + (η̃ / η) Δθ.
        gradients = tf.gradients(classifier.loss, local.variables)
        applied, displacements = model.optimizer_step(
            args.worker_optimizer, args.learning_rate, gradients, local.variables)
        local_step = tf.group(
            applied,
            *[update.assign_add(central_rate / args.learning_rate * displacement)
              for update, displacement in zip(accumulated, displacements)],
            last_loss.assign(classifier.loss))

    # Distributed: build the exchange with the ps, run every T local steps.
    with tf.compat.v1.device(device_setter):
        # Distributed: average R commits on the ps and apply them with a unit step.
        averager = tf.compat.v1.train.SyncReplicasOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(1.0),
            replicas_to_aggregate=replicas,
            total_num_replicas=task.num_workers)
        # Distributed: commit −a / T, counted on the ps to report stale ones.
        commits = counters.WorkerCounter(task, "commits")
        commit = tf.group(
            averager.apply_gradients(
                [(-update.read_value() / window, central_variable)
                 for update, central_variable
                 in zip(accumulated, central.variables)],
                global_step=global_step),
            commits.increment)
        # Distributed: pull the central copy, θ ← θ̃, and reset a ← 0.
        pull = tf.group(
            *[local_variable.assign(central_variable.read_value())
              for local_variable, central_variable
              in zip(local.variables, central.variables)],
            *[update.assign(tf.zeros_like(update)) for update in accumulated])
    # Distributed: as this worker stops, release the workers waiting for a token.
    release_waiters = sync.release_token_waiters(averager, global_step, task)
    # Distributed: count the commits left unused in the accumulator.
    left_over = sync.pending_gradient_count(accumulator_of=central.hidden_weights)

    # The round protocol (README.md): round L is each worker's commit to
    # global step L and the update that averages them. A worker that has
    # committed waits for that update, tells the others on ps 0 it reached
    # round L, and waits until all have said so before it pulls. R = W needs
    # it: the optimizer counts commits, not workers, so a fast worker could
    # otherwise take a slow one's token and commit twice to one round.
    # Distributed: with R = W, meet the other workers after each commit.
    barrier = (sync.step_barrier(task, averager, args.train_steps, commits)
               if replicas == task.num_workers else None)

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: the chief initialises or resumes θ̃; the others wait.
    if task.is_chief:
        chief = recovery.ChiefStart(task, global_step, logdir,
                                    os.path.basename(__file__))
        scaffold = chief.scaffold
    else:
        scaffold = recovery.scaffold_waiting_for_chief(task)
    # Distributed: the chief applies the averaged commits and hands out tokens.
    sync_hook = sync.SyncReplicasHook(averager, task.is_chief)
    # Distributed: only the chief writes summaries, stale commits among them.
    summary_dir = logdir if task.is_chief else None
    # Distributed: report progress once per round of T local steps.
    hooks = [sync_hook,
             tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, last_loss, args.log_every * window,
                                 examples_per_step=examples_per_step,
                                 steps_per_run=window,
                                 summary_dir=summary_dir,
                                 summaries=[commits.dropped_summaries(
                                     global_step, left_over, replicas)])]
    # Distributed: only the chief tracks the central copy's test accuracy.
    if task.is_chief:
        hooks.append(report.AccuracyCurveHook(
            logdir, args.eval_every, global_step, evaluation, dataset,
            examples_per_step=examples_per_step))
    # Distributed: train through this task's server, the chief checkpointing;
    # close without waiting for the chief's blocked update thread.
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=task.is_chief,
            config=placement.session_config(task), scaffold=scaffold,
            checkpoint_dir=logdir, hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps,
            stop_grace_period_secs=0) as session:
        # Distributed: the chief tells the other workers the model is ready.
        if task.is_chief:
            protocol.announce_chief_ready(server, task)
        start = time.perf_counter()
        # Distributed: start the first window from the central copy.
        monitored.run_without_hooks(session, pull)
        while not session.should_stop():
            # Distributed: take T local steps, bypassing the hooks.
            for _ in range(window):
                batch_images, batch_labels = batches.next()
                monitored.run_without_hooks(
                    session, local_step, classifier.feed(batch_images, batch_labels))
            # Distributed: send the commit and wait for the synchronous update.
            session.run(commit)
            # Distributed: with R = W, wait until every worker has reached this round.
            if barrier is not None:
                monitored.run_without_hooks(session, barrier)
            # Distributed: start the next window from the updated central copy.
            monitored.run_without_hooks(session, pull)
        # Distributed: let any worker still waiting for a token finish.
        monitored.run_without_hooks(session, release_waiters)
        # Distributed: the chief waits until the other workers say they stopped.
        if task.is_chief:
            protocol.wait_for_workers_to_finish(server, task)
        else:
            protocol.report_training_finished(server, task)
        wall_s = time.perf_counter() - start

        # --- Evaluate and report: the central copy (the chief only) ---
        # Distributed: only the chief evaluates θ̃, and reports T, R and stale commits.
        if task.is_chief:
            made, dropped = commits.read_with_dropped(
                session, global_step, left_over, replicas)
            report.evaluate_and_write(
                session, logdir, flags.run_settings(args), "sagn", evaluation,
                dataset, global_step, wall_s, train_back=False,
                workers=task.num_workers, ps=task.num_ps,
                start_step=chief.start_step, examples_per_step=examples_per_step,
                communication_window=window, replicas_to_aggregate=replicas,
                central_learning_rate=round(central_rate, 6), commits=made,
                commits_dropped=dropped)
    # Distributed: tell the ps this worker is done, so that it can exit.
    protocol.signal_done(server, task)


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
