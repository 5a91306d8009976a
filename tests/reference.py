"""The update rules as each example's README states them (after its
paper), replayed for the fidelity tests: the events are the simulator's
(simulator/rules.py), one NumPy implementation for both; this module plays
them in the order of a run of one worker, of a synchronous round, or of a
recorded order of commits.

Parameters are dicts of float64 arrays keyed by the checkpoint's variable
names; the fidelity tests run a script for a few communication windows and
compare the parameters it saved with what these functions compute from the
same initial parameters and the same minibatches.
"""

import contextlib
import itertools

import numpy as np

from simulator import rules
from simulator.rules import Adam, names  # noqa: F401 (the tests' names)

NAMES = ("hidden/weights", "hidden/biases", "output/weights", "output/biases")

# TensorFlow computes a hidden unit's pre-activation in float32 from float32
# parameters, these rules in float64 from float64 ones, and the two
# parameter trajectories drift apart by up to 6e-7 (relative) in the
# replays. So where a pre-activation lies within KINK of zero, relative to
# the sum of its terms' magnitudes, the two may take different sides of
# ReLU's kink: the unit's gradient, or none (docs/testing.md).
KINK = 1e-6
# The entries of this replay's `gradients` calls that are that close to the
# kink, and those it takes on the other side from float64's (taking_other_side).
_kinks = {"active": False, "call": 0, "seen": [], "other_side": frozenset()}


def gradients(params, images, labels):
    """rules.gradients, where, inside `taking_other_side`, each ReLU within
    KINK of its kink is noted and the chosen ones take the other side."""
    call = _kinks["call"]
    if not _kinks["active"]:  # float64's sides, as they are
        return rules.gradients(params, images, labels)
    _kinks["call"] += 1

    def relu_active(layer, before_relu, inputs, weights, biases):
        active = before_relu > 0
        scale = np.abs(inputs) @ np.abs(weights) + np.abs(biases)
        for example, unit in zip(*np.nonzero(np.abs(before_relu) <= KINK * scale)):
            entry = (call, layer, int(example), int(unit))
            _kinks["seen"].append(
                (abs(before_relu[example, unit]) / scale[example, unit], entry))
            if entry in _kinks["other_side"]:
                active[example, unit] = not active[example, unit]
        return active

    return rules.gradients(params, images, labels, relu_active)


@contextlib.contextmanager
def taking_other_side(entries=()):
    """Within it, `gradients` notes its calls' entries within KINK of the
    kink (yielded, as they come) and takes `entries`, (call, hidden layer,
    example, unit) counted from the block's start, on the other side from
    float64's."""
    seen = []
    _kinks.update(active=True, call=0, seen=seen, other_side=frozenset(entries))
    try:
        yield seen
    finally:
        _kinks.update(active=False, call=0, seen=[], other_side=frozenset())


def either_side(replay, matches, most=2):
    """Runs `replay()`, a call of the rules below that makes its own
    minibatches, and returns what it returns: as float64 has every ReLU's
    side if `matches` accepts that, else with the first one, then two, of
    the ten entries closest to the kink (within KINK) on the other side that
    `matches` accepts. None if no such choice matches: the rule differs."""
    def attempt(other_side):
        with taking_other_side(other_side) as seen:
            return replay(), [entry for _, entry in sorted(seen)]

    result, ambiguous = attempt(())
    if matches(result):
        return result
    for count in range(1, most + 1):
        for other_side in itertools.combinations(ambiguous[:10], count):
            result, _ = attempt(other_side)
            if matches(result):
                print(f"matched with (call, layer, example, unit) {other_side} "
                      f"on the other side of ReLU's kink")
                return result
    return None


def _plus_scaled(params, factor, other):
    """params + factor · other, parameter by parameter."""
    return rules.plus_scaled(params, factor, other)


def _windows(rule, central, batches, window, windows, optimizer=None):
    """One worker's `windows` windows of T local steps (of `optimizer`, if
    given), each committed with staleness 0 and followed by a pull unless
    the rule keeps the worker's own copy; returns the ps's state and the
    worker."""
    central = rule.central(central)
    worker = rule.new_worker(central.params, optimizer)
    for _ in range(windows):
        for _ in range(window):
            rule.local_step(worker, *batches.next())
        rule.apply(central, rule.commit(worker, central.params), staleness=0)
        if not rule.keeps_local_copy:
            rule.pull(worker, central.params)
    return central, worker


