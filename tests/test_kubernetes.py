"""The TFJob manifests: generated from one table; valid for the CRD and the
operator's webhook; every pod not root, sized, on a pinned image, on the
disks the disk rule gives it, reachable by its own job only; and runnable
with the TF_CONFIG the operator injects."""

import copy
import glob
import json
import os
import re

import generate
import pytest
from admission import load, schema_errors, tfjob_webhook_errors
from manifest_rules import network_policy_errors, pod_rule_errors
from operator_job import operator_tf_configs

from conftest import PYTHON, REPO, run
from guide import examples
from launcher import network

KUBERNETES = os.path.join(REPO, "kubernetes")
TFJOBS = sorted(glob.glob(os.path.join(KUBERNETES, "*.yaml")))
CLAIMS = sorted(glob.glob(os.path.join(KUBERNETES, "volumes", "*.yaml")))
EXAMPLES = {folder.lower(): example for folder, example in examples.BY_FOLDER.items()}


def manifest_id(path):
    return os.path.relpath(path, KUBERNETES)


def job_of(path):
    return next(document for document in load(path)
                if document["kind"] in ("TFJob", "JobSet"))


def test_there_is_a_manifest_per_example_made_by_the_generator(tmp_path):
    assert len(TFJOBS) >= 10
    for paths in (TFJOBS, CLAIMS):
        assert {os.path.basename(path)[:-5] for path in paths} == set(EXAMPLES)
    result = run([PYTHON, os.path.join(KUBERNETES, "generate.py"), "--out",
                  str(tmp_path)], timeout=60)
    assert result.returncode == 0, result.stderr
    for path in TFJOBS + CLAIMS:
        with open(path) as ours:
            assert (tmp_path / manifest_id(path)).read_text() == ours.read(), \
                f"{path} differs from what kubernetes/generate.py writes; run it"


@pytest.mark.parametrize("path", TFJOBS, ids=manifest_id)
def test_tfjob_passes_the_crd_schema_and_the_webhook(path):
    policy, tfjob = load(path)
    assert (policy["kind"], tfjob["apiVersion"], tfjob["kind"]) == (
        "NetworkPolicy", "kubeflow.org/v1", "TFJob")
    assert not schema_errors(tfjob)
    assert not tfjob_webhook_errors(tfjob)
    specs = tfjob["spec"]["tfReplicaSpecs"]
    assert {"Chief", "PS"} <= set(specs)
    run_policy = tfjob["spec"]["runPolicy"]
    assert run_policy["cleanPodPolicy"] in ("Running", "All")
    # A crash loop (exit code 2 for bad input, say) ends.
    assert run_policy["backoffLimit"] > 0 and run_policy["activeDeadlineSeconds"] > 0


@pytest.mark.parametrize("path", TFJOBS, ids=manifest_id)
def test_every_pod_follows_the_rules(path):
    policy, job = load(path)
    assert not pod_rule_errors(job, EXAMPLES[job["metadata"]["name"]])
    assert not network_policy_errors(policy, job)


@pytest.mark.parametrize("path", CLAIMS, ids=manifest_id)
def test_each_claim_is_the_one_the_chief_and_evaluator_mount(path):
    (claim,) = load(path)
    assert (claim["apiVersion"], claim["kind"]) == ("v1", "PersistentVolumeClaim")
    assert claim["metadata"]["name"] == os.path.basename(path)[:-5] + "-logdir"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert re.match(r"^\d+[MG]i$", claim["spec"]["resources"]["requests"]["storage"])


def pod(job, role):
    if job["kind"] == "TFJob":
        return job["spec"]["tfReplicaSpecs"][role]["template"]["spec"]
    return next(replicated for replicated in job["spec"]["replicatedJobs"]
                if replicated["name"] == role)["template"]["spec"]["template"]["spec"]


