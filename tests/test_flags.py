"""The flags every example shares for the model and the run's length:
--hidden_layers, --worker_optimizer (where workers take local steps of
their own), and --epochs, which each script turns into --train_steps by
what one of its global steps trains on. No TensorFlow here: each script is
stopped where it has resolved --epochs, before it loads TensorFlow."""

import importlib.util
import json
import math
import sys

import pytest

from conftest import REPO
from guide import examples
from guide.training import data, flags

SCHEMES_WITH_A_WORKER_OPTIMIZER = {
    # folder: the default --worker_optimizer, as before the flag
    "DOWNPOUR": "adagrad", "DOWNPOUR-Easy": "sgd", "AGN": "sgd",
    "Dynamic-SGD": "sgd", "AEASGD": "sgd", "SAGN": "sgd"}


def parser_for(**kwargs):
    return flags.make_parser("An example.", "example.py", **kwargs)


def test_the_defaults_are_the_model_and_run_of_before():
    args = flags.parse(parser_for(), [])
    assert (args.hidden_layers, args.epochs, args.train_steps) == ([128], None, 1000)
    assert args.learning_rate == 0.2 and not hasattr(args, "worker_optimizer")
    assert flags.set_train_steps(args, examples_per_step=100) == 1000
    assert flags.parameter_count(flags.HIDDEN_LAYERS) == 784 * 128 + 128 + 1290


def test_hidden_layers_are_widths_from_input_to_output():
    args = flags.parse(parser_for(), ["--hidden_layers", "1000,2000,1000"])
    assert args.hidden_layers == [1000, 2000, 1000]
    # Hermans' thesis: about 4.8 million parameters, 19 MB of float32.
    assert flags.parameter_count(args.hidden_layers) == 4_798_010


def test_adam_takes_keras_rate_unless_a_rate_is_given():
    parser = parser_for(worker_optimizer="sgd", learning_rate=0.2)
    assert flags.parse(parser, []).worker_optimizer == "sgd"
    adam = flags.parse(parser, ["--worker_optimizer", "adam"])
    assert adam.learning_rate == flags.ADAM_LEARNING_RATE == 0.001
    given = flags.parse(parser, ["--worker_optimizer", "adam",
                                 "--learning_rate", "0.01"])
    assert given.learning_rate == 0.01
    assert flags.parse(parser, ["--worker_optimizer", "adagrad"]).learning_rate == 0.2
    assert "(default: 0.2; 0.001 with --worker_optimizer adam)" in " ".join(
        parser.format_help().split())


@pytest.mark.parametrize("argv, message", [
    (["--hidden_layers", "128,0"], "argument --hidden_layers: must be "
     "comma-separated positive integers, got '128,0'"),
    (["--hidden_layers", "1000,,10"], "must be comma-separated positive integers"),
    (["--hidden_layers", "100000,2000"], "--hidden_layers 100000,2000 makes a model "
     "of 278,522,010 parameters, more than 100,000,000; use narrower or fewer layers"),
    (["--epochs", "0"], "argument --epochs: must be a positive number, got '0'"),
    (["--epochs", "nan"], "argument --epochs: must be a positive number"),
    (["--epochs", "40", "--train_steps", "100"],
     "--epochs and --train_steps both set how long to train; give one of them"),
    (["--worker_optimizer", "rmsprop"], "argument --worker_optimizer: invalid "
     "choice: 'rmsprop'"),
])
def test_bad_model_and_length_flags_are_one_clear_error(argv, message):
    with pytest.raises(flags.UsageError, match=message) as error:
        flags.parse(parser_for(worker_optimizer="sgd"), argv)
    assert "\n" not in str(error.value)


def test_only_schemes_with_local_steps_take_a_worker_optimizer():
    with pytest.raises(flags.UsageError, match="unrecognized arguments"):
        flags.parse(parser_for(), ["--worker_optimizer", "adam"])


@pytest.mark.parametrize("dataset, validation, size", [
    ("synthetic", False, 20_000), ("synthetic", True, 15_000),
    ("mnist", False, 60_000), ("mnist", True, 55_000),
    ("fashion_mnist", False, 60_000)])
def test_epochs_count_the_training_set_left_for_training(dataset, validation, size):
    argv = ["--epochs", "40", "--dataset", dataset] + (
        ["--validation"] if validation else [])
    args = flags.parse(parser_for(), argv)
    assert args.train_steps is None  # until the script says what a step trains on
    assert flags.set_train_steps(args, examples_per_step=128) == math.ceil(
        40 * size / 128)
    assert args.train_steps * 128 >= 40 * size > (args.train_steps - 1) * 128
    # The defaults that follow from the run's length follow from it here too.
    assert args.log_every == args.train_steps // 10
    assert args.save_checkpoint_steps == args.train_steps // 20


def test_the_synthetic_set_has_the_size_epochs_count_in():
    dataset = data.synthetic(0)
    assert len(dataset.train_labels) == flags.TRAINING_SET_SIZES["synthetic"]
    assert flags.training_set_size("synthetic", True) == len(
        data.validation_split(dataset).train_labels)


def test_a_result_records_the_model_the_optimizer_and_the_epochs():
    args = flags.parse(parser_for(worker_optimizer="adagrad"),
                       ["--epochs", "0.5", "--hidden_layers", "64,32"])
    flags.set_train_steps(args, examples_per_step=100)
    assert flags.run_settings(args) == {
        "dataset": "synthetic", "train_steps": 100, "batch_size": 100,
        "learning_rate": 0.2, "seed": 0, "validation": False,
        "hidden_layers": [64, 32], "worker_optimizer": "adagrad", "epochs": 0.5}
    # Without --epochs, and without a worker optimizer, they are left out.
    assert set(flags.run_settings(flags.parse(parser_for(), []))) == {
        "dataset", "train_steps", "batch_size", "learning_rate", "seed",
        "validation", "hidden_layers"}


