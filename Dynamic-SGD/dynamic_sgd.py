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

# Distributed: the lock that makes each pull and commit whole, so that τ counts
# the commits in between exactly, lives on ps 0, found there by this name.
LOCK_NAME = "dynamic_sgd_lock"
LOCK_DEVICE = "/job:ps/task:0"


# Distributed: the workers' one lock, a mutex on ps 0.
def shared_lock():
    """The mutex that every worker shares: each worker's graph makes a
    handle to it, and ps 0 resolves every handle of this name to one mutex."""
    import tensorflow as tf
    with tf.compat.v1.device(LOCK_DEVICE):
        return tf.raw_ops.MutexV2(shared_name=LOCK_NAME, name=LOCK_NAME)


# Distributed: an op that takes the lock, runs build()'s ops, and gives it back.
def holding(lock, build):
    """An op that takes `lock` on ps 0, runs the ops `build()` makes, and
    gives the lock back. A worker holds it for one session run at most: a
    run that fails (its worker killed, a ps lost) gives it back too, and a
    restarted ps 0 starts with it free, so nothing has to put it back."""
    import tensorflow as tf
    with tf.compat.v1.device(LOCK_DEVICE):
        taken = tf.raw_ops.MutexLock(mutex=lock)
    # The exchange's reads and writes run only once the lock is taken.
    with tf.control_dependencies([taken]):
        done = build()
    # The lock is given back when its tensor dies: this op, once they are done,
    # is its last user (a run that fails drops it too).
    with tf.control_dependencies([done]), tf.compat.v1.device(LOCK_DEVICE):
        return tf.raw_ops.ConsumeMutexLock(mutex_lock=taken)