def test_the_pod_checks_catch_broken_pods():
    for path, (chief, worker, evaluator) in (
            ("hogwild.yaml", ("Chief", "Worker", "Evaluator")),):
        policy, job = load(os.path.join(KUBERNETES, path))
        broken = copy.deepcopy(job)
        container = pod(broken, chief)["containers"][0]
        container["image"] = "distributed-tensorflow-guide:latest"
        container["resources"] = {}
        container["securityContext"] = {}
        pod(broken, chief)["securityContext"]["runAsUser"] = 0
        pod(broken, worker)["volumes"] = pod(broken, chief)["volumes"]
        del pod(broken, evaluator)["affinity"]
        # image, privileges, requests and limits, user, disk, affinity
        assert len(pod_rule_errors(broken, examples.BY_NAME["Hogwild"])) == 7
        broken = copy.deepcopy(policy)
        broken["spec"]["ingress"][0]["from"] = [{"namespaceSelector": {}}]
        broken["spec"]["egress"] = []
        assert len(network_policy_errors(broken, job)) == 2


def test_the_tfjob_checks_catch_broken_manifests():
    manifest = job_of(os.path.join(KUBERNETES, "hogwild.yaml"))
    broken = copy.deepcopy(manifest)
    broken["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "two"
    assert schema_errors(broken)
    broken = copy.deepcopy(manifest)
    broken["metadata"]["name"] = "Hogwild"
    container = broken["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"][
        "containers"][0]
    container["name"], container["image"] = "tf", ""
    broken["spec"]["tfReplicaSpecs"]["Master"] = broken["spec"]["tfReplicaSpecs"]["PS"]
    assert len(tfjob_webhook_errors(broken)) == 1 + 2 * 2 + 1


def test_the_dockerfile_installs_the_runtime_only_for_a_numeric_user():
    with open(os.path.join(KUBERNETES, "Dockerfile")) as stream:
        lines = [line.strip() for line in stream.read().replace("\\\n", " ")
                 .splitlines() if line.strip() and not line.startswith("#")]
    installs = [line for line in lines if "pip install" in line]
    assert len(installs) == 1 and '"${TENSORFLOW}==' in installs[0]
    assert "-r requirements.txt" not in installs[0]
    for tool in ("pytest", "ruff", "ipykernel", "nbclient", "jsonschema", "PyYAML"):
        assert tool.lower() not in installs[0].lower()
    assert "ARG TENSORFLOW=tensorflow-cpu" in lines
    (user,) = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert user.split(":")[0] == str(generate.USER_ID) != "0"
    assert any(f"--uid {generate.USER_ID}" in line and "--create-home" in line
               for line in lines)
    assert any(re.match(r"^ENV HOME=/\S+$", line) for line in lines)


def test_the_operator_tf_config_is_the_documented_one():
    # The operator's README example: a job of 1 PS and 2 Workers.
    hogwild = job_of(os.path.join(KUBERNETES, "hogwild.yaml"))
    plain = copy.deepcopy(hogwild)
    specs = plain["spec"]["tfReplicaSpecs"]
    del specs["Chief"], specs["Evaluator"]
    specs["Worker"]["replicas"] = 2
    assert operator_tf_configs(plain)["hogwild-worker-1"] == (
        '{"cluster":{"ps":["hogwild-ps-0.default.svc:2222"],"worker":'
        '["hogwild-worker-0.default.svc:2222","hogwild-worker-1.default.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}')
    # Hogwild's own: the chief apart, every task's cluster lists the
    # evaluator, keys sorted.
    configs = operator_tf_configs(hogwild)
    assert list(json.loads(configs["hogwild-worker-0"])["cluster"]) == [
        "chief", "evaluator", "ps", "worker"]
    assert json.loads(configs["hogwild-evaluator-0"])["task"] == {
        "type": "evaluator", "index": 0}
    pss = operator_tf_configs(job_of(os.path.join(KUBERNETES,
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
    # The chief, a ps, a worker and the evaluator, each in a namespace of its own.
    assert_every_pod_succeeded(result.stdout, ["hogwild-chief-0", "hogwild-evaluator-0",
                                               "hogwild-ps-0", "hogwild-worker-0"])
    assert 'hogwild-worker-0 TF_CONFIG={"cluster":{"chief":["10.10.0.2:2222"],' \
           '"evaluator":["10.10.0.3:2222"],"ps":["10.10.0.4:2222"],' \
           '"worker":["10.10.0.5:2222"]},' \
           '"task":{"type":"worker","index":0},"environment":"cloud"}' \
        in result.stdout
    assert re.search(r"global_step 2\d test_accuracy", (
        run_dir / "pods" / "hogwild-evaluator-0.log").read_text())
    assert "RESULT algorithm=hogwild" in (run_dir / "pods" /
                                          "hogwild-chief-0.log").read_text()

