"""Bad input gets one clear line on stderr and exit code 2, and leaves no
process behind, whether a script is run directly or through run.sh.

Most checks run before TensorFlow loads (or before the launcher starts any
task), so most rows of the table take well under a second."""

import glob
import json
import os
import re
import shutil
import signal
import socket
import stat
import tempfile

import pytest
from test_hostile_data import npy_bytes, npz_with, stored

from conftest import (
    LAUNCHER,
    PYTHON,
    REPO,
    Running,
    env_without_tf_config,
    error_lines,
    run,
)
from launcher.forking import PRELOAD
from launcher.options import (
    MEMORY_PER_TASK_MIB,
    LaunchError,
    free_ports,
    parse_command_line,
)
from test_data import fake_mnist, write_idx_fixture

HOGWILD = [PYTHON, "Hogwild/hogwild.py"]
HOSTS = ["--ps_hosts=127.0.0.1:1", "--worker_hosts=127.0.0.1:2,127.0.0.1:3"]
PSS = "Parameter-Server-Strategy/parameter_server_strategy.py"
PSS_CLUSTER = {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
               "worker": ["127.0.0.1:3"]}
EXAMPLES = sorted(glob.glob("*/*.py", root_dir=REPO) + ["Non-Distributed_Setup.py"])
EXAMPLES = [path for path in EXAMPLES
            if path.split("/")[0] not in ("benchmarks", "guide", "kubernetes",
                                           "launcher", "simulator", "tests")]


def tf_config(cluster, task_type, index):
    return json.dumps({"cluster": cluster, "task": {"type": task_type,
                                                    "index": index}})


