"""AEAMSGD: Asynchronous Elastic Averaging SGD with Nesterov momentum.

Each worker keeps its own copy of the model and takes Nesterov momentum steps
on it (--momentum).
Every --communication_window (T) steps it reads the central parameters and
the two copies pull towards each other by an elastic difference
E = α (θ − θ̃): the worker moves by −E, the ps's copy by +E. α = η ρ.

Topology: 1 ps + 2 workers by default (any number of either); asynchronous.

Run:  bash run.sh                          # or: bash run.sh --workers 4
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python aeamsgd.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223,127.0.0.1:12224 --job_name=ps --task_index=0
      python aeamsgd.py ...same hosts... --job_name=worker --task_index=0
      python aeamsgd.py ...same hosts... --job_name=worker --task_index=1
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide import cli, config, data


def main():
    # Momentum δ = 0.9 multiplies a step by about 1 / (1 − δ) = 10, so η is a
    # tenth of plain SGD's 0.2 (see README.md).
    # The elastic exchange moves the centre and the W workers together, so
    # they advance by η / (W + 1) per minibatch: on the real data sets the
    # rate is (W + 1) × 0.02 for the default 2 workers (see README.md).
    parser = cli.make_parser(__doc__, __file__, learning_rate=(0.02, 0.06))
    parser.add_argument("--communication_window", type=cli.positive_int, default=4,
                        help="local steps between two elastic exchanges (T)")
    parser.add_argument("--rho", type=float,
                        help="strength of the elastic force: α = learning_rate "
                             "× rho (default: α = 0.9 / workers, the paper's "
                             "choice)")
    parser.add_argument("--momentum", type=float, default=0.9,
                        help="Nesterov momentum δ of the local steps")
    args = cli.parse(parser)
    # Distributed: a window longer than the run would overshoot --train_steps.
    cli.check_window(args)
    if not 0 <= args.momentum < 1:
        raise cli.UsageError(f"--momentum must be in [0, 1), got {args.momentum}")
    task = config.resolve(args, os.environ)  # Distributed: TF_CONFIG or flags
    # The paper's guidance for the asynchronous case: α = β / W with β = 0.9,
    # so that the W workers together pull the centre by at most 0.9 a round.
    rho = args.rho or 0.9 / (task.num_workers * args.learning_rate)
    alpha = args.learning_rate * rho
    if not 0 < alpha < 1:
        raise cli.UsageError(f"--rho {rho} makes α = learning_rate × rho = "
                             f"{alpha:g}; choose rho so that 0 < α < 1")
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
        central = model.MLP(args.seed)  # θ̃, the centre, initialised by the chief
        commit_log = counters.CommitLog(task)  # exchanges and staleness per worker
        evaluation = model.Classifier(mlp=central, summaries=False)
    with cluster.local_variables(worker_device), \
            tf.compat.v1.variable_scope("local"):  # Distributed: this worker's own
        local = model.MLP(args.seed)  # θ, set to θ̃ once, at the start
        velocity = [  # v, the momentum of the local steps
            tf.compat.v1.Variable(tf.zeros(variable.shape), trainable=False,
                                  name="velocity")
            for variable in local.variables]
        # The model at the look-ahead point θ + δ v, where Nesterov momentum
        # takes its gradient.
        classifier = model.Classifier(
            mlp=local, summaries=False,
            offsets=[args.momentum * speed for speed in velocity])
        last_loss = tf.compat.v1.Variable(0.0, trainable=False, name="last_loss")
        tf.compat.v1.summary.scalar("loss", last_loss)

        # One local step, on this worker only:
        # v ← δ v − η g(θ + δ v), then θ ← θ + v.
        gradients = tf.gradients(classifier.loss, local.variables)
        new_velocity = [args.momentum * speed - args.learning_rate * gradient
                        for speed, gradient in zip(velocity, gradients)]
        local_step = tf.group(
            *[speed.assign(new) for speed, new in zip(velocity, new_velocity)],
            *[variable.assign_add(new)
              for variable, new in zip(local.variables, new_velocity)],
            last_loss.assign(classifier.loss))

    window = args.communication_window
    with tf.compat.v1.device(device_setter):  # Distributed: the exchange with the ps
        # Start: every worker begins at the centre, θ ← θ̃.
        start_at_centre = tf.group(
            *[local_variable.assign(central_variable.read_value())
              for local_variable, central_variable
              in zip(local.variables, central.variables)],
            commit_log.record_pull(global_step))
        # The elastic exchange: E = α (θ − θ̃), then θ ← θ − E and θ̃ ← θ̃ + E.
        # The global step counts the window's minibatches.
        elastic = [alpha * (local_variable - central_variable.read_value())
                   for local_variable, central_variable
                   in zip(local.variables, central.variables)]
        # The global step counts the window's minibatches. It advances only
        # after the commit's staleness is counted, which reads it.
        counted = commit_log.record_commit(global_step)
        with tf.control_dependencies([counted]):
            advance = global_step.assign_add(window)
        exchange = tf.group(
            *[local_variable.assign_sub(difference)
              for local_variable, difference in zip(local.variables, elastic)],
            *[central_variable.assign_add(difference)
              for central_variable, difference in zip(central.variables, elastic)],
            advance)
        # Note the global step after the exchange, for the staleness figure.
        note_exchange = commit_log.record_pull(global_step)
        # Distributed: TensorBoard shows how far this copy is from the centre.
        distance = report.ElasticDistance(local.variables, central.variables)

    # --- Train: the chief initialises, the others wait for it ---
    # Distributed: the chief initialises or resumes, the others wait for its
    # signal (no 30 s poll); restarted tasks resume (guide/cluster.py).
    scaffold = cluster.resumable_scaffold(task, args, global_step)
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, last_loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 steps_per_run=window,  # Distributed: one window
                                 summary_dir=args.logdir if task.is_chief else None,
                                 # Distributed: it also writes the exchanges per
                                 # worker, their staleness, and the distance.
                                 summaries=[commit_log, distance])]
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
        # Only the note after each exchange goes through the hooks (stop at
        # step, progress), once per window, with an up-to-date global step;
        # local steps, which must not talk to the ps, bypass them.
        cluster.run_without_hooks(session, start_at_centre)  # Distributed:
        while not session.should_stop():
            for _ in range(window):
                batch_images, batch_labels = batches.next()
                cluster.run_without_hooks(
                    session, local_step, classifier.feed(batch_images, batch_labels))
            cluster.run_without_hooks(session, exchange)  # Distributed: ±E
            session.run(note_exchange)  # Distributed:
        cluster.training_finished(server, task)  # Distributed: chief waits for all
        wall_s = time.perf_counter() - start  # until the last worker stopped

        # --- Evaluate the centre and report (the chief only) ---
        if task.is_chief:
            report.save_local_copy(session, local.variables, args.logdir)
            report.evaluate_and_write(
                session, args, "aeamsgd", evaluation, dataset, global_step, wall_s,
                workers=task.num_workers, ps=task.num_ps,
                communication_window=window, rho=round(rho, 4),  # Distributed:
                alpha=round(alpha, 4), momentum=args.momentum,  # Distributed:
                **commit_log.results(session))  # Distributed:
    cluster.signal_done(server, task)  # Distributed: lets the ps exit


if __name__ == "__main__":
    cli.run_main(main)
