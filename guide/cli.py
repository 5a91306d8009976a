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
import os
import sys
import time


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
    if not values or not all(value > 0 for value in values):
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


def make_parser(doc, script_file, *, distributed=True, train_steps=1000,
                batch_size=100, learning_rate=0.2):
    """The parser with the common flags; an example adds its own on top.

    `doc` is the script's docstring: its first line becomes the description.
    """
    parser = Parser(
        prog=os.path.basename(script_file),
        description=doc.strip().splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False)
    parser.set_defaults(script_dir=os.path.dirname(os.path.abspath(script_file)))
    training = parser.add_argument_group("training")
    training.add_argument("--train_steps", type=int, default=train_steps,
                          help="global steps to train for")
    training.add_argument("--batch_size", type=int, default=batch_size,
                          help="examples per minibatch, per worker")
    training.add_argument("--learning_rate", type=float, default=learning_rate,
                          help="step size of the optimizer")
    training.add_argument("--seed", type=int, default=0,
                          help="seed for the data, the initial model and "
                               "the batch order")
    training.add_argument("--dataset", choices=("synthetic", "mnist"),
                          default="synthetic",
                          help="synthetic: generated from --seed, no files "
                               "needed; mnist: the real MNIST from --data_dir")
    training.add_argument("--data_dir", default=None,
                          help="folder holding the MNIST files (default: "
                               "the Keras cache, ~/.keras/datasets)")
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
    if distributed:
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
    for name in ("train_steps", "batch_size"):
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name} must be a positive integer, got "
                             f"{getattr(args, name)}")
    if not args.learning_rate > 0:
        raise UsageError(f"--learning_rate must be positive, got "
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
    return args


_teardown_needed = False


def run_main(main):
    """Runs `main()`, turns UsageError and Ctrl-C into clean exits, and ends
    the process: call it only as a script's last line."""
    prog = os.path.basename(sys.argv[0])
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
