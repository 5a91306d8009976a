#!/usr/bin/env python3
"""Writes the Kubernetes manifests of every example, from guide/examples.py.

    python kubernetes/generate.py [--image NAME] [--tag TAG] [--out DIR]

For each example folder, into DIR (default: this folder):
- <example>.yaml: a Kubeflow TFJob, after the NetworkPolicy that lets only
  the job's own pods reach its port (the operator gives every pod TF_CONFIG);
- jobset/<example>.yaml: the same job as a JobSet, after its NetworkPolicy
  (jobset_tf_config.py builds each pod's TF_CONFIG);
- volumes/<example>.yaml: the PersistentVolumeClaim that the chief and the
  evaluator of either share, created once and kept after the job.
Every pod runs the example's script in the image kubernetes/Dockerfile
builds, with the tasks its run.sh starts. Edit the table in
guide/examples.py (or the rules below), not the YAML, then run this again;
tests/test_kubernetes.py checks the two agree. docs/multi-host.md says what
each field is for.
"""

import argparse
import dataclasses
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

import jobset_tf_config  # noqa: E402 - the env vars its entrypoint reads

from guide import examples  # noqa: E402 - the table of every example
from launcher import contract  # noqa: E402 - what each script declares

IMAGE = "distributed-tensorflow-guide"
PORT = 2222
# The run's folder: a fixed path on a volume, so that a chief restarted in
# its pod finds its checkpoints there (a default --logdir is new each start).
LOGDIR = "/logdir"
# The Dockerfile's user, by number, so that runAsNonRoot can check it.
USER_ID = 1000
# Restarts before the job counts as failed: a TFJob's, in all (as run.sh's
# --max_restarts); a JobSet's, per Job (pods replaced), then per JobSet.
RESTARTS = 3
JOBSET_RESTARTS = 2
# A run with the defaults takes minutes; past this, one is stuck.
DEADLINE_S = 3600
# A task peaks at 775 MiB resident (launcher/options.py), MNIST's arrays
# add about 250 MiB; a GPU task also maps CUDA's libraries.
RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"},
             "limits": {"cpu": "2", "memory": "2Gi"}}
GPU_RESOURCES = {"requests": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": 1},
                 "limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 1}}
# The checkpoints (under a megabyte each, five kept), events and results.
CLAIM_SIZE = "1Gi"
ENTRYPOINT = "/app/kubernetes/jobset_tf_config.py"
# Exit code 2 (bad input) fails the Job at once, which the JobSet's
# BadInput rule turns into a failed JobSet; a pod evicted or preempted is
# replaced without counting as a failure.
POD_FAILURE_POLICY = {"rules": [
    {"action": "FailJob", "onExitCodes": {
        "containerName": "tensorflow", "operator": "In", "values": [2]}},
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
]}
REPLICA_TYPES = {"chief": "Chief", "ps": "PS", "worker": "Worker",
                 "evaluator": "Evaluator"}


@dataclasses.dataclass(frozen=True)
class Role:
    """The pods of one task type: a TFJob replica type, a JobSet
    replicatedJob."""

    task_type: str
    count: int
    # Mounts the example's claim (the chief and the evaluator), rather than
    # a disk of its own that dies with the pod.
    shares_logdir: bool = False
    gpu: bool = False


def roles(example):
    """The roles of an example's pods, from its row of guide/examples.py:
    the tasks its run.sh starts, and
    - a chief of its own: ParameterServerStrategy's coordinator, or worker 0
      of a tf.compat.v1 example (which takes a "chief" in TF_CONFIG as
      worker 0), so that only it and the evaluator mount the claim;
    - an evaluator, which tests each new checkpoint of the chief, for the
      tf.compat.v1 examples (Parameter-Server-Strategy has none);
    - a GPU for each training worker where run.sh gives each worker one."""
    chief_trains = not example.coordinator
    listed = [
        Role("chief", 1, gpu=chief_trains and example.gpu_per_worker),
        Role("ps", example.ps),
        Role("worker", example.workers - chief_trains,
             gpu=example.gpu_per_worker),
        Role("evaluator", int(chief_trains)),
    ]
    # The disk rule the script declares for the launcher (chief_disk in its
    # launch block), where the chief is a type of its own, as a coordinator.
    shared = ("chief", *contract.read(
        os.path.join(examples.REPO, example.script_path)).chief_disk)
    return [dataclasses.replace(role, shares_logdir=role.task_type in shared)
            for role in listed if role.count]


def claim_name(example):
    return f"{example.folder.lower()}-logdir"


def pod_spec(example, role, images, command, port_name, env=None,
             chief_labels=None):
    """The pod template's spec: one container named tensorflow, not root,
    with no privilege, its resources, and its --logdir volume."""
    container = {
        "name": "tensorflow",
        "image": images["gpu" if role.gpu else "cpu"],
        "imagePullPolicy": "IfNotPresent",
        "workingDir": f"/app/{example.folder}",
        "command": command,
        "args": ["--logdir", LOGDIR],
        **({"env": env} if env else {}),
        "ports": [{"name": port_name, "containerPort": PORT}],
        "resources": GPU_RESOURCES if role.gpu else RESOURCES,
        "securityContext": {"allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "logdir", "mountPath": LOGDIR}],
    }
    volume = {"name": "logdir", "emptyDir": {}}
    if role.shares_logdir:
        volume = {"name": "logdir",
                  "persistentVolumeClaim": {"claimName": claim_name(example)}}
    spec = {
        # fsGroup: the claim's files are the user's group's, so writable.
        "securityContext": {"runAsNonRoot": True, "runAsUser": USER_ID,
                            "runAsGroup": USER_ID, "fsGroup": USER_ID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [volume],
    }
    if role.task_type == "evaluator":
        # On the chief's node: the claim is ReadWriteOnce, and the evaluator
        # wakes on inotify, which sees no write made on another node.
        spec["affinity"] = {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": chief_labels},
                "topologyKey": "kubernetes.io/hostname"}]}}
    return spec


