"""Every scheme's update rule in NumPy, as the events of a run: a worker's
local step on a minibatch, the update it commits, that update arriving at
the ps with its staleness, and a pull of the central copy. The simulator
plays these events in the order its simulated cluster makes them happen;
tests/reference.py plays them in the order a real run recorded, and the
fidelity tests check that order against TensorFlow's parameters to 1e-5.

Parameters are dicts of arrays keyed by the checkpoints' variable names
(`names`); the rules keep the arrays' dtype (float64 in the fidelity tests,
float32 in the simulator). Each rule takes the gradient function it uses,
so that the fidelity tests can put their own around `gradients`.
"""

import numpy as np

IMAGE_SIZE, NUM_CLASSES = 28 * 28, 10
ADAGRAD_INITIAL_ACCUMULATOR = 0.1  # tf.compat.v1.train.AdagradOptimizer's
# tf.compat.v1.train.AdamOptimizer's β1, β2 and ε (Keras 2.0's).
ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON = 0.9, 0.999, 1e-8


# --- The model: guide/training/model.py's perceptron of ReLU layers ---

def names(hidden_layers):
    """The variable names of the model with these hidden layers' widths, as
    guide/training/model.py names them: hidden/, hidden_2/, ..., output/."""
    scopes = ["hidden"] + [f"hidden_{number}"
                           for number in range(2, len(hidden_layers) + 1)]
    return tuple(f"{scope}/{kind}" for scope in [*scopes, "output"]
                 for kind in ("weights", "biases"))


def layer_scopes(params):
    """The layers' scopes in `params`, from the input to the output."""
    scopes = ["hidden"]
    while f"hidden_{len(scopes) + 1}/weights" in params:
        scopes.append(f"hidden_{len(scopes) + 1}")
    return [*scopes, "output"]


def initial_parameters(hidden_layers, seed, dtype=np.float32):
    """Parameters drawn as guide/training/model.py draws them (weights from
    a normal of standard deviation √(2 / (inputs + outputs)) truncated at
    two of them, zero biases): the same distribution, not TensorFlow's
    values."""
    rng = np.random.default_rng(seed)
    widths = [IMAGE_SIZE, *hidden_layers, NUM_CLASSES]
    params = {}
    for name, inputs, outputs in zip(names(hidden_layers)[::2], widths, widths[1:]):
        stddev = (2.0 / (inputs + outputs)) ** 0.5
        weights = rng.standard_normal((inputs, outputs))
        while (outside := np.abs(weights) > 2).any():
            weights[outside] = rng.standard_normal(int(outside.sum()))
        params[name] = (stddev * weights).astype(dtype)
        params[name.replace("weights", "biases")] = np.zeros(outputs, dtype)
    return params


def parameter_count(params):
    return sum(value.size for value in params.values())


def _relu_active(layer, before_relu, inputs, weights, biases):
    return before_relu > 0


def gradients(params, images, labels, relu_active=_relu_active):
    """Gradient of the mean cross-entropy of the perceptron in `params` on a
    minibatch. `relu_active(layer, pre-activations, inputs, weights,
    biases)` decides which hidden units pass a gradient (by default those
    whose pre-activation is positive)."""
    scopes = layer_scopes(params)
    inputs = [images.astype(params["output/weights"].dtype, copy=False)]
    actives = []
    for layer, scope in enumerate(scopes[:-1]):
        weights, biases = params[f"{scope}/weights"], params[f"{scope}/biases"]
        before_relu = inputs[-1] @ weights + biases
        actives.append(relu_active(layer, before_relu, inputs[-1], weights, biases))
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


def accuracy(params, images, labels, chunk=2000):
    """The share of `images` whose highest score is their label."""
    correct = 0
    for start in range(0, len(labels), chunk):
        activations = images[start:start + chunk].astype(
            params["output/weights"].dtype, copy=False)
        for scope in layer_scopes(params)[:-1]:
            activations = np.maximum(
                activations @ params[f"{scope}/weights"] + params[f"{scope}/biases"], 0)
        logits = activations @ params["output/weights"] + params["output/biases"]
        correct += int((logits.argmax(axis=1) == labels[start:start + chunk]).sum())
    return correct / len(labels)


# --- Arithmetic on parameter dicts ---

def apply(function, *dicts):
    """{name: function(each dict's array of that name)}."""
    return {name: function(*(d[name] for d in dicts)) for name in dicts[0]}


def plus_scaled(params, factor, other):
    """params + factor · other, parameter by parameter."""
    return apply(lambda p, o: p + factor * o, params, other)


def zeros_like(params):
    return apply(np.zeros_like, params)


def mean(updates):
    """The parameter-wise mean of a list of updates."""
    return apply(lambda *values: sum(values) / len(values), *updates)


