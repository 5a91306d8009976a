"""The Kubernetes manifests: generated from one table; valid for their CRDs,
webhooks and the Job API; every pod not root, sized, on a pinned image, on
the disks the disk rule gives it, reachable by its own job only; and
runnable: a TFJob's pods with the TF_CONFIG the operator injects, a
JobSet's with the one its entrypoint builds, which is run.sh's."""

import argparse
import copy
import glob
import json
import os
import re
import subprocess

import generate
import jobset_tf_config
import pytest
from admission import (
    jobset_webhook_errors,
    load,
    schema_errors,
    tfjob_webhook_errors,
)
from jobset_job import pod_environment, pods_of
from manifest_rules import network_policy_errors, pod_rule_errors
from operator_job import operator_tf_configs

from conftest import PYTHON, REPO, run
from guide import examples
from launcher import network
from launcher.options import layout

KUBERNETES = os.path.join(REPO, "kubernetes")
TFJOBS = sorted(glob.glob(os.path.join(KUBERNETES, "*.yaml")))
JOBSETS = sorted(glob.glob(os.path.join(KUBERNETES, "jobset", "*.yaml")))
CLAIMS = sorted(glob.glob(os.path.join(KUBERNETES, "volumes", "*.yaml")))
EXAMPLES = {folder.lower(): example for folder, example in examples.BY_FOLDER.items()}
ENTRYPOINT = os.path.join(KUBERNETES, "jobset_tf_config.py")


def manifest_id(path):
    return os.path.relpath(path, KUBERNETES)


def job_of(path):
    return next(document for document in load(path)
                if document["kind"] in ("TFJob", "JobSet"))


def test_there_is_a_manifest_per_example_made_by_the_generator(tmp_path):
    assert len(TFJOBS) >= 10
    for paths in (TFJOBS, JOBSETS, CLAIMS):
        assert {os.path.basename(path)[:-5] for path in paths} == set(EXAMPLES)
    result = run([PYTHON, os.path.join(KUBERNETES, "generate.py"), "--out",
                  str(tmp_path)], timeout=60)
    assert result.returncode == 0, result.stderr
    for path in TFJOBS + JOBSETS + CLAIMS:
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
    assert "Chief" in specs
    assert ("PS" in specs) == (EXAMPLES[tfjob["metadata"]["name"]].ps > 0)
    run_policy = tfjob["spec"]["runPolicy"]
    assert run_policy["cleanPodPolicy"] in ("Running", "All")
    # A crash loop (exit code 2 for bad input, say) ends.
    assert run_policy["backoffLimit"] > 0 and run_policy["activeDeadlineSeconds"] > 0


@pytest.mark.parametrize("path", JOBSETS, ids=manifest_id)
def test_jobset_passes_the_crd_schema_and_the_webhook(path):
    policy, jobset = load(path)
    assert (policy["kind"], jobset["apiVersion"], jobset["kind"]) == (
        "NetworkPolicy", "jobset.x-k8s.io/v1alpha2", "JobSet")
    assert not schema_errors(jobset)
    assert not jobset_webhook_errors(jobset)
    spec = jobset["spec"]
    # Done when the chief is: a ps ends only when every worker has said so.
    assert spec["successPolicy"] == {"operator": "All",
                                     "targetReplicatedJobs": ["chief"]}
    assert spec["failurePolicy"]["maxRestarts"] > 0
    assert {"name": "BadInput", "action": "FailJobSet",
            "onJobFailureReasons": ["PodFailurePolicy"]} in \
        spec["failurePolicy"]["rules"]
    counts = {}
    for replicated in spec["replicatedJobs"]:
        job = replicated["template"]["spec"]
        assert replicated["replicas"] == 1 and job["completionMode"] == "Indexed"
        # Every task of a cluster must run at once, each its own pod.
        assert job["completions"] == job["parallelism"] > 0
        assert job["backoffLimit"] > 0 and job["activeDeadlineSeconds"] > 0
        assert {"action": "FailJob", "onExitCodes": {
            "containerName": "tensorflow", "operator": "In", "values": [2]}} \
            in job["podFailurePolicy"]["rules"]
        counts[replicated["name"]] = job["completions"]
    env = pod_environment(jobset, spec["replicatedJobs"][0], 0, 0)
    assert jobset_tf_config.task_counts(env["TF_TASK_COUNTS"]) == counts


@pytest.mark.parametrize("path", TFJOBS + JOBSETS, ids=manifest_id)
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
            ("hogwild.yaml", ("Chief", "Worker", "Evaluator")),
            ("jobset/hogwild.yaml", ("chief", "worker", "evaluator"))):
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


def replicated(jobset, name):
    return next(job for job in jobset["spec"]["replicatedJobs"] if job["name"] == name)


def job_spec(jobset, name):
    return replicated(jobset, name)["template"]["spec"]