def tfjob(example, images):
    name = example.folder.lower()
    job_label = {"training.kubeflow.org/job-name": name}
    chief_labels = {**job_label, "training.kubeflow.org/replica-type": "chief"}
    specs = {
        REPLICA_TYPES[role.task_type]: {
            "replicas": role.count,
            # Every example carries on after a task restarts (checkpoints,
            # handshakes that survive restarts: see docs/recovery.md).
            "restartPolicy": "OnFailure",
            # Named tfjob-port, the port is the one the operator puts in
            # TF_CONFIG.
            "template": {"spec": pod_spec(
                example, role, images, ["python", example.script],
                "tfjob-port", chief_labels=chief_labels)},
        } for role in roles(example)}
    return [network_policy(f"{name}-tfjob", job_label), {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {
            # A ps serves until its workers are done; Running deletes the
            # pods still running then, and keeps the finished ones' logs.
            # The job is done when its Chief is, which waits for every
            # worker; it fails after RESTARTS restarts or DEADLINE_S.
            "runPolicy": {"cleanPodPolicy": "Running",
                          "backoffLimit": RESTARTS,
                          "activeDeadlineSeconds": DEADLINE_S},
            "tfReplicaSpecs": specs,
        },
    }]


def jobset(example, images):
    name = example.folder.lower()
    job_label = {"jobset.sigs.k8s.io/jobset-name": name}
    chief_labels = {**job_label, "jobset.sigs.k8s.io/replicatedjob-name": "chief"}
    env = [
        {"name": "TF_TASK_COUNTS", "value": ",".join(
            f"{role.task_type}={role.count}" for role in roles(example))},
        {"name": "TF_PORT", "value": str(PORT)},
        {"name": "TF_CHIEF_IS_WORKER_0",
         "value": "false" if example.coordinator else "true"},
    ] + [{"name": variable, "valueFrom": {"fieldRef": {
        "fieldPath": f"metadata.labels['{label}']"}}}
        for variable, label in jobset_tf_config.LABELS.items()]
    replicated_jobs = []
    for role in roles(example):
        pod = pod_spec(example, role, images,
                       ["python", ENTRYPOINT, "python", example.script],
                       "tf-server", env, chief_labels)
        # A failed pod is replaced under the same host name (podFailurePolicy
        # needs Never rather than OnFailure).
        pod = {"restartPolicy": "Never", **pod}
        replicated_jobs.append({"name": role.task_type, "replicas": 1,
                                "template": {"spec": {
                                    "completionMode": "Indexed",
                                    "completions": role.count,
                                    "parallelism": role.count,
                                    "backoffLimit": RESTARTS,
                                    "activeDeadlineSeconds": DEADLINE_S,
                                    "podFailurePolicy": POD_FAILURE_POLICY,
                                    "template": {"spec": pod}}}})
    return [network_policy(f"{name}-jobset", job_label), {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            # Each pod's host name, <name>-<role>-0-<index>.<name>, resolves
            # before the pods are ready: what jobset_tf_config.py lists.
            "network": {"enableDNSHostnames": True,
                        "publishNotReadyAddresses": True},
            # Done when the chief is, which waits for every worker (a ps
            # ends once every worker has said it is done).
            "successPolicy": {"operator": "All",
                              "targetReplicatedJobs": ["chief"]},
            "failurePolicy": {"maxRestarts": JOBSET_RESTARTS, "rules": [
                # Exit code 2 (bad input) fails the same way every time.
                {"name": "BadInput", "action": "FailJobSet",
                 "onJobFailureReasons": ["PodFailurePolicy"]},
                {"name": "PastDeadline", "action": "FailJobSet",
                 "onJobFailureReasons": ["DeadlineExceeded"]}]},
            "replicatedJobs": replicated_jobs,
        },
    }]



