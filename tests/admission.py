"""What a cluster would reject in a manifest of kubernetes/: the API server
by the CRD's openAPIV3Schema (the copies in shared/k8s/, beside the
repository), the training operator's or JobSet's validating webhook by the
rules that the schema cannot say (shared/k8s/README.md and JOBSET.md list
them), and the Job API's own rules for a JobSet's Job templates. No
TensorFlow."""

import functools
import os
import re

import jsonschema
import pytest
import yaml

from conftest import REPO

CRDS = os.path.join(REPO, "..", "shared", "k8s")
CRD_FILES = {"TFJob": "kubeflow.org_tfjobs.yaml",
             "JobSet": "jobset.x-k8s.io_jobsets.yaml"}
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
TFJOB_MANAGERS = (None, "kubeflow.org/training-operator",
                  "kueue.x-k8s.io/multikueue")
TFJOB_RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
TFJOB_REPLICA_TYPES = ("Chief", "Evaluator", "Master", "PS", "Worker")
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
FAILURE_ACTIONS = ("FailJobSet", "RestartJobSet",
                   "RestartJobSetAndIgnoreMaxRestarts", "RestartJob",
                   "RestartJobAndIgnoreMaxRestarts")
JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded",
                       "FailedIndexes", "MaxFailedIndexesExceeded",
                       "PodFailurePolicy")
INT32_MAX = 2**31 - 1
# The Job controller adds five random characters to a pod's name.
POD_NAME_SUFFIX = "-abcde"


def load(path):
    """The YAML documents of a file: a manifest file of kubernetes/ holds a
    NetworkPolicy and its job."""
    with open(path) as stream:
        # The CRDs are most of a megabyte: libyaml reads them in a second,
        # where pure-Python YAML takes many.
        return list(yaml.load_all(stream, Loader=getattr(
            yaml, "CSafeLoader", yaml.SafeLoader)))


@functools.cache
def crd_validator(kind):
    path = os.path.join(CRDS, CRD_FILES[kind])
    if not os.path.exists(path):
        pytest.skip(f"the {kind} CRD is not at {path}")
    (version,) = load(path)[0]["spec"]["versions"]
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


def schema_errors(manifest):
    """What the API server's check against the CRD's schema rejects."""
    return [f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
            for error in crd_validator(manifest["kind"]).iter_errors(manifest)]


def label_errors(what, name):
    """A DNS-1035 label: what every generated object and host name is."""
    if len(name) > 63 or not DNS_1035.match(name):
        return [f"{what} {name!r} is not a DNS-1035 label of at most 63 "
                f"characters"]
    return []


def tfjob_webhook_errors(manifest):
    """What the training operator's validating webhook would reject, and the
    values the controller would turn into a pod the API server rejects."""
    errors = label_errors("name", manifest.get("metadata", {}).get("name", ""))
    specs = manifest.get("spec", {}).get("tfReplicaSpecs")
    if not specs:
        return errors + ["no tfReplicaSpecs"]
    if sum(kind in ("Chief", "Master") for kind in specs) > 1:
        errors.append("more than one Chief/Master")
    for kind, spec in specs.items():
        containers = spec.get("template", {}).get("spec", {}).get("containers", [])
        if not any(container.get("name") == "tensorflow" for container in containers):
            errors.append(f"{kind} has no container named tensorflow")
        if not all(container.get("image") for container in containers):
            errors.append(f"{kind} has a container without an image")
        if spec.get("restartPolicy", "Never") not in TFJOB_RESTART_POLICIES:
            errors.append(f"{kind} restartPolicy {spec['restartPolicy']!r}")
        if kind not in TFJOB_REPLICA_TYPES:
            errors.append(f"{kind} is not a replica type the examples know")
    managed_by = manifest["spec"].get("runPolicy", {}).get("managedBy")
    if managed_by not in TFJOB_MANAGERS:
        errors.append(f"runPolicy.managedBy {managed_by!r}")
    return errors


