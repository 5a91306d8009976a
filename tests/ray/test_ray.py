"""Multi-Worker-Mirrored-Strategy under Ray Train on a Ray cluster of two
nodes: the head on this machine, the second node in a network namespace of
its own, joined to this one by a veth pair, so that the two training workers
sit on different addresses. `make test-ray` installs Ray and runs it; it
needs root (for the namespace) and iproute2's `ip`.
"""

import fcntl
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import (
    PYTHON,
    REPO,
    Running,
    env_without_tf_config,
    error_lines,
    processes_mentioning,
    read_result,
    run,
)

RAY_PACKAGES = os.path.join(sys.prefix, "ray-packages")
RAY = [PYTHON, "-m", "ray.scripts.scripts"]
EXAMPLE = os.path.join(REPO, "Multi-Worker-Mirrored-Strategy")
# The /24 networks the veth pair may take: the first one no interface here
# uses, so that a pair another run left behind cannot take the replies.
CANDIDATE_SUBNETS = [ipaddress.ip_network(f"10.77.{n}.0/24") for n in range(256)]
SUBNET_LOCK = os.path.join(tempfile.gettempdir(), "ray-test-subnets.lock")
START_TIMEOUT_S = 120
RUN_TIMEOUT_S = 300
STOP_TIMEOUT_S = 30
# Ray's token authentication, with a token of this test's own: a token
# another cluster left in ~/.ray must not decide who may join.
AUTH_TOKEN = secrets.token_hex(32)
# Tiny runs on the synthetic data: both must end at the same accuracy.
TRAINING_FLAGS = ["--train_steps", "60", "--log_every", "20"]


def ray_env(**extra):
    # Ray goes after the environment's own packages, as run_ray.sh puts it.
    paths = [REPO, os.environ.get("PYTHONPATH", ""), RAY_PACKAGES]
    return env_without_tf_config(
        PYTHONPATH=os.pathsep.join(path for path in paths if path),
        RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=AUTH_TOKEN, **extra)


def ip(*arguments):
    """`ip ARGUMENTS`; its output."""
    return subprocess.run(["ip", *arguments], check=True, timeout=30,
                          capture_output=True, text=True).stdout


def free_port(address):
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def unused_subnet():
    """The first candidate that holds no address here and that no route as
    specific as it (or more) overlaps; broader routes lose to its own."""
    addresses, routes = ip("-o", "-4", "addr"), ip("-4", "route")
    interfaces = [ipaddress.ip_interface(word)
                  for word in re.findall(r"\binet (\S+)", addresses)]
    in_use = [ipaddress.ip_network(interface.ip) for interface in interfaces]
    in_use += [interface.network for interface in interfaces
               if interface.network.prefixlen >= 24]
    in_use += [network for network in (
        ipaddress.ip_network(line.split()[0], strict=False)
        for line in routes.splitlines() if line[:1].isdigit())
        if network.prefixlen >= 24]
    for subnet in CANDIDATE_SUBNETS:
        if not any(subnet.overlaps(network) for network in in_use):
            return subnet
    pytest.fail("every 10.77.N.0/24 network is in use on this machine")


def namespaces():
    listed = ip("netns", "list")
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def links():
    return ip("-o", "link")


