"""The launcher's contract, with a fake task that needs no TensorFlow."""

import functools
import http.server
import os
import pathlib
import re
import signal
import threading

import pytest

from conftest import (
    LAUNCHER,
    REPO,
    Running,
    env_without_tf_config,
    processes_mentioning,
    run,
    run_together,
    wait_until_gone,
)
from launcher import network
from launcher.forking import PRELOAD
from launcher.options import gpu_for, visible_gpus

FAKE = os.path.join(REPO, "tests", "fake_task.py")
# A bound on a launch, not an expectation: on a loaded machine a launcher
# that forks its tasks imports TensorFlow first, which took over 30 s.
LAUNCH_S = 180
# For the tests that run each way of starting a task.
EVERY_PATH = pytest.mark.parametrize("path", ["exec", "forked", "served"],
                                     indirect=True)


@pytest.fixture(autouse=True)
def path(request, monkeypatch, fork_server):
    """How the launcher starts its tasks: a new Python each (exec, what users
    get), forked from a launcher that has imported TensorFlow once
    (LAUNCH_PRELOAD_TENSORFLOW=1), or forked by the fork server (set to its
    socket). The fake tasks need no TensorFlow, so only the forked path
    pays for its import."""
    way = getattr(request, "param", "exec")
    monkeypatch.setenv(PRELOAD, {"exec": "0", "forked": "1",
                                 "served": fork_server}[way])
    return way


def launch(run_dir, *options, mode="ok"):
    return [*LAUNCHER, *options, "--", FAKE, "--mode", mode,
            "--logdir", str(run_dir / "run")]


def test_success_stops_the_ps_and_keeps_prefixed_logs(run_dir):
    result = run(launch(run_dir, "--ps", "2", "--workers", "3"), timeout=LAUNCH_S)
    assert result.returncode == 0, result.stdout + result.stderr
    for index in range(3):
        assert f"[worker:{index}] worker {index} done" in result.stdout
    ports = re.findall(r"port=(\d+)", result.stdout)
    assert len(ports) == 5 and len(set(ports)) == 5
    logs = sorted(os.listdir(run_dir / "run" / "logs"))
    assert logs == ["ps-0.log", "ps-1.log", "worker-0.log", "worker-1.log",
                    "worker-2.log"]
    assert "worker 2 done" in (run_dir / "run" / "logs" / "worker-2.log").read_text()


def test_a_coordinator_is_a_chief_task_the_job_waits_for(run_dir):
    result = run(launch(run_dir, "--coordinator", "--ps", "1", "--workers", "2"),
                 timeout=LAUNCH_S)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[chief:0] worker 0 done" in result.stdout  # fake_task's words
    assert "all 2 worker(s) and the coordinator finished" in result.stdout
    assert len(set(re.findall(r"port=(\d+)", result.stdout))) == 4
    assert "chief-0.log" in os.listdir(run_dir / "run" / "logs")


def test_user_flags_override_run_sh_defaults(run_dir):
    # run.sh passes --ps 1 --workers 2 before "--"; the user's come after.
    command = launch(run_dir, "--ps", "1", "--workers", "2")
    result = run(command + ["--workers", "4", "--ps=2"], timeout=LAUNCH_S)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[worker:3] worker 3 done" in result.stdout
    # Not ps 1's "ready": the fake workers need no ps, so the job may end
    # before ps 1 has printed anything.
    assert "2 ps + 4 worker(s)" in result.stdout
    assert (run_dir / "run" / "logs" / "ps-1.log").exists()


def test_two_launches_at_once_do_not_collide(run_dir):
    outcomes = run_together({"a": launch(run_dir / "a"), "b": launch(run_dir / "b")},
                            timeout=LAUNCH_S)
    (first_code, first_output), (second_code, second_output) = outcomes.values()
    assert (first_code, second_code) == (0, 0), first_output + second_output
    # The ports each launcher chose, from its own first line: a ps that the
    # launcher stops before it has said it is ready names none of them. Each
    # task binds its port, so a clash would have failed a task.
    first_ports, second_ports = (
        set(re.search(r" ports ([\d, ]+);", output)[1].split(", "))
        for output in (first_output, second_output))
    assert len(first_ports) == len(second_ports) == 3
    assert not first_ports & second_ports