def job_template_errors(jobset, replicated_job):
    """The JobSet webhook's checks of one replicatedJob's generated names
    and sizes, and the Job API's of its template."""
    name = replicated_job.get("name", "")
    errors = label_errors("replicatedJob name", name)
    replicas = replicated_job.get("replicas", 1)
    spec = replicated_job.get("template", {}).get("spec", {})
    # The webhook makes a Job Indexed unless it says otherwise.
    indexed = spec.get("completionMode", "Indexed") == "Indexed"
    parallelism, completions = spec.get("parallelism", 1), spec.get("completions")
    errors += label_errors("the last Job's name", f"{jobset}-{name}-{replicas - 1}")
    if indexed and completions is None:
        errors.append(f"{name}: an Indexed Job needs completions")
    elif indexed:
        errors += label_errors("the last pod's name", f"{jobset}-{name}-"
                               f"{replicas - 1}-{completions - 1}{POD_NAME_SUFFIX}")
    if replicas * parallelism > INT32_MAX:
        errors.append(f"{name}: replicas x parallelism is over {INT32_MAX}")
    restart = spec.get("template", {}).get("spec", {}).get("restartPolicy",
                                                           "OnFailure")
    if restart not in ("Never", "OnFailure"):
        errors.append(f"{name}: a Job's pods restart Never or OnFailure, "
                      f"not {restart}")
    elif "podFailurePolicy" in spec and restart != "Never":
        errors.append(f"{name}: a podFailurePolicy needs restartPolicy Never")
    return errors


def policy_rule_errors(failure_policy, names):
    errors, seen = [], set()
    for rule in failure_policy.get("rules", []):
        rule_name = rule.get("name", "")
        if not 1 <= len(rule_name) <= 128 or not RULE_NAME.match(rule_name):
            errors.append(f"failure policy rule name {rule_name!r}")
        if rule_name in seen:
            errors.append(f"failure policy rule name {rule_name!r} twice")
        seen.add(rule_name)
        if rule.get("action") not in FAILURE_ACTIONS:
            errors.append(f"failure policy action {rule.get('action')!r}")
        errors += [f"job failure reason {reason!r}"
                   for reason in rule.get("onJobFailureReasons", [])
                   if reason not in JOB_FAILURE_REASONS]
        errors += [f"failure policy target {target!r} is no replicatedJob"
                   for target in rule.get("targetReplicatedJobs", [])
                   if target not in names]
    return errors


def jobset_webhook_errors(manifest):
    """What JobSet's validating webhook (and the CRD's CEL rules, which a
    JSON schema check does not run) would reject."""
    jobset = manifest.get("metadata", {}).get("name", "")
    spec = manifest.get("spec", {})
    errors = label_errors("JobSet name", jobset)
    if "subdomain" in spec.get("network", {}):
        errors += label_errors("subdomain", spec["network"]["subdomain"])
    replicated_jobs = spec.get("replicatedJobs", [])
    names = [job.get("name", "") for job in replicated_jobs]
    errors += [f"replicatedJob {name!r} twice" for name in set(names)
               if names.count(name) > 1]
    for number, job in enumerate(replicated_jobs):
        errors += job_template_errors(jobset, job)
        for dependency in job.get("dependsOn", []):
            if number == 0 or dependency.get("name") not in names[:number]:
                errors.append(f"{job.get('name')} depends on "
                              f"{dependency.get('name')!r}, not an earlier "
                              f"replicatedJob")
    in_order = spec.get("startupPolicy", {}).get("startupPolicyOrder") == "InOrder"
    if in_order and any("dependsOn" in job for job in replicated_jobs):
        errors.append("startupPolicy InOrder and dependsOn together")
    success = spec.get("successPolicy", {"operator": "All"})
    if success.get("operator") not in ("All", "Any"):
        errors.append(f"successPolicy operator {success.get('operator')!r}")
    errors += [f"successPolicy target {target!r} is no replicatedJob"
               for target in success.get("targetReplicatedJobs", [])
               if target not in names]
    errors += policy_rule_errors(spec.get("failurePolicy", {}), names)
    return errors
