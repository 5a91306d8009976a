"""The simulator (`python -m simulator`): its timing against the formulas
that hold for a synchronous step, a ps's link and a ring allreduce; a small
run of every scheme that learns; staleness; the examples' own defaults;
machine files; and bad input, in one line with exit code 2."""

import json
import math

import pytest

from conftest import PYTHON, run
from simulator import cli, platform, rules
from simulator.platform import shard_bytes
from simulator.schemes import SCHEMES

MODEL_BYTES = 4 * ((784 + 1) * 128 + (128 + 1) * 10)
# Links so fast and a step so short that they take no time to speak of.
INSTANT = ["--bandwidth", "1000TBps", "--latency", "0"]


def simulate(*flags, timeout=120):
    """The JSON of one simulation; it must succeed."""
    result = run([PYTHON, "-m", "simulator", *flags, "--json"], timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def harmonic(count):
    return sum(1 / k for k in range(1, count + 1))


@pytest.mark.parametrize("workers, steps", [(1, 2000), (8, 2000), (16, 1000)])
def test_a_synchronous_step_takes_the_slowest_of_w_exponential_steps(workers, steps):
    """With exponential step times of rate μ and no network time, a step of
    synchronous SGD (R = W) waits for the slowest worker: E[T] = H_W / μ.
    Over 1,000 steps or more the mean is within about 1% (one standard
    error) of it; 4% allows for four. The seed is fixed, so the draws are
    the same from run to run."""
    step_s = 0.01
    outcome = simulate("Synchronous-SGD", "--workers", str(workers), "--no_learning",
                       "--stragglers", "exp", "--step_ms", str(step_s * 1000),
                       "--train_steps", str(steps), *INSTANT)
    assert outcome["global_step"] == steps and outcome["dropped"] == 0
    mean_step = outcome["simulated_s"] / steps
    assert mean_step == pytest.approx(harmonic(workers) * step_s, rel=0.04)


@pytest.mark.parametrize("ps", [1, 2])
def test_the_ps_link_bounds_a_synchronous_step(ps):
    """W workers each pull the model and push a gradient through the ps's
    link each step: a step takes at least W × (the ps's share of the model)
    / bandwidth each way. With a computation of a microsecond, the two
    phases take all of it. replica_device_setter's round-robin puts the
    hidden layer's weights on one ps whatever S, so a second ps barely
    shortens the step: the busiest shard bounds it, not the model / S."""
    workers, steps, rate = 8, 50, 1e9 / 8  # 1 Gbit/s
    outcome = simulate("Synchronous-SGD", "--workers", str(workers), "--ps", str(ps),
                       "--no_learning", "--step_ms", "0.001", "--bandwidth", "1Gbps",
                       "--latency", "0", "--train_steps", str(steps))
    shards = shard_bytes([128], ps)
    assert outcome["ps_shard_bytes"] == shards and sum(shards) == MODEL_BYTES
    busiest = max(shards)
    mean_step = outcome["simulated_s"] / steps
    assert mean_step >= workers * MODEL_BYTES / ps / rate
    assert mean_step == pytest.approx(2 * workers * busiest / rate, rel=0.01)
    busiest_ps = f"ps{shards.index(busiest)}"
    assert outcome["link_bytes"][busiest_ps]["received"] == steps * workers * busiest
    if ps == 2:
        assert busiest > 0.98 * MODEL_BYTES


@pytest.mark.parametrize("workers", [2, 8])
def test_a_ring_allreduce_sends_2_w_minus_1_over_w_of_the_model_per_link(workers):
    """Each link of the ring carries 2 (W − 1) / W × the model's bytes each
    way per step, and the step takes that over the bandwidth, plus the
    latency of each of the ring's 2 (W − 1) hops."""
    steps, rate, latency_s, step_s = 20, 1e9 / 8, 1e-4, 1e-6
    outcome = simulate("Multi-Worker-Mirrored-Strategy", "--workers", str(workers),
                       "--no_learning", "--step_ms", str(step_s * 1000),
                       "--bandwidth", "1Gbps", "--latency", str(latency_s * 1000),
                       "--train_steps", str(steps))
    per_link = 2 * (workers - 1) / workers * MODEL_BYTES
    assert outcome["link_bytes"]["worker0"]["sent"] == pytest.approx(
        steps * per_link, abs=steps)
    assert outcome["link_bytes"]["worker0"]["received"] == pytest.approx(
        steps * per_link, abs=steps)
    expected = step_s + per_link / rate + 2 * (workers - 1) * latency_s
    assert outcome["simulated_s"] / steps == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_every_scheme_learns_and_counts_its_staleness(scheme):
    """Three workers, one pass over the synthetic data: far above chance
    (10%), staleness in commits counted (0 for the synchronous schemes),
    and the JSON's keys all there."""
    outcome = simulate(scheme, "--workers", "3", "--epochs", "1",
                       "--stragglers", "lognormal:0.5")
    for key in ("examples_per_s", "staleness_mean", "staleness_p95",
                "test_accuracy", "seconds_to_target", "accuracy_curve"):
        assert key in outcome, key
    assert outcome["examples"] >= 20_000
    assert outcome["test_accuracy"] > 0.4
    assert outcome["examples_per_s"] > 0
    if SCHEMES[scheme].kind in ("every step", "window"):
        assert outcome["staleness_mean"] > 0
    else:
        assert outcome["staleness_mean"] == 0
    # On the synthetic data accuracy levels off in the high 80s: never 97%.
    assert outcome["seconds_to_target"] is None
    reached = simulate(scheme, "--workers", "3", "--epochs", "1", "--target", "0.3")
    assert 0 < reached["seconds_to_target"] <= reached["simulated_s"]


@pytest.mark.parametrize("scheme", ["Hogwild", "DOWNPOUR"])
def test_staleness_is_zero_with_one_worker_and_grows_with_workers(scheme):
    means = {}
    for workers in (1, 4, 16):
        outcome = simulate(scheme, "--workers", str(workers), "--no_learning",
                           "--stragglers", "exp", "--train_steps", "2000")
        means[workers] = outcome["staleness_mean"]
        if workers == 1:
            assert (outcome["staleness_max"], outcome["staleness_p95"]) == (0, 0)
    assert means[1] == 0 < means[4] < means[16]
    # With W workers of equal speed a commit waits for fewer than W − 1 others.
    assert means[16] <= 15


def test_the_examples_own_defaults():
    """Each scheme's flags resolve as its script's parser resolves them."""
    downpour = cli.parse(["DOWNPOUR"])
    assert (downpour.learning_rate, downpour.worker_optimizer,
            downpour.communication_window, downpour.train_steps) == (
        0.05, "adagrad", 4, 1000)
    assert cli.parse(["DOWNPOUR", "--dataset", "mnist"]).train_steps == 9000
    assert cli.parse(["AEAMSGD", "--dataset", "mnist"]).learning_rate == 0.06
    assert cli.parse(["DOWNPOUR-Easy"]).communication_window == 2
    assert cli.parse(["SAGN"]).train_steps == 250
    assert cli.parse(["Hogwild", "--hidden_layers", "24,16"]).hidden_layers == [24, 16]
    # --epochs counts a synchronous step as R workers' minibatches.
    assert cli.parse(["Synchronous-SGD", "--workers", "4",
                      "--epochs", "1"]).train_steps == 50
    # The rule gets the settings the script derives: AGN's η̃ = T η / W.
    agn = cli.parse(["AGN", "--workers", "4"])
    assert SCHEMES["AGN"].rule(agn, 4).central_rate == pytest.approx(4 * 0.2 / 4)
    assert SCHEMES["AEASGD"].rule(cli.parse(["AEASGD"]), 3).alpha == pytest.approx(0.3)


def test_a_machine_file_shares_its_cores_among_its_tasks(tmp_path):
    """Four workers and the ps on one machine of 1 core take about four
    times as long as on one of 5 cores: each worker gets a quarter core."""
    seconds = {}
    for cores in (1, 5):
        machine = tmp_path / f"cores-{cores}.json"
        machine.write_text(json.dumps({
            "machines": [{"name": "node", "cores": cores, "bandwidth": "100GBps",
                          "latency_ms": 0}],
            "step_ms": 2.0}))
        outcome = simulate("DOWNPOUR", "--workers", "4", "--no_learning",
                           "--machine", str(machine), "--train_steps", "400")
        seconds[cores] = outcome["simulated_s"]
    assert seconds[1] / seconds[5] == pytest.approx(4, rel=0.05)


def test_this_machine_shares_its_cores():
    outcome = simulate("Hogwild", "--workers", "4", "--no_learning",
                       "--machine", "this", "--train_steps", "200")
    assert outcome["settings"]["timing"].startswith("this machine")
    # The loop's cost is the stored step runs' of this processor.
    stored = platform.stored_step_measurements()
    assert outcome["settings"]["hooked_loop_ms"] == round(
        stored.hooked_loop_s * 1000, 4)
    assert outcome["settings"]["loop_ms"] == round(stored.loop_s * 1000, 4)
    alone = simulate("Hogwild", "--workers", "4", "--no_learning",
                     "--train_steps", "200", *INSTANT)
    assert outcome["examples_per_s"] < alone["examples_per_s"]


def test_sagns_window_may_be_longer_than_its_rounds():
    """As SAGN's script allows it: its steps are rounds, each a window."""
    outcome = simulate("SAGN", "--workers", "2", "--no_learning",
                       "--communication_window", "8", "--train_steps", "3",
                       *INSTANT)
    assert outcome["global_step"] == 3


def steps_record(cpu, local, server, ps, batch=100, loop=None):
    """A line of the step tracer's runs.jsonl, CPU ms per kind of step;
    `loop`: (without hooks, hooked), the loop's CPU ms beyond session.run."""
    kinds = [{"kind": "local", "cpu_ms": local},
             {"kind": "local, through a server", "cpu_ms": server},
             {"kind": "ps", "cpu_ms": ps}]
    result = {"batch_size": batch, "cores": 2, "kinds": kinds}
    if loop:
        result["loop_overhead"] = {
            "loop, run without hooks": {"cpu_ms": loop[0], "wall_ms": 9.0},
            "loop, hooked run": {"cpu_ms": loop[1], "wall_ms": 9.0}}
    return json.dumps({"machine": {"cpu": cpu}, "result": result})


def test_this_machines_steps_are_a_workers_on_this_processor(tmp_path):
    """A worker runs its local steps in a session on its server, so a step
    costs that session's CPU, and an exchange the ps step's beyond it: a
    window of T then costs (T − 1) such steps and one ps step, as the step
    tracer's window row counts it. A run of the loop costs its CPU beyond
    session.run, hooked or not. This processor's runs are used where there
    are any; the source names the processors."""
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join([steps_record("A", 1.0, 1.5, 5.0, loop=(0.5, 2.0)),
                               steps_record("B", 2.0, 3.0, 9.0, loop=(7.0, 7.0)),
                               steps_record("A", 9.0, 9.0, 99.0, batch=1000,
                                            loop=(9.0, 9.0))]))
    stored = platform.stored_step_measurements(str(path), cpu="A")
    assert stored == (0.0015, 0.0035, 2, "A", 0.0005, 0.002)
    window = 8
    assert (window * stored.step_s + stored.exchange_s) / window == pytest.approx(
        ((window - 1) * 1.5 + 5.0) / window / 1000)
    stored = platform.stored_step_measurements(str(path), cpu="C")
    assert stored.step_s == pytest.approx(0.00225) and stored.processors == "A, B"
    assert stored.loop_s == pytest.approx(0.00375)
    # Runs from before the loop's rows charge no loop.
    path.write_text(steps_record("A", 1.0, 1.5, 5.0))
    stored = platform.stored_step_measurements(str(path), cpu="A")
    assert (stored.loop_s, stored.hooked_loop_s) == (0.0, 0.0)


