"""DOWNPOUR: asynchronous SGD with local steps and Adagrad on both sides.

Each worker pulls the central parameters from the ps, takes
--communication_window local steps with its own Adagrad optimizer while
summing its gradients, then pushes the sum, which the ps applies with Adagrad.

Topology: 1 ps + 2 workers by default (any number of either); asynchronous.

Run:  bash run.sh                          # or: bash run.sh --workers 4
By hand, one shell per task (TF_CONFIG works too, see README.md):
      python downpour.py --ps_hosts=127.0.0.1:12222 \\
          --worker_hosts=127.0.0.1:12223,127.0.0.1:12224 --job_name=ps --task_index=0
      python downpour.py ...same hosts... --job_name=worker --task_index=0
      python downpour.py ...same hosts... --job_name=worker --task_index=1
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from guide.distributed import scheme_flags, tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: the parser adds the classic cluster flags, and DOWNPOUR's
    # own: the rate η of the Adagrad steps on both sides, smaller than SGD's
    # 0.2 because an Adagrad step moves each parameter by at most η
    # (|g| / √G ≤ 1; the measurements are in README.md), and the window T.
    parser = flags.make_parser(__doc__, __file__, learning_rate=0.05)
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

    # --- The graph: the central copy on the ps, a local copy on this worker ---
    # Distributed: replica_device_setter puts every variable made under it on
    # a ps (round robin over them) and every op on this worker, whose device
    # also holds the local copy.
    worker_device = f"/job:worker/task:{task.task_index}"
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=worker_device, cluster=cluster_spec)
    # Distributed: the global state, on the ps: the global step, the central
    # copy θ̃ (initialised once, by the chief), the log of the commits per
    # worker and their staleness, and a classifier on θ̃ for the evaluation.
    with tf.compat.v1.device(device_setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        central = model.MLP(args.seed)
        commit_log = counters.CommitLog(task)
        evaluation = model.Classifier(mlp=central, summaries=False)
    # Distributed: this worker's own state, local variables that the chief
    # neither initialises nor checkpoints: the local copy θ, overwritten by
    # every pull, the sum Σ g of the window's gradients, and the last local
    # step's loss, which the progress line and summaries read.
    with placement.local_variables(worker_device):
        local = model.MLP(args.seed)
        gradient_sum = [
            tf.compat.v1.Variable(tf.zeros(variable.shape), trainable=False,
                                  name="gradient_sum")
            for variable in local.variables]
        classifier = model.Classifier(mlp=local, summaries=False)
        last_loss = tf.compat.v1.Variable(0.0, trainable=False, name="last_loss")
        tf.compat.v1.summary.scalar("loss", last_loss)

        # Distributed: one local step, on this worker only, with no traffic
        # to the ps: an Adagrad step on θ (its accumulators are local
        # variables too), and Σ g ← Σ g + g for the next commit.
        gradients = tf.gradients(classifier.loss, local.variables)
        local_optimizer = tf.compat.v1.train.AdagradOptimizer(args.learning_rate)
        local_step = tf.group(
            local_optimizer.apply_gradients(zip(gradients, local.variables)),
            *[total.assign_add(gradient)
              for total, gradient in zip(gradient_sum, gradients)],
            last_loss.assign(classifier.loss))

    # Distributed: the exchange with the ps, once every T local steps; its
    # ops run on the ps, beside the central copy.
    window = args.communication_window
    with tf.compat.v1.device(device_setter):
        # Distributed: the commit, DOWNPOUR's update rule on the ps: its own
        # Adagrad, whose accumulators G̃ are global variables on the ps,
        # applies G̃ ← G̃ + (Σ g)², θ̃ ← θ̃ − η Σ g / √G̃; locking applies each
        # commit whole, never interleaved with another worker's.
        central_optimizer = tf.compat.v1.train.AdagradOptimizer(
            args.learning_rate, use_locking=True)
        applied = central_optimizer.apply_gradients(
            [(total.read_value(), central_variable) for central_variable, total
             in zip(central.variables, gradient_sum)])
        # Distributed: the global step counts the window's T minibatches. It
        # advances only once the commit is applied and its staleness counted
        # (which reads it), so whoever reads the new step, a checkpoint
        # included, finds the commit in the central copy.
        counted = commit_log.record_commit(global_step)
        with tf.control_dependencies([applied, counted]):
            commit = global_step.assign_add(window).op
        # Distributed: the pull starts the next window from the central copy,
        # θ ← θ̃, Σ g ← 0, and notes the global step, to measure the next
        # commit's staleness.
        pull = tf.group(
            *[local_variable.assign(central_variable.read_value())
              for local_variable, central_variable
              in zip(local.variables, central.variables)],
            *[total.assign(tf.zeros_like(total)) for total in gradient_sum],
            commit_log.record_pull(global_step))

    # --- Train: the chief initialises (or resumes), the others wait for it ---
    # Distributed: the chief initialises the variables on the ps, or resumes
    # them after a restart; the others wait for its signal, with no 30 s
    # poll (guide/distributed/recovery.py).
    resume = recovery.Resume(task, global_step, logdir, os.path.basename(__file__))
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps),
             # Distributed: the hooks run once per window, with the pull, so
             # the progress line reads the last local step's loss from its
             # variable, and counts a window's T steps per run.
             report.ProgressHook(global_step, last_loss, args.log_every,
                                 examples_per_step=args.batch_size,
                                 steps_per_run=window,
                                 # Distributed: only the chief writes summaries,
                                 # with the commits per worker and their
                                 # staleness.
                                 summary_dir=logdir if task.is_chief else None,
                                 summaries=[commit_log])]
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
            # Distributed: T local steps on θ, each summing its gradient into
            # Σ g, with no exchange with the ps.
            for _ in range(window):
                batch_images, batch_labels = batches.next()
                monitored.run_without_hooks(
                    session, local_step, classifier.feed(batch_images, batch_labels))
            # Distributed: push Σ g to the ps, then pull θ ← θ̃ for the next
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
        # Distributed: only the chief evaluates, the central copy θ̃, and its
        # result names the cluster, the window T, and the commits per worker
        # and their staleness.
        if task.is_chief:
            settings = dict(
                dataset=args.dataset, train_steps=args.train_steps,
                batch_size=args.batch_size, learning_rate=args.learning_rate,
                seed=args.seed, validation=args.validation)
            report.evaluate_and_write(
                session, logdir, settings, "downpour", evaluation, dataset,
                global_step, wall_s, workers=task.num_workers, ps=task.num_ps,
                start_step=resume.start_step, communication_window=window,
                **commit_log.results(session))
    # Distributed: tells the ps this worker is done, so that it can exit.
    protocol.signal_done(server, task)


if __name__ == "__main__":
    sys.exit(flags.run_main(main))
