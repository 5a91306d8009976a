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
# The examples in each training set, which --epochs counts in (--validation
# holds data.VALIDATION_SIZE of them out).
TRAINING_SET_SIZES = {"synthetic": 20_000, "mnist": 60_000, "fashion_mnist": 60_000}
# The widths of the model's hidden layers by default (also model.py's, which
# loads TensorFlow): 784 -> 128 ReLU -> 10.
HIDDEN_LAYERS = (128,)
# What a worker may take its local steps with (--worker_optimizer), and
# Keras's Adam rate, the default --learning_rate with adam.
WORKER_OPTIMIZERS = ("sgd", "adagrad", "adam")
ADAM_LEARNING_RATE = 0.001
# The widest model --hidden_layers may build: 400 MB of float32 a copy, of
# which a windowed worker holds several.
MAX_PARAMETERS = 100_000_000


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


def positive_ints(text):
    """An argparse type: comma-separated positive integers, e.g. 1000,2000."""
    try:
        values = [int(item) for item in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated positive integers, got {text!r}")
    return values


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
                batch_size=100, learning_rate=0.2, worker_optimizer=None):
    """The parser with the common flags, described by `doc`'s first line;
    an example adds its own. `train_steps`, `batch_size` and `learning_rate`
    may each be a `ByDataset` pair, which `parse` resolves. With
    `worker_optimizer` (one of WORKER_OPTIMIZERS), the parser has
    --worker_optimizer with that default, and --learning_rate defaults to
    ADAM_LEARNING_RATE with adam."""
    parser = Parser(
        prog=os.path.basename(script_file),
        description=doc.strip().splitlines()[0],
        formatter_class=HelpFormatter,
        allow_abbrev=False)
    # None marks a flag as not given, for `parse` to fill in from these.
    later = {"train_steps": train_steps, "batch_size": batch_size,
             "learning_rate": learning_rate}
    training = parser.add_argument_group("training")
    for name, type_, default, help_text in (
            ("train_steps", int, train_steps, "global steps to train for"),
            ("epochs", positive_float, None,
             "train for this many passes over the training set, counted in "
             "examples over all workers, so that each worker sees its shard "
             "about this many times: sets --train_steps to match"),
            ("batch_size", int, batch_size, "examples per minibatch, per worker"),
            ("learning_rate", float, learning_rate, "step size of the optimizer")):
        if name in later:
            help_text += " (default: " + (
                f"{default.synthetic} on synthetic data, {default.real} on "
                f"mnist and fashion_mnist" if isinstance(default, ByDataset)
                else f"{default}")
            if name == "learning_rate" and worker_optimizer:
                help_text += f"; {ADAM_LEARNING_RATE} with --worker_optimizer adam"
            help_text += ")"
            default = None
        training.add_argument(f"--{name}", type=type_, default=default,
                              help=help_text)
    parser.set_defaults(defaults_later=later)
    training.add_argument("--hidden_layers", type=positive_ints,
                          default=list(HIDDEN_LAYERS),
                          help="the widths of the model's hidden ReLU layers, "
                               "comma-separated: 1000,2000,1000 is the "
                               "784-1000-2000-1000-10 model of Hermans' "
                               "thesis (docs/running.md) (default: 128)")
    if worker_optimizer:
        training.add_argument("--worker_optimizer", choices=WORKER_OPTIMIZERS,
                              default=worker_optimizer,
                              help="what each worker takes its local steps "
                                   "with; its state (Adagrad's accumulators, "
                                   "Adam's moments) is the worker's own")
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
                               "(0: about ten lines from each worker)")
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
    defaults that depend on other flags; --logdir stays None unless given.
    With --epochs, --train_steps stays None until `set_train_steps`."""
    args = parser.parse_args(argv)
    if args.epochs is not None and args.train_steps is not None:
        raise UsageError("--epochs and --train_steps both set how long to "
                         "train; give one of them")
    for name, default in args.defaults_later.items():
        if getattr(args, name) is not None:
            continue  # given
        if name == "train_steps" and args.epochs is not None:
            continue  # set_train_steps sets it
        if name == "learning_rate" and getattr(args, "worker_optimizer",
                                               None) == "adam":
            default = ADAM_LEARNING_RATE
        if isinstance(default, ByDataset):
            default = default.synthetic if args.dataset == "synthetic" else default.real
        setattr(args, name, default)
    for name in ("train_steps", "batch_size"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            raise UsageError(f"--{name} must be a positive integer, got "
                             f"{getattr(args, name)}")
    if not 0 < args.learning_rate < math.inf:
        raise UsageError(f"--learning_rate must be a positive number, got "
                         f"{args.learning_rate}")
    for name in ("log_every", "eval_every", "save_checkpoint_steps"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name} must be 0 or more, got "
                             f"{getattr(args, name)}")
    parameters = parameter_count(args.hidden_layers)
    if parameters > MAX_PARAMETERS:
        widths = ",".join(str(width) for width in args.hidden_layers)
        raise UsageError(f"--hidden_layers {widths} makes "
                         f"a model of {parameters:,} parameters, more than "
                         f"{MAX_PARAMETERS:,}; use narrower or fewer layers")
    # Whether --log_every is this module's to choose (set_train_steps).
    args.auto_log_every = args.log_every == 0
    if args.train_steps is not None:
        _fill_step_defaults(args)
    return args


def set_train_steps(args, examples_per_step):
    """With --epochs, sets --train_steps to the global steps, of
    `examples_per_step` training examples each (what one global step trains
    on in the calling script), that add up to --epochs times the training
    set (rounded up), and fills in the defaults that follow from it. Without
    --epochs, changes nothing. Returns --train_steps."""
    if args.epochs is not None:
        examples = round(args.epochs * training_set_size(args.dataset,
                                                         args.validation))
        args.train_steps = max(1, -(-examples // examples_per_step))
        _fill_step_defaults(args)
    if getattr(args, "auto_log_every", False):
        # About ten progress lines from each worker, the chief's included,
        # however many workers share the global steps.
        sharing = workers_sharing_steps(args, examples_per_step)
        args.log_every = max(1, args.train_steps // (10 * sharing))
    return args.train_steps


def workers_sharing_steps(args, examples_per_step):
    """How many workers' local steps make up the global steps: all of them
    where a global step is one worker's minibatch (the asynchronous
    schemes), else 1 (each worker takes part in every global step). From
    TF_CONFIG, else the cluster flags; 1 for any task but a worker."""
    if examples_per_step != args.batch_size:
        return 1
    try:
        config = json.loads(os.environ["TF_CONFIG"])
        job, workers = config["task"]["type"], len(config["cluster"]["worker"])
    except (KeyError, TypeError, ValueError):
        job = getattr(args, "job_name", "")
        workers = len([host for host in getattr(args, "worker_hosts", "").split(",")
                       if host])
    return max(1, workers) if job == "worker" else 1


def training_set_size(dataset, validation):
    """The training examples of `dataset` (one of DATASETS), without the
    ones --validation holds out."""
    from guide.training.data import VALIDATION_SIZE  # data imports this module

    return TRAINING_SET_SIZES[dataset] - (VALIDATION_SIZE if validation else 0)


def parameter_count(hidden_layers):
    """The parameters of the model with these hidden layers' widths."""
    from guide.training.data import IMAGE_SIZE, NUM_CLASSES

    widths = [IMAGE_SIZE, *hidden_layers, NUM_CLASSES]
    return sum((inputs + 1) * outputs for inputs, outputs in zip(widths, widths[1:]))


def _fill_step_defaults(args):
    if args.log_every == 0:
        args.log_every = max(1, args.train_steps // 10)
    if args.save_checkpoint_steps == 0:
        args.save_checkpoint_steps = max(1, args.train_steps // 20)


# The flags that say what a run trained: the settings its result records.
RUN_SETTINGS = ("dataset", "train_steps", "batch_size", "learning_rate", "seed",
                "validation", "hidden_layers", "worker_optimizer", "epochs")


def run_settings(args):
    """{name: value} of the RUN_SETTINGS flags in `args`, as `parse` and
    `set_train_steps` resolved them: what `report.write_result` records of
    the run. A flag the script does not have (--worker_optimizer), or
    --epochs not given, is left out."""
    return {name: getattr(args, name) for name in RUN_SETTINGS
            if getattr(args, name, None) is not None}


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
