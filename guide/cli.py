"""Command-line flags shared by every example, and the exit-code contract.

Every example takes the same common flags (`--train_steps`, `--batch_size`,
`--learning_rate`, `--seed`, `--dataset`, `--data_dir`, `--logdir`,
`--log_every`, `--save_checkpoint_steps`, `--eval_every`), and the
distributed ones also take TensorFlow's classic cluster flags (`--ps_hosts
--worker_hosts --job_name --task_index`).

Bad input is reported as one line on stderr with exit code 2: raise
`UsageError` anywhere under `run_main` and it is turned into exactly that.
"""

import argparse
import math
import os
import signal
import sys
import threading
import time

from guide import logdirs

DATASETS = ("synthetic", "mnist", "fashion_mnist")


class UsageError(Exception):
    """Input the user can fix: reported as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line instead of usage + error."""

    def error(self, message):
        raise UsageError(f"{message}; run with --help to see the flags")


def positive_int(text):
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def positive_floats(text):
    """An argparse type: comma-separated positive numbers, e.g. 0.1,0.05."""
    try:
        values = [float(item) for item in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(0 < value < math.inf for value in values):
        raise argparse.ArgumentTypeError(
            f"must be comma-separated positive numbers, got {text!r}")
    return values


def replicas_to_aggregate(args, num_workers):
    """--replicas_to_aggregate, every worker by default; UsageError if it
    asks for more than there are workers, for a step could never complete."""
    replicas = args.replicas_to_aggregate or num_workers
    if replicas > num_workers:
        raise UsageError(f"--replicas_to_aggregate {replicas} is more than the "
                         f"{num_workers} workers; use at most {num_workers}")
    return replicas


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, unless it has none or its help gives it."""

    def _get_help_string(self, action):
        if action.default is None or "(default: " in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def _by_dataset(value):
    """A default given as one value, or as (synthetic, real data sets)."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def _default_help(help_text, value):
    synthetic, real = _by_dataset(value)
    if synthetic == real:
        return help_text
    return (f"{help_text} (default: {synthetic} on synthetic data, {real} on "
            f"mnist and fashion_mnist)")


def make_parser(doc, script_file, *, cluster_flags=True, train_steps=(1000, 6000),
                batch_size=100, learning_rate=0.2):
    """The parser with the common flags; an example adds its own on top.

    `doc` is the script's docstring: its first line becomes the description.
    `train_steps`, `batch_size` and `learning_rate` may each be one default,
    or a pair: the default on the synthetic data, and on the real data sets,
    which need more steps to reach their best accuracy.
    """
    parser = Parser(
        prog=os.path.basename(script_file),
        description=doc.strip().splitlines()[0],
        formatter_class=HelpFormatter,
        allow_abbrev=False)
    parser.set_defaults(
        script_dir=os.path.dirname(os.path.abspath(script_file)),
        defaults_by_dataset={"train_steps": _by_dataset(train_steps),
                             "batch_size": _by_dataset(batch_size),
                             "learning_rate": _by_dataset(learning_rate)})
    training = parser.add_argument_group("training")
    training.add_argument("--train_steps", type=int,
                          default=_by_dataset(train_steps)[0],
                          help=_default_help("global steps to train for",
                                             train_steps))
    training.add_argument("--batch_size", type=int,
                          default=_by_dataset(batch_size)[0],
                          help=_default_help("examples per minibatch, per worker",
                                             batch_size))
    training.add_argument("--learning_rate", type=float,
                          default=_by_dataset(learning_rate)[0],
                          help=_default_help("step size of the optimizer",
                                             learning_rate))
    training.add_argument("--seed", type=int, default=0,
                          help="seed for the data, the initial model and "
                               "the batch order")
    training.add_argument("--dataset", choices=DATASETS, default="synthetic",
                          help="synthetic: generated from --seed, no files "
                               "needed; mnist, fashion_mnist: the real data "
                               "sets, from --data_dir, else the Keras cache, "
                               "else downloaded by Keras")
    training.add_argument("--data_dir", default=None,
                          help="folder holding the four IDX .gz files (or, "
                               "for MNIST, mnist.npz) (default: the Keras "
                               "cache, ~/.keras/datasets)")
    training.add_argument("--validation", action="store_true",
                          help="hold out the last 5000 training images and "
                               "report accuracy on them instead of the test "
                               "set: for choosing hyper-parameters")
    training.add_argument("--logdir", default=None,
                          help="where the chief writes TensorBoard summaries, "
                               "checkpoints and result.json (default: a new "
                               "folder under the example's runs/)")
    training.add_argument("--log_every", type=int, default=0,
                          help="print progress every this many local steps "
                               "(0: about ten lines per run)")
    training.add_argument("--save_checkpoint_steps", type=int, default=0,
                          help="the chief writes a checkpoint every this "
                               "many global steps, which a restarted task "
                               "resumes from (0: every 5%% of "
                               "--train_steps)")
    training.add_argument("--eval_every", type=int, default=0,
                          help="the chief measures test accuracy every this "
                               "many global steps and writes the curve to "
                               "accuracy_curve.json (0: only at the end)")
    if cluster_flags:
        cluster = parser.add_argument_group(
            "cluster (ignored when TF_CONFIG is set)")
        cluster.add_argument("--ps_hosts", default="",
                             help="comma-separated host:port of the "
                                  "parameter servers")
        cluster.add_argument("--worker_hosts", default="",
                             help="comma-separated host:port of the workers")
        cluster.add_argument("--job_name", default="",
                             help="this task's job: ps or worker")
        cluster.add_argument("--task_index", type=int, default=0,
                             help="this task's index within its job")
    return parser


def parse(parser, argv=None):
    """Parses and checks the common flags; raises UsageError on bad input."""
    args = parser.parse_args(argv)
    if args.dataset != "synthetic":
        # The real data sets' defaults, for the flags the user left alone.
        given = {arg.split("=", 1)[0] for arg in
                 (sys.argv[1:] if argv is None else argv)}
        for name, (_, real) in args.defaults_by_dataset.items():
            if f"--{name}" not in given:
                setattr(args, name, real)
    for name in ("train_steps", "batch_size"):
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name} must be a positive integer, got "
                             f"{getattr(args, name)}")
    if not 0 < args.learning_rate < math.inf:
        raise UsageError(f"--learning_rate must be a positive number, got "
                         f"{args.learning_rate}")
    for name in ("log_every", "eval_every", "save_checkpoint_steps"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name} must be 0 or more, got "
                             f"{getattr(args, name)}")
    if args.log_every == 0:
        args.log_every = max(1, args.train_steps // 10)
    if args.save_checkpoint_steps == 0:
        args.save_checkpoint_steps = max(1, args.train_steps // 20)
    # The global step this run started from: more than 0 when it resumed
    # from a checkpoint (`cluster.resumable_scaffold` sets it), so that the
    # RESULT counts only the steps this run made.
    args.start_step = 0
    if args.logdir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        args.logdir = os.path.join(args.script_dir, "runs",
                                   f"{stamp}-{os.getpid()}")
    logdirs.check(args.logdir)
    return args


def check_window(args):
    """UsageError if one --communication_window is longer than the whole run,
    which would then overshoot --train_steps."""
    if args.communication_window > args.train_steps:
        raise UsageError(f"--communication_window {args.communication_window} "
                         f"is longer than the run (--train_steps "
                         f"{args.train_steps}); use at most {args.train_steps}")


_teardown_needed = False


def run_main(main):
    """Runs `main()`, turns UsageError and Ctrl-C into clean exits, and ends
    the process: call it only as a script's last line."""
    prog = os.path.basename(sys.argv[0])
    _exit_on_ctrl_c(prog)
    try:
        code = main()
    except UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(130)
    if _teardown_needed:
        sys.exit(code or 0)
    _exit_without_teardown(code or 0)


def _exit_on_ctrl_c(prog):
    """Ctrl-C ends this task in every state, even inside a TensorFlow call.

    Python runs its SIGINT handler only between bytecodes, and a blocking
    `session.run` (a task waiting for the chief or for its workers) does not
    return to Python. The C-level handler still writes the signal to a wakeup
    pipe at once, so a thread blocked reading that pipe says so and exits.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return  # started with Ctrl-C ignored (`nohup`, a background job)
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)

    def exit_when_interrupted():
        while os.read(read_end, 1) != bytes([signal.SIGINT]):
            pass  # another signal with a Python handler: not ours to act on
        print(f"{prog}: interrupted", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(130)

    # The main thread must not handle it too, so it ignores it in Python.
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    threading.Thread(target=exit_when_interrupted, daemon=True).start()


def exit_with_teardown():
    """Asks `run_main` for Python's usual, slower exit: a server that others
    may still be closing sessions on gives their last requests that time."""
    global _teardown_needed
    _teardown_needed = True


def _exit_without_teardown(code):
    """Exits at once, once this task's files and output are written.

    With TensorFlow loaded, the interpreter's own teardown takes most of a
    second per process and writes nothing a task needs, so a finished task
    flushes what is buffered (TensorBoard events, stdout, stderr) and skips
    it: the launcher's job ends that much sooner. A parameter server does
    not (`exit_with_teardown`): its workers may still be closing sessions on
    it, and would log errors if it vanished at once.
    """
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is not None:
        tensorflow.compat.v1.summary.FileWriterCache.clear()  # flushes, closes
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