def test_a_failing_worker_stops_the_job_and_is_named(run_dir):
    result = run(launch(run_dir, mode="fail"), timeout=LAUNCH_S)
    assert result.returncode == 1
    assert "worker:1 exited with code 3; stopped every other task" in result.stdout
    assert "    worker 1 is about to fail" in result.stdout  # its last lines


def test_a_task_rejecting_its_input_gives_exit_2(run_dir):
    result = run(launch(run_dir, mode="bad_input"), timeout=LAUNCH_S)
    assert result.returncode == 2
    assert "worker:0 rejected its input (exit code 2)" in result.stdout
    # The error line goes to stderr, once, and not to stdout as well.
    assert result.stderr.count("error: --mode bad_input was given") == 1
    assert "error: --mode bad_input was given" not in result.stdout


@pytest.mark.parametrize("value", ["yes", "/no/such/socket"])
def test_a_preload_that_is_not_0_1_or_a_fork_server_is_refused(value, run_dir,
                                                               monkeypatch):
    monkeypatch.setenv(PRELOAD, value)
    result = run(launch(run_dir), timeout=LAUNCH_S)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"launch.sh: error: {PRELOAD} is {value!r}, which is neither 0, 1 nor "
        f"the socket of a running fork server; unset it, or start one with "
        f"`python tests/fork_server.py SOCKET`"]
    assert not (run_dir / "run").exists()


@EVERY_PATH
def test_a_killed_ps_stops_the_job(path, run_dir):
    job = Running(launch(run_dir, mode="hang"))
    try:
        ps_pid = int(job.wait_for_line(r"\[ps:0\] ready pid=(\d+)", LAUNCH_S).group(1))
        job.wait_for_line(r"\[worker:1\] ready", LAUNCH_S)
        os.kill(ps_pid, signal.SIGKILL)
        code, output = job.finish(timeout=LAUNCH_S)
    finally:
        job.kill()
    assert code == 1
    assert "ps:0 was killed by signal 9; stopped every other task" in output


