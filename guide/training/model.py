"""The classifier every example trains: a perceptron of ReLU hidden layers
(784 -> 128 ReLU -> 10 by default; --hidden_layers 1000,2000,1000 is the
784-1000-2000-1000-10 of Hermans' thesis) of explicit variables, which work
under any device placement and which tests read by name to compare with a
NumPy re-implementation. Also the optimizers a worker takes its local steps
with (--worker_optimizer)."""

import tensorflow as tf

from guide.training.data import IMAGE_SIZE, NUM_CLASSES
from guide.training.flags import HIDDEN_LAYERS


def layer_names(hidden_layers=HIDDEN_LAYERS):
    """Each layer's variable scope, input to output: "hidden", "hidden_2",
    "hidden_3", ..., "output"; so a layer's variables are "<scope>/weights"
    and "<scope>/biases" in the checkpoints."""
    return (["hidden"] + [f"hidden_{number}"
                          for number in range(2, len(hidden_layers) + 1)]
            + ["output"])


def variable_names(hidden_layers=HIDDEN_LAYERS):
    """The names of MLP(seed, hidden_layers).variables, in their order."""
    return [f"{layer}/{kind}" for layer in layer_names(hidden_layers)
            for kind in ("weights", "biases")]


class MLP:
    """The model's variables, in the caller's device scope; v1 Variables, so
    that a creator scope (`placement.local_variables`) picks collections.
    `variables` holds each layer's weights and then its biases, from the
    input to the output layer, which `output_weights` and `output_biases`
    also name; `hidden_weights` and `hidden_biases` are the first layer's."""

    def __init__(self, seed, hidden_layers=HIDDEN_LAYERS):
        def weights(name, shape, op_seed):
            # Glorot-style scale keeps the initial logits small.
            stddev = (2.0 / (shape[0] + shape[1])) ** 0.5
            initial = tf.random.truncated_normal(shape, stddev=stddev,
                                                 seed=seed * 2 + op_seed)
            return tf.compat.v1.Variable(initial, name=name)

        widths = [IMAGE_SIZE, *hidden_layers, NUM_CLASSES]
        names = layer_names(hidden_layers)
        # The first hidden layer's seed 0 and the output's 1 are those of the
        # one-hidden-layer model; hidden layer k, from 2 on, takes k.
        op_seeds = [0, *range(2, len(hidden_layers) + 1), 1]
        self.variables = []
        for name, inputs, outputs, op_seed in zip(names, widths, widths[1:],
                                                  op_seeds):
            with tf.compat.v1.variable_scope(name):
                self.variables += [
                    weights("weights", [inputs, outputs], op_seed),
                    tf.compat.v1.Variable(tf.zeros([outputs]), name="biases")]
        self.hidden_weights, self.hidden_biases = self.variables[:2]
        self.output_weights, self.output_biases = self.variables[-2:]

    def logits(self, images, offsets=None):
        """The class scores; with `offsets` (one tensor per variable), those
        of the parameters θ + offsets, as Nesterov momentum needs."""
        variables = (self.variables if offsets is None else
                     [variable + offset
                      for variable, offset in zip(self.variables, offsets)])
        activations = images
        for weights, biases in zip(variables[:-2:2], variables[1:-2:2]):
            activations = tf.nn.relu(tf.matmul(activations, weights) + biases)
        output_weights, output_biases = variables[-2:]
        return tf.matmul(activations, output_weights) + output_biases


class Classifier:
    """The model graph, in the caller's device scope: placeholders `images`
    and `labels`, `loss` and `accuracy` (also TensorBoard summaries unless
    `summaries` is False), computed with new variables (`hidden_layers`
    wide), or `mlp`'s, at θ + `offsets` if given."""

    def __init__(self, seed=0, mlp=None, summaries=True, offsets=None,
                 hidden_layers=HIDDEN_LAYERS):
        self.images = tf.compat.v1.placeholder(tf.float32, [None, IMAGE_SIZE],
                                               "images")
        self.labels = tf.compat.v1.placeholder(tf.int64, [None], "labels")
        self.mlp = mlp or MLP(seed, hidden_layers)
        logits = self.mlp.logits(self.images, offsets)
        self.loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=self.labels, logits=logits))
        correct = tf.equal(tf.argmax(logits, axis=1), self.labels)
        self.accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        if summaries:
            tf.compat.v1.summary.scalar("loss", self.loss)
            tf.compat.v1.summary.scalar("accuracy", self.accuracy)

    def feed(self, images, labels):
        return {self.images: images, self.labels: labels}


def optimizer(name, learning_rate):
    """The tf.compat.v1 optimizer `name` (flags.WORKER_OPTIMIZERS) at
    `learning_rate`, with TensorFlow's other defaults: Adagrad's
    accumulators start at 0.1; Adam's β1 = 0.9, β2 = 0.999 and ε = 1e-8 are
    Keras 2.0's, the thesis's. Its slots are created where its variables
    are: inside `placement.local_variables`, on the worker, its own."""
    train = tf.compat.v1.train
    return {"sgd": train.GradientDescentOptimizer,
            "adagrad": train.AdagradOptimizer,
            "adam": train.AdamOptimizer}[name](learning_rate)


def optimizer_step(name, learning_rate, gradients, variables):
    """Applies `gradients` to `variables` with `optimizer(name,
    learning_rate)`; returns that op and, for each variable, the step it
    moved by (its value after minus before), to be run with the op: −η g
    with sgd, without reading the variable twice."""
    if name == "sgd":
        steps = [-learning_rate * gradient for gradient in gradients]
        applied = optimizer(name, learning_rate).apply_gradients(
            zip(gradients, variables))
        return applied, steps
    before = [variable.read_value() for variable in variables]
    # The values before go through the gradients, so they are read before
    # the update (which copies a variable whose value is still being read).
    with tf.control_dependencies(before):
        gradients = [tf.identity(gradient) for gradient in gradients]
    applied = optimizer(name, learning_rate).apply_gradients(
        zip(gradients, variables))
    with tf.control_dependencies([applied]):
        steps = [variable.read_value() - value
                 for variable, value in zip(variables, before)]
    return applied, steps
