"""Runs the pods of a TFJob manifest (the TFJob in a file of kubernetes/)
as processes on this machine, as the Kubeflow operator would run them: the
container's command in its working directory, with exactly the TF_CONFIG
the operator gives each pod, except that each pod's host name is replaced
by the address of a network namespace of its own (as `launch.sh --network
hosts` makes them).

    unshare --user --map-root-user --net python operator_job.py MANIFEST \\
        LOGDIR [FLAG...]

FLAGs are added to every pod's command. Prints each pod's TF_CONFIG before
it starts, and exits 0 once every pod but the ps has exited 0 (a ps still
running then is stopped), else 1 after killing the rest. Must run in a
network namespace of its own: it makes a bridge.
With LAUNCH_PRELOAD_TENSORFLOW set to a fork server's socket (as the test
suite sets it), that server forks each pod's script instead of a new
Python running it.
"""

import json
import os
import select
import signal
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import yaml  # noqa: E402

from launcher import network  # noqa: E402
from launcher.forking import LAUNCHER, PRELOAD, Served, fork_mode  # noqa: E402
from launcher.network import die_with_parent  # noqa: E402

KNOWN_TYPES = ("Chief", "Evaluator", "Master", "PS", "Worker")


def operator_tf_configs(manifest, namespace="default"):
    """{pod name: TF_CONFIG} as the operator's README says it injects them."""
    job = manifest["metadata"]["name"]
    specs = manifest["spec"]["tfReplicaSpecs"]
    cluster = {}
    for kind, spec in specs.items():
        ports = [port["containerPort"] for container in
                 spec["template"]["spec"]["containers"]
                 if container["name"] == "tensorflow"
                 for port in container.get("ports", [])
                 if port.get("name") == "tfjob-port"]
        port = ports[0] if ports else 2222
        cluster[kind.lower()] = [f"{job}-{kind.lower()}-{index}.{namespace}.svc:{port}"
                                 for index in range(spec.get("replicas", 1))]
    cluster = dict(sorted(cluster.items()))
    # The operator sets TF_CONFIG only for a distributed job.
    assert sum(spec.get("replicas", 1) for kind, spec in specs.items()
               if kind in KNOWN_TYPES) != 1
    return {f"{job}-{kind}-{index}": json.dumps(
                {"cluster": cluster, "task": {"type": kind, "index": index},
                 "environment": "cloud"}, separators=(",", ":"))
            for kind, hosts in cluster.items() for index in range(len(hosts))}


def tfjob_pods(manifest, hosts, extra):
    """[(pod, command, working directory, env)] of a TFJob's pods, each
    TF_CONFIG's host names replaced by the addresses of `hosts`, pod k's
    at hosts.host(k)."""
    configs = operator_tf_configs(manifest)
    pods = []
    for pod, tf_config in configs.items():
        for other_number, other in enumerate(configs):
            tf_config = tf_config.replace(f"{other}.default.svc",
                                          hosts.host(other_number))
        print(f"{pod} TF_CONFIG={tf_config}", flush=True)
        kind = pod.rsplit("-", 2)[1]
        spec = next(spec for name, spec in manifest["spec"]["tfReplicaSpecs"].items()
                    if name.lower() == kind)
        container = next(container for container in
                         spec["template"]["spec"]["containers"]
                         if container["name"] == "tensorflow")
        command = container["command"] + container.get("args", []) + extra
        pods.append((pod, local_command(command), local_path(
            container["workingDir"]), {"TF_CONFIG": tf_config}))
    return pods


def local_path(path):
    """The image's /app is this repository."""
    return os.path.join(REPO, os.path.relpath(path, "/app"))


def local_command(command):
    """A container's command as this machine runs it: this Python, the
    image's paths here."""
    return [sys.executable if word == "python" else
            local_path(word) if word.startswith("/app/") else word
            for word in command]


def run_pods(pods, hosts, logdir):
    """Starts every pod of `pods` ([(name, command, working directory,
    env)], command[0] a Python, env's TF_CONFIG the pod's), pod k in the
    network namespace of hosts.namespace(k), its output in
    LOGDIR/<name>.log; returns 0 once every pod but the ps has exited 0,
    else 1 after killing the rest. A ps still running then is stopped, as
    the launcher stops it: a forked ps waits to be, so that a worker still
    closing its session with it is answered (launcher/forking.py)."""
    server = fork_mode(os.environ.get(PRELOAD))
    if server == LAUNCHER:
        server = None  # there is no launcher to fork from: a new Python each
    os.makedirs(logdir, exist_ok=True)
    processes, awaited = {}, set()
    for number, (pod, command, workdir, pod_env) in enumerate(pods):
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", **pod_env)
        task = json.loads(env["TF_CONFIG"])["task"]
        if task["type"] != "ps":
            awaited.add(pod)
        with open(os.path.join(logdir, f"{pod}.log"), "w") as log:
            if server:
                # Named as the launcher names its tasks (ps:0, worker:1).
                processes[pod] = Served(
                    command[1:], env, hosts.namespace(number),
                    f"{task['type']}:{task['index']}", server, cwd=workdir,
                    output=log.fileno())
                continue
            enter = hosts.enter(number)
            processes[pod] = subprocess.Popen(
                command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=env,
                preexec_fn=lambda enter=enter: (enter(), die_with_parent()))
    # Readable once its pod has exited.
    running = {(process if server else os.pidfd_open(process.pid)): pod
               for pod, process in processes.items()}
    code = 0
    while awaited & set(running.values()) and code == 0:
        for handle in select.select(list(running), [], [])[0]:
            pod = running.pop(handle)
            code = code or processes[pod].wait()
            print(f"{pod} exited {processes[pod].wait()}", flush=True)
    for pod in running.values():
        os.kill(processes[pod].pid, signal.SIGKILL)
        processes[pod].wait()
        if code == 0:
            print(f"{pod} stopped, every other pod done", flush=True)
    return int(code != 0)


def main(manifest_path, logdir, extra):
    with open(manifest_path) as stream:
        manifest = next(document for document in yaml.safe_load_all(stream)
                        if document["kind"] == "TFJob")
    hosts = network.Hosts(len(operator_tf_configs(manifest)))
    return run_pods(tfjob_pods(manifest, hosts, extra), hosts, logdir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
