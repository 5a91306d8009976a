"""The benchmark's plan: its flags, the schemes it compares, and what each
run is asked to do so that every scheme does the same work."""

import argparse
import math
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# The examples, and how each scheme talks to the ps, which decides its flags
# and how its communication rounds are counted.
from guide import examples  # noqa: E402
from guide.examples import ALLREDUCE, SYNC, SYNC_WINDOW, WINDOW  # noqa: E402
from guide.training.flags import UsageError  # noqa: E402

DESCRIPTION = ("Benchmark: every scheme on the same work, side by side with "
               "the baseline.")
BASELINE = examples.BASELINE.name
# Every run that reports an accuracy curve: all but the Supervisor variant.
SCHEMES = [example for example in examples.EXAMPLES if example.hooks]
BY_NAME = {scheme.name: scheme for scheme in SCHEMES}
QUICK_SCHEMES = [BASELINE, "Hogwild", "DOWNPOUR", "Synchronous-SGD"]
SWEEP_SCHEMES = ["Hogwild", "DOWNPOUR", "Synchronous-SGD"]
QUICK_SWEEP_SCHEMES = ["Hogwild"]
# Run again with a larger global batch: how much of a step is the exchange.
BATCH_STUDY_SCHEMES = ("Hogwild", "DOWNPOUR", "Synchronous-SGD")
EVALUATIONS_PER_RUN = 10


class Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default unless it has none, or its help says it."""

    def _get_help_string(self, action):
        if action.default in (None, False):
            return action.help
        return super()._get_help_string(action)


def make_parser():
    parser = argparse.ArgumentParser(description=DESCRIPTION, formatter_class=Help)
    parser.add_argument("--quick", action="store_true",
                        help="four schemes, 1 and 2 workers, 20,000 examples")
    parser.add_argument("--examples", type=int, default=None,
                        help="training examples per run (default: 100,000; "
                             "20,000 with --quick)")
    parser.add_argument("--batch_size", type=int, default=100,
                        help="examples per update (the global batch)")
    parser.add_argument("--large_batch", type=int, default=None,
                        help="also run the baseline, Hogwild, DOWNPOUR and "
                             "Synchronous-SGD with this global batch, to see "
                             "how throughput depends on it (default: 1000; "
                             "0 with --quick; 0: skip)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs of each configuration in the main table, "
                             "whose medians are reported (default: 3; 1 "
                             "with --quick)")
    parser.add_argument("--window", type=int, default=8,
                        help="communication window T of the windowed schemes")
    parser.add_argument("--workers", default=None,
                        help="worker counts to sweep, e.g. 1,2,4,8 "
                             "(default: 1,2,4; 1,2 with --quick)")
    parser.add_argument("--schemes", default=None,
                        help="comma-separated example names to run (default: "
                             "all; four with --quick)")
    parser.add_argument("--target_accuracy", type=float, default=None,
                        help="accuracy whose time to reach is compared "
                             "(default: the baseline's final accuracy "
                             "minus 0.02)")
    parser.add_argument("--dataset", choices=("synthetic", "mnist"),
                        default="synthetic")
    parser.add_argument("--data_dir", default=None,
                        help="folder of the MNIST files, with --dataset mnist")
    parser.add_argument("--results", default=None,
                        help="output folder (default: benchmarks/results for "
                             "the full default run, benchmarks/results-quick "
                             "with --quick, else benchmarks/results-custom)")
    parser.add_argument("--run_timeout", type=int, default=600,
                        help="seconds after which one run is stopped")
    return parser


def parse_args(argv=None):
    """The flags as given: nothing filled in, nothing checked."""
    return make_parser().parse_args(argv)


def settings(argv=None):
    """The flags, with the defaults --quick changes filled in and every
    value checked; bad input exits 2 with one argparse error line."""
    args = parse_args(argv)
    try:
        return complete(args, argv)
    except UsageError as error:
        make_parser().error(str(error))


def choose(names):
    """The schemes named, the baseline first whether named or not."""
    unknown = [name for name in names if name not in BY_NAME]
    if unknown:
        raise UsageError(f"unknown scheme {unknown[0]!r}; choose from "
                         f"{', '.join(BY_NAME)}")
    return [BY_NAME[BASELINE]] + [BY_NAME[name] for name in names
                                  if name != BASELINE]


def complete(args, argv):
    """Fills in what parse_args leaves open; UsageError on bad input."""
    try:
        args.sweep_workers = [int(count) for count in
                              (args.workers or ("1,2" if args.quick else "1,2,4"))
                              .split(",")]
    except ValueError:
        raise UsageError(f"--workers must be comma-separated numbers, got "
                         f"{args.workers!r}") from None
    args.schemes = choose(args.schemes.split(",") if args.schemes
                          else QUICK_SCHEMES if args.quick
                          else [scheme.name for scheme in SCHEMES])
    args.sweep_schemes = QUICK_SWEEP_SCHEMES if args.quick else SWEEP_SCHEMES
    args.examples = args.examples or (20_000 if args.quick else 100_000)
    if args.large_batch is None:
        args.large_batch = 0 if args.quick else 1000
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    for name in ("examples", "batch_size", "window", "repeats"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be a positive integer")
    if min(args.sweep_workers) < 1:
        raise UsageError("--workers must all be 1 or more")
    if args.dataset == "mnist" and not args.data_dir:
        raise UsageError("--dataset mnist needs --data_dir, the folder of the "
                         "MNIST files")
    if args.data_dir:
        # Every run.sh changes into its example's folder first.
        args.data_dir = os.path.abspath(os.path.expanduser(args.data_dir))
        if not os.path.isdir(args.data_dir):
            raise UsageError(f"--data_dir {args.data_dir} is not a folder; give "
                             f"the folder that holds the MNIST files")
    if any(scheme.kind in (SYNC, SYNC_WINDOW, ALLREDUCE) for scheme in args.schemes):
        # The synchronous schemes split the global batch among the workers.
        counts = {2} | set(args.sweep_workers)
        for batch in filter(None, (args.batch_size, args.large_batch)):
            uneven = sorted(count for count in counts if batch % count)
            if uneven:
                multiple = math.lcm(*counts)
                raise UsageError(
                    f"a global batch of {batch} does not split evenly among "
                    f"{uneven[0]} synchronous workers; use a multiple of "
                    f"{multiple}, such as "
                    f"{multiple * math.ceil(batch / multiple)}, for "
                    f"--batch_size and --large_batch")
    # Only the full default run replaces the committed results.
    custom = argv_given(argv) - {"--run_timeout", "--results"}
    args.results = os.path.abspath(args.results or os.path.join(
        REPO, "benchmarks", "results-quick" if args.quick
        else "results-custom" if custom else "results"))
    return args


def argv_given(argv):
    """The options named on the command line."""
    return {part.split("=", 1)[0] for part in
            (sys.argv[1:] if argv is None else argv) if part.startswith("--")}


# --- What one run is asked to do -------------------------------------------

def default_workers(scheme):
    """The workers (towers, in one process) a scheme runs with in the main
    table: what its run.sh starts."""
    return scheme.towers or scheme.workers


def main_ps(scheme):
    """The ps tasks a scheme runs with but in the sweep: one, or none for an
    allreduce."""
    return 0 if scheme.kind == ALLREDUCE else 1


def run_flags(scheme, workers, args, global_batch):
    """The flags that give `scheme` with `workers` workers the same work as
    the baseline: args.examples examples, updates of `global_batch`."""
    batch, flags = global_batch, []
    if scheme.kind in (SYNC, SYNC_WINDOW, ALLREDUCE):
        batch = max(1, global_batch // workers)  # the global batch, split
    if scheme.kind in (WINDOW, SYNC_WINDOW):
        flags += ["--communication_window", str(args.window)]
    # What one global step stands for, in examples.
    per_step = {SYNC: batch * workers, ALLREDUCE: batch * workers,
                SYNC_WINDOW: batch * workers * args.window}.get(scheme.kind, batch)
    steps = max(1, round(args.examples / per_step))
    flags += ["--train_steps", str(steps), "--batch_size", str(batch),
              "--eval_every", str(max(1, steps // EVALUATIONS_PER_RUN)),
              "--log_every", str(steps), "--dataset", args.dataset]
    if args.data_dir:
        flags += ["--data_dir", args.data_dir]
    if scheme.name == "Synchronous-SGD-different-learning-rates":
        # Rates around the common 0.2: the fastest and slowest 1.5 : 0.5.
        rates = [0.2 * (1.5 - i / max(1, workers - 1)) for i in range(workers)]
        flags += ["--learning_rates", ",".join(f"{rate:.3g}" for rate in rates)]
    if scheme.towers:
        flags += ["--towers", str(workers)]
    return flags


def command_for(scheme, workers, ps, args, logdir, global_batch):
    command = scheme.command(sys.executable)
    command += run_flags(scheme, workers, args, global_batch)
    command += ["--logdir", logdir]
    if scheme.cluster:
        command += ["--workers", str(workers), "--ps", str(ps),
                    "--timeout", str(args.run_timeout)]
    return command


# --- Every run, in order -----------------------------------------------------

def plan(args):
    """Every run, the baseline first: dicts of scheme, workers, ps, global
    batch, and the tables it belongs to (main, sweep, batch_study)."""
    runs = []
    for scheme in args.schemes:
        workers = default_workers(scheme)
        runs.append({"scheme": scheme, "workers": workers, "ps": main_ps(scheme),
                     "batch": args.batch_size, "main": True,
                     "sweep": scheme.name in args.sweep_schemes
                     and workers in args.sweep_workers})
    for scheme in args.schemes:
        if scheme.name not in args.sweep_schemes:
            continue
        # An allreduce has no ps to sweep over.
        for ps in (1, 2) if main_ps(scheme) else (0,):
            for workers in args.sweep_workers:
                if (ps, workers) != (main_ps(scheme), 2):  # in the main table
                    runs.append({"scheme": scheme, "workers": workers, "ps": ps,
                                 "batch": args.batch_size, "sweep": True})
    if args.large_batch:
        for scheme in args.schemes:
            if scheme.name in (BASELINE,) + BATCH_STUDY_SCHEMES:
                runs.append({"scheme": scheme, "workers": default_workers(scheme),
                             "ps": main_ps(scheme), "batch": args.large_batch,
                             "batch_study": True})
    return runs

