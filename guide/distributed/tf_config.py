"""Which cluster this process belongs to, and which task it is.

Read from `TF_CONFIG` when it is set (the convention of Kubernetes' TFJob and
other orchestrators), else from the classic flags `--ps_hosts --worker_hosts
--job_name --task_index`. A "chief" (or "master") entry in TF_CONFIG is treated
as worker 0, with the other workers numbered after it. An "evaluator" entry,
as a TFJob with an Evaluator replica sets it, is no part of the training
cluster: that task only reads the chief's checkpoints. TF_CONFIG's other
keys, such as TFJob's `"environment": "cloud"`, are ignored.

`resolve_task` gives this task's `TaskConfig`; `resolve_coordinated_task`
reads the other shape, TensorFlow 2's ParameterServerStrategy's: TF_CONFIG
only, with a "chief" (the coordinator), "worker" and "ps" entries, the chief
kept apart from the workers. No TensorFlow here.
"""

import dataclasses
import errno
import json
import re
import socket

from guide.training.flags import UsageError

TF_CONFIG_EXAMPLE = ('{"cluster": {"ps": ["host:port"], "worker": '
                     '["host:port", ...]}, "task": {"type": "worker", '
                     '"index": 0}}')
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.\-]+):[0-9]{1,5}$")


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """The cluster as {"ps": [...], "worker": [...]} and this task's place."""

    cluster: dict
    job_name: str
    task_index: int

    @property
    def num_ps(self):
        return len(self.cluster.get("ps", []))

    @property
    def num_workers(self):
        return len(self.cluster["worker"])

    @property
    def is_chief(self):
        # A "chief" job is left in the cluster by resolve_coordinated_task only.
        return self.job_name == "chief" or (self.job_name == "worker"
                                            and self.task_index == 0)

    @property
    def name(self):
        return f"{self.job_name}:{self.task_index}"


def _host_list(value, what):
    hosts = [host.strip() for host in value]
    for host in hosts:
        if not _HOST_PORT.match(host) or not 0 < int(host.rsplit(":", 1)[1]) < 65536:
            raise UsageError(f"{what} has {host!r}, which is not host:port "
                             f"(for example worker0.example.com:2222)")
    return hosts


def _parse_tf_config(text):
    """TF_CONFIG's cluster of checked host lists, task type and index."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"TF_CONFIG is not valid JSON ({error}); set it to "
                         f"{TF_CONFIG_EXAMPLE}") from None
    if not isinstance(config, dict) or not isinstance(config.get("cluster"), dict) \
            or not isinstance(config.get("task"), dict):
        raise UsageError(f"TF_CONFIG needs a \"cluster\" and a \"task\" object; "
                         f"set it to {TF_CONFIG_EXAMPLE}")
    cluster = {}
    for job, hosts in config["cluster"].items():
        if not isinstance(hosts, list) or not hosts:
            raise UsageError(f"TF_CONFIG cluster {job!r} must be a non-empty "
                             f"list of \"host:port\" strings")
        if not all(isinstance(host, str) for host in hosts):
            raise UsageError(f"TF_CONFIG cluster {job!r} must list "
                             f"\"host:port\" strings")
        cluster[job] = _host_list(hosts, f"TF_CONFIG cluster {job!r}")
    return (cluster, config["task"].get("type"),
            task_index_of(config["task"].get("index", 0)))


def _from_tf_config(text):
    cluster, task_type, task_index = _parse_tf_config(text)
    leaders = [job for job in ("chief", "master") if job in cluster]
    if len(leaders) > 1 or any(len(cluster[job]) != 1 for job in leaders):
        raise UsageError("TF_CONFIG may name one chief (or master) task, "
                         "not more")
    if leaders:
        # The chief is worker 0 here; the workers keep their order after it.
        leader = leaders[0]
        cluster["worker"] = cluster.pop(leader) + cluster.get("worker", [])
        if task_type == leader:
            if task_index != 0:
                raise UsageError(f"task index {task_index} is out of range "
                                 f"for the one {leader} task; use 0")
            task_type = "worker"
        elif task_type == "worker":
            task_index += 1
    unknown = sorted(set(cluster) - {"ps", "worker", "evaluator"})
    if unknown:
        raise UsageError(f"TF_CONFIG cluster has job(s) {', '.join(unknown)}; "
                         f"these examples use only ps and worker (and chief, "
                         f"evaluator)")
    return cluster, task_type, task_index, "TF_CONFIG"


def task_index_of(value):
    """TF_CONFIG's task index: an integer, or a string of digits ("0"), as
    TensorFlow's own TF_CONFIG reader takes it; UsageError otherwise."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"TF_CONFIG task index must be an integer, got "
                         f"{value!r}")
    return value


def check_port_free(address):
    """UsageError if this task's port is taken, since TensorFlow's server
    would fail with a traceback that does not name it."""
    port = int(address.rsplit(":", 1)[1])
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("", port))
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} of this task ({address}) is already "
                             f"in use; stop what holds it, or give this task "
                             f"another port") from None
    finally:
        probe.close()


