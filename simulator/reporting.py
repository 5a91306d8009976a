"""What a simulation shows while it runs and how it sums up staleness."""

import sys
import time


class Progress:
    """One line on standard error, rewritten at most twice a second, on a
    terminal only."""

    def __init__(self, total, enabled):
        self.total, self.enabled = total, enabled and sys.stderr.isatty()
        self.started = self.shown = time.monotonic()

    def update(self, done, simulated_s):
        now = time.monotonic()
        if not self.enabled or now - self.shown < 0.5:
            return
        self.shown = now
        print(f"\rsimulating: {done:,}/{self.total:,} global steps, "
              f"{simulated_s:,.1f} s simulated, {now - self.started:,.0f} s so far",
              end="", file=sys.stderr, flush=True)

    def close(self):
        if self.enabled and self.shown > self.started:
            print(file=sys.stderr, flush=True)


def nearest_rank(histogram, percent):
    """The least τ with ⌈percent · n / 100⌉ of the n commits of `histogram`
    ({τ: commits}) at or below it, as result.json's staleness percentiles
    are taken (guide/distributed/counters.py)."""
    total = sum(histogram.values())
    if not total:
        return None
    wanted, seen = -(-percent * total // 100), 0
    for tau in sorted(histogram):
        seen += histogram[tau]
        if seen >= wanted:
            return tau