# Each JobSet rule, broken alone: how, which check must say so, and what
# its error says.
JOBSET_BREAKAGES = {
    "name not DNS-1035": ("webhook", "JobSet name 'Hogwild'", lambda js: js[
        "metadata"].update(name="Hogwild")),
    "pod names over 63": ("webhook", "the last pod's name", lambda js: js[
        "metadata"].update(name="h" * 50)),
    "replicatedJob name": ("webhook", "replicatedJob name 'ps_0'", lambda js: (
        replicated(js, "ps").update(name="ps_0"))),
    "replicatedJob twice": ("webhook", "replicatedJob 'worker' twice", lambda js: (
        replicated(js, "ps").update(name="worker"))),
    "subdomain": ("webhook", "subdomain 'Not.A_Label'", lambda js: js["spec"][
        "network"].update(subdomain="Not.A_Label")),
    "startupPolicy with dependsOn": ("webhook", "InOrder and dependsOn", lambda js: (
        js["spec"].update(startupPolicy={"startupPolicyOrder": "InOrder"}),
        replicated(js, "worker").update(dependsOn=[
            {"name": "ps", "status": "Ready"}]))),
    "dependsOn a later job": ("webhook", "not an earlier", lambda js: replicated(
        js, "chief").update(dependsOn=[{"name": "ps", "status": "Ready"}])),
    "successPolicy operator": ("schema", "'Most' is not one of", lambda js: js[
        "spec"]["successPolicy"].update(operator="Most")),
    "successPolicy target": ("webhook", "target 'coordinator'", lambda js: js[
        "spec"]["successPolicy"].update(targetReplicatedJobs=["coordinator"])),
    "failurePolicy action": ("schema", "'Ignore' is not one of", lambda js: js[
        "spec"]["failurePolicy"]["rules"][0].update(action="Ignore")),
    "failurePolicy rule name": ("webhook", "rule name 'bad-input'", lambda js: js[
        "spec"]["failurePolicy"]["rules"][0].update(name="bad-input")),
    "failurePolicy reason": ("webhook", "reason 'ExitCode2'", lambda js: js[
        "spec"]["failurePolicy"]["rules"][0].update(
        onJobFailureReasons=["ExitCode2"])),
    "completions a string": ("schema", "'one' is not of type 'integer'",
                             lambda js: job_spec(js, "worker").update(
                                 completions="one")),
    "Indexed without completions": ("webhook", "needs completions", lambda js: (
        job_spec(js, "worker").pop("completions"))),
    "podFailurePolicy with OnFailure": ("webhook", "needs restartPolicy Never",
                                        lambda js: job_spec(js, "worker")[
                                            "template"]["spec"].update(
                                            restartPolicy="OnFailure")),
    "replicas x parallelism over int32": ("webhook", "replicas x parallelism",
                                          lambda js: (
        replicated(js, "ps").update(replicas=2**16),
        job_spec(js, "ps").update(parallelism=2**16))),
    "container without a name": ("schema", "'name' is a required property",
                                 lambda js: job_spec(js, "ps")["template"][
                                     "spec"]["containers"][0].pop("name")),
}


@pytest.mark.parametrize("breakage", JOBSET_BREAKAGES)
def test_the_jobset_checks_catch_broken_manifests(breakage):
    check, message, breaking = JOBSET_BREAKAGES[breakage]
    jobset = job_of(os.path.join(KUBERNETES, "jobset", "hogwild.yaml"))
    breaking(jobset)
    found = schema_errors(jobset) if check == "schema" else \
        jobset_webhook_errors(jobset)
    assert any(message in error for error in found), found


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
    # As the launcher's tasks: a crash leaves the Python stack in the log.
    assert any(line.startswith("ENV ") and "PYTHONFAULTHANDLER=1" in line.split()
               for line in lines)


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


def run_sh_tf_configs(example):
    """{(task type, index): TF_CONFIG} as `bash run.sh` gives its tasks, with
    --evaluator where the manifests have an evaluator; task k is at host
    "task-k"."""
    options = argparse.Namespace(ps=example.ps, workers=example.workers,
                                 coordinator=example.coordinator,
                                 evaluator=not example.coordinator)
    roles, _, cluster = layout(options, lambda number: f"task-{number}")
    return {(job, index): json.dumps({"cluster": cluster, "task": {
        "type": job, "index": index}}) for job, index in roles}


@pytest.mark.parametrize("folder", ["hogwild", "distributed-setup",
                                    "parameter-server-strategy"])