# --- The optimizers a worker (or DOWNPOUR's ps) steps with ---

class Sgd:
    """θ ← θ − η g."""

    def __init__(self, learning_rate):
        self.learning_rate = learning_rate

    def step(self, params, gradient):
        return plus_scaled(params, -self.learning_rate, gradient)


class Adagrad:
    """tf.compat.v1.train.AdagradOptimizer, its accumulators G kept from
    step to step: G ← G + g², θ ← θ − η g / √G, G starting at 0.1."""

    def __init__(self, learning_rate):
        self.learning_rate = learning_rate
        self.accumulators = None

    def step(self, params, gradient):
        if self.accumulators is None:
            self.accumulators = apply(
                lambda p: np.full_like(p, ADAGRAD_INITIAL_ACCUMULATOR), params)
        self.accumulators = apply(lambda a, g: a + g * g, self.accumulators, gradient)
        return apply(lambda p, g, a: p - self.learning_rate * g / np.sqrt(a),
                     params, gradient, self.accumulators)


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
            self.moments = (zeros_like(params), zeros_like(params))
        first, second = self.moments
        first = apply(lambda m, g: ADAM_BETA1 * m + (1 - ADAM_BETA1) * g,
                      first, gradient)
        second = apply(lambda v, g: ADAM_BETA2 * v + (1 - ADAM_BETA2) * g * g,
                       second, gradient)
        self.moments, self.steps = (first, second), self.steps + 1
        rate = (self.learning_rate * np.sqrt(1 - ADAM_BETA2 ** self.steps)
                / (1 - ADAM_BETA1 ** self.steps))
        return apply(lambda p, m, v: p - rate * m / (np.sqrt(v) + ADAM_EPSILON),
                     params, first, second)


class Momentum:
    """tf.compat.v1.train.MomentumOptimizer: v ← μ v + g, θ ← θ − η v."""

    def __init__(self, learning_rate, decay=0.9):
        self.learning_rate, self.decay = learning_rate, decay
        self.velocity = None

    def step(self, params, gradient):
        if self.velocity is None:
            self.velocity = zeros_like(params)
        self.velocity = apply(lambda v, g: self.decay * v + g, self.velocity, gradient)
        return plus_scaled(params, -self.learning_rate, self.velocity)


OPTIMIZERS = {"sgd": Sgd, "adagrad": Adagrad, "adam": Adam}


def optimizer(name, learning_rate):
    """The worker optimizer `name` (--worker_optimizer) at `learning_rate`."""
    return OPTIMIZERS[name](learning_rate)


# --- The schemes' rules, event by event ---

class Worker:
    """A worker's own state: its copy θ (`params`), its optimizer, and what
    it sums until its next commit (`accumulated`)."""

    def __init__(self, params, local_optimizer):
        self.params = params
        self.optimizer = local_optimizer
        self.accumulated = zeros_like(params)


class Central:
    """The ps's state: the central copy θ̃ (`params`) and, for DOWNPOUR,
    the ps's own Adagrad."""

    def __init__(self, params, optimizer=None):
        self.params = params
        self.optimizer = optimizer


class Rule:
    """A scheme's update rule. A worker `pull`s θ ← θ̃ (resetting what it
    sums), takes `local_step`s on minibatches, then `commit`s: the update
    it sends, computed from its state and the θ̃ it `read` for the
    exchange; `apply` is that update landing on the ps, `staleness` τ
    commits after the worker's pull. Synchronous schemes `apply_together`
    the updates of one round instead."""

    keeps_local_copy = False  # a worker pulls θ ← θ̃ after its commit

    def __init__(self, learning_rate, worker_optimizer="sgd", gradient=gradients):
        self.learning_rate = learning_rate
        self.worker_optimizer = worker_optimizer
        self.gradient = gradient

    def central(self, params):
        return Central(dict(params))

    def new_worker(self, params, local_optimizer=None):
        """A worker starting from `params`, stepping with `local_optimizer`
        (default: --worker_optimizer's at the learning rate)."""
        return Worker(dict(params), local_optimizer or optimizer(
            self.worker_optimizer, self.learning_rate))

    def pull(self, worker, central_params):
        worker.params = dict(central_params)
        worker.accumulated = zeros_like(central_params)

    def local_step(self, worker, images, labels):
        """A step of the worker's optimizer, summing its displacement Δθ."""
        before = worker.params
        worker.params = worker.optimizer.step(
            before, self.gradient(before, images, labels))
        worker.accumulated = apply(lambda a, p, b: a + (p - b),
                                   worker.accumulated, worker.params, before)

    def commit(self, worker, read):
        return worker.accumulated

    def apply(self, central, update, staleness):
        raise NotImplementedError

    def apply_together(self, central, updates):
        raise NotImplementedError


