"""Bytes on the wire: what the launcher measures from the kernel's interface
counters (launcher/traffic.py) agrees with what the graph moves."""

import json
import os
import re
import shutil
import time

import pytest

from conftest import REPO, read_result, run
from guide.training.flags import HIDDEN_LAYERS, parameter_count
from launcher import network

pytestmark = pytest.mark.skipif(
    network.namespaces_unavailable() is not None,
    reason="this system does not allow user namespaces")

# The model's float32 parameters: what one pull, or one push, carries.
MODEL_BYTES = 4 * parameter_count(HIDDEN_LAYERS)
# Measured over the graph's bytes: headers (few, with segmentation offload
# on a veth), gRPC's framing and the small tensors (the global step, the
# counters, the queues' tokens). Three runs each beside a loaded machine
# measured 1.008-1.010 (Hogwild), 1.020-1.023 (DOWNPOUR, whose small tensors
# weigh more against a window's one exchange) and 1.012-1.013
# (Synchronous-SGD). Below: the counters are read every 50 ms and taken
# at each progress record's time by interpolation, which a burst of
# traffic between two readings would make undercount a little.
ABOVE_THE_GRAPH = 1.05
BELOW_THE_GRAPH = 0.97


def graph_bytes_per_step(result):
    """What the graph moves per global step: every worker pulls the model
    and pushes a gradient (or an update) of the same size, once per
    minibatch (Hogwild: one global step), per window of T minibatches
    (DOWNPOUR, T global steps), or once per worker per synchronous step."""
    window = result.get("communication_window", 1)
    per_exchange = 2 * MODEL_BYTES
    if result["algorithm"] == "synchronous-sgd":
        return result["workers"] * per_exchange
    return per_exchange / window


def read_launch(logdir):
    """What the launcher measured of a run (launch.json)."""
    with open(os.path.join(logdir, "launch.json")) as stream:
        return json.load(stream)


def copied(folder, script, into):
    """`script` of `folder` copied into a folder of a user's own: the launcher
    must treat it as it treats the example, from its launch block alone."""
    into.mkdir()
    copy = into / f"my_{script}"
    shutil.copy(os.path.join(REPO, folder, script), copy)
    return ["bash", os.path.join(REPO, "launch.sh"), "--ps", "1", "--workers",
            "2", "--", str(copy)]


@pytest.mark.parametrize("folder, mode", [
    ("Hogwild", "hosts"), ("DOWNPOUR", "private"), ("Synchronous-SGD", "private")])
def test_measured_bytes_per_step_match_the_graph(run_dir, folder, mode):
    logdir = run_dir / "run"
    launched = time.monotonic()
    # Hogwild's run is a copy of its script, elsewhere: the same contract,
    # the same measurement.
    command = (copied(folder, "hogwild.py", run_dir / "mine")
               if folder == "Hogwild" else
               ["bash", os.path.join(REPO, folder, "run.sh")])
    # No checkpoint and no test evaluation within the run: each reads the
    # whole model from the ps, which is traffic of its own.
    result = run(command + ["--network", mode, "--train_steps", "400",
                            "--log_every", "10", "--save_checkpoint_steps",
                            "100000", "--eval_every", "100000",
                            "--logdir", str(logdir)], timeout=180)
    elapsed = time.monotonic() - launched
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    saved = read_result(logdir)
    launch = read_launch(logdir)
    # The chief's training lies within the launch's time to its result,
    # which lies within the command's.
    to_result = launch["timeline"]["launch_to_result_s"]
    assert saved["wall_s"] < to_result < elapsed, (saved, launch, elapsed)
    measured = launch["network"]
    line = re.search(r"^\[launch\] ([\d,]+) bytes on the wire over ([\d,]+) "
                     r"steps, ([\d,]+) per example", result.stdout, re.MULTILINE)
    assert line, result.stdout[-2000:]
    assert [int(field.replace(",", "")) for field in line.groups()] == [
        measured["bytes"], measured["steps"], measured["bytes_per_example"]]
    assert measured["steps"] >= 300, measured
    expected = graph_bytes_per_step(saved)
    print(f"bytes per step: measured {measured['bytes_per_step']}, graph "
          f"{expected:.0f}, ratio {measured['bytes_per_step'] / expected:.4f}")
    assert (BELOW_THE_GRAPH <= measured["bytes_per_step"] / expected
            <= ABOVE_THE_GRAPH), (measured, expected)
    examples_per_step = saved["examples"] / saved["global_step"]
    assert measured["bytes_per_example"] == pytest.approx(
        measured["bytes_per_step"] / examples_per_step, rel=0.01)
    if mode == "hosts":
        links = measured["links"]
        assert set(links) == {"ps:0", "worker:0", "worker:1"}
        # Every byte one task sends, another receives.
        sent = sum(link["sent"] for link in links.values())
        received = sum(link["received"] for link in links.values())
        assert sent == measured["bytes"]
        assert received == pytest.approx(sent, rel=0.01)
        # The ps's link carries every pull and every push: half of all bytes
        # each way, the busiest link of the job.
        assert measured["busiest_link"] == "ps:0"
        print(f"ps:0 sent {links['ps:0']['sent'] / (sent / 2):.4f} and received "
              f"{links['ps:0']['received'] / (sent / 2):.4f} of half the bytes")
        # (Measured within 0.1% of half, in each of three runs.)
        assert links["ps:0"]["sent"] == pytest.approx(sent / 2, rel=0.01)
        assert links["ps:0"]["received"] == pytest.approx(sent / 2, rel=0.01)
    else:
        assert "links" not in measured


def test_a_run_with_no_progress_line_gets_its_timeline_but_no_bytes(run_dir):
    """Bytes are counted between the chief's first and last progress
    records; a run too short to write two has none, but its time to its
    result is still kept."""
    logdir = run_dir / "run"
    result = run(["bash", os.path.join(REPO, "Hogwild", "run.sh"),
                  "--train_steps", "20", "--log_every", "1000", "--logdir",
                  str(logdir)], timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert re.search(r"^\[worker:0\] RESULT .* seed=0 hidden_layers=128( |$)",
                     result.stdout, re.MULTILINE)
    launch = read_launch(logdir)
    assert "network" not in launch and "network" not in read_result(logdir)
    assert launch["timeline"]["launch_to_result_s"] > read_result(logdir)["wall_s"]


def test_the_host_network_is_not_measured(run_dir):
    """On this machine's network the loopback carries others' traffic too."""
    logdir = run_dir / "run"
    result = run(["bash", os.path.join(REPO, "Hogwild", "run.sh"), "--network",
                  "host", "--train_steps", "40", "--logdir", str(logdir)],
                 timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert re.search(r"^\[worker:0\] RESULT .* seed=0 hidden_layers=128( |$)",
                     result.stdout, re.MULTILINE)
    assert "network" not in read_launch(logdir)
    assert "network" not in read_result(logdir)
