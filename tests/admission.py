"""What a cluster would reject in a manifest of kubernetes/: the API server
by the CRD's openAPIV3Schema (the copy in shared/k8s/, beside the
repository), and the training operator's validating webhook by the rules
that the schema cannot say (shared/k8s/README.md lists them). No
TensorFlow."""

import functools
import os
import re

import jsonschema
import pytest
import yaml

from conftest import REPO

CRDS = os.path.join(REPO, "..", "shared", "k8s")
CRD_FILES = {"TFJob": "kubeflow.org_tfjobs.yaml"}
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
TFJOB_MANAGERS = (None, "kubeflow.org/training-operator",
                  "kueue.x-k8s.io/multikueue")
TFJOB_RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
TFJOB_REPLICA_TYPES = ("Chief", "Evaluator", "Master", "PS", "Worker")


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
