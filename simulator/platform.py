"""The simulated cluster: machines (cores that their tasks share), the tasks
placed on them, and a network where every task has a link of its own to a
non-blocking switch; read from the flags, from a machine file, or from this
machine's stored measurements (`--machine this`).

A machine file is JSON:

    {"machines": [{"name": "node", "count": 64, "cores": 8,
                   "bandwidth": "10Gbps", "latency_ms": 0.05}],
     "step_ms": 4.0,
     "exchange_cpu_ms": 0.0}

`machines` lists groups of identical machines (`count` of them, default 1;
`bandwidth` and `latency_ms` default to --bandwidth and --latency).
`step_ms` is one minibatch's computation on one core, for the examples'
default model and batch of 100 (scaled to the run's, see `step_seconds`);
or give `gflops` (a core's rate, GFLOP/s) and the step costs the model's
6 × parameters × batch floating-point operations. `exchange_cpu_ms` is the
CPU an exchange with the ps costs its worker's machine (serialising and
copying tensors), 0 by default. `loop_ms` is the CPU a run of the script's
loop costs its worker's machine outside the run's session.run (the hooks,
the next minibatch and its feed, the Python loop), 0 by default.
"""

import collections
import dataclasses
import json
import math
import os
import re
import statistics

import numpy as np

from guide.training.flags import UsageError, parameter_count
from simulator import rules

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS_RESULTS = os.path.join(REPO, "benchmarks", "results", "steps", "runs.jsonl")
# The model and batch that step_ms is given for: the examples' defaults.
REFERENCE_PARAMETERS = (784 + 1) * 128 + (128 + 1) * 10
REFERENCE_BATCH = 100
# A link of a task on this machine that no --bandwidth shapes: loopback,
# whose cost is the CPU an exchange takes (exchange_cpu_ms), not its bytes.
LOOPBACK_BYTES_PER_S = 1e12

_RATE_UNITS = {
    # bits per second (SI), as tc and the launcher's --bandwidth write them too
    "bps": 1 / 8, "kbps": 1e3 / 8, "mbps": 1e6 / 8, "gbps": 1e9 / 8, "tbps": 1e12 / 8,
    "bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8, "tbit": 1e12 / 8,
    # bytes per second: a capital B
    "Bps": 1, "kBps": 1e3, "KBps": 1e3, "MBps": 1e6, "GBps": 1e9, "TBps": 1e12,
}


def bytes_per_second(text):
    """A rate such as 10Gbps, 100Mbps, 100mbit (bits per second) or 10GBps
    (bytes per second; a capital B), in bytes per second."""
    match = re.fullmatch(r"\s*([0-9.]+(?:e[+-]?[0-9]+)?)\s*([A-Za-z]+)\s*", str(text))
    unit = match and (match.group(2) if match.group(2) in _RATE_UNITS
                      else match.group(2).lower())
    if not match or unit not in _RATE_UNITS:
        raise UsageError(f"bandwidth {text!r} is not a rate; write it as a number "
                         f"and a unit, such as 10Gbps, 100Mbps or 10GBps (bytes)")
    rate = float(match.group(1)) * _RATE_UNITS[unit]
    if not 0 < rate < math.inf:
        raise UsageError(f"bandwidth {text!r} must be positive; give a rate such "
                         f"as 10Gbps")
    return rate


@dataclasses.dataclass
class Machine:
    name: str
    cores: int
    bytes_per_s: float
    latency_s: float


@dataclasses.dataclass
class Cluster:
    """The machines, a minibatch's seconds on one core of the reference
    model and batch, and the CPU seconds an exchange costs its worker."""

    machines: list
    step_s: float
    exchange_cpu_s: float = 0.0
    # How the step time was found, for the output.
    source: str = ""
    # The CPU seconds a run of the script's loop costs outside its
    # session.run: one without the hooks (a window's local step), and a
    # hooked one (Hogwild's step, a window's pull), the same if not given.
    loop_s: float = 0.0
    hooked_loop_s: float = None

    def __post_init__(self):
        if self.hooked_loop_s is None:
            self.hooked_loop_s = self.loop_s

    def step_s_for(self, hidden_layers, batch_size):
        """A minibatch's seconds on one core for this model and batch."""
        return step_seconds(self.step_s, parameter_count(hidden_layers), batch_size)

    def exchange_s_for(self, hidden_layers):
        """An exchange's CPU seconds, in proportion to the model's bytes."""
        return (self.exchange_cpu_s * parameter_count(hidden_layers)
                / REFERENCE_PARAMETERS)

    def place(self, tasks):
        """The machine of each of `tasks` (ps first, then workers): dealt
        round-robin over the machines in order."""
        return [self.machines[index % len(self.machines)] for index in range(tasks)]


