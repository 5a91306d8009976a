"""Runs the pods of a TFJob manifest as processes on this machine, as the
Kubeflow operator would run them: the container's command in its working
directory, with exactly the TF_CONFIG the operator gives each pod, except
that each pod's host name is replaced by the address of a network namespace
of its own (as `launch.sh --network hosts` makes them).

    unshare --user --map-root-user --net python operator_job.py MANIFEST \\
        LOGDIR [FLAG...]

FLAGs are added to every pod's command. Prints each pod's TF_CONFIG before
it starts, and exits 0 once every pod has exited 0, else 1 after killing
the rest. Must run in a network namespace of its own: it makes a bridge.
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


def main(manifest_path, logdir, extra):
    with open(manifest_path) as stream:
        manifest = yaml.safe_load(stream)
    configs = operator_tf_configs(manifest)
    server = fork_mode(os.environ.get(PRELOAD))
    if server == LAUNCHER:
        server = None  # there is no launcher to fork from: a new Python each
    hosts = network.Hosts(len(configs))
    network.interface_up("lo")
    pods = list(configs)
    os.makedirs(logdir, exist_ok=True)
    processes = {}
    for number, pod in enumerate(pods):
        tf_config = configs[pod]
        for other_number, other in enumerate(pods):
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
        if command[0] == "python":
            command[0] = sys.executable
        workdir = os.path.join(REPO, os.path.relpath(container["workingDir"], "/app"))
        env = dict(os.environ, TF_CONFIG=tf_config, PYTHONUNBUFFERED="1")
        with open(os.path.join(logdir, f"{pod}.log"), "w") as log:
            if server:
                processes[pod] = Served(command[1:], env,
                                        hosts.namespace(number), pod[-15:],
                                        server, cwd=workdir, output=log.fileno())
                continue
            enter = hosts.enter(number)
            processes[pod] = subprocess.Popen(
                command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=env,
                preexec_fn=lambda enter=enter: (enter(), die_with_parent()))
    # Readable once its pod has exited.
    running = {(process if server else os.pidfd_open(process.pid)): pod
               for pod, process in processes.items()}
    while running:
        for handle in select.select(list(running), [], [])[0]:
            pod = running.pop(handle)
            code = processes[pod].wait()
            print(f"{pod} exited {code}", flush=True)
            if code != 0:
                for other in running.values():
                    os.kill(processes[other].pid, signal.SIGKILL)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
