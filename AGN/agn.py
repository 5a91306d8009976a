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

from guide.distributed import scheme_flags, tf_config
from guide.training import data, flags, logdirs


def main():
    # Distributed: add the cluster flags, T and the ps's rate η̃; train twice as
    # long on the real data sets, as the centre moves by the workers' mean step.
    parser = flags.make_parser(
        __doc__, __file__, train_steps=flags.ByDataset(synthetic=1000, real=12000),
        worker_optimizer="sgd")
    parser.add_argument("--communication_window", type=flags.positive_int, default=4,
                        help="local steps between two exchanges with the ps (T)")
    parser.add_argument("--central_learning_rate", type=flags.positive_float,
                        help="rate η̃ of the commits a = (η̃ / η) (θ − θ̃), "
                             "−η̃ Σ g with sgd (default: T × learning_rate / workers, "
                             "README.md)")
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
    # Distributed: W commits a / T make the centre move by the workers' mean step.
    central_rate = args.central_learning_rate or (
        args.communication_window * args.learning_rate / task.num_workers)
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

    # --- The graph: the central copy on the ps, a local copy on this worker ---
    # Distributed: put the variables on the ps and the ops on this worker.
    worker_device = f"/job:worker/task:{task.task_index}"
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=worker_device, cluster=cluster_spec)
    # Distributed: keep the global step, θ̃ and the commit log on the ps.
    with tf.compat.v1.device(device_setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        central = model.MLP(args.seed, args.hidden_layers)
        commit_log = counters.CommitLog(task)
        evaluation = model.Classifier(mlp=central, summaries=False)
    # Distributed: keep θ, a and the last loss on this worker, out of checkpoints.
    with placement.local_variables(worker_device):
        local = model.MLP(args.seed, args.hidden_layers)
        accumulated = [
            tf.compat.v1.Variable(tf.zeros(variable.shape), trainable=False,
                                  name="accumulated_update")
            for variable in local.variables]
        classifier = model.Classifier(mlp=local, summaries=False)
        last_loss = tf.compat.v1.Variable(0.0, trainable=False, name="last_loss")
        tf.compat.v1.summary.scalar("loss", last_loss)

        # Distributed: a local step θ ← θ + Δθ of --worker_optimizer (sgd: Δθ =
        # −η g), and a ← a + (η̃ / η) Δθ; no ps traffic.
        gradients = tf.gradients(classifier.loss, local.variables)
        applied, displacements = model.optimizer_step(
            args.worker_optimizer, args.learning_rate, gradients, local.variables)
        local_step = tf.group(
            applied,
            *[update.assign_add(central_rate / args.learning_rate * displacement)
              for update, displacement in zip(accumulated, displacements)],
            last_loss.assign(classifier.loss))

    # Distributed: build the exchange with the ps, run once every T local steps.
    window = args.communication_window
    with tf.compat.v1.device(device_setter):
        # Distributed: the commit, AGN's update rule on the ps: θ̃ ← θ̃ + a / T.
        applied = tf.group(
            *[central_variable.assign_add(update / window)
              for central_variable, update in zip(central.variables, accumulated)])
        # Distributed: advance the global step by T once the commit is applied.
        counted = commit_log.record_commit(global_step, applied)
        with tf.control_dependencies([applied, counted]):
            commit = global_step.assign_add(window).op
        # Distributed: pull θ ← θ̃, reset a ← 0, and note the step for staleness.
        pull = tf.group(
            *[local_variable.assign(central_variable.read_value())
              for local_variable, central_variable
              in zip(local.variables, central.variables)],
            *[update.assign(tf.zeros_like(update)) for update in accumulated],
            commit_log.record_pull(global_step))

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
                                 summaries=[commit_log])]
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
            # Distributed: push a / T to the ps, then pull θ ← θ̃ for the next window.
            monitored.run_without_hooks(session, commit)
            session.run(pull)
        # Distributed: the other workers report they have stopped; the chief waits.
        if task.is_chief:
            protocol.wait_for_workers_to_finish(server, task)
        else:
            protocol.report_training_finished(server, task)
        wall_s = time.perf_counter() - start

        # --- Evaluate and report: the central copy (the chief only) ---
        # Distributed: only the chief evaluates θ̃, and reports T and the commits.
        if task.is_chief:
            report.evaluate_and_write(
                session, logdir, flags.run_settings(args), "agn", evaluation,
                dataset, global_step, wall_s, workers=task.num_workers,
                ps=task.num_ps, start_step=chief.start_step,
                communication_window=window,
                central_learning_rate=round(central_rate, 6),
                **commit_log.results(session))
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