@pytest.fixture
def namespace():
    """A network namespace joined to this one by a veth pair on a /24 no
    interface uses: yields (name, this end's address, the namespace end's).
    Deleted afterwards, and checked gone."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("this test needs root and iproute2's `ip` (apt-get "
                    "install iproute2) to make a network namespace")
    name = f"raynode{os.getpid()}"
    host_end, node_end = f"rayh{os.getpid()}"[:15], f"rayn{os.getpid()}"[:15]
    ip("netns", "add", name)
    try:
        ip("link", "add", host_end, "type", "veth", "peer", "name", node_end,
           "netns", name)
        # Chosen and claimed under a lock, so that two runs cannot both
        # choose the same network.
        with open(SUBNET_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            head_ip, node_ip = list(unused_subnet().hosts())[:2]
            ip("addr", "add", f"{head_ip}/24", "dev", host_end)
        ip("link", "set", host_end, "up")
        ip("-n", name, "addr", "add", f"{node_ip}/24", "dev", node_end)
        ip("-n", name, "link", "set", node_end, "up")
        ip("-n", name, "link", "set", "lo", "up")
        yield name, str(head_ip), str(node_ip)
    finally:
        # Deleting one end of a veth pair deletes both, at once; deleting the
        # namespace would only once its last process has gone.
        subprocess.run(["ip", "link", "delete", host_end], check=False,
                       timeout=30, capture_output=True)
        ip("netns", "delete", name)
    assert name not in namespaces()
    assert host_end not in links()


def stop(node):
    """SIGTERM to `ray start --block`, which stops the node's processes,
    then SIGKILL to its group if it has not exited in time."""
    if node.process.poll() is None:
        os.killpg(node.process.pid, signal.SIGTERM)
        try:
            node.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            node.kill()


def leftovers_after(text, timeout):
    """Processes whose command line names `text`, once `timeout` seconds
    have passed or none is left."""
    deadline = time.monotonic() + timeout
    while processes_mentioning(text) and time.monotonic() < deadline:
        time.sleep(0.2)  # polling, with a deadline, for the node's processes
    return processes_mentioning(text)


@pytest.fixture
def cluster(namespace):
    """A Ray cluster of two nodes, one CPU each, so that each Ray Train
    worker has a node to itself: the head here, the other in `namespace`.
    Yields the head's address and both nodes' addresses; afterwards no Ray
    process may be left."""
    name, head_ip, node_ip = namespace
    # Every Ray process names this folder (its session) on its command line.
    temp_dir = tempfile.mkdtemp(prefix="ray-")
    port = free_port(head_ip)
    common = ["--block", "--num-cpus", "1", "--temp-dir", temp_dir,
              "--disable-usage-stats"]
    nodes = []
    try:
        head = Running([*RAY, "start", "--head", "--node-ip-address", head_ip,
                        "--port", str(port), "--include-dashboard", "false",
                        *common], env=ray_env())
        nodes.append(head)
        head.wait_for_line(r"Ray runtime started", START_TIMEOUT_S)
        second = Running(["ip", "netns", "exec", name, *RAY, "start",
                          "--address", f"{head_ip}:{port}",
                          "--node-ip-address", node_ip, *common],
                         env=ray_env())
        nodes.append(second)
        second.wait_for_line(r"Ray runtime started", START_TIMEOUT_S)
        yield f"{head_ip}:{port}", {head_ip, node_ip}
    finally:
        for node in reversed(nodes):
            stop(node)
        left = leftovers_after(temp_dir, STOP_TIMEOUT_S)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert not left, f"Ray processes left behind: {left}"
    assert not leftovers_after("raylet", 0), "a raylet is still running"
    assert not leftovers_after("gcs_server", 0), "a gcs_server is still running"


def test_two_nodes_train_like_run_sh(cluster, tmp_path):
    address, node_addresses = cluster
    ray_logdir, plain_logdir = tmp_path / "ray", tmp_path / "plain"
    on_ray = run(["bash", os.path.join(EXAMPLE, "run_ray.sh"), "--address",
                  address, *TRAINING_FLAGS, "--logdir", str(ray_logdir)],
                 timeout=RUN_TIMEOUT_S, env=ray_env())
    assert on_ray.returncode == 0, on_ray.stdout[-3000:] + on_ray.stderr[-3000:]
    placed = re.findall(r"^\[ray\] worker (\d) ran on node (\S+), listening at "
                        r"(\S+):\d+$", on_ray.stdout, re.MULTILINE)
    assert len(placed) == 2, on_ray.stdout[-3000:]
    # Each worker on its own node, and its TF_CONFIG address that node's.
    assert {node for _, node, _ in placed} == node_addresses
    for _, node, host in placed:
        assert ipaddress.ip_address(host) == ipaddress.ip_address(node)
    assert re.search(r"^RESULT .*test_accuracy=", on_ray.stdout, re.MULTILINE)

    plain = run(["bash", os.path.join(EXAMPLE, "run.sh"), *TRAINING_FLAGS,
                 "--logdir", str(plain_logdir)], timeout=RUN_TIMEOUT_S)
    assert plain.returncode == 0, plain.stdout[-3000:] + plain.stderr[-3000:]
    on_ray_result, plain_result = read_result(ray_logdir), read_result(plain_logdir)
    for field in ("global_step", "workers", "examples", "dataset"):
        assert on_ray_result[field] == plain_result[field], field
    # The same minibatches and updates: the same accuracy, up to the order
    # of floating-point sums.
    assert on_ray_result["test_accuracy"] == pytest.approx(
        plain_result["test_accuracy"], abs=0.01), (on_ray_result, plain_result)
    print(json.dumps({"ray": on_ray_result, "run.sh": plain_result}))


def test_bad_address_is_one_line(tmp_path):
    # Nothing listens on a port just freed.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    result = run(["bash", os.path.join(EXAMPLE, "run_ray.sh"), "--address",
                  address, "--logdir", str(tmp_path / "run")],
                 timeout=RUN_TIMEOUT_S, env=ray_env())
    assert result.returncode == 2, result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and "ray start --head" in lines[0], result.stderr


def test_without_ray_is_one_line(tmp_path):
    # A Python whose prefix has no ray-packages: a virtual environment of
    # this one, without Ray on its path.
    env = env_without_tf_config(PYTHONPATH=REPO)
    script = os.path.join(EXAMPLE, "ray_train.py")
    result = run([PYTHON, "-c", "import sys, runpy; sys.prefix = sys.argv[1]; "
                  "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], "
                  "run_name='__main__')", str(tmp_path), script, "--logdir",
                  str(tmp_path / "run")], timeout=RUN_TIMEOUT_S, env=env)
    assert result.returncode == 2, result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and "make ray" in lines[0], result.stderr