def step_seconds(reference_step_s, parameters, batch_size):
    """A minibatch's seconds for `parameters` and `batch_size`, from one on
    the reference model and batch: proportional to both, as a dense
    model's matrix products are."""
    return (reference_step_s * parameters / REFERENCE_PARAMETERS
            * batch_size / REFERENCE_BATCH)


def this_cpu():
    """This machine's processor, as the benchmark tool records it."""
    from benchmarks.provenance import machine

    return machine()["cpu"]


# What the step tracer's stored runs give (stored_step_measurements).
StepMeasurements = collections.namedtuple(
    "StepMeasurements", "step_s exchange_s cores processors loop_s hooked_loop_s")


def stored_step_measurements(path=STEPS_RESULTS, cpu=None):
    """From the step tracer's stored runs (`make bench-steps`) at batch 100,
    those of this machine's processor (`cpu`) if there are any, else all,
    the medians of: the CPU seconds of a local step in a session on the
    worker's server, as a worker runs its steps (the plain session's where
    a run has no such step); the extra an exchange with the ps costs (a ps
    step's CPU minus that); and what a run of the examples' loop costs
    beyond its session.run, without the hooks and hooked (0 where no run
    has the loop's rows). Also the cores and the processors they were
    measured on. None where there are none."""
    runs = []
    try:
        with open(path) as stream:
            for line in stream:
                record = json.loads(line)
                result = record.get("result") or {}
                if result.get("batch_size") != REFERENCE_BATCH:
                    continue
                kinds = {kind["kind"]: kind["cpu_ms"] for kind in result["kinds"]}
                local = kinds.get("local, through a server", kinds["local"])
                loop = {kind: extra["cpu_ms"] / 1000 for kind, extra
                        in (result.get("loop_overhead") or {}).items()}
                runs.append((local / 1000, (kinds["ps"] - local) / 1000,
                             result["cores"], (record.get("machine") or {}).get("cpu"),
                             loop))
    except (OSError, ValueError, KeyError):
        return None
    cpu = this_cpu() if cpu is None else cpu
    runs = [run for run in runs if run[3] == cpu] or runs
    if not runs:
        return None

    def loop(kind):
        # A step costs at least its session.run: a negative difference of
        # two noisy medians is none.
        values = [run[4][kind] for run in runs if kind in run[4]]
        return max(statistics.median(values), 0.0) if values else 0.0

    return StepMeasurements(
        statistics.median(run[0] for run in runs),
        statistics.median(run[1] for run in runs), max(run[2] for run in runs),
        ", ".join(sorted({str(run[3]) for run in runs})),
        loop("loop, run without hooks"), loop("loop, hooked run"))


def measured_step_seconds():
    """One minibatch of the reference model and batch on this machine: the
    stored measurements' median, else timed now with the simulator's NumPy
    gradient (the median of 20 steps)."""
    stored = stored_step_measurements()
    if stored:
        return stored[0], f"benchmarks/results/steps, measured on {stored[3]}"
    import time

    rng = np.random.default_rng(0)
    params = rules.initial_parameters([128], 0)
    images = rng.random((REFERENCE_BATCH, 784), dtype=np.float32)
    labels = rng.integers(0, 10, REFERENCE_BATCH)
    times = []
    for _ in range(21):
        start = time.perf_counter()
        rules.gradients(params, images, labels)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:]), "a NumPy step timed now"


def this_machine(bytes_per_s, latency_s):
    """This machine: its cores shared by every task, each task on its own
    link (shaped to `bytes_per_s`, else loopback), the step and exchange
    costs from the stored measurements (else a NumPy step, no exchange
    cost)."""
    stored = stored_step_measurements()
    cores = os.cpu_count() or 1
    machine = Machine("this", cores, bytes_per_s or LOOPBACK_BYTES_PER_S,
                      latency_s if bytes_per_s else 0.0)
    if not stored:
        step_s, source = measured_step_seconds()
        return Cluster([machine], step_s, 0.0, f"this machine ({source})")
    return Cluster([machine], stored.step_s, stored.exchange_s,
                   f"this machine (benchmarks/results/steps, measured on "
                   f"{stored.processors})",
                   loop_s=stored.loop_s, hooked_loop_s=stored.hooked_loop_s)


def _problem(path, text):
    return UsageError(f"machine file {path}: {text}")


