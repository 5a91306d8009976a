"""Which task am I: TF_CONFIG and the classic flags, and their errors."""

import json

import pytest

from guide.distributed import tf_config as config
from guide.training import flags, logdirs
from guide.training.flags import UsageError


def cluster_flags(ps_hosts="", worker_hosts="", job_name="", task_index=0):
    """The values of --ps_hosts, --worker_hosts, --job_name, --task_index."""
    return ps_hosts, worker_hosts, job_name, task_index


def tf_config(cluster, task_type, index):
    return {"TF_CONFIG": json.dumps({"cluster": cluster,
                                     "task": {"type": task_type, "index": index}})}


CLUSTER = {"ps": ["127.0.0.1:1000"], "worker": ["127.0.0.1:1001", "127.0.0.1:1002"]}


def test_flags_give_the_cluster_and_the_task():
    task = config.resolve_task({}, *cluster_flags("h:1", "h:2,h:3", "worker", 1))
    assert task.cluster == {"ps": ["h:1"], "worker": ["h:2", "h:3"]}
    assert (task.name, task.num_ps, task.num_workers, task.is_chief) == \
        ("worker:1", 1, 2, False)


def test_tf_config_wins_over_flags():
    task = config.resolve_task(tf_config(CLUSTER, "worker", 0),
                               *cluster_flags("h:1", "h:2", "ps", 0))
    assert task.cluster == CLUSTER and task.is_chief


def test_a_chief_entry_becomes_worker_0():
    cluster = {"chief": ["c:1"], "worker": ["w:1", "w:2"], "ps": ["p:1"]}
    chief = config.resolve_task(tf_config(cluster, "chief", 0), *cluster_flags())
    second = config.resolve_task(tf_config(cluster, "worker", 1), *cluster_flags())
    assert chief.cluster["worker"] == ["c:1", "w:1", "w:2"] and chief.is_chief
    assert second.name == "worker:2"


def test_an_allreduce_cluster_has_workers_and_no_ps():
    """`ps=False`: a cluster of workers only (a chief as worker 0); a ps is
    refused, as the other examples refuse its absence."""
    # An empty list is no job: a TFJob with PS replicas 0 lists it so.
    cluster = {"chief": ["c:1"], "ps": [], "worker": ["w:1"]}
    task = config.resolve_task(tf_config(cluster, "worker", 0), *cluster_flags(),
                               ps=False)
    assert task.cluster == {"worker": ["c:1", "w:1"]} and task.num_ps == 0
    by_hand = config.resolve_task({}, *cluster_flags("", "h:2,h:3", "worker", 0),
                                  ps=False)
    assert by_hand.is_chief and by_hand.num_workers == 2
    with pytest.raises(UsageError, match="has a ps; .* leave it out"):
        config.resolve_task(tf_config(CLUSTER, "worker", 0), *cluster_flags(),
                            ps=False)


def test_a_task_index_of_digits_reads_as_tensorflow_reads_it():
    task = config.resolve_task(tf_config(CLUSTER, "worker", "1"), *cluster_flags())
    assert task.task_index == 1 and task.name == "worker:1"


def test_a_tfjob_tf_config_with_chief_evaluator_and_environment():
    # The shape Kubeflow's operator injects (see shared k8s notes): compact
    # JSON, cluster keys lower-cased and sorted, "environment": "cloud".
    cluster = {"chief": ["j-chief-0.ns.svc:2222"],
               "evaluator": ["j-evaluator-0.ns.svc:2222"],
               "ps": ["j-ps-0.ns.svc:2222"],
               "worker": ["j-worker-0.ns.svc:2222", "j-worker-1.ns.svc:2222"]}

    def resolve(task_type, index):
        return config.resolve_task({"TF_CONFIG": json.dumps(
            {"cluster": cluster, "task": {"type": task_type, "index": index},
             "environment": "cloud"}, separators=(",", ":"))}, *cluster_flags())

    chief, worker, evaluator = (resolve("chief", 0), resolve("worker", 1),
                                resolve("evaluator", 0))
    assert chief.is_chief and worker.name == "worker:2"
    assert "evaluator" not in chief.cluster and chief.num_workers == 3
    assert evaluator.name == "evaluator:0" and not evaluator.is_chief
    assert evaluator.cluster == chief.cluster


