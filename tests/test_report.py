"""What the chief reports at the end of a run."""

import json
import math

import numpy as np
import pytest

from conftest import read_result


def test_a_model_that_went_back_after_training_is_not_reported(tmp_path):
    """A chief whose ps restored an older checkpoint once training had
    ended (its session recreated at the final evaluation) must not report
    that model as trained to --train_steps: it fails with exit code 75,
    naming the steps lost, so that a restart trains them again; a
    synchronous one, which cannot train alone, reports them lost."""
    import tensorflow as tf

    from guide.training import flags, report

    class Classifier:  # what evaluate_and_write reads of one
        def __init__(self):
            self.loss, self.accuracy = tf.constant(0.5), tf.constant(0.9)

        def feed(self, images, labels):
            return {}

    dataset = type("Dataset", (), {"test_images": None, "test_labels": None,
                                   "train_images": [0] * 3, "train_labels": [0] * 3})
    settings = dict(dataset="synthetic", train_steps=3000, batch_size=100,
                    learning_rate=0.2, seed=0, validation=False)
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        global_step = tf.constant(2864, tf.int64)
        with pytest.raises(report.StepsLost) as lost:
            report.evaluate_and_write(session, str(tmp_path), settings, "hogwild",
                                      Classifier(), dataset, global_step, 1.0,
                                      workers=2, ps=1)
        assert not (tmp_path / "result.json").exists()
        assert lost.value.exit_code == 75 and isinstance(lost.value, flags.Failure)
        assert ("the model is at global step 2864, 136 steps short of "
                "--train_steps 3000, after training ended") in str(lost.value)
        # A synchronous chief cannot train alone: it reports what was lost.
        report.evaluate_and_write(session, str(tmp_path), settings,
                                  "synchronous-sgd", Classifier(), dataset,
                                  global_step, 1.0, train_back=False,
                                  workers=2, ps=1)
        outcome = read_result(tmp_path)
        assert (outcome["global_step"], outcome["steps_lost"]) == (2864, 136)
        assert "older checkpoint" in outcome["steps_lost_why"]
        settings["train_steps"] = 2864
        report.evaluate_and_write(session, str(tmp_path), settings, "hogwild",
                                  Classifier(), dataset, global_step, 1.0,
                                  workers=2, ps=1)
        assert "steps_lost" not in read_result(tmp_path)


def test_a_result_records_the_flags_that_say_what_the_run_trained(tmp_path):
    """Every script hands the report `flags.run_settings(args)`: the
    result records those flags' values as parsed, defaults resolved."""
    from guide.training import flags, report

    parser = flags.make_parser("An example.", "example.py",
                               train_steps=flags.ByDataset(synthetic=30, real=60))
    args = flags.parse(parser, ["--dataset", "mnist", "--batch_size", "50",
                                "--learning_rate", "0.1", "--seed", "3",
                                "--validation"])
    fields = report.write_result(str(tmp_path), flags.run_settings(args),
                                 "hogwild", 60, 0.5, 0.9, 2.0, workers=2, ps=1)
    assert read_result(tmp_path) == fields
    assert {name: fields[name] for name in ("dataset", "train_steps",
                                             "batch_size", "learning_rate",
                                             "seed", "evaluated_on")} == {
        "dataset": "mnist", "train_steps": 60, "batch_size": 50,
        "learning_rate": 0.1, "seed": 3, "evaluated_on": "validation"}
    assert fields["examples"] == 60 * 50


class Classifier:
    """What evaluate_and_write reads of a classifier, in a graph of its own:
    its loss and its accuracy on each feed, the images given being the
    number of examples right (test set) or a slice of the training set."""

    def __init__(self, test_loss, test_accuracy):
        import tensorflow as tf
        self.images = tf.compat.v1.placeholder(tf.float32, [None])
        self.loss = tf.constant(test_loss)
        self.accuracy = tf.reduce_mean(self.images)
        self._test_accuracy = test_accuracy

    def feed(self, images, labels):
        if images is None:  # the test set
            return {self.images: [self._test_accuracy]}
        return {self.images: images}


