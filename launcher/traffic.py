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

Training is the stretch between the first and the last record of the
chief's progress file (contract.py): a thread reads the counters every
SAMPLE_S and, when a record appears, takes them as they were at the
record's time, interpolated between the two readings around it. The
job's start-up and its final evaluation are left out. When the job ends
the launcher writes <logdir>/launch.json: a "network" section, and a
"timeline" with the seconds from the launch to the result file, which,
less the chief's training, is the job's start-up and its final evaluation.
Standard library only.
"""

import bisect
import collections
import json
import os
import threading
import time

COUNTERS = "/proc/thread-self/net/dev"
SAMPLE_S = 0.05
# The readings kept: enough to find a record's time within them, although
# the record is found up to one reading after it is written.
KEPT = 20
REPORT = "launch.json"


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


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def between(readings, moment):
    """The counters at `moment`, interpolated between the readings
    [(time, counters)] around it (the nearest one outside them)."""
    times = [at for at, _ in readings]
    after = bisect.bisect_left(times, moment)
    if after == 0 or after == len(readings):
        return readings[min(after, len(readings) - 1)][1]
    (t0, before), (t1, later) = readings[after - 1], readings[after]
    share = (moment - t0) / (t1 - t0) if t1 > t0 else 1.0
    return {name: tuple(round(a + share * (b - a))
                        for a, b in zip(before[name], later[name]))
            for name in later if name in before}


class Traffic:
    """Measures the training of one job, from the chief's `progress` file
    in `logdir` (None: not measured). `links` is {task name: interface}
    whose counters are that task's link (hosts), or {"job": "lo"}."""

    def __init__(self, links, logdir, progress, result, shaped=None,
                 launcher_pid=None):
        self.links, self.logdir = links, logdir
        self.progress = progress and os.path.join(logdir, progress)
        self.result = result and os.path.join(logdir, result)
        self.shaped = shaped or {}  # the links' --bandwidth and --latency
        # The launch: the start of the launcher the user ran (outside the
        # job's namespace), before it imported anything.
        self.launched = time.time() - process_age(launcher_pid or os.getpid())
        self.readings = collections.deque(maxlen=KEPT)
        self.first = self.last = None  # (global step, counters)
        self.since = time.monotonic()  # records before this are not ours
        # How far the progress file has been read: what an earlier run in the
        # same logdir wrote is not this one's (nor are its times, after a
        # reboot, comparable).
        self.offset = _size(self.progress) if self.progress else 0
        # Nor is an earlier run's report.
        if os.path.exists(os.path.join(logdir, REPORT)):
            os.remove(os.path.join(logdir, REPORT))
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.sampler = None

    def start(self):
        if self.links and self.progress:
            self.sampler = threading.Thread(target=self.sample, daemon=True)
            self.sampler.start()

    def chief_restarted(self):
        """A restarted chief's training is measured anew."""
        with self.lock:
            self.first = self.last = None
            self.since = time.monotonic()

    def sample(self):
        while not self.stopping.wait(SAMPLE_S):
            self.readings.append((time.monotonic(), counters()))
            with self.lock:
                self.read_records()

    def read_records(self):
        """Takes the counters at the time of each new progress record."""
        if not self.readings:
            return
        if _size(self.progress) < self.offset:
            self.offset = 0  # a new file: a restarted chief's on an empty disk
        try:
            with open(self.progress, "rb") as stream:
                stream.seek(self.offset)
                data = stream.read()
        except OSError:
            return
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written waits
        self.offset += len(complete)
        for line in complete.splitlines():
            try:
                record = json.loads(line)
                step, moment = int(record["global_step"]), float(record["time"])
            except (ValueError, KeyError, TypeError):
                continue  # not a record: not ours to judge
            if moment >= self.since:
                taken = (step, between(list(self.readings), moment))
                self.first = self.first or taken
                self.last = taken

    def finish(self, sections=None):
        """Stops measuring and writes launch.json, with `sections` besides
        its own (usage.py's; their "timeline" joins this one's); returns
        the line to show, or None."""
        sections = dict(sections or {})
        self.stopping.set()
        if self.sampler is not None:
            self.sampler.join()
            self.readings.append((time.monotonic(), counters()))
            self.read_records()
        timeline = {}
        if self.fresh_result():
            timeline["launch_to_result_s"] = round(
                os.path.getmtime(self.result) - self.launched, 2)
        timeline.update(sections.pop("timeline", {}))
        network = self.measure() if self.sampler is not None else None
        report = {**({"network": network} if network else {}), **sections,
                  **({"timeline": timeline} if timeline else {})}
        if not report:
            return None
        path = os.path.join(self.logdir, REPORT)
        with open(path + ".new", "w") as stream:
            json.dump(report, stream, indent=2)
            stream.write("\n")
        os.replace(path + ".new", path)
        if not network:
            return None
        per_example = network.get("bytes_per_example")
        return (f"{network['bytes']:,} bytes on the wire over "
                f"{network['steps']:,} steps"
                f"{f', {per_example:,} per example' if per_example else ''} "
                f"({network['measured_on']}; {REPORT})")

    def fresh_result(self):
        """Whether the chief wrote its result file during this launch (not
        one an earlier run left in the logdir)."""
        return bool(self.result) and os.path.exists(self.result) and \
            os.path.getmtime(self.result) >= self.launched

    def measure(self):
        """The "network" section: the bytes sent between the first and the
        last progress record, in all and per link, per step and per example
        (the examples of a step from the result file, if there is one)."""
        if self.first is None or self.last[0] <= self.first[0]:
            return None  # fewer than two records: nothing to divide by
        (start_step, before), (step, now) = self.first, self.last
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
                   "measured_on": "loopback" if "job" in links else "each task's link",
                   **self.shaped}
        examples_per_step = self.examples_per_step()
        if examples_per_step:
            network["bytes_per_example"] = round(total / (steps * examples_per_step))
        if "job" not in links:
            network["links"] = links
            busiest = max(links, key=lambda task: max(links[task].values()))
            network["busiest_link"] = busiest
            if examples_per_step:
                network["busiest_link_bytes_per_example"] = round(
                    max(links[busiest].values()) / (steps * examples_per_step))
        return network

    def examples_per_step(self):
        if not self.fresh_result():
            return None
        try:
            with open(self.result) as stream:
                result = json.load(stream)
            return int(result["examples"]) / (
                int(result["global_step"]) - int(result.get("start_step", 0)))
        except (OSError, TypeError, ValueError, KeyError, ZeroDivisionError):
            return None


def for_job(job_network, roles, options, logdir, contract):
    """The Traffic of a job whose task `number` is roles[number], placed by
    `job_network` (None or False: this machine's network, not measured),
    with the launcher's `options` and the script's `contract`."""
    links = None
    if job_network:
        links = {f"{job}:{index}": job_network.link(number)
                 for number, (job, index) in enumerate(roles)}
        if set(links.values()) == {"lo"}:
            links = {"job": "lo"}
    shaped = {"link_rate": options.bandwidth, "link_latency_ms": options.latency}
    return Traffic(links, logdir, contract.progress, contract.result,
                   {key: value for key, value in shaped.items() if value},
                   job_network and job_network.launcher_pid)