def _from_flags(ps_hosts, worker_hosts, job_name, task_index):
    if not worker_hosts:
        raise UsageError("no cluster given: pass --ps_hosts, --worker_hosts, "
                         "--job_name and --task_index, or set TF_CONFIG")
    cluster = {"worker": _host_list(worker_hosts.split(","), "--worker_hosts")}
    if ps_hosts:
        cluster["ps"] = _host_list(ps_hosts.split(","), "--ps_hosts")
    return cluster, job_name, task_index, "--job_name/--task_index"


def resolve_task(environ, ps_hosts, worker_hosts, job_name, task_index):
    """This task's TaskConfig, from `environ`'s TF_CONFIG when it is set,
    else from the cluster flags' values (comma-separated host:port lists,
    the job name and the task index).

    Raises UsageError, naming the problem and the fix, on any bad input.
    """
    tf_config = environ.get("TF_CONFIG", "").strip()
    if tf_config:
        cluster, job_name, task_index, source = _from_tf_config(tf_config)
    else:
        cluster, job_name, task_index, source = _from_flags(
            ps_hosts, worker_hosts, job_name, task_index)
    # Distributed: the evaluator is no part of training; no task connects to it.
    evaluators = cluster.pop("evaluator", [])
    if job_name == "evaluator" and evaluators:
        if not 0 <= task_index < len(evaluators):
            raise UsageError(f"task index {task_index} from {source} is out "
                             f"of range for {len(evaluators)} evaluator(s)")
        return TaskConfig(cluster=cluster, job_name="evaluator",
                          task_index=task_index)
    if "worker" not in cluster:
        raise UsageError(f"the cluster from {source} has no worker; add at "
                         f"least one")
    if "ps" not in cluster:
        raise UsageError(f"the cluster from {source} has no ps; this example "
                         f"keeps its variables on a parameter server, so add "
                         f"one (--ps 1 with run.sh; by hand, --ps_hosts or "
                         f"a \"ps\" list in TF_CONFIG)")
    if job_name not in cluster:
        raise UsageError(f"job name {job_name!r} from {source} is not in the "
                         f"cluster; use one of: {', '.join(sorted(cluster))}")
    if not 0 <= task_index < len(cluster[job_name]):
        raise UsageError(f"task index {task_index} from {source} is out of "
                         f"range: job {job_name!r} has "
                         f"{len(cluster[job_name])} task(s), so use 0 to "
                         f"{len(cluster[job_name]) - 1}")
    check_port_free(cluster[job_name][task_index])
    return TaskConfig(cluster=cluster, job_name=job_name, task_index=task_index)


COORDINATED_EXAMPLE = ('{"cluster": {"chief": ["host:port"], "ps": '
                       '["host:port"], "worker": ["host:port", ...]}, '
                       '"task": {"type": "chief", "index": 0}}')


def resolve_coordinated_task(environ):
    """The TaskConfig of a task of a ParameterServerStrategy cluster.

    TF_CONFIG is required and gives the cluster: one "chief" (the
    coordinator, which runs the training loop), "worker" and "ps" tasks
    (which only serve). Unlike `resolve_task`, the chief stays a job of its
    own, as TensorFlow's TFConfigClusterResolver reads it, so `num_workers`
    counts the workers without it. Raises UsageError, naming the problem and
    the fix, on any bad input.
    """
    tf_config = environ.get("TF_CONFIG", "").strip()
    if not tf_config:
        raise UsageError("TF_CONFIG is not set; this example takes its "
                         "cluster from TF_CONFIG only: start it with "
                         "bash run.sh, or set TF_CONFIG as README.md shows")
    cluster, job_name, task_index = _parse_tf_config(tf_config)
    missing = [job for job in ("chief", "worker", "ps") if job not in cluster]
    if missing:
        raise UsageError(f"TF_CONFIG cluster has no {', '.join(missing)}; this "
                         f"example needs chief, worker and ps entries (bash "
                         f"run.sh sets them), e.g. {COORDINATED_EXAMPLE}")
    unknown = sorted(set(cluster) - {"chief", "worker", "ps"})
    if unknown:
        raise UsageError(f"TF_CONFIG cluster has job(s) {', '.join(unknown)}; "
                         f"this example uses only chief, worker and ps")
    if len(cluster["chief"]) != 1:
        raise UsageError("TF_CONFIG may name one chief task (the "
                         "coordinator), not more")
    if job_name not in cluster:
        raise UsageError(f"TF_CONFIG task type {job_name!r} is not in the "
                         f"cluster; use one of: chief, ps, worker")
    if not 0 <= task_index < len(cluster[job_name]):
        raise UsageError(f"TF_CONFIG task index {task_index} is out of range: "
                         f"job {job_name!r} has {len(cluster[job_name])} "
                         f"task(s), so use 0 to {len(cluster[job_name]) - 1}")
    check_port_free(cluster[job_name][task_index])
    return TaskConfig(cluster=cluster, job_name=job_name, task_index=task_index)