def test_each_jobset_pod_gets_the_tf_config_run_sh_gives(folder):
    """The entrypoint's TF_CONFIG, from exactly the environment the manifest
    declares, is run.sh's with each address the pod's JobSet host name."""
    jobset = job_of(os.path.join(KUBERNETES, "jobset", f"{folder}.yaml"))
    expected = run_sh_tf_configs(EXAMPLES[folder])
    ours = {}
    for job, job_index, pod_index, host in pods_of(jobset):
        config = jobset_tf_config.tf_config(
            pod_environment(jobset, job, job_index, pod_index))
        task = json.loads(config)["task"]
        ours[task["type"], task["index"]] = host, config
    assert ours.keys() == expected.keys()
    # run.sh's task-k:port is the host of the pod with task k's place.
    addresses = {}
    for role, (host, config) in ours.items():
        own = json.loads(config)["cluster"][role[0]][role[1]]
        assert own == f"{host}.{folder}:{generate.PORT}"
        run_sh_own = json.loads(expected[role])["cluster"][role[0]][role[1]]
        addresses[run_sh_own] = own
    for role, (_, config) in ours.items():
        assert config == re.sub(r"task-\d+:\d+", lambda found: addresses[
            found.group(0)], expected[role])


def pod_env(folder="hogwild", role="worker", **changes):
    """The environment of the first pod of `role`, changed as said (None:
    unset), and PATH."""
    jobset = job_of(os.path.join(KUBERNETES, "jobset", f"{folder}.yaml"))
    env = dict(pod_environment(jobset, replicated(jobset, role), 0, 0),
               PATH=os.environ["PATH"], **changes)
    return {key: value for key, value in env.items() if value is not None}


def test_the_entrypoint_runs_the_command_with_its_tf_config():
    env = pod_env()
    result = subprocess.run(
        [PYTHON, ENTRYPOINT, PYTHON, "-c",
         "import os; print(os.environ['TF_CONFIG'])"],
        env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == jobset_tf_config.tf_config(env)
    assert json.loads(result.stdout)["task"] == {"type": "worker", "index": 1}


@pytest.mark.parametrize("changes, command, message", [
    ({"JOB_COMPLETION_INDEX": None}, None, "JOB_COMPLETION_INDEX is not set"),
    ({"JOB_COMPLETION_INDEX": "one"}, None, "'one', not a number"),
    ({"JOB_COMPLETION_INDEX": "1"}, None, "JOB_COMPLETION_INDEX 1 is out of range"),
    ({"JOBSET_NAME": None}, None, "JOBSET_NAME is not set; pass it from"),
    ({"REPLICATED_JOB_NAME": "trainer"}, None, "'trainer' is not in TF_TASK_COUNTS"),
    ({"REPLICATED_JOB_REPLICAS": "2"}, None, "has 2 Jobs"),
    ({"TF_TASK_COUNTS": "ps:1,worker:2"}, None, "is not a list of TYPE=COUNT"),
    ({"TF_TASK_COUNTS": "ps=1,worker=2"}, None, "needs chief=1"),
    ({"TF_PORT": "99999"}, None, "TF_PORT 99999 is not a port"),
    ({"TF_CHIEF_IS_WORKER_0": "yes"}, None, "TF_CHIEF_IS_WORKER_0 is 'yes'"),
    ({}, [], "no command given"),
    ({}, ["no-such-program"], "cannot run no-such-program"),
])
def test_a_bad_pod_environment_is_one_line_and_exit_code_2(changes, command,
                                                             message):
    result = subprocess.run(
        [PYTHON, ENTRYPOINT] + (["true"] if command is None else command),
        env=pod_env(**changes), capture_output=True, text=True, timeout=60,
        check=False)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("jobset_tf_config.py: ") and message in line
    assert ";" in line, "the line names the problem, then the fix"


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


def test_hogwild_runs_as_the_pods_of_its_jobset(run_dir):
    if network.namespaces_unavailable():
        pytest.skip("this system does not allow user namespaces")
    result = run(network.namespace_command() + [
        PYTHON, os.path.join(REPO, "tests", "jobset_job.py"),
        os.path.join(KUBERNETES, "jobset", "hogwild.yaml"), str(run_dir),
        "--train_steps", "20"], timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_every_pod_succeeded(result.stdout, [
        f"hogwild-{role}-0-0" for role in ("chief", "evaluator", "ps", "worker")])
    # Each task is reached at its JobSet host name, which resolves to the
    # address of its pod's namespace.
    assert 'hogwild-worker-0-0 TF_CONFIG={"cluster": {"worker": ' \
           '["hogwild-chief-0-0.hogwild:2222", "hogwild-worker-0-0.hogwild:2222"], ' \
           '"ps": ["hogwild-ps-0-0.hogwild:2222"], ' \
           '"evaluator": ["hogwild-evaluator-0-0.hogwild:2222"]}, ' \
           '"task": {"type": "worker", "index": 1}}' in result.stdout
    # The evaluator read the chief's checkpoints from the claim they share;
    # the worker's own disk holds none.
    assert re.search(r"global_step 2\d test_accuracy", (
        run_dir / "hogwild-evaluator-0-0.log").read_text())
    assert "RESULT algorithm=hogwild" in (
        run_dir / "hogwild-chief-0-0.log").read_text()
    assert (run_dir / "claims" / "hogwild-logdir" / "checkpoint").exists()
    assert not list((run_dir / "pods" / "hogwild-worker-0-0").rglob("checkpoint"))
