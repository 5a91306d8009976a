"""The rules every pod of the manifests in kubernetes/ follows, whichever
way it is run (TFJob or JobSet): not root and without privileges, sized,
a pinned image of the right TensorFlow build, the disk rule (the chief and
the evaluator share the example's claim, every other pod has a disk of its
own), the evaluator beside the chief; and a NetworkPolicy that lets only
the job's own pods reach its port. No TensorFlow."""

from generate import PORT, USER_ID

LOGDIR = "/logdir"
# The labels each controller gives the pods of a job, and of one role.
JOB_LABEL = {"TFJob": "training.kubeflow.org/job-name",
             "JobSet": "jobset.sigs.k8s.io/jobset-name"}
ROLE_LABEL = {"TFJob": "training.kubeflow.org/replica-type",
              "JobSet": "jobset.sigs.k8s.io/replicatedjob-name"}
SHARING_THE_CLAIM = ("chief", "evaluator")


def pod_templates(job):
    """[(role, pod spec)] of a TFJob or a JobSet: the role is the replica
    type or replicatedJob, lower-cased as TF_CONFIG's task type."""
    if job["kind"] == "TFJob":
        return [(kind.lower(), spec["template"]["spec"])
                for kind, spec in job["spec"]["tfReplicaSpecs"].items()]
    return [(replicated["name"], replicated["template"]["spec"]["template"]["spec"])
            for replicated in job["spec"]["replicatedJobs"]]


def container_errors(role, container, gpu):
    errors = []
    image = container.get("image", "")
    tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
    build = "-gpu" if gpu else "-cpu"
    if tag in ("", "latest") or not tag.endswith(build):
        errors.append(f"{role}: image {image!r} is not pinned to a {build} tag")
    if container.get("imagePullPolicy") != "IfNotPresent":
        errors.append(f"{role}: imagePullPolicy is not IfNotPresent")
    security = container.get("securityContext", {})
    if security.get("allowPrivilegeEscalation") is not False or \
            security.get("capabilities", {}).get("drop") != ["ALL"]:
        errors.append(f"{role}: may escalate privileges or keeps capabilities")
    resources = container.get("resources", {})
    for kind in ("requests", "limits"):
        if not {"cpu", "memory"} <= set(resources.get(kind, {})):
            errors.append(f"{role}: no cpu and memory {kind}")
    if gpu != ("nvidia.com/gpu" in resources.get("limits", {})):
        errors.append(f"{role}: {'no' if gpu else 'a'} GPU")
    return errors


def pod_rule_errors(job, example):
    """What in a TFJob's or JobSet's pods breaks the rules above."""
    name = job["metadata"]["name"]
    chief = {JOB_LABEL[job["kind"]]: name, ROLE_LABEL[job["kind"]]: "chief"}
    gpu_roles = ("chief", "worker") if example.gpu_per_worker else ()
    errors = []
    for role, pod in pod_templates(job):
        security = pod.get("securityContext", {})
        if security.get("runAsNonRoot") is not True or \
                security.get("runAsUser") != USER_ID or \
                security.get("fsGroup") != USER_ID:
            errors.append(f"{role}: not run as user {USER_ID} with its group "
                          f"owning the volumes")
        containers = pod.get("containers", [])
        if [container.get("name") for container in containers] != ["tensorflow"]:
            errors.append(f"{role}: not one container named tensorflow")
        for container in containers:
            errors += container_errors(role, container, role in gpu_roles)
        mounts = {mount["mountPath"]: mount["name"] for container in containers
                  for mount in container.get("volumeMounts", [])}
        volume = next((volume for volume in pod.get("volumes", [])
                       if volume["name"] == mounts.get(LOGDIR)), {})
        claim = volume.get("persistentVolumeClaim", {}).get("claimName")
        if role in SHARING_THE_CLAIM and claim != f"{name}-logdir":
            errors.append(f"{role}: {LOGDIR} is not the claim {name}-logdir")
        if role not in SHARING_THE_CLAIM and "emptyDir" not in volume:
            errors.append(f"{role}: {LOGDIR} is not a disk of its own")
        affinity = pod.get("affinity", {}).get("podAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution", [])
        beside_chief = [{"labelSelector": {"matchLabels": chief},
                         "topologyKey": "kubernetes.io/hostname"}]
        if (role == "evaluator") != (affinity == beside_chief):
            errors.append(f"{role}: {'not' if role == 'evaluator' else ''} "
                          f"required on the chief's node")
    return errors


def network_policy_errors(policy, job):
    """What in a NetworkPolicy lets anything but the job's own pods reach
    them, or them not reach each other's port."""
    own_pods = {"matchLabels": {JOB_LABEL[job["kind"]]: job["metadata"]["name"]}}
    spec = policy.get("spec", {})
    expected = {"podSelector": own_pods, "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": own_pods}],
                             "ports": [{"protocol": "TCP", "port": PORT}]}]}
    return [f"{key}: {spec.get(key)!r}, not {value!r}"
            for key, value in expected.items() if spec.get(key) != value] + \
        [f"{key}: not wanted" for key in set(spec) - set(expected)]
