"""What the live stream shows of a job with many workers (--output
summary, the default above options.SUMMARY_ABOVE_WORKERS workers): every
line of the launcher, the chief, the ps and the evaluator, and every error;
the other workers' lines go to their logs only, and a line every
SUMMARY_EVERY_S seconds, and once at the end, sums them up:

    [workers] 39 others: 37 running, 2 finished, 0 restarted; latest:
    [worker:17] <its latest line>

The launcher knows nothing of the script, so the line says what any task
would: whether it runs, and what it said last. Standard library only.
"""

import threading

SUMMARY_EVERY_S = 10.0
# A longer latest line is cut, so that the summary stays one line.
LATEST_CHARS = 100
JOIN_S = 1.0


class Summary:
    """Sums up `tasks` (task.Task) that are workers but not `chief`, if
    `on`; `emit(text)` shows a line."""

    def __init__(self, tasks, chief, emit, on=True, every_s=SUMMARY_EVERY_S):
        self.tasks, self.chief, self.on = tasks, chief, on
        self.others, self.hidden = [], set()  # once started
        self.emit, self.every_s = emit, every_s
        self.latest = None  # (task name, line)
        self.stopping = threading.Event()
        self.thread = None

    def hides(self, task):
        return task in self.hidden

    def note(self, task, line):
        """`line`, which `task` said and the stream does not show."""
        if line.strip():
            self.latest = (task.name, line)

    def line(self):
        codes = [task.process.returncode for task in self.others]
        counts = [f"{codes.count(None)} running", f"{codes.count(0)} finished"]
        failed = len(codes) - codes.count(None) - codes.count(0)
        if failed:
            counts.append(f"{failed} failed")
        counts.append(f"{sum(task.restarts for task in self.others)} restarted")
        text = f"[workers] {len(self.others)} others: {', '.join(counts)}"
        if self.latest:
            name, said = self.latest
            if len(said) > LATEST_CHARS:
                said = said[:LATEST_CHARS - 3] + "..."
            text += f"; latest: [{name}] {said}"
        return text

    def start(self):
        """Every task has been started."""
        self.others = [task for task in self.tasks if self.on and
                       task.job == "worker" and task.name != self.chief]
        self.hidden = set(self.others)
        if self.others:
            self.thread = threading.Thread(target=self.every, daemon=True)
            self.thread.start()

    def every(self):
        while not self.stopping.wait(self.every_s):
            self.emit(self.line())

    def stop(self, final=False):
        """Stops the periodic line; with `final`, shows it once more (once
        at most)."""
        if self.thread is None or self.stopping.is_set():
            return
        self.stopping.set()
        # Not for ever: a stalled stdout may hold it in emit().
        self.thread.join(timeout=JOIN_S)
        if final:
            self.emit(self.line())