class Resolved(Exception):
    """Stops a script where it has set --train_steps from --epochs."""


def train_steps_of(example, argv, monkeypatch):
    """The --train_steps `example`'s script sets from `argv`, and what it
    says one global step trains on; the script stops right after."""
    told = {}

    def set_train_steps(args, examples_per_step):
        told["steps"] = real(args, examples_per_step)
        told["examples_per_step"] = examples_per_step
        raise Resolved

    real = flags.set_train_steps
    monkeypatch.setattr(flags, "set_train_steps", set_train_steps)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setattr(sys, "argv", [example.script, *argv])
    monkeypatch.setattr(sys, "path", list(sys.path))  # which the script extends
    path = f"{REPO}/{example.script_path}"
    spec = importlib.util.spec_from_file_location(
        f"script_{example.name.replace('-', '_')}", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with pytest.raises(Resolved):
        script.main()
    return told


WORKERS, BATCH, WINDOW, REPLICAS, EPOCHS = 4, 50, 5, 3, 2


def hosts(example):
    ps = [] if example.kind == examples.ALLREDUCE else ["--ps_hosts=h:1"]
    return [*ps, "--worker_hosts=" + ",".join(f"h:{port}" for port in
                                               range(2, WORKERS + 2)),
            "--job_name=worker", "--task_index=1"]


@pytest.mark.parametrize("example", [example for example in examples.EXAMPLES
                                     if example.name != "Non-Distributed_Setup"],
                         ids=lambda example: example.name)
def test_epochs_set_the_steps_by_what_a_global_step_trains_on(example, monkeypatch):
    """E epochs of the 20,000 synthetic examples, over 4 workers of 50-example
    minibatches: a global step of one minibatch, R = 3 (SAGN: R windows of
    T = 5 local steps), or one minibatch per worker (the allreduce)."""
    argv = ["--epochs", str(EPOCHS), "--batch_size", str(BATCH)]
    if example.kind in (examples.WINDOW, examples.SYNC_WINDOW):
        argv += ["--communication_window", str(WINDOW)]
    if example.kind in (examples.SYNC, examples.SYNC_WINDOW):
        argv += ["--replicas_to_aggregate", str(REPLICAS)]
    if example.cluster and not example.coordinator:
        argv += hosts(example)
    if example.towers:
        argv += ["--mode", "in_graph"]
    minibatches = {examples.SYNC: REPLICAS, examples.SYNC_WINDOW: REPLICAS * WINDOW,
                   examples.ALLREDUCE: WORKERS}.get(example.kind, 1)
    told = train_steps_of(example, argv, monkeypatch)
    assert told["examples_per_step"] == minibatches * BATCH
    assert told["steps"] == math.ceil(EPOCHS * 20_000 / (minibatches * BATCH))


def test_the_baseline_trains_an_epoch_in_training_set_over_batch_steps(monkeypatch):
    told = train_steps_of(examples.BASELINE, ["--epochs", "1", "--batch_size", "128"],
                          monkeypatch)
    assert told == {"steps": 157, "examples_per_step": 128}  # ⌈20,000 / 128⌉


def test_exact_synchronous_sgd_splits_one_minibatch_over_the_workers(monkeypatch):
    told = train_steps_of(examples.BY_NAME["Synchronous-SGD"],
                          ["--epochs", "1", "--batch_size", "100", "--exact",
                           *hosts(examples.BY_NAME["Synchronous-SGD"])],
                          monkeypatch)
    assert told == {"steps": 200, "examples_per_step": 100}


@pytest.mark.parametrize("folder", sorted(SCHEMES_WITH_A_WORKER_OPTIMIZER))
def test_schemes_with_local_steps_keep_their_optimizer_by_default(folder,
                                                                  monkeypatch):
    """Each scheme's --worker_optimizer keeps its optimizer of before (its
    --help says so) and takes every choice; AEAMSGD's momentum is its rule."""
    seen = []
    real = flags.parse

    def parse(parser, argv=None):
        seen.append(parser)
        return real(parser, argv)

    monkeypatch.setattr(flags, "parse", parse)
    told = train_steps_of(examples.BY_FOLDER[folder], ["--epochs", "1",
                                                       *hosts(examples.BY_FOLDER[folder])],
                          monkeypatch)
    assert told["steps"] > 0
    (parser,) = seen
    assert parser.get_default("worker_optimizer") == SCHEMES_WITH_A_WORKER_OPTIMIZER[
        folder]
    for choice in flags.WORKER_OPTIMIZERS:
        assert real(parser, ["--worker_optimizer", choice]).worker_optimizer == choice


@pytest.mark.parametrize("task, per_step, given, every", [
    # Asynchronous: 40 workers share 4,000 global steps, 100 local steps each.
    ({"type": "worker", "index": 0}, 100, [], 10),
    # Synchronous: every worker takes part in each of the 4,000.
    ({"type": "worker", "index": 0}, 40 * 100, [], 400),
    # A coordinator schedules every step itself.
    ({"type": "chief", "index": 0}, 100, [], 400),
    # Given, it is kept.
    ({"type": "worker", "index": 0}, 100, ["--log_every", "7"], 7)])
def test_each_worker_prints_about_ten_progress_lines(task, per_step, given, every,
                                                     monkeypatch):
    cluster = {"worker": [f"host:{port}" for port in range(40)], "ps": ["ps:1"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": task}))
    args = flags.parse(parser_for(), ["--train_steps", "4000", *given])
    flags.set_train_steps(args, examples_per_step=per_step)
    assert args.log_every == every
