"""NumPy re-implementations of the update rules, as each example's README
states them (after its paper).

Parameters are dicts of float64 arrays keyed by the checkpoint's variable
names; the fidelity tests run a script for a few communication windows and
compare the parameters it saved with what these functions compute from the
same initial parameters and the same minibatches.
"""

import contextlib
import itertools

import numpy as np

NAMES = ("hidden/weights", "hidden/biases", "output/weights", "output/biases")
ADAGRAD_INITIAL_ACCUMULATOR = 0.1  # tf.compat.v1.train.AdagradOptimizer's
# tf.compat.v1.train.AdamOptimizer's β1, β2 and ε (Keras 2.0's).
ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON = 0.9, 0.999, 1e-8

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


def names(hidden_layers):
    """The variable names of the model with these hidden layers' widths, as
    guide/training/model.py names them: hidden/, hidden_2/, ..., output/."""
    scopes = ["hidden"] + [f"hidden_{number}"
                           for number in range(2, len(hidden_layers) + 1)]
    return tuple(f"{scope}/{kind}" for scope in [*scopes, "output"]
                 for kind in ("weights", "biases"))


def _layers(params):
    """The layers' scopes in `params`, from the input to the output."""
    scopes = ["hidden"]
    while f"hidden_{len(scopes) + 1}/weights" in params:
        scopes.append(f"hidden_{len(scopes) + 1}")
    return [*scopes, "output"]


def gradients(params, images, labels):
    """Gradient of the mean cross-entropy of the MLP of ReLU hidden layers
    in `params` (784-128-10 with NAMES)."""
    scopes = _layers(params)
    call = _kinks["call"]
    if _kinks["active"]:
        _kinks["call"] += 1
    inputs = [images.astype(np.float64)]  # each layer's
    actives = []
    for layer, scope in enumerate(scopes[:-1]):
        weights, biases = params[f"{scope}/weights"], params[f"{scope}/biases"]
        before_relu = inputs[-1] @ weights + biases
        active = before_relu > 0
        if _kinks["active"]:  # else float64's sides, as they are
            scale = np.abs(inputs[-1]) @ np.abs(weights) + np.abs(biases)
            for example, unit in zip(*np.nonzero(np.abs(before_relu)
                                                 <= KINK * scale)):
                entry = (call, layer, int(example), int(unit))
                _kinks["seen"].append(
                    (abs(before_relu[example, unit]) / scale[example, unit], entry))
                if entry in _kinks["other_side"]:
                    active[example, unit] = not active[example, unit]
        actives.append(active)
        inputs.append(np.maximum(before_relu, 0))
    logits = inputs[-1] @ params["output/weights"] + params["output/biases"]
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    d_outputs = probabilities
    d_outputs[np.arange(len(labels)), labels] -= 1
    d_outputs /= len(labels)
    result = {}
    for layer in reversed(range(len(scopes))):
        scope = scopes[layer]
        result[f"{scope}/weights"] = inputs[layer].T @ d_outputs
        result[f"{scope}/biases"] = d_outputs.sum(axis=0)
        if layer:
            d_outputs = (d_outputs @ params[f"{scope}/weights"].T) * actives[layer - 1]
    return result


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


def _map(function, *dicts):
    return {name: function(*(d[name] for d in dicts)) for name in dicts[0]}


def _plus_scaled(params, factor, other):
    """params + factor · other, parameter by parameter."""
    return _map(lambda p, o: p + factor * o, params, other)


class Sgd:
    """θ ← θ − η g."""

    def __init__(self, learning_rate):
        self.learning_rate = learning_rate

    def step(self, params, gradient):
        return _plus_scaled(params, -self.learning_rate, gradient)


