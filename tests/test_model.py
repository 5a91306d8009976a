"""The model of any depth (--hidden_layers), its variables' names and
shapes, which checkpoints and the NumPy reference go by; the optimizers a
worker steps with (--worker_optimizer), whose state stays on the worker;
and the evaluator, which builds the chief's model to restore it."""

import re

import numpy as np
import tensorflow as tf

import reference
from guide.distributed import evaluator, placement
from guide.training import data, model

WORKER = "/job:worker/task:1"


def shapes(variables):
    return [(variable.op.name, variable.shape.as_list()) for variable in variables]


def test_one_hidden_layer_is_the_model_of_before():
    """Same names, shapes, order and initial values as the 784-128-10 MLP
    whose checkpoints the fidelity tests and earlier runs hold."""
    with tf.Graph().as_default():
        mlp = model.MLP(seed=3)
        assert shapes(mlp.variables) == [
            ("hidden/weights", [784, 128]), ("hidden/biases", [128]),
            ("output/weights", [128, 10]), ("output/biases", [10])]
        assert [mlp.hidden_weights, mlp.hidden_biases, mlp.output_weights,
                mlp.output_biases] == mlp.variables
        # The initial weights: truncated normals of op seeds 2·seed and 2·seed+1.
        before = [tf.random.truncated_normal([784, 128], stddev=(2 / 912) ** 0.5,
                                             seed=6),
                  tf.random.truncated_normal([128, 10], stddev=(2 / 138) ** 0.5,
                                             seed=7)]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            ours = session.run([mlp.hidden_weights, mlp.output_weights])
            theirs = session.run(before)
    for our, their in zip(ours, theirs):
        np.testing.assert_array_equal(our, their)
    assert tuple(model.variable_names()) == reference.NAMES


def test_three_hidden_layers_are_named_by_their_place():
    with tf.Graph().as_default():
        central = model.MLP(seed=0, hidden_layers=[1000, 2000, 1000])
        # A second copy in the same graph, as a worker's local one.
        local = model.MLP(seed=0, hidden_layers=[1000, 2000, 1000])
        expected = [("hidden/weights", [784, 1000]), ("hidden/biases", [1000]),
                    ("hidden_2/weights", [1000, 2000]), ("hidden_2/biases", [2000]),
                    ("hidden_3/weights", [2000, 1000]), ("hidden_3/biases", [1000]),
                    ("output/weights", [1000, 10]), ("output/biases", [10])]
        assert shapes(central.variables) == expected
        assert [name for name, _ in expected] == model.variable_names(
            [1000, 2000, 1000]) == list(reference.names([1000, 2000, 1000]))
        assert [shape for _, shape in shapes(local.variables)] == [
            shape for _, shape in expected]
        assert central.output_weights.shape.as_list() == [1000, 10]
        images = tf.compat.v1.placeholder(tf.float32, [None, 784])
        assert central.logits(images).shape.as_list() == [None, 10]
        assert sum(variable.shape.num_elements()
                   for variable in central.variables) == 4_798_010


def test_logits_match_the_reference_at_any_depth():
    """The forward pass and the gradients of a 2-hidden-layer model, in
    TensorFlow and in tests/reference.py (float32 against float64)."""
    dataset = data.synthetic(0, 20, 1)
    with tf.Graph().as_default():
        classifier = model.Classifier(seed=1, summaries=False, hidden_layers=[16, 8])
        gradients = tf.gradients(classifier.loss, classifier.mlp.variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            values = session.run(classifier.mlp.variables)
            computed = session.run(gradients, classifier.feed(
                dataset.train_images, dataset.train_labels))
    names = reference.names([16, 8])
    params = {name: value.astype(np.float64) for name, value in zip(names, values)}
    expected = reference.gradients(params, dataset.train_images,
                                   dataset.train_labels)
    assert set(expected) == set(names)
    for name, gradient in zip(names, computed):
        np.testing.assert_allclose(gradient, expected[name], rtol=1e-4,
                                   atol=1e-6 * np.abs(expected[name]).max())


def worker_graph(name, hidden_layers=(8,), worker=WORKER):
    """A worker's local copy under `placement.local_variables`, on `worker`
    (beside a central copy on a ps, if that is a cluster's worker), and one
    local step of optimizer `name`."""
    if worker == WORKER:
        cluster = tf.train.ClusterSpec({"ps": ["h:1"], "worker": ["h:2", "h:3"]})
        with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
                worker_device=WORKER, cluster=cluster)):
            model.MLP(0, hidden_layers)
    with placement.local_variables(worker):
        local = model.MLP(0, hidden_layers)
        classifier = model.Classifier(mlp=local, summaries=False)
        gradients = tf.gradients(classifier.loss, local.variables)
        applied, steps = model.optimizer_step(name, 0.01, gradients, local.variables)
    return classifier, local, applied, steps


def test_a_workers_adam_keeps_its_state_on_the_worker_out_of_checkpoints():
    with tf.Graph().as_default():
        _, local, _, _ = worker_graph("adam", hidden_layers=(8, 4))
        local_names = {variable.op.name for variable in
                       tf.compat.v1.local_variables()}
        # m and v per variable, and the powers of β1 and β2.
        slots = {name for name in local_names if re.search(r"Adam|power", name)}
        assert len(slots) == 2 * len(local.variables) + 2
        assert {variable.device for variable in tf.compat.v1.local_variables()} == {
            WORKER}
        assert {variable.op.name for variable in tf.compat.v1.global_variables()} \
            == set(model.variable_names((8, 4)))


def test_a_local_step_reports_how_far_it_moved_each_variable():
    """optimizer_step's steps are the values after minus before: read around
    the update for Adam and Adagrad, −η g (to float32 rounding) for SGD."""
    dataset = data.synthetic(0, 40, 1)
    for name in ("adam", "adagrad", "sgd"):
        with tf.Graph().as_default():
            classifier, local, applied, steps = worker_graph(name, worker="/cpu:0")
            # Two steps: Adam's second is not its first's size.
            feeds = [classifier.feed(dataset.train_images[rows],
                                     dataset.train_labels[rows])
                     for rows in (slice(0, 20), slice(20, 40))]
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.local_variables_initializer())
                for batch in feeds:
                    before = session.run(local.variables)
                    _, moved = session.run([applied, steps], batch)
                    after = session.run(local.variables)
                    for start, end, step in zip(before, after, moved):
                        if name == "sgd":  # −η g, which θ − η g rounds
                            ulp = np.spacing(np.abs(start).max())
                            np.testing.assert_allclose(step, end - start, rtol=0,
                                                       atol=ulp)
                        else:
                            np.testing.assert_array_equal(step, end - start)
                    assert max(np.abs(step).max() for step in moved) > 1e-4


def test_the_evaluator_builds_the_chiefs_model_to_restore_it(tmp_path, capsys,
                                                             monkeypatch):
    monkeypatch.setattr(evaluator, "inotify_simple", None)
    with tf.Graph().as_default():
        model.MLP(seed=0, hidden_layers=[12, 6])
        step = tf.compat.v1.train.get_or_create_global_step()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(step.assign(30))
            tf.compat.v1.train.Saver().save(session, str(tmp_path / "model.ckpt"),
                                            global_step=30)
    evaluator.run(str(tmp_path), data.synthetic(0, 100, 100), train_steps=30,
                  hidden_layers=[12, 6])
    # It tested the checkpoint: restoring it into another model would fail.
    assert re.findall(r"^global_step (\d+) test_accuracy",
                      capsys.readouterr().out, re.MULTILINE) == ["30"]
