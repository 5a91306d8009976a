"""The launcher's --network modes: a default job cannot be reached from this
machine, `hosts` runs examples on separate addresses, and without user
namespaces the launcher warns and runs on the host's network."""

import json
import os
import re
import select
import shutil
import signal
import socket
import time

import pytest

from conftest import (
    LAUNCHER,
    PYTHON,
    REPO,
    Running,
    env_without_tf_config,
    error_lines,
    run,
    served_tasks,
)
from launcher import network
from launcher.forking import PRELOAD

FAKE = os.path.join(REPO, "tests", "fake_task.py")

pytestmark = pytest.mark.skipif(
    network.namespaces_unavailable() is not None,
    reason="this system does not allow user namespaces")


@pytest.fixture
def each_task_a_new_python(monkeypatch):
    """The exec path users get, its tasks found by their command line."""
    monkeypatch.setenv(PRELOAD, "0")


def namespace_of(pid):
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def tasks_of(logdir, script):
    """Pids of the running tasks (not the launchers) writing to `logdir`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                argv = stream.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if str(logdir) in argv and script in " ".join(argv) and \
                "launcher" not in argv:
            found.append(int(pid))
    return found


def listening_ports(pid):
    """TCP ports listening in the network namespace of process `pid`."""
    ports = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as stream:
            for row in list(stream)[1:]:
                fields = row.split()
                if fields[3] == "0A":  # LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def own_addresses(pid="self"):
    """The IPv4 addresses of process `pid`'s network namespace, from the
    kernel's table of local routes: no traffic needed to learn them."""
    with open(f"/proc/{pid}/net/fib_trie") as stream:
        lines = stream.read().splitlines()
    return {previous.split()[-1] for previous, line in zip(lines, lines[1:])
            if "/32 host LOCAL" in line}


@pytest.mark.usefixtures("each_task_a_new_python")
def test_a_default_job_cannot_be_reached_from_this_machine(run_dir):
    logdir = run_dir / "run"
    job = Running([*LAUNCHER, "--", FAKE, "--mode", "hang",
                   "--logdir", str(logdir)])
    try:
        ports = [int(port) for port in job.wait_for_line(
            r"ports (\d+), (\d+), (\d+);", 30).groups()]
        for name in ("ps:0", "worker:0", "worker:1"):
            job.wait_for_line(rf"\[{name}\] ready", 30)
        tasks = tasks_of(logdir, "fake_task.py")
        assert len(tasks) == 3
        for pid in tasks:
            assert namespace_of(pid) != namespace_of("self")
            # The ports listen, in the job's namespace only.
            assert set(ports) <= listening_ports(pid)
        addresses = own_addresses() | {"127.0.0.1"}
        assert len(addresses) >= 2
        for address in addresses:
            for port in ports:
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection((address, port), timeout=5).close()
        job.process.send_signal(signal.SIGTERM)
        code, _ = job.finish(timeout=30)
    finally:
        job.kill()
    assert code == 143


@pytest.mark.parametrize("example", ["Hogwild", "Synchronous-SGD"])
def test_an_example_runs_with_each_task_on_its_own_host(example, run_dir):
    """Each task sits at its own address, in a namespace of its own, and the
    job still trains: its tasks reach each other only through the bridge.
    (Forked by the fork server, the tasks are found as its children.)"""
    job = Running(["bash", os.path.join(REPO, example, "run.sh"),
                   "--network", "hosts", "--train_steps", "100",
                   "--log_every", "5", "--logdir", str(run_dir / "run")])
    try:
        job.wait_for_line(r"on 10\.10\.0\.2-4 \(one namespace each\)", 60)
        # As soon as all three run, each in its namespace: a worker may
        # finish long before the chief's first progress line.
        deadline = time.monotonic() + 120
        while True:
            tasks = served_tasks()
            try:
                namespaces = {namespace_of(pid) for pid in tasks}
                addresses = {name: own_addresses(pid) - {"127.0.0.1"}
                             for pid, name in tasks.items()}
            except OSError:  # one ended between the listing and the reads
                namespaces, addresses = set(), {}
            if set(addresses) == {"ps:0", "worker:0", "worker:1"} and \
                    namespace_of("self") not in namespaces:
                break
            assert time.monotonic() < deadline, f"tasks seen: {tasks}"
            time.sleep(0.05)  # polling /proc: nothing to wait on
        code, output = job.finish(timeout=240)
    finally:
        job.kill()
    assert code == 0, output
    assert len(tasks) == 3 and len(namespaces) == 3
    assert namespace_of("self") not in namespaces
    # In the order of TF_CONFIG's cluster: ps, then the workers.
    assert addresses == {"ps:0": {"10.10.0.2"}, "worker:0": {"10.10.0.3"},
                         "worker:1": {"10.10.0.4"}}
    assert re.search(r"\[worker:0\] RESULT algorithm=", output)