class Adam:
    """tf.compat.v1.train.AdamOptimizer, its moments kept from step to step:
    m ← β1 m + (1 − β1) g, v ← β2 v + (1 − β2) g², and at step t
    θ ← θ − η √(1 − β2^t) / (1 − β1^t) · m / (√v + ε)."""

    def __init__(self, learning_rate):
        self.learning_rate = learning_rate
        self.moments = None
        self.steps = 0

    def step(self, params, gradient):
        if self.moments is None:
            self.moments = (_map(np.zeros_like, params), _map(np.zeros_like, params))
        first, second = self.moments
        first = _map(lambda m, g: ADAM_BETA1 * m + (1 - ADAM_BETA1) * g,
                     first, gradient)
        second = _map(lambda v, g: ADAM_BETA2 * v + (1 - ADAM_BETA2) * g * g,
                      second, gradient)
        self.moments, self.steps = (first, second), self.steps + 1
        rate = (self.learning_rate * np.sqrt(1 - ADAM_BETA2 ** self.steps)
                / (1 - ADAM_BETA1 ** self.steps))
        return _map(lambda p, m, v: p - rate * m / (np.sqrt(v) + ADAM_EPSILON),
                    params, first, second)


def _local_window(central, batches, window, optimizer):
    """T local steps of `optimizer` from θ̃; returns the displacement θ − θ̃."""
    local = dict(central)
    for _ in range(window):
        local = optimizer.step(local, gradients(local, *batches.next()))
    return _map(np.subtract, local, central)


def _sgd_window(central, batches, window, learning_rate):
    """T local SGD steps from θ̃; returns Σ_t g_t, the gradients they took."""
    local = dict(central)
    gradient_sum = _map(np.zeros_like, central)
    for _ in range(window):
        gradient = gradients(local, *batches.next())
        local = _map(lambda p, g: p - learning_rate * g, local, gradient)
        gradient_sum = _map(np.add, gradient_sum, gradient)
    return gradient_sum


def allreduce_sgd(params, worker_batches, steps, learning_rate):
    """Each step, every worker's next minibatch together make one global
    batch: θ ← θ − η ∇ (its mean loss), what the allreduce's sum of each
    worker's share of that mean gives every worker."""
    for _ in range(steps):
        drawn = [batches.next() for batches in worker_batches]
        images = np.concatenate([images for images, _ in drawn])
        labels = np.concatenate([labels for _, labels in drawn])
        params = _plus_scaled(params, -learning_rate,
                              gradients(params, images, labels))
    return params


def downpour_easy(central, batches, window, windows, learning_rate):
    """θ̃ ← θ̃ − η Σ_{t<T} g_t, the g_t taken along T local SGD steps."""
    for _ in range(windows):
        gradient_sum = _sgd_window(central, batches, window, learning_rate)
        central = _map(lambda p, s: p - learning_rate * s, central, gradient_sum)
    return central


def agn(central, batches, window, windows, learning_rate, central_rate,
        optimizer=None):
    """a = (η̃ / η) (θ − θ̃) after T local steps of the worker's `optimizer`
    (default: SGD at η, with which a = −η̃ Σ_{t<T} g_t), which keeps its
    state from window to window; θ̃ ← θ̃ + a / T."""
    optimizer = optimizer or Sgd(learning_rate)
    for _ in range(windows):
        displacement = _local_window(central, batches, window, optimizer)
        central = _map(lambda p, d: p + central_rate / learning_rate * d / window,
                       central, displacement)
    return central


def sagn(central, worker_batches, window, rounds, learning_rate, central_rate):
    """Every worker: a = −η̃ Σ_{t<T} g_t along T local SGD steps at η from
    θ̃; then θ̃ ← θ̃ + (1/W) Σ_w a_w / T, once per round, for all W together."""
    for _ in range(rounds):
        updates = [_map(lambda s: -central_rate * s / window,
                        _sgd_window(central, batches, window, learning_rate))
                   for batches in worker_batches]
        central = _map(lambda p, *a: p + sum(a) / len(a), central, *updates)
    return central


