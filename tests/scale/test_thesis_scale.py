"""Not part of `make test` (`make test-scale`; a few minutes and several GiB
of memory): Hermans' thesis's settings at the sizes of its grid, on the
synthetic data. Every scheme whose workers keep a local optimizer steps
with Adam on a deeper model; AGN trains the 784-1000-2000-1000-10 model
with 10 Adam workers, and AEASGD with 40 (each task forked from one
TensorFlow import, as LAUNCH_PRELOAD_TENSORFLOW=1 does)."""

import pytest

from conftest import read_result, run

THESIS = ["--hidden_layers", "1000,2000,1000", "--worker_optimizer", "adam",
          "--batch_size", "128"]


@pytest.mark.parametrize("folder", ["DOWNPOUR", "DOWNPOUR-Easy", "AGN",
                                    "Dynamic-SGD", "AEASGD", "SAGN"])
def test_every_local_optimizer_scheme_runs_adam_on_a_deeper_model(folder,
                                                                  run_dir):
    logdir = run_dir / "run"
    result = run(["bash", f"{folder}/run.sh", "--workers", "3",
                  "--hidden_layers", "64,32,16", "--worker_optimizer", "adam",
                  "--epochs", "0.05", "--logdir", str(logdir)], timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert (outcome["hidden_layers"], outcome["worker_optimizer"],
            outcome["learning_rate"]) == ([64, 32, 16], "adam", 0.001)
    # 1,000 examples: 10 minibatches of 100; in SAGN's one round, 3 windows of 4.
    assert outcome["global_step"] >= outcome["train_steps"] == (
        1 if folder == "SAGN" else 10)


@pytest.mark.parametrize("folder, workers, epochs", [
    ("AGN", 10, 0.5),      # 10,000 examples: 79 steps of 128
    ("AEASGD", 40, 1.0),   # 157 steps: each worker about one window of 4
])
def test_the_thesis_model_at_the_grids_worker_counts(folder, workers, epochs,
                                                     run_dir):
    logdir = run_dir / "run"
    result = run(["bash", f"{folder}/run.sh", "--workers", str(workers),
                  "--ignore_memory_check", *THESIS, "--epochs", str(epochs),
                  "--logdir", str(logdir)], timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert outcome["workers"] == workers
    assert outcome["hidden_layers"] == [1000, 2000, 1000]
    assert outcome["global_step"] >= outcome["train_steps"]