def loop_machine(tmp_path, loop_ms, step_ms=1.0):
    """A machine file: a machine of one core per task, instant links."""
    machine = tmp_path / f"loop-{loop_ms}.json"
    machine.write_text(json.dumps({
        "machines": [{"name": "node", "count": 5, "bandwidth": "1000TBps",
                      "latency_ms": 0}],
        "step_ms": step_ms, "loop_ms": loop_ms}))
    return str(machine)


def test_the_loop_runs_between_a_commit_and_the_next_read(tmp_path):
    """One worker's cycle is its step and the loop's runs: Hogwild's step
    and its hooked run; a window of T local steps, each a run, then the
    commit's run and the pull's."""
    machine = loop_machine(tmp_path, 3.0, step_ms=2.0)
    hogwild = simulate("Hogwild", "--workers", "1", "--no_learning",
                       "--machine", machine, "--train_steps", "100")
    assert hogwild["simulated_s"] == pytest.approx(100 * 0.005, rel=1e-4)
    assert hogwild["settings"]["loop_ms"] == 3.0
    downpour = simulate("DOWNPOUR", "--workers", "1", "--no_learning",
                        "--communication_window", "4", "--machine", machine,
                        "--train_steps", "100")
    assert downpour["simulated_s"] == pytest.approx(
        100 / 4 * (4 * (0.002 + 0.003) + 2 * 0.003), rel=1e-4)


