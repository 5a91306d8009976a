"""Hermans' thesis's settings, end to end on the synthetic data: AGN with
the 784-1000-2000-1000-10 model, Adam workers at Keras's rate, minibatches
of 128 and a length in epochs; the evaluator task tests the chief's
checkpoints of that model. A few steps only (about 7 s): the runs at the
thesis's scale are in tests/scale."""

import math
import re

from conftest import read_result, run

THESIS = ["--hidden_layers", "1000,2000,1000", "--worker_optimizer", "adam",
          "--batch_size", "128"]


def test_agn_trains_the_thesis_model_for_a_share_of_an_epoch(run_dir):
    logdir = run_dir / "run"
    epochs = 0.1  # of the 20,000 synthetic examples: 2,000, or 16 steps of 128
    result = run(["bash", "AGN/run.sh", "--evaluator", *THESIS, "--epochs",
                  str(epochs), "--save_checkpoint_steps", "8",
                  "--logdir", str(logdir)], timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert {name: outcome[name] for name in (
        "hidden_layers", "worker_optimizer", "learning_rate", "batch_size",
        "epochs", "train_steps")} == {
        "hidden_layers": [1000, 2000, 1000], "worker_optimizer": "adam",
        "learning_rate": 0.001, "batch_size": 128, "epochs": epochs,
        "train_steps": math.ceil(epochs * 20_000 / 128)}
    assert outcome["global_step"] >= outcome["train_steps"]
    # The evaluator built the same model: it tested the final checkpoint
    # and found the chief's figures.
    tested = re.findall(r"^global_step (\d+) test_accuracy (\S+)",
                        (logdir / "logs" / "evaluator-0.log").read_text(),
                        re.MULTILINE)
    assert tested[-1] == (str(outcome["global_step"]),
                          f"{outcome['test_accuracy']:.4f}")
