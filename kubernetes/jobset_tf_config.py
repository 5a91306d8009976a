#!/usr/bin/env python3
"""Sets TF_CONFIG in a pod of a JobSet, then runs the example's command.

    python kubernetes/jobset_tf_config.py COMMAND [ARG...]

Nothing in a JobSet sets TF_CONFIG. This builds it from what the manifests
in kubernetes/jobset/ give every pod:

- JOB_COMPLETION_INDEX, the pod's index in its Indexed Job (Kubernetes
  sets it);
- JOBSET_NAME, REPLICATED_JOB_NAME, JOB_INDEX and REPLICATED_JOB_REPLICAS,
  the pod's jobset.sigs.k8s.io/ labels (LABELS below), which the manifest
  passes in through the downward API;
- TF_TASK_COUNTS, how many tasks each replicatedJob runs
  ("chief=1,ps=1,worker=1,evaluator=1"), since no label tells a pod the
  size of the other replicatedJobs; TF_PORT, the port every task listens
  on; and TF_CHIEF_IS_WORKER_0: "true" where the chief is worker 0 (the
  tf.compat.v1 examples, as their run.sh has it), "false" where it is a
  coordinator of its own, "chief" in TF_CONFIG (ParameterServerStrategy).

Each replicatedJob is named after its task type and is one Job of Indexed
pods, one per task, so task i of type T is the pod with
JOB_COMPLETION_INDEX i, whose host name JobSet makes
<jobset>-<T>-0-<i>.<jobset> (the subdomain is the JobSet's name unless
spec.network.subdomain says otherwise, which these manifests do not). The
TF_CONFIG has the shape run.sh gives: the same keys in the same order.
Bad input is one line on stderr and exit code 2, which the manifests'
podFailurePolicy turns into a failed JobSet at once. Standard library only.
"""

import json
import os
import sys

# The env var the manifest fills from each of the pod's JobSet labels.
LABELS = {
    "JOBSET_NAME": "jobset.sigs.k8s.io/jobset-name",
    "REPLICATED_JOB_NAME": "jobset.sigs.k8s.io/replicatedjob-name",
    "JOB_INDEX": "jobset.sigs.k8s.io/job-index",
    "REPLICATED_JOB_REPLICAS": "jobset.sigs.k8s.io/replicatedjob-replicas",
}
TASK_TYPES = ("chief", "ps", "worker", "evaluator")
COUNTS_EXAMPLE = "chief=1,ps=1,worker=1,evaluator=1"


class BadEnvironment(Exception):
    """One sentence: what is wrong, and how to fix it."""


def required(environ, name, how):
    value = environ.get(name, "").strip()
    if not value:
        raise BadEnvironment(f"{name} is not set; {how}")
    return value


def number(environ, name, how):
    """A non-negative integer env var."""
    value = required(environ, name, how)
    if not value.isdigit():
        raise BadEnvironment(f"{name} is {value!r}, not a number; {how}")
    return int(value)


def task_counts(text):
    """{task type: count} from "chief=1,ps=1,worker=2"."""
    counts = {}
    for item in text.split(","):
        task_type, _, count = item.strip().partition("=")
        if task_type not in TASK_TYPES or not count.isdigit() \
                or task_type in counts:
            raise BadEnvironment(
                f"TF_TASK_COUNTS {text!r} is not a list of TYPE=COUNT with "
                f"the types {', '.join(TASK_TYPES)} once each; set it to, for "
                f"example, {COUNTS_EXAMPLE}")
        counts[task_type] = int(count)
    # No ps is an allreduce job (Multi-Worker-Mirrored-Strategy).
    if counts.get("chief") != 1:
        raise BadEnvironment(f"TF_TASK_COUNTS {text!r} needs chief=1; set it "
                             f"to, for example, {COUNTS_EXAMPLE}")
    return counts


def tf_config(environ):
    """The TF_CONFIG of the pod whose environment is `environ`, as JSON;
    BadEnvironment if any of it is missing or malformed."""
    from_label = "pass it from the pod's label {} through the downward API"
    jobset, task_type = (required(environ, name, from_label.format(LABELS[name]))
                         for name in ("JOBSET_NAME", "REPLICATED_JOB_NAME"))
    counts = task_counts(required(environ, "TF_TASK_COUNTS",
                                  f"set it to, for example, {COUNTS_EXAMPLE}"))
    if task_type not in counts:
        raise BadEnvironment(f"replicatedJob {task_type!r} is not in "
                             f"TF_TASK_COUNTS ({', '.join(counts)}); "
                             f"name each replicatedJob after its task type "
                             f"and count it there")
    one_job = ("give each replicatedJob replicas: 1, and its tasks as the "
               "Indexed pods of that Job")
    job_index = number(environ, "JOB_INDEX", from_label.format(LABELS["JOB_INDEX"]))
    jobs = number(environ, "REPLICATED_JOB_REPLICAS",
                  from_label.format(LABELS["REPLICATED_JOB_REPLICAS"]))
    if (job_index, jobs) != (0, 1):
        raise BadEnvironment(f"replicatedJob {task_type!r} has {jobs} Jobs "
                             f"(this is Job {job_index}); {one_job}")
    index = number(environ, "JOB_COMPLETION_INDEX",
                   "run each replicatedJob as an Indexed Job "
                   "(completionMode: Indexed)")
    port = number(environ, "TF_PORT", "set it to the containerPort, 2222")
    if not 0 < port < 65536:
        raise BadEnvironment(f"TF_PORT {port} is not a port; set it to the "
                             f"containerPort, 2222")
    chief_is_worker_0 = required(environ, "TF_CHIEF_IS_WORKER_0",
                                 'set it to "true" or "false"')
    if chief_is_worker_0 not in ("true", "false"):
        raise BadEnvironment(f'TF_CHIEF_IS_WORKER_0 is {chief_is_worker_0!r}; '
                             f'set it to "true" (the chief is worker 0) or '
                             f'"false" (a coordinator of its own)')
    if index >= counts[task_type]:
        raise BadEnvironment(f"JOB_COMPLETION_INDEX {index} is out of range: "
                             f"TF_TASK_COUNTS gives {task_type} "
                             f"{counts[task_type]} task(s); make the Job's "
                             f"completions that count")

    def hosts(of_type):
        return [f"{jobset}-{of_type}-0-{i}.{jobset}:{port}"
                for i in range(counts.get(of_type, 0))]

    # The keys in run.sh's order (launcher/options.py's layout).
    cluster = {"worker": hosts("worker"), "ps": hosts("ps")}
    if chief_is_worker_0 == "true":
        # Worker 0 is the chief, the other workers numbered after it.
        cluster["worker"] = hosts("chief") + cluster["worker"]
        if task_type in ("chief", "worker"):
            index += task_type == "worker"
            task_type = "worker"
    else:
        cluster["chief"] = hosts("chief")
    if counts.get("evaluator"):
        cluster["evaluator"] = hosts("evaluator")
    return json.dumps({"cluster": cluster,
                       "task": {"type": task_type, "index": index}})


def main(argv):
    try:
        if not argv:
            raise BadEnvironment("no command given; put the example's "
                                 "command after this script, for example "
                                 "python hogwild.py")
        env = dict(os.environ, TF_CONFIG=tf_config(os.environ))
        os.execvpe(argv[0], argv, env)
    except BadEnvironment as problem:
        print(f"jobset_tf_config.py: {problem}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"jobset_tf_config.py: cannot run {argv[0]} ({error.strerror}); "
              f"check the container's command", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