class Hogwild(Rule):
    """Each minibatch's gradient g, applied as θ̃ ← θ̃ − η g."""

    def local_step(self, worker, images, labels):
        worker.accumulated = apply(np.add, worker.accumulated,
                                   self.gradient(worker.params, images, labels))

    def apply(self, central, update, staleness):
        central.params = plus_scaled(central.params, -self.learning_rate, update)


class SumOfGradients(Rule):
    """Local steps of the worker's optimizer, committing Σ g."""

    def local_step(self, worker, images, labels):
        gradient = self.gradient(worker.params, images, labels)
        worker.params = worker.optimizer.step(worker.params, gradient)
        worker.accumulated = apply(np.add, worker.accumulated, gradient)


class DownpourEasy(SumOfGradients):
    """θ̃ ← θ̃ − η Σ g."""

    def apply(self, central, update, staleness):
        central.params = plus_scaled(central.params, -self.learning_rate, update)


class Downpour(SumOfGradients):
    """Local Adagrad steps summing their gradients; the ps applies the sum
    with its own Adagrad: G ← G + (Σ g)², θ̃ ← θ̃ − η Σ g / √G. Each
    Adagrad keeps its accumulators for the whole run."""

    def __init__(self, learning_rate, worker_optimizer="adagrad", gradient=gradients):
        super().__init__(learning_rate, worker_optimizer, gradient)

    def central(self, params):
        return Central(dict(params), Adagrad(self.learning_rate))

    def apply(self, central, update, staleness):
        central.params = central.optimizer.step(central.params, update)


class Agn(Rule):
    """a = (η̃ / η) (θ − θ̃) after T local steps (with SGD, −η̃ Σ g);
    θ̃ ← θ̃ + a / T."""

    def __init__(self, learning_rate, window, central_rate,
                 worker_optimizer="sgd", gradient=gradients):
        super().__init__(learning_rate, worker_optimizer, gradient)
        self.window, self.central_rate = window, central_rate

    def commit(self, worker, read):
        factor = self.central_rate / self.learning_rate / self.window
        return apply(lambda a: factor * a, worker.accumulated)

    def apply(self, central, update, staleness):
        central.params = apply(np.add, central.params, update)


class Sagn(Agn):
    """AGN's a / T from every worker, averaged into one synchronous update:
    θ̃ ← θ̃ + (1/R) Σ_w a_w / T."""

    def apply_together(self, central, updates):
        central.params = apply(np.add, central.params, mean(updates))


class DynamicSgd(Rule):
    """Δ = θ − θ_pulled after T local steps; θ̃ ← θ̃ + Δ / (τ + 1), τ the
    commits that landed since the worker's pull."""

    def apply(self, central, update, staleness):
        central.params = plus_scaled(central.params, 1 / (staleness + 1), update)


class Aeasgd(Rule):
    """The elastic exchange every T local steps: E = α (θ − θ̃), θ ← θ − E,
    θ̃ ← θ̃ + E; the worker keeps its own copy. With `momentum` δ > 0 the
    local steps are Nesterov's (AEAMSGD): v ← δ v − η g(θ + δ v), θ ← θ + v."""

    keeps_local_copy = True

    def __init__(self, learning_rate, alpha, momentum=0.0, worker_optimizer="sgd",
                 gradient=gradients):
        super().__init__(learning_rate, worker_optimizer, gradient)
        self.alpha, self.momentum = alpha, momentum

    def new_worker(self, params, local_optimizer=None):
        worker = super().new_worker(params, local_optimizer)
        worker.velocity = zeros_like(params)
        return worker

    def local_step(self, worker, images, labels):
        if not self.momentum:
            worker.params = worker.optimizer.step(
                worker.params, self.gradient(worker.params, images, labels))
            return
        ahead = plus_scaled(worker.params, self.momentum, worker.velocity)
        gradient = self.gradient(ahead, images, labels)
        worker.velocity = apply(lambda v, g: self.momentum * v - self.learning_rate * g,
                                worker.velocity, gradient)
        worker.params = apply(np.add, worker.params, worker.velocity)

    def commit(self, worker, read):
        elastic = apply(lambda p, c: self.alpha * (p - c), worker.params, read)
        worker.params = apply(np.subtract, worker.params, elastic)
        return elastic

    def apply(self, central, update, staleness):
        central.params = apply(np.add, central.params, update)


class SynchronousSgd(Hogwild):
    """Each worker's gradient; the ps averages R of them into one update,
    θ̃ ← θ̃ − η (1/R) Σ g. Multi-Worker-Mirrored-Strategy's allreduce gives
    every worker the same average of all W."""

    def apply_together(self, central, updates):
        central.params = plus_scaled(central.params, -self.learning_rate,
                                     mean(updates))
