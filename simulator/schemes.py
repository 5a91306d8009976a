"""The schemes the simulator plays out: each example's kind of exchange
(guide/examples.py), its rule (rules.py) with the settings its script
derives from the flags, and the examples a global step trains on."""

import dataclasses
import importlib.util
import os
import sys
import types

from guide.examples import (
    ALLREDUCE,
    BY_FOLDER,
    EVERY_STEP,
    REPO,
    SYNC,
    SYNC_WINDOW,
    WINDOW,
)
from guide.training import flags
from simulator import rules


def _central_rate(args, default):
    return args.central_learning_rate or default


def _alpha(args, workers):
    """(A)EASGD's α = η ρ, ρ by default 0.9 / (W η): α = 0.9 / W."""
    rho = args.rho or 0.9 / (workers * args.learning_rate)
    return args.learning_rate * rho


@dataclasses.dataclass(frozen=True)
class Scheme:
    name: str
    # The rule, from the resolved flags and the number of workers, as the
    # script computes its settings after parsing them.
    make_rule: object
    # Dynamic-SGD: each pull and commit holds the workers' one lock on ps 0.
    locked: bool = False
    # (A)EASGD: a worker keeps its own copy; the exchange reads θ̃ and
    # sends the elastic difference, with no pull after it.
    keeps_local_copy: bool = False

    @property
    def kind(self):
        return BY_FOLDER[self.name].kind

    @property
    def script_path(self):
        return os.path.join(REPO, BY_FOLDER[self.name].script_path)

    def window(self, args):
        """Local steps per exchange: T, or 1 for a scheme without a window."""
        return args.communication_window if self.kind in (WINDOW, SYNC_WINDOW) else 1

    def replicas(self, args, workers):
        """R, the gradients (or commits) a synchronous update averages."""
        if self.kind in (SYNC, SYNC_WINDOW):
            return args.replicas_to_aggregate or workers
        return workers if self.kind == ALLREDUCE else 1

    def examples_per_step(self, args, workers):
        """A global step's examples, as the script counts its steps."""
        if self.kind in (EVERY_STEP, WINDOW):
            return args.batch_size
        return self.replicas(args, workers) * self.window(args) * args.batch_size

    def rule(self, args, workers):
        return self.make_rule(args, workers)

    def check(self, args, workers):
        """The script's own checks of its flags against the cluster;
        UsageError as the script words it."""
        from guide.distributed import scheme_flags

        # SAGN's steps are rounds of a window each: a window longer than
        # the run is fine there, and its script does not check it.
        if self.kind == WINDOW:
            scheme_flags.check_window(args.communication_window, args.train_steps)
        if self.kind in (SYNC, SYNC_WINDOW):
            scheme_flags.replicas_to_aggregate(args.replicas_to_aggregate, workers)
        if self.name in ("AEASGD", "AEAMSGD") and not 0 < _alpha(args, workers) < 1:
            raise flags.UsageError(
                f"--rho {args.rho} makes α = learning_rate × rho = "
                f"{_alpha(args, workers):g}; choose rho so that 0 < α < 1")
        if self.name == "AEAMSGD" and not 0 <= args.momentum < 1:
            raise flags.UsageError(f"--momentum must be in [0, 1), got {args.momentum}")


SCHEMES = {scheme.name: scheme for scheme in [
    Scheme("Hogwild", lambda args, workers: rules.Hogwild(args.learning_rate)),
    Scheme("DOWNPOUR", lambda args, workers: rules.Downpour(
        args.learning_rate, args.worker_optimizer)),
    Scheme("DOWNPOUR-Easy", lambda args, workers: rules.DownpourEasy(
        args.learning_rate, args.worker_optimizer)),
    # η̃ = T η / W by default: W commits a / T move θ̃ by the workers' mean step.
    Scheme("AGN", lambda args, workers: rules.Agn(
        args.learning_rate, args.communication_window,
        _central_rate(args, args.communication_window * args.learning_rate / workers),
        args.worker_optimizer)),
    Scheme("Dynamic-SGD", lambda args, workers: rules.DynamicSgd(
        args.learning_rate, args.worker_optimizer), locked=True),
    Scheme("AEASGD", lambda args, workers: rules.Aeasgd(
        args.learning_rate, _alpha(args, workers),
        worker_optimizer=args.worker_optimizer), keeps_local_copy=True),
    Scheme("AEAMSGD", lambda args, workers: rules.Aeasgd(
        args.learning_rate, _alpha(args, workers), args.momentum),
        keeps_local_copy=True),
    Scheme("Synchronous-SGD", lambda args, workers: rules.SynchronousSgd(
        args.learning_rate)),
    # η̃ = T η by default: the average of a / T moves θ̃ by the mean step.
    Scheme("SAGN", lambda args, workers: rules.Sagn(
        args.learning_rate, args.communication_window,
        _central_rate(args, args.communication_window * args.learning_rate),
        args.worker_optimizer)),
    Scheme("Multi-Worker-Mirrored-Strategy", lambda args, workers:
           rules.SynchronousSgd(args.learning_rate)),
]}


class _ParserFound(Exception):
    """Raised by the stand-in `flags.parse` once the script built its parser."""


def script_parser(name):
    """The example's own argument parser, its flags and defaults exactly as
    its script makes them: the script is loaded as a module (which loads
    no TensorFlow: the scripts import it after parsing), and its `main` runs
    until it parses, where a stand-in `flags.parse` takes the parser and
    stops it."""
    path = SCHEMES[name].script_path
    spec = importlib.util.spec_from_file_location(
        f"_simulated_{name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    found = []
    path_before = list(sys.path)
    try:
        spec.loader.exec_module(module)

        def take_parser(parser, argv=None):
            found.append(parser)
            raise _ParserFound

        module.flags = types.SimpleNamespace(**{**vars(flags), "parse": take_parser})
        try:
            module.main()
        except _ParserFound:
            pass
    finally:
        sys.path[:] = path_before  # the script puts the repository first
    if not found:
        raise RuntimeError(f"{path} did not build its parser with flags.parse")
    return found[0]
