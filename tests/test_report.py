"""What the chief reports at the end of a run."""

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

    dataset = type("Dataset", (), {"test_images": None, "test_labels": None})
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
