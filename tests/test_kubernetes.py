"""The TFJob manifests: generated from one table, valid for the CRD and the
operator's webhook, and runnable with the TF_CONFIG the operator injects."""

import copy
import functools
import glob
import json
import os
import re

import jsonschema
import pytest
import yaml
from operator_job import operator_tf_configs

from conftest import PYTHON, REPO, run
from launcher import network

KUBERNETES = os.path.join(REPO, "kubernetes")
CRD = os.path.join(REPO, "..", "shared", "k8s", "kubeflow.org_tfjobs.yaml")
MANIFESTS = sorted(glob.glob(os.path.join(KUBERNETES, "*.yaml")))
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MANAGERS = (None, "kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")


def load(path):
    with open(path) as stream:
        # The CRD is half a megabyte: libyaml reads it in a second, where
        # pure-Python YAML takes many.
        return yaml.load(stream, Loader=getattr(yaml, "CSafeLoader",
                                                yaml.SafeLoader))


@functools.cache
def crd_validator():
    if not os.path.exists(CRD):
        pytest.skip(f"the TFJob CRD is not at {CRD}")
    (version,) = load(CRD)["spec"]["versions"]
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


def webhook_errors(manifest):
    """What the training operator's validating webhook would reject, and the
    values the controller would turn into a pod the API server rejects."""
    errors = []
    name = manifest.get("metadata", {}).get("name", "")
    if len(name) > 63 or not DNS_1035.match(name):
        errors.append(f"name {name!r} is not a DNS-1035 label")
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
        if spec.get("restartPolicy", "Never") not in (
                "Always", "OnFailure", "Never", "ExitCode"):
            errors.append(f"{kind} restartPolicy {spec['restartPolicy']!r}")
        if kind not in ("Chief", "Evaluator", "Master", "PS", "Worker"):
            errors.append(f"{kind} is not a replica type the examples know")
    managed_by = manifest["spec"].get("runPolicy", {}).get("managedBy")
    if managed_by not in MANAGERS:
        errors.append(f"runPolicy.managedBy {managed_by!r}")
    return errors


def test_there_is_a_manifest_per_example_made_by_the_generator(tmp_path):
    assert len(MANIFESTS) >= 10
    examples = {os.path.dirname(path).lower() for path in
                glob.glob(os.path.join("*", "run.sh"), root_dir=REPO)}
    assert {os.path.basename(path)[:-5] for path in MANIFESTS} == examples
    result = run([PYTHON, os.path.join(KUBERNETES, "generate.py"), "--out",
                  str(tmp_path)], timeout=60)
    assert result.returncode == 0, result.stderr
    for path in MANIFESTS:
        with open(path) as ours:
            assert (tmp_path / os.path.basename(path)).read_text() == ours.read(), \
                f"{path} differs from what kubernetes/generate.py writes; run it"


@pytest.mark.parametrize("path", MANIFESTS, ids=os.path.basename)
def test_manifest_passes_the_crd_schema_and_the_webhook(path):
    manifest = load(path)
    errors = [error.message for error in crd_validator().iter_errors(manifest)]
    assert not errors
    assert not webhook_errors(manifest)
    assert (manifest["apiVersion"], manifest["kind"]) == ("kubeflow.org/v1", "TFJob")
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert {"PS", "Worker"} <= set(specs)
    assert manifest["spec"]["runPolicy"]["cleanPodPolicy"] in ("Running", "All")


def test_the_checks_catch_broken_manifests():
    manifest = load(os.path.join(KUBERNETES, "hogwild.yaml"))
    broken = copy.deepcopy(manifest)
    broken["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "two"
    assert list(crd_validator().iter_errors(broken))
    broken = copy.deepcopy(manifest)
    broken["metadata"]["name"] = "Hogwild"
    container = broken["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"][
        "containers"][0]
    container["name"], container["image"] = "tf", ""
    broken["spec"]["tfReplicaSpecs"]["Chief"] = broken["spec"]["tfReplicaSpecs"]["PS"]
    broken["spec"]["tfReplicaSpecs"]["Master"] = broken["spec"]["tfReplicaSpecs"]["PS"]
    assert len(webhook_errors(broken)) == 1 + 3 * 2 + 1


def test_the_operator_tf_config_is_the_documented_one():
    # The documented example is a job of 1 PS and 2 Workers: Hogwild's
    # manifest without its Evaluator.
    hogwild = load(os.path.join(KUBERNETES, "hogwild.yaml"))
    plain = copy.deepcopy(hogwild)
    del plain["spec"]["tfReplicaSpecs"]["Evaluator"]
    assert operator_tf_configs(plain)["hogwild-worker-1"] == (
        '{"cluster":{"ps":["hogwild-ps-0.default.svc:2222"],"worker":'
        '["hogwild-worker-0.default.svc:2222","hogwild-worker-1.default.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}')
    # With it, every task's cluster lists the evaluator, keys sorted.
    configs = operator_tf_configs(hogwild)
    assert list(json.loads(configs["hogwild-worker-1"])["cluster"]) == [
        "evaluator", "ps", "worker"]
    assert json.loads(configs["hogwild-evaluator-0"])["task"] == {
        "type": "evaluator", "index": 0}
    pss = operator_tf_configs(load(os.path.join(KUBERNETES,
                                                "parameter-server-strategy.yaml")))
    assert list(json.loads(pss["parameter-server-strategy-chief-0"])["cluster"]) == [
        "chief", "ps", "worker"]


def assert_every_pod_succeeded(output, pods):
    """Every pod exited 0, but a ps, which may also have been stopped once
    it had served its workers."""
    outcomes = dict(re.findall(r"^(\S+) (exited -?\d+|stopped)", output, re.M))
    assert sorted(outcomes) == pods, output
    assert all(outcome == "exited 0" or "-ps-" in pod and outcome == "stopped"
               for pod, outcome in outcomes.items()), output


def test_hogwild_runs_with_the_tf_config_of_its_manifest(run_dir):
    if network.namespaces_unavailable():
        pytest.skip("this system does not allow user namespaces")
    result = run(network.namespace_command() + [
        PYTHON, os.path.join(REPO, "tests", "operator_job.py"),
        os.path.join(KUBERNETES, "hogwild.yaml"), str(run_dir / "pods"),
        "--train_steps", "20", "--logdir", str(run_dir / "run")], timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    # A ps, two workers and the evaluator, each in a namespace of its own.
    assert_every_pod_succeeded(result.stdout, [
        "hogwild-evaluator-0", "hogwild-ps-0", "hogwild-worker-0", "hogwild-worker-1"])
    assert 'hogwild-worker-1 TF_CONFIG={"cluster":{"evaluator":["10.10.0.2:2222"],' \
           '"ps":["10.10.0.3:2222"],"worker":["10.10.0.4:2222","10.10.0.5:2222"]},' \
           '"task":{"type":"worker","index":1},"environment":"cloud"}' \
        in result.stdout
    assert re.search(r"global_step 2\d test_accuracy", (
        run_dir / "pods" / "hogwild-evaluator-0.log").read_text())
    assert "RESULT algorithm=hogwild" in (run_dir / "pods" /
                                          "hogwild-worker-0.log").read_text()
