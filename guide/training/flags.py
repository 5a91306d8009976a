"""The command-line flags every example shares, and the exit-code contract:
a `UsageError` raised under `run_main` is one line on stderr, exit code 2; a
`Failure`, one line and its own exit code."""

import argparse
import atexit
import contextlib
import json
import math
import os
import signal
import sys
import threading
from typing import NamedTuple

DATASETS = ("synthetic", "mnist", "fashion_mnist")
# The widths of the model's hidden layers by default (also model.py's, which
# loads TensorFlow): 784 -> 128 ReLU -> 10.
HIDDEN_LAYERS = (128,)


class UsageError(Exception):
    """Input the user can fix: reported as one line, exit code 2."""


class Failure(Exception):
    """A run that cannot go on, for a reason one line says: reported as that
    line, with the subclass's exit code."""

    exit_code = 1


# The exit code of a failure that a restart may mend (EX_TEMPFAIL), by the
# launcher's --max_restarts or a TFJob's restartPolicy.
EXIT_TRY_AGAIN = 75


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


def positive_float(text):
    """An argparse type: a positive, finite number."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
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


class ByDataset(NamedTuple):
    """A default on the synthetic data, and on the real ones (mnist,
    fashion_mnist), which need more steps to reach their best accuracy."""

    synthetic: float
    real: float


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, unless it has none or its help gives it."""

    def _get_help_string(self, action):
        if action.default is None or "(default: " in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


TRAIN_STEPS = ByDataset(synthetic=1000, real=6000)


def make_parser(doc, script_file, *, cluster_flags=True, train_steps=TRAIN_STEPS,
                batch_size=100, learning_rate=0.2):
    """The parser with the common flags, described by `doc`'s first line;
    an example adds its own. `train_steps`, `batch_size` and `learning_rate`
    may each be a `ByDataset` pair, which `parse` resolves."""
    parser = Parser(
        prog=os.path.basename(script_file),
        description=doc.strip().splitlines()[0],
        formatter_class=HelpFormatter,
        allow_abbrev=False)
    by_dataset = {}
    training = parser.add_argument_group("training")
    for name, type_, default, help_text in (
            ("train_steps", int, train_steps, "global steps to train for"),
            ("batch_size", int, batch_size, "examples per minibatch, per worker"),
            ("learning_rate", float, learning_rate, "step size of the optimizer")):
        if isinstance(default, ByDataset):
            # None marks the flag as not given, for `parse` to fill in.
            by_dataset[name] = default
            help_text += (f" (default: {default.synthetic} on synthetic data, "
                          f"{default.real} on mnist and fashion_mnist)")
            default = None
        training.add_argument(f"--{name}", type=type_, default=default,
                              help=help_text)
    parser.set_defaults(defaults_by_dataset=by_dataset)
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
    """Parses and checks `argv` (default: the command line), filling in the
    defaults that depend on other flags; --logdir stays None unless given."""
    args = parser.parse_args(argv)
    for name, default in args.defaults_by_dataset.items():
        if getattr(args, name) is None:
            setattr(args, name, default.synthetic if args.dataset == "synthetic"
                    else default.real)
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
    return args


# The flags that say what a run trained: the settings its result records.
RUN_SETTINGS = ("dataset", "train_steps", "batch_size", "learning_rate", "seed",
                "validation")


def run_settings(args):
    """{name: value} of the RUN_SETTINGS flags in `args`, as `parse` returned
    them: what `report.write_result` records of the run."""
    return {name: getattr(args, name) for name in RUN_SETTINGS}


def run_main(main):
    """Runs `main()` and ends the process with its exit code: main's own
    (None is 0), 2 after one line for a UsageError, a Failure's own after
    its line, 130 on Ctrl-C, which ends the process at once even inside a
    blocking TensorFlow call. (The scripts' `sys.exit(run_main(main))`
    reads as Python's usual ending, which this one only shortens.)"""
    prog = os.path.basename(sys.argv[0])
    _exit_on_ctrl_c(prog)
    try:
        code = main() or 0
    except UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        code = 2
    except Failure as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        code = error.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        code = 130
    # A ps keeps Python's own ending: while it tears down, it still answers
    # the workers' last calls (closing their sessions' graphs on it).
    if not _is_a_ps():
        _end_now(code)
    return code


def _is_a_ps():
    """Whether this process is a ps: its TF_CONFIG task, or --job_name."""
    try:
        task_type = json.loads(os.environ["TF_CONFIG"])["task"]["type"]
    except (KeyError, TypeError, ValueError):
        task_type = None
    argv = sys.argv[1:]
    return task_type == "ps" or "--job_name=ps" in argv or any(
        (flag, value) == ("--job_name", "ps") for flag, value in zip(argv, argv[1:]))


def _end_now(code):
    """Ends the process without the interpreter's teardown, which takes a
    process that has loaded TensorFlow seconds (3 s of a 10-step Hogwild
    worker's life, measured). Before that, the exit handlers run,
    TensorFlow's summary files are closed and the output is flushed; what
    this skips is what the scripts do not leave: file objects still open
    (their buffers would be lost) and threads that are not daemons (they
    would not be waited for). A worker has told each ps it is done by now."""
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is not None:
        tensorflow.compat.v1.summary.FileWriterCache.clear()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _exit_on_ctrl_c(prog):
    """Python runs its SIGINT handler only between bytecodes, which a
    blocking `session.run` never returns to; but the C-level handler writes
    the signal to a wakeup pipe at once, so a thread reading that pipe ends
    the process (os._exit: the main thread is stuck)."""
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
