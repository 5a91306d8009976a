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

from guide.distributed import scheme_flags, tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: the parser adds the classic cluster flags, and the window
    # T, the local steps between two exchanges with the ps.
    parser = flags.make_parser(__doc__, __file__)
    parser.add_argument("--communication_window", type=flags.positive_int, default=4,
                        help="local steps between two exchanges with the ps (T)")
    args = flags.parse(parser)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: a window longer than the run would overshoot --train_steps.
    scheme_flags.check_window(args.communication_window, args.train_steps)
    # Distributed: this task's place in the cluster, from TF_CONFIG if it is
    # set, else from the cluster flags.
    task = tf_config.resolve_task(os.environ, args.ps_hosts, args.worker_hosts,
                                  args.job_name, args.task_index)
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: guide.distributed holds what the cluster adds: `counters`
    # tallies kept on the ps, `evaluator` the evaluator task's loop,
    # `placement` where each task computes, `protocol` how the tasks start and
    # stop, `recovery` restarts.
    from guide.distributed import counters, evaluator, placement, protocol, recovery
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
    # Distributed: a ps only serves the variables placed on it; unlike
    # server.join(), this returns once every worker has said it is done.
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

    # --- The graph: the central copy and the clock on the ps ---
    # Distributed: the window T, and the most commits the run can make, the
    # size of the ps's record of commits: every worker commits once per
    # window and finishes the window it is in.
    window = args.communication_window
    max_commits = -(-args.train_steps // window) + task.num_workers
    # Distributed: replica_device_setter puts every variable made under it on
    # a ps (round robin over them) and every op on this worker, whose device
    # also holds the local copy.
    worker_device = f"/job:worker/task:{task.task_index}"
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=worker_device, cluster=cluster_spec)
    # Distributed: the global state, on the ps: the global step, the central
    # copy θ̃ (initialised once, by the chief), a classifier on θ̃ for the
    # evaluation, the clock c that counts the commits applied so far, each
    # worker's c_i (c at its last pull), and the record of every commit for the
    # report: who, and how stale.
    with tf.compat.v1.device(device_setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        central = model.MLP(args.seed)
        evaluation = model.Classifier(mlp=central, summaries=False)
        clock = counters.counter("clock")
        pulled_at = counters.counter("pulled_at", [task.num_workers])
        commit_worker = counters.counter("commit_worker", [max_commits])
        commit_staleness = counters.counter("commit_staleness", [max_commits])
    # Distributed: this worker's own state, local variables that the chief
    # neither initialises nor checkpoints: the local copy θ, overwritten by
    # every pull, its update Δ = θ − θ_pulled = −η Σ g over the window, and
    # the last local step's loss, which the progress line and summaries read.
    with placement.local_variables(worker_device), \
            tf.compat.v1.variable_scope("local"):
        local = model.MLP(args.seed)
        update = [
            tf.compat.v1.Variable(tf.zeros(variable.shape), trainable=False,
                                  name="update")
            for variable in local.variables]
        classifier = model.Classifier(mlp=local, summaries=False)
        last_loss = tf.compat.v1.Variable(0.0, trainable=False, name="last_loss")
        tf.compat.v1.summary.scalar("loss", last_loss)

        # Distributed: one local step, on this worker only, with no traffic
        # to the ps: θ ← θ − η g, and Δ ← Δ − η g for the next commit.
        gradients = tf.gradients(classifier.loss, local.variables)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        local_step = tf.group(
            optimizer.apply_gradients(zip(gradients, local.variables)),
            *[delta.assign_sub(args.learning_rate * gradient)
              for delta, gradient in zip(update, gradients)],
            last_loss.assign(classifier.loss))

    # Distributed: pulls and commits hold a lock on ps 0, so that the clock
    # a commit reads is exactly the number of commits before it; `me` is this
    # worker's row in the ps's records.
    lock = protocol.PsLock("dynamic_sgd_lock")
    me = task.task_index

    # Distributed: the commit, DynSGD's update rule on the ps: its staleness
    # τ = c − c_i, with c_i the clock at this worker's last pull, then
    # θ̃ ← θ̃ + Δ / (τ + 1), so a stale update counts for less; it records the
    # commit, advances the clock c ← c + 1, and advances the global step by
    # T, so that it counts minibatches.
    def commit_ops():
        now = clock.read_value()
        staleness = now - pulled_at[me]
        with tf.control_dependencies([staleness]):  # read before advancing
            scale = 1.0 / tf.cast(staleness + 1, tf.float32)
            applied = tf.group(
                *[central_variable.assign_add(delta * scale)
                  for central_variable, delta in zip(central.variables, update)])
            recorded = tf.group(
                tf.compat.v1.scatter_update(commit_worker, [now], [me]),
                tf.compat.v1.scatter_update(commit_staleness, [now], [staleness]),
                clock.assign_add(1))
        # The global step moves last: a checkpoint taken at the new step
        # holds this commit whole.
        with tf.control_dependencies([applied, recorded]):
            return global_step.assign_add(window).op

    # Distributed: the pull starts the next window from the central copy,
    # θ ← θ̃, Δ ← 0, and notes the clock, c_i ← c, from which the next
    # commit's staleness is counted.
    def pull_ops():
        return tf.group(
            *[local_variable.assign(central_variable.read_value())
              for local_variable, central_variable
              in zip(local.variables, central.variables)],
            *[delta.assign(tf.zeros_like(delta)) for delta in update],
            tf.compat.v1.scatter_update(pulled_at, [me], [clock.read_value()]))

    # Distributed: the exchange with the ps, each half inside the lock; its
    # ops run on the ps, beside the central copy and the clock.
    with tf.compat.v1.device(device_setter):
        commit = lock.around(commit_ops)
        pull = lock.around(pull_ops)

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: the chief initialises the variables on the ps and puts
    # the lock's token in place, or resumes them after a restart; the others
    # wait for its signal, with no 30 s poll (guide/distributed/recovery.py).
    resume = recovery.Resume(task, global_step, logdir, os.path.basename(__file__),
                             ps_init_op=lock.initialize)
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             # Distributed: the hooks run once per window, with the pull, so
             # the progress line reads the last local step's loss from its
             # variable, and counts a window's T steps per run.
             report.ProgressHook(global_step, last_loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 steps_per_run=window,
                                 # Distributed: only the chief writes summaries,
                                 # with the commits per worker and their
                                 # staleness, from the ps's record.
                                 summary_dir=logdir if task.is_chief else None,
                                 summaries=[counters.CommitRecord(
                                     clock, commit_worker, commit_staleness,
                                     task.num_workers, window)])]
    # Distributed: only the chief tracks the central copy's test accuracy,
    # with --eval_every.
    if task.is_chief:
        hooks.append(report.AccuracyCurveHook(
            logdir, args.eval_every, global_step, evaluation, dataset,
            examples_per_step=args.batch_size))
    with tf.compat.v1.train.MonitoredTrainingSession(
            # Distributed: the session runs through this task's server; only
            # the chief initialises, restores and writes checkpoints.
            master=server.target, is_chief=task.is_chief,
            config=placement.session_config(task), scaffold=resume.scaffold,
            checkpoint_dir=logdir, hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        # Distributed: the chief tells the other workers the model is ready.
        if task.is_chief:
            protocol.announce_chief_ready(server, task)
        start = time.perf_counter()
        # Distributed: the first pull starts this worker from θ̃. Only the
        # pull at the end of each window goes through the hooks (stop at
        # step, progress): it follows the commit, so the global step they
        # read is up to date. The hooks read it from the ps, so the local
        # steps, which must not talk to the ps, bypass them, and so do the
        # commit and this first pull.
        monitored.run_without_hooks(session, pull)
        while not session.should_stop():
            # Distributed: T local steps on θ, each adding its update −η g to
            # Δ, with no exchange with the ps.
            for _ in range(window):
                batch_images, batch_labels = batches.next()
                monitored.run_without_hooks(
                    session, local_step, classifier.feed(batch_images, batch_labels))
            # Distributed: push Δ to the ps, then pull θ ← θ̃ for the next
            # window.
            monitored.run_without_hooks(session, commit)
            session.run(pull)
        # Distributed: the other workers say they have stopped, and the chief
        # waits for them, so its time and its result cover the whole run.
        if task.is_chief:
            protocol.wait_for_workers_to_finish(server, task)
        else:
            protocol.report_training_finished(server, task)
        wall_s = time.perf_counter() - start

        # --- Evaluate and report: the central copy (the chief only) ---
        # Distributed: only the chief evaluates, the central copy θ̃; it also
        # keeps its local copy θ, which checkpoints do not hold, and the
        # ps's record of commits, and its result names the cluster, the
        # window T, and the commits per worker and their staleness.
        if task.is_chief:
            report.save_local_copy(session, local.variables, logdir)
            commits = counters.write_commit_record(
                session, logdir, clock, commit_worker, commit_staleness,
                pulled_at)
            settings = dict(
                dataset=args.dataset, train_steps=args.train_steps,
                batch_size=args.batch_size, learning_rate=args.learning_rate,
                seed=args.seed, validation=args.validation)
            report.evaluate_and_write(
                session, logdir, settings, "dynamic-sgd", evaluation, dataset,
                global_step, wall_s, workers=task.num_workers, ps=task.num_ps,
                start_step=resume.start_step, communication_window=window,
                **counters.staleness_summary(commits, task.num_workers))
    # Distributed: tells the ps this worker is done, so that it can exit.
    protocol.signal_done(server, task)


if __name__ == "__main__":
    sys.exit(flags.run_main(main))