def read_machine_file(path, bytes_per_s, latency_s):
    """The cluster a machine file describes (the module's docstring);
    UsageError naming what is wrong and how to put it right."""
    try:
        with open(path) as stream:
            description = json.load(stream)
    except OSError as error:
        raise UsageError(f"cannot read machine file {path} ({error.strerror}); "
                         f"give --machine this, or a JSON file that exists") from None
    except ValueError as error:
        raise _problem(path, f"not JSON ({error}); see docs/simulator.md for "
                             f"the format") from None
    if not isinstance(description, dict) or not isinstance(
            description.get("machines"), list) or not description["machines"]:
        raise _problem(path, 'needs "machines", a non-empty list such as '
                             '[{"count": 64, "cores": 8, "bandwidth": "10Gbps"}]')
    known = {"machines", "step_ms", "gflops", "exchange_cpu_ms", "loop_ms"}
    unknown = sorted(set(description) - known)
    if unknown:
        raise _problem(path, f"unknown key {unknown[0]!r}; use only "
                             f"{', '.join(sorted(known))}")
    machines = []
    for number, group in enumerate(description["machines"]):
        where = f"machines[{number}]"
        if not isinstance(group, dict):
            raise _problem(path, f"{where} must be an object such as "
                                 f'{{"count": 4, "cores": 8}}')
        allowed = {"name", "count", "cores", "bandwidth", "latency_ms"}
        if set(group) - allowed:
            raise _problem(path, f"{where} has unknown key "
                                 f"{sorted(set(group) - allowed)[0]!r}; use only "
                                 f"{', '.join(sorted(allowed))}")
        count, cores = group.get("count", 1), group.get("cores", 1)
        for key, value in (("count", count), ("cores", cores)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise _problem(path, f"{where}.{key} must be a positive integer, "
                                     f"got {value!r}")
        rate = (bytes_per_second(group["bandwidth"]) if "bandwidth" in group
                else bytes_per_s)
        latency = group.get("latency_ms")
        if latency is not None and (not isinstance(latency, (int, float))
                                    or isinstance(latency, bool) or latency < 0):
            raise _problem(path, f"{where}.latency_ms must be a number of "
                                 f"milliseconds, 0 or more, got {latency!r}")
        name = str(group.get("name", f"machine{number}"))
        machines += [Machine(f"{name}-{index}", cores, rate,
                             latency_s if latency is None else latency / 1000)
                     for index in range(count)]
    step_ms, gflops = description.get("step_ms"), description.get("gflops")
    if (step_ms is None) == (gflops is None):
        raise _problem(path, 'give the computation as one of "step_ms" (a '
                             'minibatch of 100 on one core of the 784-128-10 '
                             'model) or "gflops" (a core\'s rate)')
    costs = {key: description.get(key, 0) for key in ("exchange_cpu_ms", "loop_ms")}
    for key, value in (("step_ms", step_ms), ("gflops", gflops), *costs.items()):
        if value is not None and (not isinstance(value, (int, float))
                                  or isinstance(value, bool) or value < 0
                                  or not math.isfinite(value)
                                  or (key not in costs and value == 0)):
            what = ("a number of milliseconds, 0 or more" if key in costs
                    else "a positive number")
            raise _problem(path, f"{key} must be {what}, got {value!r}")
    if step_ms is not None:
        step_s = step_ms / 1000
    else:  # a forward and backward pass: about 6 operations per parameter and example
        step_s = 6 * REFERENCE_PARAMETERS * REFERENCE_BATCH / (gflops * 1e9)
    return Cluster(machines, step_s, costs["exchange_cpu_ms"] / 1000,
                   f"machine file {os.path.basename(path)}",
                   loop_s=costs["loop_ms"] / 1000)


def flag_cluster(tasks, bytes_per_s, latency_s, step_s, source):
    """A machine of one core per task, on links of the given rate and latency."""
    return Cluster([Machine(f"host{index}", 1, bytes_per_s, latency_s)
                    for index in range(tasks)], step_s, 0.0, source)


# The examples' variables are float32.
FLOAT_BYTES = 4


def shard_bytes(hidden_layers, ps_count):
    """The model's bytes on each ps: replica_device_setter deals the
    variables round-robin over the ps tasks in the order they are created,
    the global step first (every example creates it first), then each
    layer's weights and biases."""
    widths = [rules.IMAGE_SIZE, *hidden_layers, rules.NUM_CLASSES]
    sizes = [0]  # the global step: an int64 nobody moves in an exchange
    for inputs, outputs in zip(widths, widths[1:]):
        sizes += [inputs * outputs * FLOAT_BYTES, outputs * FLOAT_BYTES]
    shards = [0] * ps_count
    for index, size in enumerate(sizes):
        shards[index % ps_count] += size
    return shards


class Stragglers:
    """A minibatch's time as a multiple of the mean, drawn per minibatch:
    `none` (always 1), `exp` (exponential), `lognormal:SIGMA` (log-normal of
    that σ of the log), each of mean 1."""

    def __init__(self, spec, seed):
        self.rng = np.random.default_rng(seed)
        self.spec = spec
        kind, _, sigma = spec.partition(":")
        self.kind, self.sigma = kind, float(sigma or 0)

    def factor(self):
        if self.kind == "exp":
            return self.rng.exponential()
        if self.kind == "lognormal":
            return self.rng.lognormal(-self.sigma ** 2 / 2, self.sigma)
        return 1.0
