"""`python -m simulator SCHEME --workers W ...`: the command line. The
example's own flags (--train_steps, --batch_size, --learning_rate,
--communication_window, ...) come from its script's parser, with its
defaults; the simulator adds the cluster's."""

import argparse
import json
import sys

from guide.examples import ALLREDUCE
from guide.training import flags
from simulator import platform
from simulator.schemes import SCHEMES, script_parser

DEFAULT_BANDWIDTH = "10Gbps"
DEFAULT_LATENCY_MS = 0.05
# The example's flags that say nothing to a simulation: where a run writes,
# how it logs, the cluster's addresses, and --exact (not simulated).
NOT_SIMULATED = {"help", "logdir", "log_every", "save_checkpoint_steps", "eval_every",
                 "ps_hosts", "worker_hosts", "job_name", "task_index", "exact"}


def stragglers(text):
    """An argparse type: none, exp or lognormal:SIGMA."""
    kind, _, sigma = text.partition(":")
    try:
        valid = (kind in ("none", "exp") and not sigma) or (
            kind == "lognormal" and float(sigma) > 0)
    except ValueError:
        valid = False
    if not valid:
        raise argparse.ArgumentTypeError(
            f"must be none, exp or lognormal:SIGMA with SIGMA > 0, got {text!r}")
    return text


