"""Each scheme does what its paper says: with one worker, a fixed seed and
fixed minibatches, the central parameters after k communication windows
equal a NumPy re-implementation of the update rule."""

import json
import os

import numpy as np
import pytest

import reference
from conftest import PYTHON, read_result, run, run_together
from guide.training import data

SEED = 3
BATCH = 20
WINDOW = 3
WINDOWS = 16
SCHEMES = {
    # folder: (NumPy update rule, learning rate)
    "DOWNPOUR": (reference.downpour, 0.05),
    "DOWNPOUR-Easy": (reference.downpour_easy, 0.2),
    # One worker: AGN's default η̃ = T η / W is T η.
    "AGN": (lambda central, batches, window, windows, learning_rate: reference.agn(
        central, batches, window, windows, learning_rate,
        central_rate=window * learning_rate), 0.2),
}


# Checkpoints at the start and the end only: the tests read both, and the
# periodic ones in between would rotate the first away.
FIRST_AND_LAST = ["--save_checkpoint_steps", "1000000"]


def command(folder, logdir, *, window, steps, learning_rate, workers=1):
    """One ps and `workers` workers through the example's run.sh; with
    `learning_rate` None, the script's default rate."""
    rate = [] if learning_rate is None else ["--learning_rate", str(learning_rate)]
    return ["bash", f"{folder}/run.sh", "--workers", str(workers), "--seed", str(SEED),
            "--batch_size", str(BATCH), *rate,
            "--communication_window", str(window), "--train_steps", str(steps),
            *FIRST_AND_LAST, "--logdir", str(logdir)]


def checkpoint(logdir, step, names=reference.NAMES):
    """The central parameters the chief saved from the ps at `step` (with no
    ps, its own copy), by name or, from a tf.train.Checkpoint, by object."""
    # Here, so that other test files need not pay for loading TensorFlow.
    from guide.distributed.evaluator import read_variables

    values = read_variables(os.path.join(logdir, f"model.ckpt-{step}"), names)
    return {name: value.astype(np.float64) for name, value in values.items()}


def local_copy(logdir, names=reference.NAMES):
    """The chief's own parameters θ, which it saved to local_copy.npz."""
    with np.load(os.path.join(logdir, "local_copy.npz")) as saved:
        assert sorted(saved.files) == sorted(names)
        return {name: saved[name].astype(np.float64) for name in names}


def run_all(commands, timeout):
    """Runs the commands at once; each must succeed."""
    for name, (code, output) in run_together(commands, timeout=timeout).items():
        assert code == 0, f"{name}: {output[-3000:]}"


def worker_batches(index=0, count=1):
    """The minibatches worker `index` of `count` draws, as the scripts do."""
    dataset = data.synthetic(SEED)
    shard = data.shard(dataset.train_images, dataset.train_labels, index, count)
    return data.Batches(*shard, BATCH, seed=SEED + index)


def relative_errors(actual, expected):
    assert actual.keys() == expected.keys()
    return {name: np.linalg.norm(actual[name] - expected[name])
            / np.linalg.norm(expected[name]) for name in expected}


def assert_close(actual, expected, rtol):
    for name, error in relative_errors(actual, expected).items():
        print(f"{name}: relative error {error:.2e}")
        assert error < rtol, f"{name}: relative error {error:.2e}"


def assert_follows(replay, actual, rtol=1e-5):
    """`actual`, the parameters a run saved (a dict, or a tuple of dicts),
    equal what `replay()` computes with NumPy (the same shape), where
    float32 rounding decides a ReLU's side taking either side of its kink
    (reference.either_side)."""
    def pairs(expected):
        if isinstance(actual, tuple):
            return zip(actual, expected)
        return [(actual, expected)]

    def matches(expected):
        return all(max(relative_errors(a, e).values()) < rtol
                   for a, e in pairs(expected))

    expected = reference.either_side(replay, matches)
    for a, e in pairs(replay() if expected is None else expected):
        assert_close(a, e, rtol)


def assert_moved(final, initial):
    """Every parameter moved, by far more than the tolerances used here."""
    assert final.keys() == initial.keys()
    for name in final:
        moved = np.linalg.norm(final[name] - initial[name])
        assert moved > 1e-3 * np.linalg.norm(final[name]), name


