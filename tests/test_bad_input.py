"""Bad input gets one clear line on stderr and exit code 2, and leaves no
process behind, whether a script is run directly or through run.sh."""

import pytest

from conftest import PYTHON, env_without_tf_config, error_lines, run

HOGWILD = [PYTHON, "Hogwild/hogwild.py"]
HOSTS = ["--ps_hosts=127.0.0.1:1", "--worker_hosts=127.0.0.1:2,127.0.0.1:3"]


@pytest.mark.parametrize("command, tf_config, message", [
    (HOGWILD, "{'cluster': 1}", "TF_CONFIG is not valid JSON"),
    (HOGWILD + HOSTS + ["--job_name=chief"], None,
     "job name 'chief' from --job_name/--task_index is not in the cluster; "
     "use one of: ps, worker"),
    (HOGWILD + HOSTS + ["--job_name=worker", "--task_index=2"], None,
     "task index 2 from --job_name/--task_index is out of range"),
    ([PYTHON, "Non-Distributed_Setup.py", "--train_steps", "-1"], None,
     "--train_steps must be a positive integer, got -1"),
    ([PYTHON, "AGN/agn.py", "--communication_window", "0"], None,
     "argument --communication_window: must be a positive integer, got '0'"),
    ([PYTHON, "Synchronous-SGD-different-learning-rates/"
      "synchronous_sgd_different_learning_rates.py", *HOSTS, "--job_name=worker",
      "--learning_rates", "0.1,0.2,0.3"], None,
     "--learning_rates gives 3 rates for 2 workers; give one per worker"),
    ([PYTHON, "Synchronous-SGD/synchronous_sgd.py", *HOSTS, "--job_name=worker",
      "--replicas_to_aggregate", "3"], None,
     "--replicas_to_aggregate 3 is more than the 2 workers; use at most 2"),
    ([PYTHON, "Parameter-Server-Strategy/parameter_server_strategy.py"], None,
     "TF_CONFIG is not set; this example takes its cluster from TF_CONFIG only"),
], ids=["malformed-TF_CONFIG", "unknown-job", "index-out-of-range",
        "negative-steps", "zero-window", "rates-per-worker", "replicas",
        "no-TF_CONFIG"])
def test_direct_run_gives_one_error_line(command, tf_config, message, run_dir):
    env = env_without_tf_config(**({"TF_CONFIG": tf_config} if tf_config else {}))
    result = run(command + ["--logdir", str(run_dir)], env=env, timeout=60)
    assert result.returncode == 2
    lines = error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert message in lines[0] and ": error: " in lines[0]


def test_missing_mnist_files_direct(run_dir):
    result = run([PYTHON, "Non-Distributed_Setup.py", "--dataset", "mnist",
                  "--data_dir", str(run_dir), "--logdir", str(run_dir / "run")],
                 timeout=60)
    assert result.returncode == 2
    (line,) = error_lines(result.stderr)
    assert f"MNIST not found in {run_dir}" in line and "--data_dir" in line


@pytest.mark.parametrize("flags, message", [
    (["--train_steps", "0"], "--train_steps must be a positive integer, got 0"),
    (["--eval_every", "-5"], "--eval_every must be 0 or more, got -5"),
    (["--dataset", "mnist", "--data_dir", "{run_dir}"], "MNIST not found in"),
], ids=["zero-steps", "negative-eval-every", "missing-mnist"])
def test_through_run_sh_exit_2_and_no_process_left(flags, message, run_dir):
    flags = [flag.format(run_dir=run_dir) for flag in flags]
    result = run(["bash", "Hogwild/run.sh", *flags, "--logdir",
                  str(run_dir / "run")], timeout=90)
    assert result.returncode == 2, result.stdout[-3000:]
    assert result.stdout.count(message) == 1, result.stdout
    assert "rejected its input (exit code 2)" in result.stdout
    # run_dir's fixture checks that no task is left running.

