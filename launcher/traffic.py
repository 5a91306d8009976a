"""What a job's tasks send each other while they train: bytes on the wire,
read from the kernel's interface counters, as a switch's port counters
would give them on separate machines.

- --network private: every task is in the job's network namespace, on its
  loopback, which counts each byte sent once (and once more as received).
- --network hosts: task k's link is the veth pair between its namespace and
  the job's bridge; the bridge's end, t<k>, is in the launcher's namespace,
  where what it receives is what task k sent, and what it sends is what
  task k received.
- --network host: not measured (this machine's loopback carries others'
  traffic too).

Training is the stretch from the chief's first progress line to its RESULT
line: the job's start-up (sessions, the model's initialisation) and its
shut-down are left out. When the RESULT line comes, the launcher adds
`bytes=` and `bytes_per_example=` to it, as it shows it, and to result.json,
which the chief has just written, a "network" section and a "timeline": the
seconds from the launch to the RESULT line, which, less the chief's wall_s
(its training, from its first step), is the job's start-up and its final
evaluation. Standard library only.
"""

import json
import os
import re
import time

PROGRESS = re.compile(r"^global_step (\d+) ")
RESULT = re.compile(r"^RESULT .*")
COUNTERS = "/proc/thread-self/net/dev"


def counters():
    """{interface: (bytes received, bytes sent)} in this thread's network
    namespace."""
    table = {}
    with open(COUNTERS) as stream:
        for line in stream.readlines()[2:]:
            name, fields = line.split(":", 1)
            values = fields.split()
            table[name.strip()] = (int(values[0]), int(values[8]))
    return table


def process_age(pid):
    """Seconds since process `pid` started: its start time in /proc/PID/stat
    (field 22, in clock ticks since boot) against the boot clock; 0 if it
    cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)


def result_fields(line):
    """The RESULT line's key=value fields."""
    return dict(field.split("=", 1) for field in line.split()[1:] if "=" in field)


class Traffic:
    """Measures the training of one job. `links` is {task name: interface}
    whose counters are that task's link (hosts), or {"job": "lo"}; None
    measures nothing. `chief` is the task name whose lines mark training."""

    def __init__(self, links, chief, logdir, shaped=None, launcher_pid=None):
        self.links, self.chief, self.logdir = links, chief, logdir
        # The links' --bandwidth and --latency, if limited.
        self.shaped = shaped or {}
        self.start = None  # (global step, counters) at the first progress line
        # The launch: the start of the launcher the user ran (outside the
        # job's namespace), before it imported anything. A restarted
        # chief's RESULT is timed from there too.
        self.launched = time.monotonic() - process_age(launcher_pid or os.getpid())

    def observe(self, task_name, line):
        """Looks at a line task `task_name` printed; returns it as shown."""
        if self.links is None or task_name != self.chief:
            return line
        progress = PROGRESS.match(line)
        if progress and self.start is None:
            self.start = int(progress[1]), counters()
        elif RESULT.match(line):
            to_result = round(time.monotonic() - self.launched, 2)
            timeline = {"launch_to_result_s": to_result}
            network = None
            if self.start is not None:  # no progress line: no bytes measured
                try:
                    network = self.measure(result_fields(line), counters())
                except (OSError, ValueError, KeyError, ZeroDivisionError):
                    pass  # a result without its steps: no bytes to add
                self.start = None  # a restarted chief's training is measured anew
            self.add_to_result(network, timeline)
            if network:
                return (f"{line} bytes={network['bytes']} "
                        f"bytes_per_example={network['bytes_per_example']}")
        return line

    def measure(self, result, now):
        """The "network" section: the bytes sent between the first progress
        line and now, in all and per link, per step and per example."""
        start_step, before = self.start
        step = int(result["global_step"])
        steps_run = step - int(result.get("start_step", 0))
        examples_per_step = int(result["examples"]) / steps_run
        links = {}
        for task, interface in self.links.items():
            (received_0, sent_0), (received_1, sent_1) = \
                before[interface], now[interface]
            if interface == "lo":
                links[task] = {"sent": sent_1 - sent_0}
            else:  # the bridge's end: what it receives, the task sent
                links[task] = {"sent": received_1 - received_0,
                               "received": sent_1 - sent_0}
        total = sum(link["sent"] for link in links.values())
        steps = step - start_step
        network = {"bytes": total, "steps": steps,
                   "bytes_per_step": round(total / steps),
                   "bytes_per_example": round(total / (steps * examples_per_step)),
                   "measured_on": "loopback" if "job" in links else "each task's link",
                   **self.shaped}
        if "job" not in links:
            network["links"] = links
            busiest = max(links, key=lambda task: max(links[task].values()))
            network["busiest_link"] = busiest
            network["busiest_link_bytes_per_example"] = round(
                max(links[busiest].values()) / (steps * examples_per_step))
        return network

    def add_to_result(self, network, timeline):
        path = os.path.join(self.logdir, "result.json")
        try:
            with open(path) as stream:
                result = json.load(stream)
            if network:
                result["network"] = network
            result["timeline"] = timeline
            with open(path + ".new", "w") as stream:
                json.dump(result, stream, indent=2)
                stream.write("\n")
            os.replace(path + ".new", path)
        except (OSError, ValueError, TypeError):
            pass  # no result (or not one of ours) to add to: the line stands


def for_job(job_network, roles, options, logdir):
    """The Traffic of a job whose task `number` is roles[number], placed by
    `job_network` (None or False: this machine's network, not measured),
    with the launcher's `options`."""
    if not job_network:
        return Traffic(None, None, logdir)
    links = {f"{job}:{index}": job_network.link(number)
             for number, (job, index) in enumerate(roles)}
    if set(links.values()) == {"lo"}:
        links = {"job": "lo"}
    shaped = {"link_rate": options.bandwidth, "link_latency_ms": options.latency}
    return Traffic(links, "chief:0" if options.coordinator else "worker:0",
                   logdir, {key: value for key, value in shaped.items() if value},
                   job_network.launcher_pid)