@pytest.mark.usefixtures("each_task_a_new_python")
def test_without_user_namespaces_the_job_runs_on_the_host_and_says_so(run_dir):
    env = env_without_tf_config(LAUNCH_UNSHARE="false")
    command = [*LAUNCHER, "--", FAKE, "--logdir", str(run_dir / "run")]
    result = run(command, timeout=60, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    (warning,) = result.stderr.splitlines()
    assert warning.startswith("launch.sh: warning: no private network")
    assert "listen on every interface" in warning
    assert "127.0.0.1 ports" in result.stdout
    assert "[worker:1] worker 1 done" in result.stdout
    result = run(command + ["--network", "hosts"], timeout=60, env=env)
    assert result.returncode == 2
    (error,) = result.stderr.splitlines()
    assert error.startswith("launch.sh: error: --network hosts needs user "
                            "namespaces")


@pytest.mark.usefixtures("each_task_a_new_python")
def test_sigkill_to_the_launcher_ends_every_task_on_its_own_host(run_dir):
    logdir = run_dir / "run"
    job = Running([*LAUNCHER, "--network", "hosts", "--", FAKE, "--mode",
                   "hang", "--logdir", str(logdir)])
    try:
        for name in ("ps:0", "worker:0", "worker:1"):
            job.wait_for_line(rf"\[{name}\] ready", 30)
        tasks = tasks_of(logdir, "fake_task.py")
        assert len({namespace_of(pid) for pid in tasks}) == 3
        handles = [os.pidfd_open(pid) for pid in tasks]
        job.process.send_signal(signal.SIGKILL)
        job.process.wait(timeout=10)
        for handle in handles:
            # Readable once the process has exited.
            assert select.select([handle], [], [], 10)[0]
            os.close(handle)
    finally:
        job.kill()


# Run in a user and network namespace of its own: Hosts(40) as the launcher
# makes it, what ip then sees in each namespace, a connection across the
# bridge, and the error of a step that fails.
HOSTS_SCRIPT = """
import json, socket, subprocess, sys
from launcher import network

def links():
    shown = subprocess.run(["ip", "-j", "address"], capture_output=True,
                           text=True, check=True, timeout=30).stdout
    return {link["ifname"]: {
        "up": "UP" in link["flags"], "master": link.get("master"),
        "inet": [f"{a['local']}/{a['prefixlen']} brd {a.get('broadcast')}"
                 for a in link["addr_info"] if a["family"] == "inet"]}
        for link in json.loads(shown)}

hosts = network.Hosts(int(sys.argv[1]))
seen = {"job": links(), "tasks": []}
for number in range(int(sys.argv[1])):
    with network.entered(hosts.namespace(number)):
        seen["tasks"].append(links())
last = int(sys.argv[1]) - 1
with network.entered(hosts.namespace(last)):
    server = socket.create_server((hosts.host(last), 0))
with network.entered(hosts.namespace(0)), socket.create_connection(
        (hosts.host(last), server.getsockname()[1]), timeout=10) as client:
    client.sendall(b"across")
    with server.accept()[0] as accepted:
        seen["received"] = accepted.recv(16).decode()
        seen["from"] = accepted.getpeername()[0]
# Again, in a new namespace where a t1 already stands in veth t1's way.
network.libc.unshare(network.CLONE_NEWNET)
subprocess.run(["ip", "link", "add", "t1", "type", "bridge"], check=True,
               timeout=30)
try:
    network.Hosts(3)
except network.NetworkError as error:
    seen["error"] = str(error)
print(json.dumps(seen))
"""


def test_forty_tasks_each_get_their_own_address_on_the_bridge():
    result = run(network.namespace_command() + [
        PYTHON, "-c", HOSTS_SCRIPT, "40"], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    seen = json.loads(result.stdout)
    ports = {f"t{number}": {"up": True, "master": "br0", "inet": []}
             for number in range(40)}
    assert seen["job"] == {"lo": seen["job"]["lo"], "br0": {
        "up": True, "master": None, "inet": []}, **ports}
    assert seen["job"]["lo"]["up"]
    for number, task in enumerate(seen["tasks"]):
        assert task["lo"]["up"]
        # The name traffic.py reads the task's counters by, in the job's
        # namespace, is t<k>; in the task's, its link is eth0.
        assert task["eth0"] == {"up": True, "master": None, "inet": [
            f"10.10.0.{number + 2}/24 brd 10.10.0.255"]}
        assert set(task) == {"lo", "eth0"}
    assert (seen["received"], seen["from"]) == ("across", "10.10.0.2")
    assert seen["error"] == "cannot make veth t1: File exists"


@pytest.mark.parametrize("mode", ["private", "hosts"])
def test_without_ip_the_job_stops_in_one_line_that_names_the_fix(
        mode, run_dir, tmp_path):
    """Every program the launcher needs before its tasks start, but ip."""
    for program in ("unshare", "setpriv", "true"):
        os.symlink(shutil.which(program), tmp_path / program)
    result = run([*LAUNCHER, "--network", mode, "--", FAKE, "--logdir",
                  str(run_dir / "run")], timeout=60,
                 env=env_without_tf_config(PATH=str(tmp_path)))
    assert result.returncode == 2, result.stdout + result.stderr
    assert error_lines(result.stderr) == [
        "launch.sh: error: --network private and hosts need ip, from iproute2 "
        "(apt-get install iproute2), or use --network host"]
    assert "ready" not in result.stdout
