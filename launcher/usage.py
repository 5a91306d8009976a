"""What a job takes of the machine, measured while it runs, for
<logdir>/launch.json (traffic.py writes it):

- "memory": the job's peak memory, the sum over its tasks of each one's
  PSS (/proc/PID/smaps_rollup: its resident memory, a page shared by n
  processes counted 1/n in each), with the anonymous part (Pss_Anon),
  which is what the job takes from MemAvailable (limits.py), and the
  launcher's own PSS at that moment (which holds TensorFlow when the
  tasks are forked from it). Reading smaps_rollup walks a process's page
  tables: 7 ms of CPU for a TensorFlow task, 0.3 s for 41 of them. So a
  thread reads each task's resident size every SAMPLE_EVERY_S from
  /proc/PID/status (microseconds), and the PSS only once that sum, past
  its high at the last reading, has stopped growing (the tasks have built
  their graphs and train; or FIRST_PSS_AFTER_S after they started, for a
  first reading), and no more often than keeps the readings of PSS under
  PSS_CPU_SHARE of one CPU. Also what the sampling cost in all,
  and the peak of the resident sum (which counts a shared page in each
  process).
- "tasks": how many, and how they started (forking.Start).
- "timeline": the seconds from the launch to the moment every task was
  started, and to the chief's first progress record (contract.py: its
  "time" is time.monotonic(), the same clock in every process).

A task's own children are not counted. Standard library only.
"""

import json
import os
import threading
import time

from .traffic import process_age

SAMPLE_EVERY_S = 1.0
PSS_CPU_SHARE = 0.02
# A resident sum this much above the last high is worth a reading of PSS;
# growing by less than this a second, it has stopped growing.
GROWTH = 1.01
# A first reading of PSS this long after the tasks started, even if their
# memory still grows (on a loaded machine 40 tasks may start for as long
# as the job trains).
FIRST_PSS_AFTER_S = 10.0
MIB = 1024  # /proc counts in KiB


def resident_kib(pid):
    """Process `pid`'s resident memory (VmRSS) in KiB, or None once it is
    gone."""
    try:
        with open(f"/proc/{pid}/status") as stream:
            for line in stream:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def pss_kib(pid):
    """(Pss, Pss_Anon) of process `pid` in KiB, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as stream:
            fields = dict(line.split(":", 1) for line in stream
                          if line.startswith(("Pss:", "Pss_Anon:")))
        return int(fields["Pss"].split()[0]), \
            int(fields.get("Pss_Anon", "0 kB").split()[0])
    except (OSError, KeyError, ValueError):
        return None


class Usage:
    """Samples the memory of `tasks` (task.Task, each's current process)
    and reads the chief's `progress` file in `logdir` (None: none) until
    finish(). `launcher_pid`: the launcher the user started."""

    def __init__(self, tasks, start, logdir, progress, launcher_pid=None,
                 every_s=SAMPLE_EVERY_S):
        self.tasks, self.start_mode, self.every_s = tasks, start, every_s
        self.progress = progress and os.path.join(logdir, progress)
        # What an earlier run in the same logdir wrote is not this one's.
        self.offset = _size(self.progress) if self.progress else 0
        self.launched = time.monotonic() - process_age(
            launcher_pid or os.getpid())
        self.started = None  # when every task had been started
        self.peak = None  # (PSS, Pss_Anon, tasks counted, launcher's PSS)
        self.resident_peak = 0  # the highest sum of the tasks' VmRSS
        self.resident = 0  # that sum at the last sample
        self.resident_at = 0.0  # and when (time.monotonic())
        self.pss_high = 0  # and at the last reading of PSS
        self.pss_after = 0.0  # no reading of PSS before (time.monotonic())
        self.samples = self.pss_samples = 0
        self.cpu_s = 0.0
        self.first_progress = None
        self.stopping = threading.Event()
        self.thread = None

    def start(self):
        """Every task has been started (self.tasks): begins sampling."""
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self):
        while True:
            began = time.thread_time()
            self.take()
            self.cpu_s += time.thread_time() - began
            if self.stopping.wait(self.every_s):
                return

    def running(self):
        """The pids of the tasks' processes still running."""
        return [task.process.pid for task in self.tasks
                if task.process is not None and task.process.returncode is None]

    def take(self):
        pids = self.running()
        resident = sum(filter(None, map(resident_kib, pids)))
        self.resident_peak = max(self.resident_peak, resident)
        self.samples += 1
        now = time.monotonic()
        settled = resident <= self.resident * (
            1 + (GROWTH - 1) * (now - self.resident_at))
        if not self.pss_samples and self.started is not None and \
                now - self.started >= FIRST_PSS_AFTER_S:
            settled = True
        self.resident, self.resident_at = resident, now
        if pids and settled and resident > self.pss_high * GROWTH and \
                now >= self.pss_after:
            began = time.thread_time()
            self.take_pss(pids)
            self.pss_high = resident
            self.pss_after = now + (time.thread_time() - began) / PSS_CPU_SHARE
        self.look_for_first_progress()

    def look_for_first_progress(self):
        if self.first_progress is None and self.progress:
            self.first_progress = self.read_first_progress()

    def take_pss(self, pids):
        total = anon = counted = 0
        for measured in filter(None, map(pss_kib, pids)):
            total += measured[0]
            anon += measured[1]
            counted += 1
        self.pss_samples += 1
        if counted and (self.peak is None or total > self.peak[0]):
            self.peak = (total, anon, counted, (pss_kib(os.getpid()) or (0,))[0])

    def read_first_progress(self):
        """The time of the first record the chief wrote in this run, or
        None if it has written none yet."""
        if _size(self.progress) < self.offset:
            self.offset = 0  # a new file
        try:
            with open(self.progress, "rb") as stream:
                stream.seek(self.offset)
                for line in stream:
                    if not line.endswith(b"\n"):
                        return None  # still being written
                    try:
                        return float(json.loads(line)["time"])
                    except (ValueError, KeyError, TypeError):
                        self.offset += len(line)  # not a record: skip it
        except OSError:
            pass
        return None

    def stop(self):
        self.stopping.set()
        if self.thread is not None:
            self.thread.join()

    def finish(self):
        """Stops sampling; the sections it adds to launch.json."""
        self.stop()
        # A record written since the last sample (a job that ended within
        # SAMPLE_EVERY_S of it).
        self.look_for_first_progress()
        report = {"tasks": {"count": len(self.tasks),
                            "start": self.start_mode.kind,
                            "why": self.start_mode.why}}
        memory = {}
        if self.peak is not None:  # none if no sample found the tasks settled
            total, anon, counted, launcher = self.peak
            memory = {"peak_pss_mib": round(total / MIB),
                      "peak_pss_per_task_mib": round(total / MIB / counted),
                      "peak_pss_anon_mib": round(anon / MIB),
                      "tasks_at_peak": counted,
                      "launcher_pss_mib": round(launcher / MIB)}
        if self.samples:
            report["memory"] = {
                **memory,
                # Shared pages counted in each process: more than the PSS.
                "peak_rss_sum_mib": round(self.resident_peak / MIB),
                "samples": self.samples,
                "pss_samples": self.pss_samples,
                "sampling_cpu_s": round(self.cpu_s, 3)}
        timeline = {}
        if self.started is not None:
            timeline["launch_to_started_s"] = round(
                self.started - self.launched, 2)
        if self.first_progress is not None:
            timeline["launch_to_first_progress_s"] = round(
                self.first_progress - self.launched, 2)
        if timeline:
            report["timeline"] = timeline
        return report


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