def network_policy(name, job_labels):
    """Only the job's own pods may reach its port: a TensorFlow server takes
    anyone who connects as a member of the cluster."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name},
        "spec": {
            "podSelector": {"matchLabels": job_labels},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": job_labels}}],
                         "ports": [{"protocol": "TCP", "port": PORT}]}],
        },
    }


def claim(example):
    """The chief's and the evaluator's --logdir: ReadWriteOnce, as every
    storage class offers it; the evaluator runs on the chief's node."""
    return [{
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim_name(example)},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": CLAIM_SIZE}}},
    }]


def images_for(name, tag):
    """The image of each TensorFlow build, as the Dockerfile tags them."""
    return {"cpu": f"{name}:{tag}-cpu", "gpu": f"{name}:{tag}-gpu"}


def tensorflow_version():
    """The TensorFlow version requirements.txt pins, which the image has."""
    with open(os.path.join(REPO, "requirements.txt")) as stream:
        return re.search(r"^tensorflow-cpu==(\S+)$", stream.read(),
                         re.MULTILINE).group(1)


class Dumper(yaml.SafeDumper):
    """Writes a value used twice out twice, not as a YAML alias."""

    def ignore_aliases(self, data):
        return True


def render(documents):
    return ("# Generated by kubernetes/generate.py from guide/examples.py; edit "
            "those and run it again.\n# What each field is for: "
            "docs/multi-host.md.\n"
            + yaml.dump_all(documents, Dumper=Dumper, sort_keys=False))


# Each kind of manifest: its folder under --out, and what writes it.
KINDS = {"": tfjob, "jobset": jobset, "volumes": lambda example, _: claim(example)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_tag = f"tf{tensorflow_version()}"
    parser.add_argument("--image", default=IMAGE,
                        help=f"the image's name, without a tag (default {IMAGE})")
    parser.add_argument("--tag", default=default_tag,
                        help=f"its tag, before -cpu or -gpu (default "
                             f"{default_tag})")
    parser.add_argument("--out", default=HERE,
                        help="where to write the manifests (default: this folder)")
    args = parser.parse_args()
    images = images_for(args.image, args.tag)
    for folder, write in KINDS.items():
        os.makedirs(os.path.join(args.out, folder), exist_ok=True)
        for example in examples.BY_FOLDER.values():
            path = os.path.join(args.out, folder, f"{example.folder.lower()}.yaml")
            with open(path, "w") as stream:
                stream.write(render(write(example, images)))
            print(path)


if __name__ == "__main__":
    main()
