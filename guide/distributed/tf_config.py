"""Which cluster this process belongs to, and which task it is, from
`TF_CONFIG` (as Kubernetes' TFJob sets it) or the classic cluster flags.
No TensorFlow here.
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
COORDINATED_EXAMPLE = ('{"cluster": {"chief": ["host:port"], "ps": '
                       '["host:port"], "worker": ["host:port", ...]}, '
                       '"task": {"type": "chief", "index": 0}}')
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


def _parse_tf_config(text, jobs):
    """TF_CONFIG's cluster of checked host lists (of `jobs` only), task type
    and index."""
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
        if hosts == []:
            continue  # a job of no tasks, as a TFJob lists a replica type of 0
        if not isinstance(hosts, list) or not hosts \
                or not all(isinstance(host, str) for host in hosts):
            raise UsageError(f"TF_CONFIG cluster {job!r} must be a non-empty "
                             f"list of \"host:port\" strings")
        cluster[job] = _host_list(hosts, f"TF_CONFIG cluster {job!r}")
    unknown = sorted(set(cluster) - set(jobs))
    if unknown:
        raise UsageError(f"TF_CONFIG cluster has job(s) {', '.join(unknown)}; "
                         f"use only {', '.join(jobs)}")
    return (cluster, config["task"].get("type"),
            task_index_of(config["task"].get("index", 0)))


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


def _place(cluster, job_name, task_index, job_said, index_said):
    """Checks that `job_name` is a job of `cluster` and `task_index` one of
    its tasks; `job_said` and `index_said` name them in the error."""
    if job_name not in cluster:
        raise UsageError(f"{job_said} is not in the cluster; use one of: "
                         f"{', '.join(sorted(cluster))}")
    count = len(cluster[job_name])
    if not 0 <= task_index < count:
        raise UsageError(f"{index_said} is out of range: job {job_name!r} has "
                         f"{count} task(s), so use 0 to {count - 1}")


def _from_tf_config(text):
    cluster, task_type, task_index = _parse_tf_config(
        text, ("chief", "master", "ps", "worker", "evaluator"))
    leaders = [job for job in ("chief", "master") if job in cluster]
    if len(leaders) > 1 or any(len(cluster[job]) != 1 for job in leaders):
        raise UsageError("TF_CONFIG may name one chief (or master) task, "
                         "not more")
    if leaders:
        # The chief is worker 0 here; the workers keep their order after it.
        leader = leaders[0]
        if task_type == leader:
            _place(cluster, leader, task_index, leader,
                   f"task index {task_index} from TF_CONFIG")
            task_type = "worker"
        elif task_type == "worker":
            task_index += 1
        cluster["worker"] = cluster.pop(leader) + cluster.get("worker", [])
    return cluster, task_type, task_index, "TF_CONFIG"


def _from_flags(ps_hosts, worker_hosts, job_name, task_index):
    if not worker_hosts:
        raise UsageError("no cluster given: pass --ps_hosts, --worker_hosts, "
                         "--job_name and --task_index, or set TF_CONFIG")
    cluster = {"worker": _host_list(worker_hosts.split(","), "--worker_hosts")}
    if ps_hosts:
        cluster["ps"] = _host_list(ps_hosts.split(","), "--ps_hosts")
    return cluster, job_name, task_index, "--job_name/--task_index"


def resolve_task(environ, ps_hosts, worker_hosts, job_name, task_index, *,
                 ps=True):
    """This task's TaskConfig, from `environ`'s TF_CONFIG when it is set,
    else from the cluster flags' values; UsageError on any bad input. With
    `ps` False (an allreduce example), the cluster must have no ps instead.

    TF_CONFIG's "chief" (or "master") is worker 0, the workers numbered
    after it; an "evaluator" is no part of the training cluster (it only
    reads checkpoints); other keys, such as `"environment"`, are ignored."""
    tf_config = environ.get("TF_CONFIG", "").strip()
    if tf_config:
        cluster, job_name, task_index, source = _from_tf_config(tf_config)
    else:
        cluster, job_name, task_index, source = _from_flags(
            ps_hosts, worker_hosts, job_name, task_index)
    job_said = f"job name {job_name!r} from {source}"
    index_said = f"task index {task_index} from {source}"
    # Distributed: the evaluator is no part of training; no task connects to it.
    evaluators = cluster.pop("evaluator", [])
    if job_name == "evaluator" and evaluators:
        _place({"evaluator": evaluators}, job_name, task_index, job_said,
               index_said)
        return TaskConfig(cluster, job_name, task_index)
    if "worker" not in cluster:
        raise UsageError(f"the cluster from {source} has no worker; add at "
                         f"least one")
    if not ps and "ps" in cluster:
        raise UsageError(f"the cluster from {source} has a ps; this example "
                         f"keeps a copy of the variables on every worker and "
                         f"has no parameter server, so leave it out (--ps 0 "
                         f"with run.sh; by hand, no --ps_hosts and no \"ps\" "
                         f"list in TF_CONFIG)")
    if ps and "ps" not in cluster:
        raise UsageError(f"the cluster from {source} has no ps; this example "
                         f"keeps its variables on a parameter server, so add "
                         f"one (--ps 1 with run.sh; by hand, --ps_hosts or "
                         f"a \"ps\" list in TF_CONFIG)")
    _place(cluster, job_name, task_index, job_said, index_said)
    check_port_free(cluster[job_name][task_index])
    return TaskConfig(cluster, job_name, task_index)


def resolve_coordinated_task(environ):
    """The TaskConfig of a task of a ParameterServerStrategy cluster, from
    TF_CONFIG only: one "chief" (the coordinator, kept apart from the
    workers, as TFConfigClusterResolver reads it), "worker" and "ps" tasks.
    UsageError on any bad input."""
    tf_config = environ.get("TF_CONFIG", "").strip()
    if not tf_config:
        raise UsageError("TF_CONFIG is not set; this example takes its "
                         "cluster from TF_CONFIG only: start it with "
                         "bash run.sh, or set TF_CONFIG as README.md shows")
    cluster, job_name, task_index = _parse_tf_config(
        tf_config, ("chief", "ps", "worker"))
    missing = [job for job in ("chief", "worker", "ps") if job not in cluster]
    if missing:
        raise UsageError(f"TF_CONFIG cluster has no {', '.join(missing)}; this "
                         f"example needs chief, worker and ps entries (bash "
                         f"run.sh sets them), e.g. {COORDINATED_EXAMPLE}")
    if len(cluster["chief"]) != 1:
        raise UsageError("TF_CONFIG may name one chief task (the "
                         "coordinator), not more")
    _place(cluster, job_name, task_index, f"TF_CONFIG task type {job_name!r}",
           f"TF_CONFIG task index {task_index}")
    check_port_free(cluster[job_name][task_index])
    return TaskConfig(cluster, job_name, task_index)