def number_where(accepted, wanted):
    """An argparse type: a number `accepted(value)` takes, else an error
    saying it `wanted` (something not a number counts as -1)."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not accepted(value):
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
        return value
    return parse


non_negative_float = number_where(lambda value: 0 <= value < float("inf"),
                                  "0 or a positive number")
fraction = number_where(lambda value: 0 < value <= 1, "in (0, 1]")


def make_parser(scheme=None):
    """The simulator's parser; with `scheme`, also that example's own flags."""
    parser = flags.Parser(
        prog="python -m simulator", formatter_class=flags.HelpFormatter,
        allow_abbrev=False,
        description="Plays out a scheme of the collection on a simulated cluster "
                    "of W workers and S ps (SimGrid), with its real update rule "
                    "on real data: staleness, accuracy and time together.")
    parser.add_argument("scheme", metavar="SCHEME", choices=list(SCHEMES),
                        help="the example to simulate: " + ", ".join(SCHEMES))
    cluster = parser.add_argument_group("the simulated cluster")
    cluster.add_argument("--workers", type=flags.positive_int, default=2,
                         help="worker tasks W")
    cluster.add_argument("--ps", type=flags.positive_int, default=1,
                         help="ps tasks S (none for Multi-Worker-Mirrored-Strategy)")
    cluster.add_argument("--bandwidth", default=None,
                         help="every task's link: bits per second (10Gbps, "
                              "100Mbps, 100mbit) or bytes (10GBps) (default: "
                              f"{DEFAULT_BANDWIDTH}; with --machine this, "
                              "loopback unless given)")
    cluster.add_argument("--latency", type=non_negative_float,
                         default=DEFAULT_LATENCY_MS,
                         help="one-way latency between two tasks, in milliseconds")
    timing = cluster.add_mutually_exclusive_group()
    timing.add_argument("--step_ms", type=flags.positive_float,
                        help="a minibatch's computation on a worker, in "
                             "milliseconds (default: this machine's, for the "
                             "model and batch, from its stored measurements)")
    timing.add_argument("--machine", metavar="this|FILE",
                        help="this: this machine, its cores shared by every "
                             "task; FILE: a JSON machine file describing a "
                             "cluster (docs/simulator.md)")
    cluster.add_argument("--stragglers", type=stragglers, default="none",
                         help="how a minibatch's time varies around its mean: "
                              "none, exp (exponential), lognormal:SIGMA")
    output = parser.add_argument_group("the simulation")
    output.add_argument("--no_learning", action="store_true",
                        help="timing and staleness only, no parameters: for "
                             "1,024 workers")
    output.add_argument("--target", type=fraction, default=0.97,
                        help="the test accuracy seconds_to_target is for")
    output.add_argument("--eval_every", type=int, default=0,
                        help="measure test accuracy every this many global "
                             "steps (0: twenty times in the run)")
    output.add_argument("--json", action="store_true",
                        help="print one JSON object instead of a summary")
    output.add_argument("--result", metavar="PATH",
                        help="also write that JSON object to PATH (the "
                             "benchmark tool's simulated runs read it)")
    if scheme:
        example = script_parser(scheme)
        training = parser.add_argument_group(
            f"training (the example's own flags, with {scheme}'s defaults)")
        for action in example._actions:
            if action.dest in NOT_SIMULATED:
                continue
            options = {"dest": action.dest, "default": action.default,
                       "help": action.help}
            if action.nargs == 0:
                options["action"] = "store_true"
            else:
                options.update(type=action.type, choices=action.choices,
                               metavar=action.metavar)
            training.add_argument(*action.option_strings, **options)
        # What flags.parse fills in once the data set is known.
        parser.set_defaults(defaults_later=example.get_default("defaults_later"),
                            log_every=0, save_checkpoint_steps=0)
    return parser


def parse(argv):
    """The resolved flags; UsageError for bad input."""
    scheme = next((token for token in argv if not token.startswith("-")), None)
    parser = make_parser(scheme if scheme in SCHEMES else None)
    if scheme not in SCHEMES:
        parser.parse_args(argv)  # the usage error, or --help
        raise flags.UsageError(f"unknown scheme {scheme!r}; choose one of "
                               f"{', '.join(SCHEMES)}")
    args = flags.parse(parser, argv)
    if args.eval_every < 0:
        raise flags.UsageError(f"--eval_every must be 0 or more, got {args.eval_every}")
    scheme = SCHEMES[args.scheme]
    if scheme.name != args.scheme:
        raise flags.UsageError(f"unknown scheme {args.scheme!r}")
    flags.set_train_steps(args, scheme.examples_per_step(args, args.workers))
    scheme.check(args, args.workers)
    return args


def cluster_of(args, tasks):
    """The simulated cluster the flags describe."""
    rate = platform.bytes_per_second(args.bandwidth) if args.bandwidth else None
    latency_s = args.latency / 2000  # a message crosses two links
    if args.machine == "this":
        return platform.this_machine(rate, latency_s)
    rate = rate or platform.bytes_per_second(DEFAULT_BANDWIDTH)
    if args.machine:
        return platform.read_machine_file(args.machine, rate, latency_s)
    if args.step_ms:
        step_s, source = args.step_ms / 1000, "--step_ms"
        # --step_ms is for the run's own model and batch.
        reference = platform.step_seconds(1.0, flags.parameter_count(
            args.hidden_layers), args.batch_size)
        step_s /= reference
    else:
        step_s, source = platform.measured_step_seconds()
    return platform.flag_cluster(tasks, rate, latency_s, step_s, source)


def summary(results):
    """The human-readable lines."""
    lines = [f"{results['scheme']}: {results['workers']} workers, "
             f"{results['ps']} ps, {results['global_step']:,} global steps in "
             f"{results['simulated_s']:,.2f} simulated s "
             f"({results['examples_per_s']:,.0f} examples/s)"]
    if results["staleness_mean"] is not None:
        lines.append(f"staleness in commits: mean {results['staleness_mean']}, "
                     f"p95 {results['staleness_p95']}, max {results['staleness_max']}")
    if results.get("test_accuracy") is not None:
        reached = results["seconds_to_target"]
        lines.append(f"test accuracy {results['test_accuracy']:.4f}; "
                     f"{results['target']:.0%} " + (
                         f"after {reached:,.2f} simulated s" if reached is not None
                         else "not reached"))
    lines.append(f"busiest link: {results['busiest_link_bytes'] / 1e6:,.1f} MB "
                 f"one way; "
                 f"simulated in {results['wall_s']:,.1f} s")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    from guide.training import data
    from simulator.simulation import Simulation

    scheme = SCHEMES[args.scheme]
    tasks = args.workers + (0 if scheme.kind == ALLREDUCE else args.ps)
    cluster = cluster_of(args, tasks)
    dataset = None
    if not args.no_learning:
        dataset = data.load(args.dataset, args.data_dir, args.seed, args.validation)
    results = Simulation(scheme, args, workers=args.workers, ps=args.ps,
                         cluster=cluster, stragglers=args.stragglers,
                         learning=not args.no_learning, target=args.target,
                         eval_every=args.eval_every, dataset=dataset,
                         progress=True).run()
    results["settings"] = {
        "dataset": args.dataset, "train_steps": args.train_steps,
        "batch_size": args.batch_size, "learning_rate": args.learning_rate,
        "communication_window": scheme.window(args),
        "hidden_layers": args.hidden_layers, "seed": args.seed,
        "bandwidth_bytes_per_s": cluster.machines[0].bytes_per_s,
        "latency_ms": args.latency, "stragglers": args.stragglers,
        "timing": cluster.source,
        # A run of the loop's CPU outside its session.run, per run.
        "loop_ms": round(cluster.loop_s * 1000, 4),
        "hooked_loop_ms": round(cluster.hooked_loop_s * 1000, 4)}
    if args.result:
        with open(args.result, "w") as stream:
            json.dump(results, stream)
    print(json.dumps(results) if args.json else summary(results), flush=True)
    return 0