def dynamic_sgd(central, worker_batches, window, learning_rate, commits,
                clock_at_last_pull):
    """Replays DynSGD's commits in the order the ps applied them: commit k,
    by worker w with staleness τ, was computed from the θ̃ that followed
    commit k − τ; its update Δ = −η Σ g over T local SGD steps is applied as
    θ̃ ← θ̃ + Δ / (τ + 1). Returns θ̃ and each worker's θ (the θ̃ at its last
    pull)."""
    history = [central]  # θ̃ after 0, 1, 2, ... commits
    for index, commit in enumerate(commits):
        pulled = history[index - commit["staleness"]]
        gradient_sum = _sgd_window(pulled, worker_batches[commit["worker"]],
                                   window, learning_rate)
        step = -learning_rate / (commit["staleness"] + 1)
        history.append(_plus_scaled(history[-1], step, gradient_sum))
    return history[-1], [history[clock] for clock in clock_at_last_pull]


def aeasgd(central, batches, window, windows, learning_rate, alpha,
           momentum=0.0, optimizer=None):
    """One worker of (A)EASGD, from θ = θ̃: T local steps, then the elastic
    exchange E = α (θ − θ̃), θ ← θ − E, θ̃ ← θ̃ + E. With `momentum` δ > 0 the
    local steps are Nesterov's (AEAMSGD): v ← δ v − η g(θ + δ v), θ ← θ + v;
    with an `optimizer` (Adam), its own, its state kept throughout.
    Returns (θ̃, θ)."""
    local = dict(central)
    velocity = _map(np.zeros_like, central)
    for _ in range(windows):
        for _ in range(window):
            if optimizer:
                local = optimizer.step(local, gradients(local, *batches.next()))
                continue
            ahead = _map(lambda p, v: p + momentum * v, local, velocity)
            gradient = gradients(ahead, *batches.next())
            velocity = _map(lambda v, g: momentum * v - learning_rate * g,
                            velocity, gradient)
            local = _map(np.add, local, velocity)
        elastic = _map(lambda p, c: alpha * (p - c), local, central)
        local = _map(np.subtract, local, elastic)
        central = _map(np.add, central, elastic)
    return central, local


def momentum(params, batches, steps, learning_rate, decay=0.9):
    """TensorFlow's MomentumOptimizer: v ← μ v + g, θ ← θ − η v."""
    velocity = _map(np.zeros_like, params)
    for _ in range(steps):
        gradient = gradients(params, *batches.next())
        velocity = _map(lambda v, g: decay * v + g, velocity, gradient)
        params = _map(lambda p, v: p - learning_rate * v, params, velocity)
    return params


def downpour(central, batches, window, windows, learning_rate):
    """Local Adagrad steps summing their gradients; the ps applies the sum
    with its own Adagrad: G ← G + (Σ g)², θ̃ ← θ̃ − η Σ g / √G.

    Each Adagrad keeps its accumulators G for the whole run: the worker's
    across its windows, the ps's across all commits.
    """
    def adagrad(params, accumulators, gradient):
        accumulators = _map(lambda a, g: a + g * g, accumulators, gradient)
        params = _map(lambda p, g, a: p - learning_rate * g / np.sqrt(a),
                      params, gradient, accumulators)
        return params, accumulators

    def fresh_accumulators():
        return _map(lambda p: np.full_like(p, ADAGRAD_INITIAL_ACCUMULATOR), central)

    local_accumulators, central_accumulators = (fresh_accumulators(),
                                                fresh_accumulators())
    for _ in range(windows):
        local = dict(central)
        gradient_sum = _map(np.zeros_like, central)
        for _ in range(window):
            gradient = gradients(local, *batches.next())
            local, local_accumulators = adagrad(local, local_accumulators, gradient)
            gradient_sum = _map(np.add, gradient_sum, gradient)
        central, central_accumulators = adagrad(central, central_accumulators,
                                                gradient_sum)
    return central