def main():
    # Distributed: add the cluster flags and the window T; train fifteen epochs on
    # the real data sets, as each commit is divided by its staleness + 1.
    parser = flags.make_parser(
        __doc__, __file__, train_steps=flags.ByDataset(synthetic=1000, real=9000),
        worker_optimizer="sgd")
    parser.add_argument("--communication_window", type=flags.positive_int, default=4,
                        help="local steps between two exchanges with the ps (T)")
    args = flags.parse(parser)
    # --epochs sets --train_steps: a global step is one minibatch (a commit of
    # T local steps adds T).
    flags.set_train_steps(args, examples_per_step=args.batch_size)
    logdir = logdirs.check(args.logdir or logdirs.new_run_folder(__file__))
    # Distributed: refuse a window longer than the whole run.
    scheme_flags.check_window(args.communication_window, args.train_steps)
    # Distributed: find this task's place in the cluster, from TF_CONFIG or the flags.
    task = tf_config.resolve_task(os.environ, args.ps_hosts, args.worker_hosts,
                                  args.job_name, args.task_index)
    # TensorFlow loads only now, after the flags are read: loading takes
    # seconds, and --help or a mistyped flag should answer at once.
    import tensorflow as tf

    # Distributed: the helpers that start, stop, place and restore the tasks.
    from guide.distributed import counters, evaluator, placement, protocol, recovery
    from guide.training import model, monitored, report

    tf.compat.v1.disable_eager_execution()  # the graph APIs below need it
    tf.get_logger().setLevel("ERROR")  # hide the v1 APIs' deprecation warnings
    # Distributed: an evaluator task only tests the chief's checkpoints.
    if task.job_name == "evaluator":
        return evaluator.run(
            logdir, train_steps=args.train_steps, hidden_layers=args.hidden_layers,
            dataset=data.load(args.dataset, args.data_dir, args.seed, args.validation))

    # --- The cluster: every task runs a server; a ps only serves ---
    # Distributed: run this task's server, through which the others reach it.
    cluster_spec = tf.train.ClusterSpec(task.cluster)
    server = tf.distribute.Server(
        cluster_spec, job_name=task.job_name, task_index=task.task_index,
        config=placement.session_config(task))
    # Distributed: a ps only serves, until every worker says it is done.
    if task.job_name == "ps":
        protocol.serve_until_workers_done(server, task)
        return

    # --- The data: each worker trains on its own shard ---
    dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    # Distributed: give each worker its own shard of the data and batch order.
    shard = data.shard(dataset.train_images, dataset.train_labels,
                       task.task_index, task.num_workers)
    batches = data.Batches(*shard, args.batch_size,
                           seed=args.seed + task.task_index)

    # --- The graph: the central copy and the clock on the ps ---
    # Distributed: size the ps's record for the most commits the run can make.
    window = args.communication_window
    max_commits = -(-args.train_steps // window) + task.num_workers
    # Distributed: put the variables on the ps and the ops on this worker.
    worker_device = f"/job:worker/task:{task.task_index}"
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=worker_device, cluster=cluster_spec)
    # Distributed: keep θ̃, the clock c, each c_i and the commit record on the ps.
    with tf.compat.v1.device(device_setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        central = model.MLP(args.seed, args.hidden_layers)
        evaluation = model.Classifier(mlp=central, summaries=False)
        clock = counters.counter("clock")
        pulled_at = counters.counter("pulled_at", [task.num_workers])
        commit_worker = counters.counter("commit_worker", [max_commits])
        commit_staleness = counters.counter("commit_staleness", [max_commits])
    # Distributed: keep θ, Δ and the last loss on this worker, out of checkpoints.
    with placement.local_variables(worker_device), \
            tf.compat.v1.variable_scope("local"):
        local = model.MLP(args.seed, args.hidden_layers)
        update = [
            tf.compat.v1.Variable(tf.zeros(variable.shape), trainable=False,
                                  name="update")
            for variable in local.variables]
        classifier = model.Classifier(mlp=local, summaries=False)
        last_loss = tf.compat.v1.Variable(0.0, trainable=False, name="last_loss")
        tf.compat.v1.summary.scalar("loss", last_loss)

        # Distributed: a local step θ ← θ + Δθ of --worker_optimizer (sgd: Δθ =
        # −η g), and Δ ← Δ + Δθ; no ps traffic.
        gradients = tf.gradients(classifier.loss, local.variables)
        applied, displacements = model.optimizer_step(
            args.worker_optimizer, args.learning_rate, gradients, local.variables)
        local_step = tf.group(
            applied,
            *[delta.assign_add(displacement)
              for delta, displacement in zip(update, displacements)],
            last_loss.assign(classifier.loss))

    # Distributed: pulls and commits take turns, each holding the workers' one
    # lock on ps 0; `me` is this worker's row in the ps's record.
    lock = shared_lock()
    me = task.task_index

    # Distributed: the commit, DynSGD's rule on the ps: θ̃ ← θ̃ + Δ / (τ + 1),
    # τ = c − c_i; it records the commit, then c ← c + 1 and global step += T.
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
        # The global step moves last, so a checkpoint at it holds the commit.
        with tf.control_dependencies([applied, recorded]):
            return global_step.assign_add(window).op

    # Distributed: pull θ ← θ̃, reset Δ ← 0, and note the clock, c_i ← c.
    def pull_ops():
        return tf.group(
            *[local_variable.assign(central_variable.read_value())
              for local_variable, central_variable
              in zip(local.variables, central.variables)],
            *[delta.assign(tf.zeros_like(delta)) for delta in update],
            tf.compat.v1.scatter_update(pulled_at, [me], [clock.read_value()]))

    # Distributed: this worker takes the lock, pulls or commits on the ps, and
    # gives the lock back: no other pull or commit runs in between.
    with tf.compat.v1.device(device_setter):
        commit = holding(lock, commit_ops)
        pull = holding(lock, pull_ops)

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: the chief initialises or restores the ps; the others wait for it.
    if task.is_chief:
        chief = recovery.ChiefStart(task, global_step, logdir,
                                    os.path.basename(__file__))
        scaffold = chief.scaffold
    else:
        scaffold = recovery.scaffold_waiting_for_chief(task)
    # Distributed: only the chief writes summaries; the hooks run once per
    # window, so they count T steps a run and read the last local loss.
    summary_dir = logdir if task.is_chief else None
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             report.ProgressHook(global_step, last_loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 steps_per_run=window,
                                 summary_dir=summary_dir,
                                 summaries=[counters.CommitRecord(
                                     clock, commit_worker, commit_staleness,
                                     task.num_workers, window)])]
    # Distributed: only the chief tracks the central copy's test accuracy.
    if task.is_chief:
        hooks.append(report.AccuracyCurveHook(
            logdir, args.eval_every, global_step, evaluation, dataset,
            examples_per_step=args.batch_size))
    # Distributed: run through this task's server; only the chief saves checkpoints.
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=task.is_chief,
            config=placement.session_config(task), scaffold=scaffold,
            checkpoint_dir=logdir, hooks=hooks,
            save_checkpoint_steps=args.save_checkpoint_steps) as session:
        # Distributed: the chief tells the other workers the model is ready.
        if task.is_chief:
            protocol.announce_chief_ready(server, task)
        start = time.perf_counter()
        # Distributed: start from θ̃; only the pull after each commit runs the hooks.
        monitored.run_without_hooks(session, pull)
        while not session.should_stop():
            # Distributed: T local steps on θ, with no exchange with the ps.
            for _ in range(window):
                batch_images, batch_labels = batches.next()
                monitored.run_without_hooks(
                    session, local_step, classifier.feed(batch_images, batch_labels))
            # Distributed: push Δ to the ps, then pull θ ← θ̃ for the next window.
            monitored.run_without_hooks(session, commit)
            session.run(pull)
        # Distributed: the other workers report they have stopped; the chief waits.
        if task.is_chief:
            protocol.wait_for_workers_to_finish(server, task)
        else:
            protocol.report_training_finished(server, task)
        wall_s = time.perf_counter() - start

        # --- Evaluate and report: the central copy (the chief only) ---
        # Distributed: only the chief evaluates θ̃, and keeps its θ and the
        # commit record.
        if task.is_chief:
            report.save_local_copy(session, local.variables, logdir)
            commits = counters.write_commit_record(
                session, logdir, clock, commit_worker, commit_staleness,
                pulled_at)
            report.evaluate_and_write(
                session, logdir, flags.run_settings(args), "dynamic-sgd",
                evaluation, dataset, global_step, wall_s, workers=task.num_workers,
                ps=task.num_ps, start_step=chief.start_step,
                communication_window=window,
                **counters.staleness_summary(commits, task.num_workers))
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