@pytest.mark.parametrize("folder", SCHEMES)
def test_central_parameters_follow_the_update_rule(folder, run_dir):
    update_rule, learning_rate = SCHEMES[folder]
    logdir = run_dir / "run"
    steps = WINDOW * WINDOWS
    result = run(command(folder, logdir, window=WINDOW, steps=steps,
                         learning_rate=learning_rate), timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert (outcome["global_step"], outcome["commits"]) == (steps, [WINDOWS])
    assert outcome["mean_staleness"] == 0  # nobody else commits in between
    assert outcome["staleness_in_commits"]["per_worker"] == [
        {"commits": WINDOWS, "mean": 0.0, "p50": 0, "p95": 0, "max": 0,
         "histogram": {"0": WINDOWS}}]

    initial = checkpoint(logdir, 0)
    final = checkpoint(logdir, steps)
    assert_moved(final, initial)
    # ...and exactly as the formula says (float32 against float64).
    assert_follows(lambda: update_rule(initial, worker_batches(), WINDOW, WINDOWS,
                                       learning_rate), final)


def test_agn_with_window_one_is_downpour_easy(run_dir):
    """With T = 1 and one worker, η̃ = η and a / T is −η g: AGN's commit is
    DOWNPOUR-Easy's."""
    steps = 5
    folders = ("AGN", "DOWNPOUR-Easy")
    run_all({folder: command(folder, run_dir / folder, window=1, steps=steps,
                             learning_rate=0.2) for folder in folders}, timeout=120)
    agn, downpour_easy = (checkpoint(run_dir / folder, steps) for folder in folders)
    assert_close(agn, downpour_easy, rtol=1e-7)
    initial = checkpoint(run_dir / "AGN", 0)
    assert_follows(lambda: reference.downpour_easy(initial, worker_batches(), 1,
                                                   steps, 0.2), agn)


def test_exact_synchronous_sgd_is_one_process_with_the_whole_batch(run_dir):
    """W workers, each taking its slice of the same global batch and giving
    exactly one gradient per step, follow Non-Distributed_Setup.py."""
    steps, batch = 6, 60  # 60 splits evenly over 2 and over 3 workers
    common = ["--seed", str(SEED), "--batch_size", str(batch),
              "--train_steps", str(steps), *FIRST_AND_LAST]
    commands = {"baseline": [PYTHON, "Non-Distributed_Setup.py", *common,
                             "--logdir", str(run_dir / "baseline")]}
    for workers in (2, 3):
        commands[workers] = ["bash", "Synchronous-SGD/run.sh", "--exact",
                             "--workers", str(workers), *common,
                             "--logdir", str(run_dir / f"workers-{workers}")]
    run_all(commands, timeout=150)
    baseline = checkpoint(run_dir / "baseline", steps)
    assert_moved(baseline, checkpoint(run_dir / "baseline", 0))
    for workers in (2, 3):
        outcome = read_result(run_dir / f"workers-{workers}")
        assert outcome["gradients_computed"] == [steps] * workers
        assert outcome["gradients_dropped"] == 0
        assert_close(checkpoint(run_dir / f"workers-{workers}", steps), baseline,
                     rtol=1e-5)


def test_an_allreduce_step_is_one_step_on_every_workers_minibatch(run_dir):
    """MultiWorkerMirroredStrategy, 2 workers of B examples each: every step
    is one SGD step on the 2·B examples together, on every worker."""
    steps, workers, learning_rate = 30, 2, 0.2
    logdir = run_dir / "run"
    result = run(["bash", "Multi-Worker-Mirrored-Strategy/run.sh", "--seed",
                  str(SEED), "--batch_size", str(BATCH), "--learning_rate",
                  str(learning_rate), "--train_steps", str(steps),
                  *FIRST_AND_LAST, "--logdir", str(logdir)], timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert (outcome["global_step"], outcome["workers"], outcome["ps"]) == (
        steps, workers, 0)
    initial = checkpoint(logdir, 0)
    final = checkpoint(logdir, steps)
    assert_moved(final, initial)
    assert_follows(lambda: reference.allreduce_sgd(
        initial, [worker_batches(index, workers) for index in range(workers)],
        steps, learning_rate), final)


@pytest.mark.parametrize("workers, central_rate", [(1, 0.3), (2, None)])
def test_sagn_averages_every_workers_normalised_update(workers, central_rate,
                                                       run_dir):
    """Synchronous, so deterministic even with two workers: each round
    averages exactly one a / T from every worker, a at the rate η̃ given, by
    default T η."""
    logdir = run_dir / "run"
    given = [] if central_rate is None else ["--central_learning_rate",
                                             str(central_rate)]
    result = run(command("SAGN", logdir, window=WINDOW, steps=WINDOWS,
                         learning_rate=0.2, workers=workers) + given, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert outcome["global_step"] == WINDOWS
    assert (outcome["commits"], outcome["commits_dropped"]) == ([WINDOWS] * workers, 0)
    initial = checkpoint(logdir, 0)
    final = checkpoint(logdir, WINDOWS)
    assert_moved(final, initial)
    assert_follows(lambda: reference.sagn(
        initial, [worker_batches(index, workers) for index in range(workers)],
        WINDOW, WINDOWS, 0.2, central_rate=central_rate or WINDOW * 0.2), final)


def test_a_workers_own_rate_drives_the_optimizer(run_dir):
    """One worker with rate 0.1 under a base rate of 0.2 and momentum: the
    run is momentum SGD with rate 0.1, so the worker's rate, not the base
    one, scales its updates, and not only with plain SGD."""
    steps = 40
    logdir = run_dir / "run"
    result = run(["bash", "Synchronous-SGD-different-learning-rates/run.sh",
                  "--workers", "1", "--seed", str(SEED), "--batch_size", str(BATCH),
                  "--optimizer", "momentum", "--learning_rate", "0.2",
                  "--learning_rates", "0.1", "--train_steps", str(steps),
                  *FIRST_AND_LAST, "--logdir", str(logdir)], timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    initial = checkpoint(logdir, 0)
    final = checkpoint(logdir, steps)
    assert_moved(final, initial)
    assert_follows(lambda: reference.momentum(initial, worker_batches(), steps, 0.1),
                   final)


@pytest.mark.parametrize("folder, learning_rate, momentum", [
    ("AEASGD", 0.2, 0.0), ("AEAMSGD", 0.02, 0.9)])
def test_elastic_averaging_moves_both_copies_by_the_elastic_difference(
        folder, learning_rate, momentum, run_dir):
    """One worker: after k windows, the centre θ̃ (checkpoint) and the
    worker's own θ (local_copy.npz) both follow Algorithm 1 (or 2) of the
    paper; with one worker, α defaults to 0.9."""
    logdir = run_dir / "run"
    steps = WINDOW * WINDOWS
    result = run(command(folder, logdir, window=WINDOW, steps=steps,
                         learning_rate=learning_rate), timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert (outcome["alpha"], outcome["commits"]) == (0.9, [WINDOWS])
    initial = checkpoint(logdir, 0)
    central = checkpoint(logdir, steps)
    local = local_copy(logdir)
    assert_moved(central, initial)
    assert_follows(lambda: reference.aeasgd(
        initial, worker_batches(), WINDOW, WINDOWS, learning_rate, alpha=0.9,
        momentum=momentum), (central, local))
    # The elastic force leaves the two copies apart, by (1 − α) of the gap.
    assert not np.allclose(local["hidden/weights"], central["hidden/weights"])


def test_agn_commits_the_displacement_of_the_workers_own_adam(run_dir):
    """--worker_optimizer adam at its default rate, Keras's η = 0.001: the
    worker's own Adam, its moments kept from window to window, takes the T
    local steps, and the commit is a / T with a = (η̃ / η)(θ − θ̃); η̃ = 2 η
    here, so each commit moves θ̃ by 2/3 of the worker's displacement."""
    logdir = run_dir / "run"
    steps, central_rate = WINDOW * WINDOWS, 0.002
    result = run(command("AGN", logdir, window=WINDOW, steps=steps, learning_rate=None)
                 + ["--worker_optimizer", "adam",
                    "--central_learning_rate", str(central_rate)], timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert (outcome["worker_optimizer"], outcome["learning_rate"]) == ("adam", 0.001)
    assert (outcome["global_step"], outcome["commits"]) == (steps, [WINDOWS])
    initial = checkpoint(logdir, 0)
    final = checkpoint(logdir, steps)
    assert_moved(final, initial)
    assert_follows(lambda: reference.agn(
        initial, worker_batches(), WINDOW, WINDOWS, 0.001, central_rate,
        optimizer=reference.Adam(0.001)), final)


def test_a_deeper_model_follows_aeasgd_with_the_workers_own_adam(run_dir):
    """--hidden_layers 24,16: the checkpoints and local_copy.npz hold the
    layers as hidden/, hidden_2/ and output/; the local steps are the
    worker's own Adam's (α = 0.9 with one worker, whatever the rate)."""
    logdir = run_dir / "run"
    steps, names = WINDOW * WINDOWS, reference.names([24, 16])
    result = run(command("AEASGD", logdir, window=WINDOW, steps=steps,
                         learning_rate=None)
                 + ["--worker_optimizer", "adam", "--hidden_layers", "24,16"],
                 timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = read_result(logdir)
    assert (outcome["alpha"], outcome["hidden_layers"]) == (0.9, [24, 16])
    initial = checkpoint(logdir, 0, names)
    assert {name: value.shape for name, value in initial.items()} == {
        "hidden/weights": (784, 24), "hidden/biases": (24,),
        "hidden_2/weights": (24, 16), "hidden_2/biases": (16,),
        "output/weights": (16, 10), "output/biases": (10,)}
    central = checkpoint(logdir, steps, names)
    local = local_copy(logdir, names)
    assert_moved(central, initial)
    assert_follows(lambda: reference.aeasgd(
        initial, worker_batches(), WINDOW, WINDOWS, 0.001, alpha=0.9,
        optimizer=reference.Adam(0.001)), (central, local))


def test_dynamic_sgd_scales_each_commit_by_its_staleness(run_dir):
    """Two workers, so that commits are stale; the ps records the order in
    which it applied them, and NumPy replays that order: 200 commits."""
    logdir = run_dir / "run"
    result = run(command("Dynamic-SGD", logdir, window=WINDOW, steps=600,
                         learning_rate=0.2, workers=2), timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with open(logdir / "commits.json") as stream:
        record = json.load(stream)
    commits = record["commits"]
    outcome = read_result(logdir)
    assert len(commits) * WINDOW == outcome["global_step"]
    assert {commit["worker"] for commit in commits} == {0, 1}
    assert max(commit["staleness"] for commit in commits) > 0
    # The share of the displacements that reached θ̃, which sets how long to train.
    scales = [1 / (commit["staleness"] + 1) for commit in commits]
    assert outcome["mean_commit_scale"] == pytest.approx(
        sum(scales) / len(scales), abs=5e-4)
    # The histogram of τ is the record's, counted the way the other schemes'
    # ps counts it.
    taus = [commit["staleness"] for commit in commits]
    in_commits = outcome["staleness_in_commits"]
    assert in_commits["overall"]["commits"] == len(commits)
    assert in_commits["overall"]["mean"] == round(np.mean(taus), 2)
    assert in_commits["overall"]["histogram"] == {
        str(tau): taus.count(tau) for tau in sorted(set(taus))}
    for worker, summary in enumerate(in_commits["per_worker"]):
        assert summary["max"] == max(commit["staleness"] for commit in commits
                                     if commit["worker"] == worker)
    initial = checkpoint(logdir, 0)
    central = checkpoint(logdir, outcome["global_step"])
    local = local_copy(logdir)

    def replay():
        central, locals_ = reference.dynamic_sgd(
            initial, [worker_batches(0, 2), worker_batches(1, 2)], WINDOW, 0.2,
            commits, record["clock_at_last_pull"])
        return central, locals_[0]  # the chief's θ

    assert len(commits) >= 200
    assert_follows(replay, (central, local))


def test_towers_on_distinct_devices_are_one_big_batch(run_dir):
    """In-graph towers on three logical CPU devices: each tower really ran on
    a device of its own, and the averaged update is the whole batch's."""
    steps, batch = 6, 60
    common = ["--seed", str(SEED), "--batch_size", str(batch),
              "--train_steps", str(steps), *FIRST_AND_LAST]
    run_all({"baseline": [PYTHON, "Non-Distributed_Setup.py", *common,
                          "--logdir", str(run_dir / "baseline")],
             "towers": ["bash", "Multiple-GPUs-Single-Machine/run_towers.sh",
                        "--towers", "3", *common, "--logdir", str(run_dir / "towers")]},
            timeout=120)
    devices = read_result(run_dir / "towers")["devices"]
    assert devices == ["device:CPU:0", "device:CPU:1", "device:CPU:2"]
    assert_close(checkpoint(run_dir / "towers", steps),
                 checkpoint(run_dir / "baseline", steps), rtol=1e-5)


def test_either_side_takes_the_other_side_only_at_the_kink():
    """A replay whose one pre-activation sits at ReLU's kink matches a run
    that took the other side there, and nothing else: a step that differs
    anywhere else still fails."""
    rng = np.random.default_rng(SEED)
    params = {"hidden/weights": rng.normal(0, 0.1, (784, 128)),
              "hidden/biases": np.zeros(128),
              "output/weights": rng.normal(0, 0.1, (128, 10)),
              "output/biases": np.zeros(10)}
    images, labels = rng.random((4, 784)), np.array([0, 1, 2, 3])
    # Unit 7 of example 2 at zero, to float32 rounding: 1e-9 of its terms.
    weights = params["hidden/weights"][:, 7]
    params["hidden/biases"][7] = (1e-9 * np.abs(images[2]) @ np.abs(weights)
                                  - images[2] @ weights)

    def replay():
        return reference._plus_scaled(
            params, -0.5, reference.gradients(params, images, labels))

    as_float64 = replay()
    with reference.taking_other_side({(0, 0, 2, 7)}):
        other_side = replay()
    assert max(relative_errors(other_side, as_float64).values()) > 1e-5

    def matching(actual):
        return lambda expected: max(relative_errors(actual, expected).values()) < 1e-7

    assert reference.either_side(replay, matching(as_float64)) is not None
    assert reference.either_side(replay, matching(other_side)) is not None
    elsewhere = dict(as_float64)
    elsewhere["output/biases"] = elsewhere["output/biases"] + 1e-3
    assert reference.either_side(replay, matching(elsewhere)) is None
