"""Runs the pods of a JobSet manifest (the JobSet in a file of
kubernetes/jobset/) as processes on this machine, as the JobSet controller
and Kubernetes would run them: each container's command in its working
directory, with exactly the environment its manifest declares, filled in
as Kubernetes fills it (pod_environment); each pod in a network namespace
of its own, at an address that its JobSet host name resolves to (a hosts
file of the job's, bound over /etc/hosts by with_hosts_file.py); and each
volume a folder under LOGDIR: one per claim, shared by the pods that mount
it, and one per pod for an emptyDir.

    unshare --user --map-root-user --net python jobset_job.py MANIFEST \\
        LOGDIR [FLAG...]

The command is kubernetes/jobset_tf_config.py and the example's command
after it: this runs that entrypoint's TF_CONFIG builder on the pod's
environment, then the example's command with its TF_CONFIG, so that a fork
server (LAUNCH_PRELOAD_TENSORFLOW, as the test suite sets it) can fork the
example's script where the entrypoint would exec a new Python. FLAGs are
added to every pod's command. Prints each pod's TF_CONFIG before it starts,
and exits as operator_job.py does.
Must run in a network namespace of its own: it makes a bridge.
"""

import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "kubernetes"))

import jobset_tf_config  # noqa: E402
import yaml  # noqa: E402
from operator_job import local_command, local_path, run_pods  # noqa: E402

from launcher import network  # noqa: E402

ENTRYPOINT = "/app/kubernetes/jobset_tf_config.py"
WITH_HOSTS_FILE = os.path.join(REPO, "tests", "with_hosts_file.py")
LABEL_OR_ANNOTATION = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def pods_of(manifest):
    """[(replicatedJob, job index, pod index, host name)] of every pod."""
    jobset = manifest["metadata"]["name"]
    return [(job, job_index, pod_index,
             f"{jobset}-{job['name']}-{job_index}-{pod_index}")
            for job in manifest["spec"]["replicatedJobs"]
            for job_index in range(job.get("replicas", 1))
            for pod_index in range(job["template"]["spec"]["completions"])]


def pod_labels(manifest, replicated_job, job_index):
    """The jobset.sigs.k8s.io/ labels (and annotations: the same) that the
    JobSet controller gives a pod of Job `job_index` of `replicated_job`."""
    jobs = manifest["spec"]["replicatedJobs"]
    earlier = jobs[:jobs.index(replicated_job)]
    values = {
        "jobset-name": manifest["metadata"]["name"],
        "replicatedjob-name": replicated_job["name"],
        "replicatedjob-replicas": replicated_job.get("replicas", 1),
        "job-index": job_index,
        "job-global-index": sum(job.get("replicas", 1) for job in earlier)
        + job_index,
        "global-replicas": sum(job.get("replicas", 1) for job in jobs),
    }
    return {f"jobset.sigs.k8s.io/{key}": str(value)
            for key, value in values.items()}


def tensorflow_container(replicated_job):
    return next(container for container in
                replicated_job["template"]["spec"]["template"]["spec"]["containers"]
                if container["name"] == "tensorflow")


def pod_environment(manifest, replicated_job, job_index, pod_index):
    """The environment Kubernetes gives the tensorflow container of a pod
    (beyond the image's own): its env list, each fieldRef to a label or
    annotation read from the pod's (a missing one reads as ""), and
    JOB_COMPLETION_INDEX, which an Indexed Job sets."""
    labels = pod_labels(manifest, replicated_job, job_index)
    env = {"JOB_COMPLETION_INDEX": str(pod_index)}
    for variable in tensorflow_container(replicated_job).get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
            continue
        field = variable["valueFrom"]["fieldRef"]["fieldPath"]
        match = LABEL_OR_ANNOTATION.match(field)
        assert match, f"{variable['name']}: no field {field} here"
        env[variable["name"]] = labels.get(match.group(2), "")
    return env


def volume_folders(replicated_job, pod, logdir):
    """{mount path: local folder}: a claim's folder is shared by every pod
    that mounts it, an emptyDir is the pod's own."""
    pod_spec = replicated_job["template"]["spec"]["template"]["spec"]
    folders = {}
    for volume in pod_spec.get("volumes", []):
        claim = volume.get("persistentVolumeClaim", {}).get("claimName")
        folders[volume["name"]] = os.path.join(
            logdir, "claims", claim) if claim else os.path.join(
            logdir, "pods", pod, volume["name"])
    return {mount["mountPath"]: folders[mount["name"]]
            for mount in tensorflow_container(replicated_job).get(
                "volumeMounts", [])}


def jobset_pods(manifest, hosts_file, logdir, extra):
    """[(pod, command, working directory, env)] of a JobSet's pods."""
    pods = []
    for job, job_index, pod_index, pod in pods_of(manifest):
        env = pod_environment(manifest, job, job_index, pod_index)
        env["TF_CONFIG"] = jobset_tf_config.tf_config(env)
        print(f"{pod} TF_CONFIG={env['TF_CONFIG']}", flush=True)
        container = tensorflow_container(job)
        command = container["command"] + container.get("args", []) + extra
        example = command[command.index(ENTRYPOINT) + 1:]
        for mount_path, folder in volume_folders(job, pod, logdir).items():
            os.makedirs(folder, exist_ok=True)
            example = [folder if word == mount_path else word for word in example]
        example = local_command(example)
        pods.append((pod, [example[0], WITH_HOSTS_FILE, hosts_file, *example[1:]],
                     local_path(container["workingDir"]), env))
    return pods


def main(manifest_path, logdir, extra):
    with open(manifest_path) as stream:
        manifest = next(document for document in yaml.safe_load_all(stream)
                        if document["kind"] == "JobSet")
    jobset = manifest["metadata"]["name"]
    pods = pods_of(manifest)
    hosts = network.Hosts(len(pods))
    os.makedirs(logdir, exist_ok=True)
    hosts_file = os.path.join(logdir, "hosts")
    with open("/etc/hosts") as system, open(hosts_file, "w") as stream:
        stream.write(system.read())
        for number, (_, _, _, pod) in enumerate(pods):
            stream.write(f"{hosts.host(number)} {pod}.{jobset} {pod}\n")
    return run_pods(jobset_pods(manifest, hosts_file, logdir, extra), hosts,
                    logdir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
