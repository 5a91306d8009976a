"""The fork server (fork_server.py) serves only its own user, and no client
can block it, crash it or take its other tasks down: one that says nothing
is dropped at its deadline, one that says too much or nonsense gets a line
on the server's stderr. A server without TensorFlow: it forks the same."""

import json
import os
import pathlib
import select
import shutil
import signal
import socket
import stat
import tempfile

import pytest

from conftest import PYTHON, REPO, Running, env_without_tf_config, run
from launcher.forking import LENGTH, PRELOAD, Served

SERVER = os.path.join(REPO, "tests", "fork_server.py")
NOBODY = 65534
# What a client is given to connect, or to see its connection closed.
WITHIN_S = 30


def start_server(path, request_timeout):
    server = Running([PYTHON, SERVER, str(path), "--preload", "",
                      "--request_timeout", str(request_timeout)],
                     env=env_without_tf_config(**{PRELOAD: "0"}))
    try:
        server.wait_for_line(r"^ready$", WITHIN_S)
    except BaseException:
        server.kill()
        raise
    return server


@pytest.fixture
def scripts(tmp_path):
    """A script that says it ran, one that waits for a signal, and where
    the served tasks' output goes."""
    (tmp_path / "hello.py").write_text("print('served')\n")
    (tmp_path / "pause.py").write_text("import signal\nsignal.pause()\n")
    return tmp_path


def serve(path, script, scripts):
    """Asks the server at `path` to run `script`; the Served task."""
    output = os.open(scripts / "output.log", os.O_WRONLY | os.O_CREAT |
                     os.O_APPEND)
    try:
        return Served([str(scripts / script)], dict(os.environ), None,
                      "served", str(path), cwd=str(scripts), output=output)
    finally:
        os.close(output)


def closed_by_server(connection):
    """True once the server has closed `connection` (within WITHIN_S)."""
    return bool(select.select([connection], [], [], WITHIN_S)[0]) and \
        connection.recv(4096) == b""


def test_the_socket_is_its_owners_alone(tmp_path):
    path = tmp_path / "server" / "socket"  # its folder made by the server
    server = start_server(path, 10)
    try:
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    finally:
        server.kill()
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o755)
    open_folder.chmod(0o755)
    result = run([PYTHON, SERVER, str(open_folder / "socket"), "--preload", ""],
                 timeout=WITHIN_S)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "must be a folder of yours that only you can open" in line
    assert not (open_folder / "socket").exists()


NOBODY_CLIENT = """
import json, os, socket, struct, sys
path, script = sys.argv[1:]
request = json.dumps({"argv": [script], "env": {}, "cwd": "/",
                      "name": "intruder"}).encode()
client = socket.socket(socket.AF_UNIX)
try:
    client.connect(path)
except PermissionError:
    sys.exit("no entry")
fds = [os.pipe()[1], os.open("/proc/self/ns/user", 0),
       os.open("/proc/self/ns/net", 0)]
client.settimeout(30)
try:
    socket.send_fds(client, [struct.pack("!Q", len(request)) + request], fds)
    answer = client.recv(100)
except (BrokenPipeError, ConnectionResetError):  # closed on us already
    answer = b""
sys.exit(f"answer {answer!r}")
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="connecting as another user takes root and setpriv")
def test_a_client_of_another_user_is_refused(tmp_path, scripts):
    # Out of tmp_path, which only root may enter.
    top = pathlib.Path(tempfile.mkdtemp(prefix="fork-server-test-"))
    path = top / "server" / "socket"
    marker = tmp_path / "intruder-ran"
    intruder = tmp_path / "intruder.py"
    intruder.write_text(f"open({str(marker)!r}, 'w').close()\n")
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                 "--clear-groups", "/usr/bin/python3", "-c", NOBODY_CLIENT,
                 str(path), str(intruder)]
    server = start_server(path, 10)
    try:
        # As the server made it, the socket is out of reach.
        result = run(as_nobody, timeout=WITHIN_S, cwd="/")
        assert result.stderr.strip() == "no entry", result.stderr
        # Opened to all (a careless umask, a chmod): the server refuses.
        for folder in (top, path.parent):
            folder.chmod(0o755)
        path.chmod(0o777)
        result = run(as_nobody, timeout=WITHIN_S, cwd="/")
        assert result.stderr.strip() == "answer b''", result.stderr
        server.wait_for_line(rf"refused a connection from uid {NOBODY} ",
                             WITHIN_S)
        assert not marker.exists()
        # And still serves its own user.
        assert serve(path, "hello.py", scripts).wait(timeout=WITHIN_S) == 0
    finally:
        server.kill()
        shutil.rmtree(top)
    assert (scripts / "output.log").read_text() == "served\n"


def test_a_silent_client_blocks_no_one(tmp_path, scripts):
    # A deadline no test reaches: the silent client is connected throughout.
    path = tmp_path / "server" / "socket"
    server = start_server(path, 3600)
    try:
        with socket.socket(socket.AF_UNIX) as silent:
            silent.connect(str(path))
            task = serve(path, "hello.py", scripts)
            assert task.wait(timeout=WITHIN_S) == 0
            assert not select.select([silent], [], [], 0)[0]  # still open
    finally:
        server.kill()
    assert (scripts / "output.log").read_text() == "served\n"


def test_a_silent_client_is_dropped_at_its_deadline(tmp_path):
    path = tmp_path / "server" / "socket"
    server = start_server(path, 0.5)
    try:
        with socket.socket(socket.AF_UNIX) as silent:
            silent.connect(str(path))
            silent.sendall(LENGTH.pack(100) + b"{")  # and no more
            assert closed_by_server(silent)
        server.wait_for_line(r"dropped a client that sent no complete "
                             r"request within 0.5 s", WITHIN_S)
    finally:
        server.kill()


def namespaces():
    return [os.open(f"/proc/self/ns/{kind}", os.O_RDONLY)
            for kind in ("user", "net")]


@pytest.mark.parametrize("payload, fds, complaint", [
    (LENGTH.pack(1 << 40) + b"{", 3, "a request of 1099511627776 bytes"),
    (b"{not json", 3, "not JSON"),
    (json.dumps({"argv": "python"}).encode(), 3,
     "not a request of argv, env, cwd and name"),
    (json.dumps({"argv": ["x"], "env": {}, "cwd": "/", "name": "x"}).encode(),
     0, "0 file descriptors instead of 3"),
])
def test_a_malformed_request_gets_a_line_and_the_server_goes_on(
        payload, fds, complaint, tmp_path, scripts):
    path = tmp_path / "server" / "socket"
    server = start_server(path, 10)
    running = None
    try:
        running = serve(path, "pause.py", scripts)
        if not payload.startswith(LENGTH.pack(1 << 40)):
            payload = LENGTH.pack(len(payload)) + payload
        pipe_read, pipe_write = os.pipe()
        sent = [pipe_write, *namespaces()][:fds]
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))
            socket.send_fds(client, [payload], sent)
            for fd in [pipe_read, pipe_write, *sent[1:]]:
                os.close(fd)
            assert closed_by_server(client)
        server.wait_for_line(rf"dropped a client that sent {complaint}",
                             WITHIN_S)
        # Its task still runs, and the next request is served.
        assert running.poll() is None
        assert serve(path, "hello.py", scripts).wait(timeout=WITHIN_S) == 0
        assert running.poll() is None
    finally:
        if running is not None:
            os.killpg(running.pid, signal.SIGKILL)
            assert running.wait(timeout=WITHIN_S) == -signal.SIGKILL
        server.kill()