@pytest.mark.parametrize("sent, code, word", [
    (signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_a_signal_to_the_launcher_stops_every_task(sent, code, word, run_dir):
    job = Running(launch(run_dir, mode="hang"))
    try:
        job.wait_for_line(r"\[worker:1\] ready", LAUNCH_S)
        # The launcher, its copy inside the job's network namespace (where
        # the system allows one), and 3 tasks.
        private = network.namespaces_unavailable() is None
        assert len(processes_mentioning(str(run_dir))) == 4 + private
        job.process.send_signal(sent)
        exit_code, output = job.finish(timeout=LAUNCH_S)
    finally:
        job.kill()
    assert exit_code == code
    assert f"{word}; stopped every task" in output


@EVERY_PATH
def test_sigkill_to_the_launcher_still_ends_every_task(path, run_dir):
    job = Running(launch(run_dir, mode="hang"))
    try:
        pids = [int(job.wait_for_line(rf"\[{name}\] ready pid=(\d+)",
                                      LAUNCH_S).group(1))
                for name in ("ps:0", "worker:0", "worker:1")]
        job.process.send_signal(signal.SIGKILL)
        job.process.wait(timeout=10)
        # The kernel sends each task its parent-death signal (the fork
        # server kills its tasks when their launcher hangs up).
        assert all(wait_until_gone(pid, timeout=10) for pid in pids)
    finally:
        job.kill()
    # And whatever stood between them (the namespace's inner launcher and its
    # wrappers), each ended by its own parent-death signal, a moment later.
    leftovers = processes_mentioning(str(run_dir))
    assert all(wait_until_gone(pid, timeout=10) for pid in leftovers), leftovers


@EVERY_PATH
def test_timeout_stops_the_job_and_logs_where_each_task_hung(run_dir):
    # Core files allowed, in a folder of the test's own: the launcher's
    # tasks must still leave none as they abort.
    result = run(["prlimit", "--core=unlimited", "--", *launch(
        run_dir, "--timeout", "3", mode="hang")], timeout=60, cwd=run_dir,
        env=env_without_tf_config(PYTHONPATH=REPO))
    assert result.returncode == 124, result.stdout + result.stderr
    assert "timed out after 3 s (--timeout); stopped every task; the log of " \
        "each task still running ends with its Python stack" in result.stdout
    # Where each task waited: fake_task.py's signal.pause() for mode hang.
    source = pathlib.Path(FAKE).read_text().splitlines()
    line = 1 + next(number for number, text in enumerate(source)
                    if "signal.pause()  # like server.join()" in text)
    for name in ("ps-0", "worker-0", "worker-1"):
        log = (run_dir / "run" / "logs" / f"{name}.log").read_text()
        assert "Fatal Python error: Aborted" in log, log
        assert f'fake_task.py", line {line} in <module>' in log, log
    # The dumps went to the logs, not the screen, and left no core file.
    assert "Fatal Python error" not in result.stdout + result.stderr
    assert not [path for path in os.listdir(run_dir) if path.startswith("core")]


def test_cluster_flags_are_refused_with_exit_2(run_dir):
    result = run(launch(run_dir) + ["--job_name=ps"], timeout=LAUNCH_S)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "--job_name is set by the launcher" in result.stderr


def test_bad_launcher_options_give_exit_2(run_dir):
    result = run(launch(run_dir, "--workers", "0"), timeout=LAUNCH_S)
    assert result.returncode == 2
    assert "need --workers 1 or more, got --workers 0" in result.stderr


def test_each_worker_gets_its_own_gpu_and_the_ps_none(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    gpus = visible_gpus()
    assert gpus == ["3", "5"]
    assert [gpu_for("worker", index, gpus) for index in range(3)] \
        == ["3", "5", ""]  # a worker beyond the GPUs runs on the CPU
    assert gpu_for("ps", 0, gpus) == ""


@EVERY_PATH
def test_max_restarts_restarts_a_failed_task_with_the_same_port_and_log(path, run_dir):
    result = run(launch(run_dir, "--max_restarts", "1", mode="fail_once"),
                 timeout=LAUNCH_S)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[launch] worker:1 exited with code 3; restarting it (1 of 1)" \
        in result.stdout
    log = (run_dir / "run" / "logs" / "worker-1.log").read_text()
    ports = re.findall(r"port=(\d+)", log)
    assert len(ports) == 2 and ports[0] == ports[1]  # the same TF_CONFIG
    assert log.index("fails this once") < log.index("worker 1 done")


def test_a_job_with_no_ps_restarts_as_a_group(run_dir):
    """--ps 0 (an allreduce job): worker 1 fails, and --restart_group stops
    the other workers and starts all three again, as one restart; the
    evaluator, in no collective, runs once."""
    result = run(launch(run_dir, "--ps", "0", "--workers", "3", "--evaluator",
                        "--max_restarts", "1", "--restart_group",
                        mode="group_fails_once"), timeout=LAUNCH_S)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[launch] 0 ps + 3 worker(s) + an evaluator" in result.stdout
    assert "[launch] worker:1 exited with code 3; restarting the whole group " \
           "(1 of 1)" in result.stdout
    logs = run_dir / "run" / "logs"
    assert sorted(os.listdir(logs)) == ["evaluator-0.log", "worker-0.log",
                                        "worker-1.log", "worker-2.log"]
    for index in range(3):
        log = (logs / f"worker-{index}.log").read_text()
        ports = re.findall(r"port=(\d+)", log)
        assert len(ports) == 2 and ports[0] == ports[1], log
        assert log.rstrip().endswith(f"worker {index} done")
    assert "restarted with worker:1" in (logs / "worker-0.log").read_text()
    assert len(re.findall("ready", (logs / "evaluator-0.log").read_text())) == 1


def test_restarts_run_out_and_then_the_job_fails(run_dir):
    result = run(launch(run_dir, "--max_restarts", "2", mode="fail"),
                 timeout=LAUNCH_S)
    assert result.returncode == 1
    assert "restarting it (2 of 2)" in result.stdout
    assert "restarting it (3 of" not in result.stdout
    assert "worker:1 exited with code 3; stopped every other task" in result.stdout


def test_bad_input_is_never_restarted(run_dir):
    result = run(launch(run_dir, "--max_restarts", "3", mode="bad_input"),
                 timeout=LAUNCH_S)
    assert result.returncode == 2
    assert "restarting" not in result.stdout


def test_an_evaluator_is_in_tf_config_and_the_job_waits_for_it(run_dir):
    # --max_restarts and --evaluator also come after the script, like --workers.
    result = run(launch(run_dir) + ["--evaluator", "--max_restarts", "1"],
                 timeout=LAUNCH_S)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[evaluator:0] worker 0 done" in result.stdout  # fake_task's words
    assert "all 2 worker(s) and the evaluator finished" in result.stdout
    assert len(set(re.findall(r"port=(\d+)", result.stdout))) == 4


def test_help_explains_restarts():
    result = run([*LAUNCHER, "--help"], timeout=LAUNCH_S)
    assert result.returncode == 0
    for words in ("--max_restarts", "restartPolicy: OnFailure", "--max-restarts"):
        assert words in result.stdout


SCRIPT = """
import json, os, sys
task = json.loads(os.environ["TF_CONFIG"])["task"]
print("argv", sys.argv[1:], "stdin", repr(sys.stdin.read()), "as", __name__)
if (task["type"], task["index"]) == ("worker", 1):
    raise ValueError("worker 1 breaks")
"""


@EVERY_PATH
def test_a_task_is_a_script_run_as_main_and_a_traceback_fails_it(path, run_dir):
    script = run_dir / "script.py"
    script.write_text(SCRIPT)
    result = run([*LAUNCHER, "--", str(script), "--flag",
                  "--logdir", str(run_dir / "run")], timeout=LAUNCH_S)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "worker:1 exited with code 1; stopped every other task" in result.stdout
    assert "    ValueError: worker 1 breaks" in result.stdout
    flags = ['--flag', '--logdir', str(run_dir / "run")]
    # Worker 1 prints before it raises; worker 0 may be stopped before it
    # prints anything, so only worker 1's line is certain.
    assert f"[worker:1] argv {flags} stdin '' as __main__" in result.stdout


def open_files(pid):
    """What a running process's file descriptors point to; one it closes
    while they are read (the fake tasks' handshake sockets) is left out."""
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            pass
    return links


@pytest.mark.parametrize("path", ["forked", "served"], indirect=True)
def test_forked_tasks_have_their_own_session_name_stdin_and_host(path, run_dir):
    hosts = network.namespaces_unavailable() is None
    job = Running(launch(run_dir, *(["--network", "hosts"] if hosts else []),
                         mode="hang"))
    try:
        namespaces = set()
        for name in ("ps:0", "worker:0", "worker:1"):
            pid = int(job.wait_for_line(rf"\[{name}\] ready pid=(\d+)",
                                        60).group(1))
            with open(f"/proc/{pid}/comm") as stream:
                assert stream.read().strip() == name
            assert os.getsid(pid) == pid
            assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull
            assert os.readlink(f"/proc/{pid}/cwd") == REPO  # the launcher's
            if hosts:  # in the job's user namespace, not this machine's
                assert os.stat(f"/proc/{pid}/ns/user").st_ino != \
                    os.stat("/proc/self/ns/user").st_ino
            # The pipe to the launcher, and none of the launcher's others.
            links = open_files(pid)
            assert len({link for link in links if link.startswith("pipe:")}) == 1
            namespaces.add(os.stat(f"/proc/{pid}/ns/net").st_ino)
        job.process.send_signal(signal.SIGTERM)
        code, output = job.finish(timeout=LAUNCH_S)
    finally:
        job.kill()
    assert code == 143, output
    assert len(namespaces) == (3 if hosts else 1)  # --network hosts: one each


@pytest.fixture
def web_mirror(tmp_path):
    """An HTTP server on this machine's loopback, serving a folder: a task in
    the job's private network cannot reach it, only the launcher can."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_the_data_is_fetched_before_any_task_starts(run_dir, tmp_path, web_mirror):
    """The launcher fetches from outside the job's network, before any task
    exists; here the file it gets is not MNIST's, so it stops in one line."""
    folder, url = web_mirror
    (folder / "mnist.npz").write_bytes(b"not the data set")
    env = {**env_without_tf_config(), "KERAS_HOME": str(tmp_path / "home"),
           "DATA_MIRROR": url}
    result = run(launch(run_dir, "--ps", "1", "--workers", "2") +
                 ["--dataset", "mnist"], timeout=60, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1 and "does not have the published sha256" in errors[0]
    assert "ready" not in result.stdout  # no task was started
    assert not list((tmp_path / "home").rglob("*.npz*"))


def test_no_fetch_when_the_data_comes_from_data_dir(run_dir, tmp_path):
    env = {**env_without_tf_config(), "KERAS_HOME": str(tmp_path / "home"),
           "DATA_MIRROR": str(tmp_path / "no-such-mirror")}
    result = run(launch(run_dir, "--ps", "1", "--workers", "1") +
                 ["--dataset", "mnist", "--data_dir", str(tmp_path)],
                 timeout=60, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "downloading" not in result.stdout
