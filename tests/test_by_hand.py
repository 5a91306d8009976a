"""Scripts started by hand, the classic way: a ps exits once its workers are
done, and both the host flags and TF_CONFIG work."""

import json

from conftest import PYTHON, Running, env_without_tf_config, read_result
from launcher.options import free_ports

SCRIPT = "Distributed-Setup/distributed_setup.py"


def test_ps_by_flags_and_worker_by_tf_config(run_dir):
    ps_port, worker_port = free_ports(2)
    hosts = [f"--ps_hosts=127.0.0.1:{ps_port}",
             f"--worker_hosts=127.0.0.1:{worker_port}"]
    common = ["--train_steps", "30", "--logdir", str(run_dir / "run")]
    tf_config = {"cluster": {"ps": [f"127.0.0.1:{ps_port}"],
                             "worker": [f"127.0.0.1:{worker_port}"]},
                 "task": {"type": "worker", "index": 0}}
    ps = Running([PYTHON, SCRIPT, *hosts, "--job_name=ps", "--task_index=0",
                  *common])
    # The flags say "ps", TF_CONFIG says "worker": TF_CONFIG wins.
    worker = Running([PYTHON, SCRIPT, "--job_name=ps", *common],
                     env=env_without_tf_config(TF_CONFIG=json.dumps(tf_config)))
    try:
        worker_code, worker_output = worker.finish(timeout=120)
        # No kill, no timeout: the ps leaves on its own once the worker is done.
        ps_code, ps_output = ps.finish(timeout=60)
    finally:
        worker.kill()
        ps.kill()
    assert worker_code == 0, worker_output[-3000:]
    assert ps_code == 0, ps_output[-3000:]
    assert "parameter server exiting" in ps_output
    assert read_result(run_dir / "run")["global_step"] == 30
