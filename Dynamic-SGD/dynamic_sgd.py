"""Dynamic-SGD (DynSGD): asynchronous SGD that scales each commit by its staleness.

Each worker pulls the central parameters, takes --communication_window (T)
local SGD steps and commits its update Δ = θ − θ_pulled. The ps counts commits
with a clock c; a commit made τ commits after its worker's pull is applied as
θ̃ ← θ̃ + Δ / (τ + 1), so stale updates count for less.

Topology: 1 ps + 2 workers by default (any number of either); asynchronous.

Run:  bash run.sh                          # or: bash run.sh --workers 4
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python dynamic_sgd.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223,127.0.0.1:12224 --job_name=ps --task_index=0
      python dynamic_sgd.py ...same hosts... --job_name=worker --task_index=0
      python dynamic_sgd.py ...same hosts... --job_name=worker --task_index=1
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide import cli, config, data


def main():
    parser = cli.make_parser(__doc__, __file__)
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

    # --- The graph: the central copy and the clock on the ps ---
    window = args.communication_window
    # Every worker commits once per window and finishes the window it is in.
    max_commits = -(-args.train_steps // window) + task.num_workers
    worker_device = f"/job:worker/task:{task.task_index}"  # Distributed:
    device_setter = tf.compat.v1.train.replica_device_setter(  # Distributed:
        worker_device=worker_device, cluster=cluster_spec)
    with tf.compat.v1.device(device_setter):  # Distributed: global state, on the ps
        global_step = tf.compat.v1.train.get_or_create_global_step()
        central = model.MLP(args.seed)  # θ̃, initialised once, by the chief
        evaluation = model.Classifier(mlp=central, summaries=False)

        clock = counters.counter("clock")  # c: commits applied so far
        pulled_at = counters.counter("pulled_at", [task.num_workers])  # c at pulls
        # The record of every commit, for the report: who, and how stale.
        commit_worker = counters.counter("commit_worker", [max_commits])
        commit_staleness = counters.counter("commit_staleness", [max_commits])
    with cluster.local_variables(worker_device), \
            tf.compat.v1.variable_scope("local"):  # Distributed: this worker's own
        local = model.MLP(args.seed)  # θ, overwritten by every pull
        update = [  # Δ = θ − θ_pulled = −η Σ g over the window
            tf.compat.v1.Variable(tf.zeros(variable.shape), trainable=False,
                                  name="update")
            for variable in local.variables]
        classifier = model.Classifier(mlp=local, summaries=False)
        last_loss = tf.compat.v1.Variable(0.0, trainable=False, name="last_loss")
        tf.compat.v1.summary.scalar("loss", last_loss)

        # One local step, on this worker only: θ ← θ − η g, and Δ ← Δ − η g.
        gradients = tf.gradients(classifier.loss, local.variables)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        local_step = tf.group(
            optimizer.apply_gradients(zip(gradients, local.variables)),
            *[delta.assign_sub(args.learning_rate * gradient)
              for delta, gradient in zip(update, gradients)],
            last_loss.assign(classifier.loss))

    # Distributed: pulls and commits hold a lock on ps 0, so that the clock
    # a commit reads is exactly the number of commits before it.
    lock = cluster.PsLock("dynamic_sgd_lock")
    me = task.task_index

    def commit_ops():
        # τ = c − c_at_last_pull; θ̃ ← θ̃ + Δ / (τ + 1); c ← c + 1. The global
        # step counts the window's minibatches.
        now = clock.read_value()
        staleness = now - pulled_at[me]
        with tf.control_dependencies([staleness]):  # read before advancing
            scale = 1.0 / tf.cast(staleness + 1, tf.float32)
            return tf.group(
                *[central_variable.assign_add(delta * scale)
                  for central_variable, delta in zip(central.variables, update)],
                tf.compat.v1.scatter_update(commit_worker, [now], [me]),
                tf.compat.v1.scatter_update(commit_staleness, [now], [staleness]),
                clock.assign_add(1), global_step.assign_add(window))

    def pull_ops():
        # θ ← θ̃, Δ ← 0, and note the clock: c_at_last_pull ← c.
        return tf.group(
            *[local_variable.assign(central_variable.read_value())
              for local_variable, central_variable
              in zip(local.variables, central.variables)],
            *[delta.assign(tf.zeros_like(delta)) for delta in update],
            tf.compat.v1.scatter_update(pulled_at, [me], [clock.read_value()]))

    with tf.compat.v1.device(device_setter):  # Distributed: the exchange with the ps
        commit = lock.around(commit_ops)
        pull = lock.around(pull_ops)

    # --- Train: the chief initialises, the others wait for it ---
    # Distributed: the chief initialises or resumes, the others wait for its
    # signal (no 30 s poll); restarted tasks resume (guide/cluster.py).
    scaffold = cluster.resumable_scaffold(task, args, global_step,
                                         ps_init_op=lock.initialize)
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, last_loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 steps_per_run=window,  # Distributed: one window
                                 summary_dir=args.logdir if task.is_chief else None,
                                 # Distributed: it also writes the commits per
                                 # worker and their staleness.
                                 summaries=[counters.CommitRecord(
                                     clock, commit_worker, commit_staleness,
                                     task.num_workers, window)])]
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
            cluster.run_without_hooks(session, commit)  # Distributed: push Δ
            session.run(pull)  # Distributed: θ ← θ̃
        cluster.training_finished(server, task)  # Distributed: chief waits for all
        wall_s = time.perf_counter() - start  # until the last worker stopped

        # --- Evaluate the central copy and report (the chief only) ---
        if task.is_chief:
            report.save_local_copy(session, local.variables, args.logdir)
            commits = counters.write_commit_record(  # Distributed:
                session, args.logdir, clock, commit_worker, commit_staleness,
                pulled_at)
            report.evaluate_and_write(
                session, args, "dynamic-sgd", evaluation, dataset, global_step,
                wall_s, workers=task.num_workers, ps=task.num_ps,
                communication_window=window,  # Distributed:
                **counters.staleness_summary(commits, task.num_workers))  # Distributed:
    cluster.signal_done(server, task)  # Distributed: lets the ps exit


if __name__ == "__main__":
    cli.run_main(main)