@pytest.mark.parametrize("environ, message", [
    ({"TF_CONFIG": "{not json"}, "TF_CONFIG is not valid JSON"),
    ({"TF_CONFIG": '{"cluster": {}}'}, 'needs a "cluster" and a "task"'),
    (tf_config({"ps": "h:1", "worker": ["h:2"]}, "ps", 0),
     "must be a non-empty list"),
    (tf_config(CLUSTER, "evaluator", 0), "job name 'evaluator'"),
    (tf_config(CLUSTER, "worker", 2), "task index 2 from TF_CONFIG is out of range"),
    (tf_config(CLUSTER, "worker", "zero"), "task index must be an integer"),
    (tf_config(CLUSTER, "worker", 0.5), "task index must be an integer"),
    (tf_config({"ps": ["h:1"], "worker": ["nohost"]}, "ps", 0), "is not host:port"),
    (tf_config({"worker": ["h:1"]}, "worker", 0), "has no ps"),
    (tf_config(dict(CLUSTER, trainer=["h:9"]), "worker", 0), "job(s) trainer"),
])
def test_bad_tf_config_is_one_clear_error(environ, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(
            ")", r"\)")) as error:
        config.resolve_task(environ, *cluster_flags())
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("args, message", [
    (cluster_flags(), "no cluster given"),
    (cluster_flags("h:1", "h:2", "chief", 0), "job name 'chief'"),
    (cluster_flags("h:1", "h:2", "worker", 1),
     "task index 1 from --job_name/--task_index is out of range"),
    (cluster_flags("h:1", "h:2", "worker", -1), "out of range"),
    (cluster_flags("h:1", "h:99999", "worker", 0), "is not host:port"),
])
def test_bad_flags_are_one_clear_error(args, message):
    with pytest.raises(UsageError, match=message):
        config.resolve_task({}, *args)


@pytest.mark.parametrize("argv, message", [
    (["--train_steps", "0"], "--train_steps must be a positive integer, got 0"),
    (["--batch_size", "-5"], "--batch_size must be a positive integer"),
    (["--learning_rate", "0"], "--learning_rate must be a positive number"),
    (["--learning_rate", "inf"], "--learning_rate must be a positive number"),
    (["--dataset", "cifar"], "invalid choice: 'cifar'"),
    (["--no_such_flag"], "unrecognized arguments: --no_such_flag"),
])
def test_bad_common_flags_are_one_clear_error(argv, message, tmp_path):
    parser = flags.make_parser("Doc.", str(tmp_path / "script.py"))
    with pytest.raises(UsageError, match=message):
        flags.parse(parser, argv)


def test_defaults_give_a_fresh_logdir_under_the_example(tmp_path):
    parser = flags.make_parser("Doc.", str(tmp_path / "script.py"))
    args = flags.parse(parser, ["--train_steps", "50"])
    assert args.logdir is None and args.log_every == 5
    logdir = logdirs.new_run_folder(str(tmp_path / "script.py"))
    assert logdir.startswith(str(tmp_path / "runs"))
    assert logdirs.check(logdir) == logdir


def test_defaults_by_dataset_apply_only_to_flags_left_alone(tmp_path):
    parser = flags.make_parser(
        "Doc.", str(tmp_path / "script.py"),
        train_steps=flags.ByDataset(synthetic=10, real=30),
        learning_rate=flags.ByDataset(synthetic=0.2, real=0.8))
    synthetic = flags.parse(parser, [])
    real = flags.parse(parser, ["--dataset", "mnist", "--learning_rate=0.5"])
    assert (synthetic.train_steps, synthetic.learning_rate) == (10, 0.2)
    assert (real.train_steps, real.learning_rate) == (30, 0.5)


PSS_CLUSTER = {"chief": ["c:1"], "ps": ["p:1"], "worker": ["w:1", "w:2"]}


def test_a_coordinated_cluster_keeps_its_chief_apart():
    chief = config.resolve_coordinated_task(tf_config(PSS_CLUSTER, "chief", 0))
    worker = config.resolve_coordinated_task(tf_config(PSS_CLUSTER, "worker", "1"))
    assert chief.cluster == PSS_CLUSTER and chief.is_chief
    assert (chief.num_workers, chief.num_ps) == (2, 1)
    assert worker.name == "worker:1" and not worker.is_chief


@pytest.mark.parametrize("environ, message", [
    ({}, "TF_CONFIG is not set; this example takes its cluster from TF_CONFIG"),
    ({"TF_CONFIG": "{not json"}, "TF_CONFIG is not valid JSON"),
    (tf_config(CLUSTER, "worker", 0), "TF_CONFIG cluster has no chief"),
    (tf_config(dict(PSS_CLUSTER, evaluator=["e:1"]), "chief", 0),
     "job(s) evaluator"),
    (tf_config(dict(PSS_CLUSTER, chief=["c:1", "c:2"]), "chief", 0),
     "one chief task"),
    (tf_config(PSS_CLUSTER, "master", 0), "task type 'master'"),
    (tf_config(PSS_CLUSTER, "worker", "5"), "TF_CONFIG task index 5 is out of range"),
    (tf_config(PSS_CLUSTER, "chief", 1), "TF_CONFIG task index 1 is out of range"),
    (tf_config(PSS_CLUSTER, "worker", 0.5),
     "TF_CONFIG task index must be an integer, got 0.5"),
])
def test_a_bad_coordinated_tf_config_is_one_clear_error(environ, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(
            ")", r"\)")) as error:
        config.resolve_coordinated_task(environ)
    assert "\n" not in str(error.value)