def evaluate(tmp_path, test_loss, test_accuracy, train_images):
    import tensorflow as tf

    from guide.training import report
    dataset = type("Dataset", (), {"test_images": None, "test_labels": None,
                                   "train_images": train_images,
                                   "train_labels": np.zeros(len(train_images))})
    settings = dict(dataset="synthetic", train_steps=30, batch_size=100,
                    learning_rate=0.2, seed=0, validation=False)
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        classifier = Classifier(test_loss, test_accuracy)
        return report.evaluate_and_write(
            session, str(tmp_path), settings, "hogwild", classifier, dataset,
            tf.constant(30, tf.int64), 1.0, workers=2, ps=1)


def test_train_accuracy_is_over_the_whole_training_set(tmp_path):
    """Measured in chunks of 10,000 examples, weighted by their size: 25,000
    examples of which the first 10,000 are right, then none, then half."""
    train = np.concatenate([np.ones(10_000), np.zeros(10_000),
                            np.tile([0.0, 1.0], 2_500)]).astype(np.float32)
    fields = evaluate(tmp_path, 0.3, 0.9, train)
    assert fields["train_accuracy"] == (10_000 + 2_500) / 25_000
    assert fields["test_accuracy"] == pytest.approx(0.9)
    assert fields["diverged"] is False
    assert read_result(tmp_path) == fields


@pytest.mark.parametrize("test_loss, test_accuracy, diverged", [
    (math.nan, 0.098, True),    # parameters gone NaN: argmax at one class
    (math.inf, 0.5, True),      # the loss alone is enough
    (24.0, 0.15, True),         # stuck at 1.5 × chance, the loss finite
    (2.2, 0.16, False),         # a poor model, but not at chance
])
def test_a_diverged_model_is_a_result(tmp_path, capsys, test_loss,
                                      test_accuracy, diverged):
    """A run whose loss is not finite, or whose model is no better than 1.5 ×
    chance, still writes result.json, with `diverged` true, and says so."""
    fields = evaluate(tmp_path, test_loss, test_accuracy,
                      np.zeros(100, np.float32))
    outcome = read_result(tmp_path)
    assert outcome["diverged"] is fields["diverged"] is diverged
    assert outcome["train_accuracy"] == 0.0
    if math.isnan(test_loss):
        assert math.isnan(outcome["test_loss"])
    output = capsys.readouterr().out
    assert f" diverged={diverged} " in output
    assert ("the model diverged" in output) is diverged


def test_the_result_line_shows_the_staleness_briefly(tmp_path, capsys):
    """result.json keeps the whole `staleness_in_commits`; the RESULT line
    shows its overall mean, p95 and max."""
    from guide.distributed import counters
    from guide.training import report
    staleness = counters.staleness_fields(*counters.staleness_counts(
        [0, 1, 1, 0], [0, 3, 1, 1], 2, 256))
    report.publish_result(str(tmp_path), {"algorithm": "hogwild",
                                           "staleness_in_commits": staleness})
    assert capsys.readouterr().out == (
        "RESULT algorithm=hogwild staleness_in_commits=mean:1.25,p95:3,max:3\n")
    assert read_result(tmp_path)["staleness_in_commits"] == staleness


def test_the_chiefs_first_step_is_in_its_progress_file(tmp_path, capsys):
    """The launcher times start-up to the first record of the chief's
    progress file. A chief that trains few of the steps (one of 16 workers
    that also evaluates took 21 of them) may print no progress line, so its
    first step writes a record, and only that step does."""
    import tensorflow as tf

    from guide.training import report

    hook = report.ProgressHook(tf.constant(0), tf.constant(0.0), every_n_steps=100,
                               examples_per_step=128, summary_dir=str(tmp_path))
    for step in (7, 8, 9):
        values = tf.compat.v1.train.SessionRunValues(
            results={"global_step": step, "loss": 0.5}, options=None,
            run_metadata=None)
        hook.after_run(None, values)
    records = (tmp_path / report.PROGRESS_FILE).read_text().splitlines()
    assert [json.loads(record)["global_step"] for record in records] == [7]
    assert "global_step" not in capsys.readouterr().out
