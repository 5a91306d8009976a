"""Every way of starting an example, in one table that the tests, the
benchmarks, the fault-injection scripts and the Kubernetes generator read:
the baseline, each folder's run.sh, and the two folders' extra scripts.
Standard library only, so that reading it never loads TensorFlow.
"""

import dataclasses
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# How a run talks to the ps, which decides how its steps and exchanges are
# counted: not at all (LOCAL), each minibatch's gradient (EVERY_STEP), an
# asynchronous commit per window of local steps (WINDOW), each update
# averaging a gradient (SYNC) or a window's commit (SYNC_WINDOW) per worker;
# or, with no ps, each step summing a gradient per worker by an allreduce
# (ALLREDUCE).
LOCAL, EVERY_STEP, WINDOW, SYNC, SYNC_WINDOW, ALLREDUCE = (
    "local", "every step", "window", "sync", "sync window", "allreduce")
KINDS = (LOCAL, EVERY_STEP, WINDOW, SYNC, SYNC_WINDOW, ALLREDUCE)


@dataclasses.dataclass(frozen=True)
class Example:
    # The run's name: pytest id, benchmark scheme, plot file name.
    name: str
    # Its folder, relative to the repository; None for the top (the baseline).
    folder: str | None
    # The Python script it runs, in that folder.
    script: str
    # The shell script that starts it (None: `python script`).
    run_sh: str | None
    kind: str
    # `RESULT algorithm=` and result.json's "algorithm".
    algorithm: str
    # What run.sh asks the launcher for: ps tasks (0: one process, or an
    # allreduce cluster of workers only),
    # worker tasks (result.json's "workers"), a coordinator task (TensorFlow
    # 2's ParameterServerStrategy), a GPU per worker.
    ps: int = 1
    workers: int = 2
    coordinator: bool = False
    gpu_per_worker: bool = False
    # In-graph towers one process builds by default (run_towers.sh).
    towers: int = 0
    # False where a tf.train.Supervisor runs the session: no hooks, so no
    # accuracy curve and none of the TensorBoard tags the README lists.
    hooks: bool = True
    # Flags that show the scheme's own option, as its run.sh suggests; the
    # smoke tests pass them.
    flags: tuple = ()

    @property
    def script_path(self):
        """The script, relative to the repository."""
        return os.path.join(self.folder or "", self.script)

    @property
    def run_sh_path(self):
        """The shell script, relative to the repository (None: none)."""
        return self.run_sh and os.path.join(self.folder, self.run_sh)

    @property
    def cluster(self):
        """Whether it runs as ps and worker tasks (or, in an allreduce, worker
        tasks only) through the launcher, and so takes --ps and --workers."""
        return self.ps > 0 or self.kind == ALLREDUCE

    @property
    def synchronous(self):
        return self.kind in (SYNC, SYNC_WINDOW, ALLREDUCE)

    def command(self, python=sys.executable):
        """How a user starts it from the repository's top."""
        if self.run_sh:
            return ["bash", self.run_sh_path]
        return [python, self.script_path]


EXAMPLES = [
    Example("Non-Distributed_Setup", None, "Non-Distributed_Setup.py", None,
            LOCAL, "non-distributed_setup", ps=0, workers=1),
    Example("Distributed-Setup", "Distributed-Setup", "distributed_setup.py",
            "run.sh", EVERY_STEP, "distributed-setup", workers=1),
    Example("Distributed-Setup-supervisor", "Distributed-Setup",
            "distributed_setup_supervisor.py", "run_sup.sh", EVERY_STEP,
            "distributed-setup-supervisor", workers=1, hooks=False),
    Example("Hogwild", "Hogwild", "hogwild.py", "run.sh", EVERY_STEP, "hogwild"),
    Example("DOWNPOUR", "DOWNPOUR", "downpour.py", "run.sh", WINDOW, "downpour"),
    Example("DOWNPOUR-Easy", "DOWNPOUR-Easy", "downpour_easy.py", "run.sh",
            WINDOW, "downpour-easy"),
    Example("AGN", "AGN", "agn.py", "run.sh", WINDOW, "agn"),
    Example("Dynamic-SGD", "Dynamic-SGD", "dynamic_sgd.py", "run.sh", WINDOW,
            "dynamic-sgd"),
    Example("AEASGD", "AEASGD", "aeasgd.py", "run.sh", WINDOW, "aeasgd"),
    Example("AEAMSGD", "AEAMSGD", "aeamsgd.py", "run.sh", WINDOW, "aeamsgd"),
    Example("Synchronous-SGD", "Synchronous-SGD", "synchronous_sgd.py", "run.sh",
            SYNC, "synchronous-sgd"),
    Example("Multi-Worker-Mirrored-Strategy", "Multi-Worker-Mirrored-Strategy",
            "multi_worker_mirrored_strategy.py", "run.sh", ALLREDUCE,
            "multi-worker-mirrored-strategy", ps=0),
    Example("Synchronous-SGD-different-learning-rates",
            "Synchronous-SGD-different-learning-rates",
            "synchronous_sgd_different_learning_rates.py", "run.sh", SYNC,
            "synchronous-sgd-different-learning-rates",
            flags=("--learning_rates", "0.3,0.1")),
    Example("SAGN", "SAGN", "sagn.py", "run.sh", SYNC_WINDOW, "sagn"),
    Example("Parameter-Server-Strategy", "Parameter-Server-Strategy",
            "parameter_server_strategy.py", "run.sh", EVERY_STEP,
            "parameter-server-strategy", coordinator=True),
    Example("Multiple-GPUs-Single-Machine", "Multiple-GPUs-Single-Machine",
            "multiple_gpus.py", "run.sh", EVERY_STEP,
            "multiple-gpus-single-machine", gpu_per_worker=True),
    Example("Multiple-GPUs-Single-Machine-towers", "Multiple-GPUs-Single-Machine",
            "multiple_gpus.py", "run_towers.sh", LOCAL,
            "multiple-gpus-single-machine", ps=0, workers=1, towers=2),
]
BY_NAME = {example.name: example for example in EXAMPLES}
BASELINE = EXAMPLES[0]
# Each example folder's own run.sh, in the table's order.
BY_FOLDER = {example.folder: example for example in EXAMPLES
             if example.run_sh == "run.sh"}
# Entry points that need packages outside requirements.txt, so no run in the
# table: Ray Train's (`make test-ray` runs them, tests/ray).
OPTIONAL_ENTRY_POINTS = ("Multi-Worker-Mirrored-Strategy/run_ray.sh",
                         "Multi-Worker-Mirrored-Strategy/ray_train.py")