def allreduce_sgd(params, worker_batches, steps, learning_rate):
    """Each step, every worker's next minibatch together make one global
    batch: θ ← θ − η ∇ (its mean loss), what the allreduce's sum of each
    worker's share of that mean gives every worker."""
    rule = rules.SynchronousSgd(learning_rate, gradient=gradients)
    central = rule.central(params)
    for _ in range(steps):
        drawn = [batches.next() for batches in worker_batches]
        images = np.concatenate([images for images, _ in drawn])
        labels = np.concatenate([labels for _, labels in drawn])
        rule.apply_together(central, [gradients(central.params, images, labels)])
    return central.params


def downpour_easy(central, batches, window, windows, learning_rate):
    """θ̃ ← θ̃ − η Σ_{t<T} g_t, the g_t taken along T local SGD steps."""
    rule = rules.DownpourEasy(learning_rate, gradient=gradients)
    return _windows(rule, central, batches, window, windows)[0].params


def agn(central, batches, window, windows, learning_rate, central_rate,
        optimizer=None):
    """a = (η̃ / η) (θ − θ̃) after T local steps of the worker's `optimizer`
    (default: SGD at η, with which a = −η̃ Σ_{t<T} g_t), which keeps its
    state from window to window; θ̃ ← θ̃ + a / T."""
    rule = rules.Agn(learning_rate, window, central_rate, gradient=gradients)
    return _windows(rule, central, batches, window, windows, optimizer)[0].params


def sagn(central, worker_batches, window, rounds, learning_rate, central_rate):
    """Every worker: a = −η̃ Σ_{t<T} g_t along T local SGD steps at η from
    θ̃; then θ̃ ← θ̃ + (1/W) Σ_w a_w / T, once per round, for all W together."""
    rule = rules.Sagn(learning_rate, window, central_rate, gradient=gradients)
    central = rule.central(central)
    workers = [rule.new_worker(central.params) for _ in worker_batches]
    for _ in range(rounds):
        for worker, batches in zip(workers, worker_batches):
            rule.pull(worker, central.params)
            for _ in range(window):
                rule.local_step(worker, *batches.next())
        rule.apply_together(central, [rule.commit(worker, central.params)
                                      for worker in workers])
    return central.params


def dynamic_sgd(central, worker_batches, window, learning_rate, commits,
                clock_at_last_pull):
    """Replays DynSGD's commits in the order the ps applied them: commit k,
    by worker w with staleness τ, was computed from the θ̃ that followed
    commit k − τ; its update Δ = −η Σ g over T local SGD steps is applied as
    θ̃ ← θ̃ + Δ / (τ + 1). Returns θ̃ and each worker's θ (the θ̃ at its last
    pull)."""
    rule = rules.DynamicSgd(learning_rate, gradient=gradients)
    state = rule.central(central)
    history = [state.params]  # θ̃ after 0, 1, 2, ... commits
    for index, commit in enumerate(commits):
        worker = rule.new_worker(history[index - commit["staleness"]])
        for _ in range(window):
            rule.local_step(worker, *worker_batches[commit["worker"]].next())
        rule.apply(state, rule.commit(worker, state.params), commit["staleness"])
        history.append(state.params)
    return history[-1], [history[clock] for clock in clock_at_last_pull]


def aeasgd(central, batches, window, windows, learning_rate, alpha,
           momentum=0.0, optimizer=None):
    """One worker of (A)EASGD, from θ = θ̃: T local steps, then the elastic
    exchange E = α (θ − θ̃), θ ← θ − E, θ̃ ← θ̃ + E. With `momentum` δ > 0 the
    local steps are Nesterov's (AEAMSGD): v ← δ v − η g(θ + δ v), θ ← θ + v;
    with an `optimizer` (Adam), its own, its state kept throughout.
    Returns (θ̃, θ)."""
    rule = rules.Aeasgd(learning_rate, alpha, momentum, gradient=gradients)
    state, worker = _windows(rule, central, batches, window, windows, optimizer)
    return state.params, worker.params


def momentum(params, batches, steps, learning_rate, decay=0.9):
    """TensorFlow's MomentumOptimizer: v ← μ v + g, θ ← θ − η v."""
    optimizer = rules.Momentum(learning_rate, decay)
    for _ in range(steps):
        params = optimizer.step(params, gradients(params, *batches.next()))
    return params


def downpour(central, batches, window, windows, learning_rate):
    """Local Adagrad steps summing their gradients; the ps applies the sum
    with its own Adagrad: G ← G + (Σ g)², θ̃ ← θ̃ − η Σ g / √G.

    Each Adagrad keeps its accumulators G for the whole run: the worker's
    across its windows, the ps's across all commits.
    """
    rule = rules.Downpour(learning_rate, gradient=gradients)
    return _windows(rule, central, batches, window, windows)[0].params
