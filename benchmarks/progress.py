"""The suite's progress: a bar with the run going on, the runs done and
left and the time left (tqdm), and one line per finished run above it; in
a log (no terminal), a line per run as it starts instead of the bar."""

import sys

from .reports.common import benchmark_packages


def measured(record):
    """One line on a finished run."""
    figures = record["measures"]
    if record["status"] != "ok":
        return f"{record['label']}: FAILED ({record['error']})"
    parts = []
    if "test_accuracy" in figures:
        parts.append(f"accuracy {figures['test_accuracy']:.4f}")
    if figures.get("s_to_97") is not None:
        parts.append(f"97% after {figures['s_to_97']} s of training")
    if "examples_per_s" in figures:
        parts.append(f"{figures['examples_per_s']:,.0f} examples/s")
    if figures.get("bytes_per_example") is not None:
        parts.append(f"{figures['bytes_per_example']:,} bytes/example")
    if figures.get("startup_s") is not None and "preload" in record["run"]:
        parts.append(f"start-up {figures['startup_s']} s")
    parts.append(f"{figures['command_s']} s in all")
    return f"{record['label']}: " + ", ".join(parts)


class Bar:
    """tqdm's bar on standard error; plain lines where tqdm is missing."""

    def __init__(self, total):
        tqdm = None
        if sys.stderr.isatty():  # in a log, one line per run says more
            benchmark_packages()
            try:
                from tqdm import tqdm
            except ImportError:
                pass
        self.bar = tqdm and tqdm(total=total, unit="run", file=sys.stderr,
                                 dynamic_ncols=True,
                                 bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} "
                                            "runs [{elapsed} so far, {remaining} "
                                            "left]")
        self.total, self.done = total, 0

    def starting(self, label):
        if self.bar:
            self.bar.set_description_str(label[:60])
        else:
            print(f"[{self.done + 1}/{self.total}] {label}", file=sys.stderr,
                  flush=True)

    def finished(self, line):
        self.done += 1
        if self.bar:
            self.bar.write(line, file=sys.stdout)
            self.bar.update(1)
        else:
            print(line, flush=True)

    def close(self):
        if self.bar:
            self.bar.close()