def test_staleness_falls_with_the_loop_as_predicted(tmp_path):
    """Others' commits that land between a worker's commit and its next
    read are not stale: with steps of mean c (exponential, so the workers
    drift apart) and a loop of g after each commit, τ averages about
    (W − 1) c / (c + g), not W − 1."""
    workers, c = 4, 1.0
    for g in (0.0, 1.0, 3.0):
        outcome = simulate("Hogwild", "--workers", str(workers), "--no_learning",
                           "--stragglers", "exp", "--train_steps", "4000",
                           "--machine", loop_machine(tmp_path, g, step_ms=c))
        assert outcome["staleness_mean"] == pytest.approx(
            (workers - 1) * c / (c + g), rel=0.08)


def test_initial_parameters_are_the_models_shapes_and_scale():
    params = rules.initial_parameters([24, 16], seed=1)
    assert {name: value.shape for name, value in params.items()} == {
        "hidden/weights": (784, 24), "hidden/biases": (24,),
        "hidden_2/weights": (24, 16), "hidden_2/biases": (16,),
        "output/weights": (16, 10), "output/biases": (10,)}
    stddev = math.sqrt(2 / (784 + 24))
    assert abs(params["hidden/weights"]).max() <= 2 * stddev + 1e-7
    assert not params["hidden/biases"].any()