def more_workers_than_fit():
    """--workers for a job whose tasks cannot fit in the memory available:
    half as many again as fit now, as other jobs may free some meanwhile."""
    with open("/proc/meminfo") as stream:
        available_kib = int(next(line for line in stream
                                 if line.startswith("MemAvailable")).split()[1])
    return max(64, available_kib // 1024 // MEMORY_PER_TASK_MIB * 3 // 2)


# (id, command, TF_CONFIG, the words the one error line must hold). In a
# command, {run_dir} is the test's folder and {busy_port} a port in use.
DIRECT = [
    ("malformed-TF_CONFIG", HOGWILD, "{'cluster': 1}", "TF_CONFIG is not valid JSON"),
    ("unknown-job", HOGWILD + HOSTS + ["--job_name=chief"], None,
     "job name 'chief' from --job_name/--task_index is not in the cluster; "
     "use one of: ps, worker"),
    ("index-out-of-range", HOGWILD + HOSTS + ["--job_name=worker", "--task_index=2"],
     None, "task index 2 from --job_name/--task_index is out of range"),
    ("negative-steps", [PYTHON, "Non-Distributed_Setup.py", "--train_steps", "-1"],
     None, "--train_steps must be a positive integer, got -1"),
    ("zero-window", [PYTHON, "AGN/agn.py", "--communication_window", "0"], None,
     "argument --communication_window: must be a positive integer, got '0'"),
    ("negative-central-rate", [PYTHON, "SAGN/sagn.py", "--central_learning_rate",
                               "-0.4"], None,
     "argument --central_learning_rate: must be a positive number, got '-0.4'"),
    ("rates-per-worker", [PYTHON, "Synchronous-SGD-different-learning-rates/"
                          "synchronous_sgd_different_learning_rates.py", *HOSTS,
                          "--job_name=worker", "--learning_rates", "0.1,0.2,0.3"],
     None, "--learning_rates gives 3 rates for 2 workers; give one per worker"),
    ("replicas", [PYTHON, "Synchronous-SGD/synchronous_sgd.py", *HOSTS,
                  "--job_name=worker", "--replicas_to_aggregate", "3"], None,
     "--replicas_to_aggregate 3 is more than the 2 workers; use at most 2"),
    ("no-TF_CONFIG", [PYTHON, PSS], None,
     "TF_CONFIG is not set; this example takes its cluster from TF_CONFIG only"),
    ("logdir-is-a-file", HOGWILD + HOSTS + ["--job_name=ps", "--logdir",
                                            "{run_dir}/file"], None,
     "is a file, not a folder; pass a folder there"),
    ("logdir-under-a-file", HOGWILD + HOSTS + ["--job_name=ps", "--logdir",
                                               "{run_dir}/file/run"], None,
     "/file is a file, not a folder"),
    ("infinite-rate", HOGWILD + HOSTS + ["--job_name=worker",
                                         "--learning_rate", "inf"], None,
     "--learning_rate must be a positive number, got inf"),
    ("infinite-rate-in-list", [PYTHON, "Synchronous-SGD-different-learning-rates/"
                               "synchronous_sgd_different_learning_rates.py",
                               "--learning_rates", "0.1,inf"], None,
     "argument --learning_rates: must be comma-separated positive numbers"),
    ("window-longer-than-run", [PYTHON, "AGN/agn.py", "--communication_window",
                                "5000", "--train_steps", "100"], None,
     "--communication_window 5000 is longer than the run (--train_steps 100); "
     "use at most 100"),
    ("epochs-and-steps", [PYTHON, "AGN/agn.py", "--epochs", "40", "--train_steps",
                          "100"], None,
     "--epochs and --train_steps both set how long to train; give one of them"),
    ("zero-width-layer", [PYTHON, "Non-Distributed_Setup.py", "--hidden_layers",
                          "1000,0"], None,
     "argument --hidden_layers: must be comma-separated positive integers"),
    ("no-worker-optimizer", HOGWILD + ["--worker_optimizer", "adam"], None,
     "unrecognized arguments: --worker_optimizer adam"),
    ("port-taken", HOGWILD + ["--ps_hosts=127.0.0.1:1",
                              "--worker_hosts=127.0.0.1:{busy_port}",
                              "--job_name=worker"], None,
     "port {busy_port} of this task (127.0.0.1:{busy_port}) is already in use"),
    ("string-index-like-TensorFlow", HOGWILD,
     tf_config({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, "worker", "5"),
     "task index 5 from TF_CONFIG is out of range"),
    ("string-index-PSS-agrees", [PYTHON, PSS], tf_config(PSS_CLUSTER, "worker", "5"),
     "TF_CONFIG task index 5 is out of range"),
    ("non-integer-index-PSS", [PYTHON, PSS], tf_config(PSS_CLUSTER, "worker", 0.5),
     "TF_CONFIG task index must be an integer, got 0.5"),
    ("no-ps-by-hand", HOGWILD + ["--worker_hosts=127.0.0.1:2", "--job_name=worker"],
     None, "has no ps; this example keeps its variables on a parameter server"),
    ("batch-larger-than-share-PSS", [PYTHON, PSS, "--batch_size", "100000"],
     tf_config(PSS_CLUSTER, "chief", 0),
     "--batch_size 100000 is larger than a worker's"),
    ("in-graph-in-a-cluster", [PYTHON, "Multiple-GPUs-Single-Machine/"
                               "multiple_gpus.py", "--mode", "in_graph"],
     tf_config({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, "worker", 0),
     "use bash run_towers.sh instead"),
]

# Through run.sh: (id, run.sh, flags, the words of the one line on stderr,
# whether any task may start).
THROUGH_RUN_SH = [
    ("zero-steps", "Hogwild", ["--train_steps", "0"],
     "--train_steps must be a positive integer, got 0", True),
    ("negative-eval-every", "Hogwild", ["--eval_every", "-5"],
     "--eval_every must be 0 or more, got -5", True),
    ("missing-mnist", "Parameter-Server-Strategy",
     ["--dataset", "mnist", "--data_dir", "{run_dir}"],
     "MNIST not found in", True),
    ("mnist-claims-a-huge-array", "Parameter-Server-Strategy",
     ["--dataset", "mnist", "--data_dir", "{run_dir}/hostile"],
     "/hostile/mnist.npz: the header of x_train says it holds 1,000,000,000 "
     "images", True),
    ("logdir-is-a-file", "Hogwild", ["--logdir", "{run_dir}/file"],
     "is a file, not a folder", False),
    ("logdir-under-a-file", "Hogwild", ["--logdir", "{run_dir}/file/run"],
     "/file is a file, not a folder", False),
    ("logdir-cannot-be-created", "Hogwild", ["--logdir", "/proc/{run_dir}"],
     "cannot create /proc/", False),
    ("infinite-rate", "Hogwild", ["--learning_rate", "inf"],
     "--learning_rate must be a positive number, got inf", True),
    ("too-many-workers", "Hogwild", ["--workers", str(more_workers_than_fit())],
     "GiB is available; use fewer --workers, or pass --ignore_memory_check", False),
    ("in-graph-through-run-sh", "Multiple-GPUs-Single-Machine", ["--mode", "in_graph"],
     "--mode in_graph runs as one process", True),
    ("batch-larger-than-share-PSS", "Parameter-Server-Strategy",
     ["--batch_size", "100000"], "--batch_size 100000 is larger than a worker's",
     True),
    ("window-longer-than-run", "AGN", ["--communication_window", "5000",
                                       "--train_steps", "100"],
     "--communication_window 5000 is longer than the run", True),
    ("epochs-and-steps", "AEASGD", ["--epochs", "40", "--train_steps", "100"],
     "--epochs and --train_steps both set how long to train", True),
    ("no-ps", "Hogwild", ["--ps", "0"],
     "has no ps; this example keeps its variables on a parameter server", True),
    ("negative-ps", "Hogwild", ["--ps", "-1"], "need --ps 0 or more, got --ps -1",
     False),
    ("allreduce-with-a-ps", "Multi-Worker-Mirrored-Strategy", ["--ps", "1"],
     "has a ps; this example keeps a copy of the variables on every worker",
     True),
]


@pytest.fixture
def busy_port():
    """A port some other program listens on."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    yield holder.getsockname()[1]
    holder.close()


def fill(words, run_dir, busy_port=None):
    return [word.format(run_dir=run_dir, busy_port=busy_port) for word in words]


@pytest.mark.parametrize("command, tf_config_text, message",
                         [row[1:] for row in DIRECT], ids=[row[0] for row in DIRECT])
def test_direct_run_gives_one_error_line(command, tf_config_text, message, run_dir,
                                         busy_port):
    (run_dir / "file").write_text("")
    env = env_without_tf_config(**({"TF_CONFIG": tf_config_text}
                                   if tf_config_text else {}))
    command = fill(command, run_dir, busy_port)
    if "--logdir" not in command:
        command += ["--logdir", str(run_dir / "run")]
    result = run(command, env=env, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert fill([message], run_dir, busy_port)[0] in lines[0]
    assert ": error: " in lines[0]
    assert "Traceback" not in result.stdout


@pytest.mark.parametrize("folder, flags, message, tasks_may_start",
                         [row[1:] for row in THROUGH_RUN_SH],
                         ids=[row[0] for row in THROUGH_RUN_SH])
def test_through_run_sh_exit_2_and_no_process_left(folder, flags, message,
                                                   tasks_may_start, run_dir):
    (run_dir / "file").write_text("")
    (run_dir / "hostile").mkdir()  # a 16 KB mnist.npz that claims 730 GiB
    npz_with(run_dir / "hostile", x_train=stored(
        "x_train", npy_bytes(shape=(10**9, 28, 28))))
    flags = fill(flags, run_dir)
    if "--logdir" not in flags:
        flags += ["--logdir", str(run_dir / "run")]
    # The exec path users get: its tasks reject their flags before they load
    # TensorFlow, where a preloading launcher would load it first.
    result = run(["bash", f"{folder}/run.sh", *flags], timeout=180,
                 env=env_without_tf_config(**{PRELOAD: "0"}))
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert message in lines[0] and ": error: " in lines[0]
    assert message not in result.stdout  # the error is said once, on stderr
    if tasks_may_start:
        assert "rejected its input (exit code 2)" in result.stdout
    else:
        assert result.stdout == ""  # refused before any task started
        assert not (run_dir / "run").exists()  # and before any folder was made
    # run_dir's fixture checks that no task is left running.


def test_relative_paths_are_the_users_not_the_examples(run_dir):
    """`cd somewhere && bash /path/run.sh --data_dir data --logdir rel`: both
    are taken from `somewhere`. The coordinator of Parameter-Server-Strategy
    reads the data before TensorFlow loads, so the run ends at once on a
    batch larger than a worker's share of the 60 fake examples."""
    (run_dir / "data").mkdir()
    write_idx_fixture(run_dir / "data", fake_mnist(train=60))
    script = os.path.join(REPO, "Parameter-Server-Strategy", "run.sh")
    result = run(["bash", script, "--dataset", "mnist", "--data_dir", "data",
                  "--logdir", "rel", "--batch_size", "31"],
                 cwd=str(run_dir), timeout=180)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr
    (line,) = error_lines(result.stderr)
    assert "--batch_size 31 is larger than a worker's 30 training examples" in line
    assert (run_dir / "rel" / "logs" / "chief-0.log").is_file()
    assert not os.path.exists(os.path.join(REPO, "Parameter-Server-Strategy", "rel"))
    # The tasks' command lines do not name run_dir; their folder does.
    assert not processes_in(run_dir)


def processes_in(folder):
    """PIDs of live processes whose working directory is `folder`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd") == str(folder):
                found.append(pid)
        except OSError:
            continue
    return found


def test_missing_mnist_files_direct(run_dir):
    result = run([PYTHON, "Non-Distributed_Setup.py", "--dataset", "mnist",
                  "--data_dir", str(run_dir), "--logdir", str(run_dir / "run")],
                 timeout=60)
    assert result.returncode == 2
    (line,) = error_lines(result.stderr)
    assert f"MNIST not found in {run_dir}" in line and "--data_dir" in line


def as_another_user(command):
    """`command` run as a user that may not write a read-only folder: nobody
    if we are root (who may write anywhere), else ourselves."""
    if os.geteuid() == 0:
        return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                *command]
    return command


@pytest.mark.parametrize("launched", [False, True], ids=["direct", "launcher"])
def test_a_logdir_that_is_not_writable(launched, run_dir):
    # Somewhere every user can reach, unlike pytest's folders.
    base = tempfile.mkdtemp(prefix="read-only-logdir-")
    os.chmod(base, 0o755)
    read_only = os.path.join(base, "read-only")
    os.mkdir(read_only)
    os.chmod(read_only, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP
             | stat.S_IROTH | stat.S_IXOTH)
    try:
        flags = ["--logdir", str(read_only), "--data_dir", str(run_dir)]
        # What Hogwild/run.sh runs; bash may not be able to start our Python
        # as another user, if it lives in a home folder.
        command = ([*LAUNCHER, "--", "Hogwild/hogwild.py", *flags]
                   if launched else HOGWILD + HOSTS + ["--job_name=ps", *flags])
        # Each task a new Python: the fork server's socket is ours alone.
        result = run(as_another_user(command), timeout=120,
                     env=env_without_tf_config(**{PRELOAD: "0"}))
        assert not os.path.exists(os.path.join(read_only, "logs"))
    finally:
        shutil.rmtree(base)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = error_lines(result.stderr)
    assert f"--logdir {read_only}" in line and "write" in line


def test_launcher_help_is_help():
    result = run([*LAUNCHER, "--help"], timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: launch.sh")
    assert "--ignore_memory_check" in result.stdout and result.stderr == ""


def test_timeout_inf_means_no_limit(run_dir):
    fake = os.path.join(REPO, "tests", "fake_task.py")
    result = run([*LAUNCHER, "--timeout", "inf", "--", fake,
                  "--logdir", str(run_dir / "run")], timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all 2 worker(s) finished" in result.stdout


@pytest.mark.parametrize("script", EXAMPLES)
def test_help_and_flag_errors_come_before_tensorflow_loads(script):
    """`-X importtime` lists every module imported: TensorFlow is not one."""
    for flags, code in ((["--help"], 0), (["--train_steps", "x"], 2)):
        result = run([PYTHON, "-X", "importtime", script, *flags], timeout=60)
        assert result.returncode == code, result.stderr[-2000:]
        imported = re.findall(r"^import time:.*\|\s*(\S+)$", result.stderr, re.M)
        assert "guide.training.flags" in imported
        assert not [name for name in imported if name.startswith("tensorflow")]


def ctrl_c_as_in_a_terminal():
    """Gives the task Ctrl-C's default action, as a shell does for the
    command a user types: a test run started in the background ignores
    SIGINT, and a task that inherits that rightly keeps ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_ends_a_task_that_waits_inside_tensorflow(run_dir):
    """Worker 1, started by hand, waits for the chief through a queue on a
    ps that never comes. TensorFlow says, after 10 s, that it is still
    waiting: the task is then blocked inside `session.run`, where Python's
    own Ctrl-C handling never runs. Ctrl-C ends it at once, with one line."""
    ps_port, chief_port, worker_port = free_ports(3)
    task = Running([*HOGWILD, f"--ps_hosts=127.0.0.1:{ps_port}",
                    f"--worker_hosts=127.0.0.1:{chief_port},127.0.0.1:{worker_port}",
                    "--job_name=worker", "--task_index=1",
                    "--logdir", str(run_dir / "run")],
                   env=env_without_tf_config(TF_CPP_MIN_LOG_LEVEL="0"),
                   preexec_fn=ctrl_c_as_in_a_terminal)
    try:
        task.wait_for_line("CreateSession still waiting for response from "
                           "worker: /job:ps", timeout=120)
        task.process.send_signal(signal.SIGINT)
        code, output = task.finish(timeout=10)
    finally:
        task.kill()
    assert code == 130, output[-2000:]
    assert output.splitlines()[-1] == "hogwild.py: interrupted"
    assert "Traceback" not in output


def test_ignore_memory_check_lets_a_big_job_through():
    fake = os.path.join(REPO, "tests", "fake_task.py")
    workers = str(more_workers_than_fit())
    with pytest.raises(LaunchError, match="--ignore_memory_check"):
        parse_command_line(["--workers", workers, "--", fake])
    options, _, _, _ = parse_command_line(
        ["--", fake, "--workers", workers, "--ignore_memory_check"])
    assert options.workers == int(workers) and options.ignore_memory_check
