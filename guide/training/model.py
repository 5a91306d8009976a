"""The classifier every example trains: a one-hidden-layer perceptron (784 ->
128 ReLU -> 10) of explicit variables, which work under any device placement
and which tests read by name to compare with a NumPy re-implementation."""

import tensorflow as tf

from guide.training.data import IMAGE_SIZE, NUM_CLASSES

HIDDEN_UNITS = 128


class MLP:
    """The model's variables, in the caller's device scope; v1 Variables, so
    that a creator scope (`placement.local_variables`) picks collections."""

    def __init__(self, seed, hidden_units=HIDDEN_UNITS):
        def weights(name, shape, op_seed):
            # Glorot-style scale keeps the initial logits small.
            stddev = (2.0 / (shape[0] + shape[1])) ** 0.5
            initial = tf.random.truncated_normal(shape, stddev=stddev,
                                                 seed=seed * 2 + op_seed)
            return tf.compat.v1.Variable(initial, name=name)

        with tf.compat.v1.variable_scope("hidden"):
            self.hidden_weights = weights("weights", [IMAGE_SIZE, hidden_units], 0)
            self.hidden_biases = tf.compat.v1.Variable(tf.zeros([hidden_units]),
                                                       name="biases")
        with tf.compat.v1.variable_scope("output"):
            self.output_weights = weights("weights", [hidden_units, NUM_CLASSES], 1)
            self.output_biases = tf.compat.v1.Variable(tf.zeros([NUM_CLASSES]),
                                                       name="biases")
        self.variables = [self.hidden_weights, self.hidden_biases,
                          self.output_weights, self.output_biases]

    def logits(self, images, offsets=None):
        """The class scores; with `offsets` (one tensor per variable), those
        of the parameters θ + offsets, as Nesterov momentum needs."""
        hidden_weights, hidden_biases, output_weights, output_biases = (
            self.variables if offsets is None else
            [variable + offset for variable, offset in zip(self.variables, offsets)])
        hidden = tf.nn.relu(tf.matmul(images, hidden_weights) + hidden_biases)
        return tf.matmul(hidden, output_weights) + output_biases


class Classifier:
    """The model graph, in the caller's device scope: placeholders `images`
    and `labels`, `loss` and `accuracy` (also TensorBoard summaries unless
    `summaries` is False), computed with new variables, or `mlp`'s, at
    θ + `offsets` if given."""

    def __init__(self, seed=0, mlp=None, summaries=True, offsets=None):
        self.images = tf.compat.v1.placeholder(tf.float32, [None, IMAGE_SIZE],
                                               "images")
        self.labels = tf.compat.v1.placeholder(tf.int64, [None], "labels")
        self.mlp = mlp or MLP(seed)
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