BAD_INPUT = [
    (["Hogwild!"], "invalid choice"),
    ([], "SCHEME"),
    (["Hogwild", "--workers", "0"], "--workers"),
    (["Hogwild", "--bandwidth", "fast"], "10Gbps"),
    (["Hogwild", "--stragglers", "pareto"], "lognormal:SIGMA"),
    (["Hogwild", "--step_ms", "2", "--machine", "this"], "not allowed with"),
    (["Hogwild", "--machine", "no-such-file.json"], "machine file"),
    (["SAGN", "--workers", "2", "--replicas_to_aggregate", "3"], "use at most 2"),
    (["AGN", "--communication_window", "2000"], "longer than the run"),
    (["Hogwild", "--exact"], "unrecognized"),
    (["Hogwild", "--workers", "300"], "fewer workers"),
]


@pytest.mark.parametrize("flags, says", BAD_INPUT,
                         ids=[" ".join(flags) or "none" for flags, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_code_2(flags, says):
    result = run([PYTHON, "-m", "simulator", *flags], timeout=60)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("python -m simulator: error: ")
    assert says in lines[0]


@pytest.mark.parametrize("content, says", [
    ("{", "not JSON"),
    ('{"machines": []}', '"machines"'),
    ('{"machines": [{"cores": 0}], "step_ms": 1}', "cores must be a positive"),
    ('{"machines": [{"cores": 2}]}', '"step_ms"'),
    ('{"machines": [{"cores": 2, "speed": 3}], "step_ms": 1}', "unknown key 'speed'"),
    ('{"machines": [{"bandwidth": "1 parsec"}], "step_ms": 1}', "10Gbps"),
    ('{"machines": [{}], "step_ms": 1, "loop_ms": -1}', "milliseconds, 0 or more"),
    ('{"machines": [{}], "step_ms": 1, "loop_ms": "2ms"}', "loop_ms must be"),
])
def test_a_bad_machine_file_is_one_line_and_exit_code_2(content, says, tmp_path):
    machine = tmp_path / "machine.json"
    machine.write_text(content)
    result = run([PYTHON, "-m", "simulator", "Hogwild", "--no_learning",
                  "--machine", str(machine)], timeout=60)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and says in lines[0]
