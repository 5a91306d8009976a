"""The discrete-event simulation, on SimGrid: an actor per worker, on its
machine's cores; the bytes of every exchange sent between the tasks'
network hosts, each on its own link to a switch, so that every worker's
traffic to a ps crosses that ps's link; the parameters evolve by the
scheme's rule (rules.py) at the simulated moments the events happen.

The engine is a process's one: `run` is called once per process.
"""

import collections
import contextlib
import math
import os
import sys
import time

import numpy as np

from guide.examples import ALLREDUCE, EVERY_STEP, SYNC, SYNC_WINDOW, WINDOW
from simulator import rules
from simulator.platform import Stragglers, shard_bytes
from simulator.reporting import Progress, nearest_rank

# Host speed: SimGrid counts computation in flops; one "flop" is a nanosecond
# of one core here, so that a step of s seconds is s × 1e9 of them.
CORE_SPEED = 1e9
# SimGrid's options: CM02 is the flow-level model without the TCP
# correction factors that LV08, the default, fits to measured transfers, so
# that the analytic checks hold exactly; TCP-gamma 0 lifts the window bound
# on a flow's rate (a tuned cluster's); no cross-traffic, SimGrid's 5% of a
# flow's rate for its acknowledgements on the way back; SimGrid's own log
# lines off.
ENGINE_OPTIONS = ["--log=root.thres:critical", "--log=xbt_cfg.thres:critical",
                  "--cfg=network/model:CM02", "--cfg=network/TCP-gamma:0",
                  "--cfg=network/crosstraffic:0"]


@contextlib.contextmanager
def _quiet_stderr():
    """Standard error (file descriptor 2) to /dev/null within the block: a
    line SimGrid writes before any of its options can turn its log off."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class Simulation:
    """One run of `scheme` (a simulator.schemes.Scheme) with the example's
    resolved flags `args`, `workers` workers and `ps` ps tasks on `cluster`."""

    def __init__(self, scheme, args, *, workers, ps, cluster, stragglers,
                 learning, target, eval_every, dataset=None, progress=True):
        self.scheme, self.args = scheme, args
        self.workers, self.ps = workers, (0 if scheme.kind == ALLREDUCE else ps)
        self.cluster, self.learning, self.target = cluster, learning, target
        self.stragglers = Stragglers(stragglers, args.seed + 1)
        self.window = scheme.window(args)
        self.replicas = scheme.replicas(args, workers)
        self.examples_per_step = scheme.examples_per_step(args, workers)
        self.step_s = cluster.step_s_for(args.hidden_layers, args.batch_size)
        self.exchange_s = cluster.exchange_s_for(args.hidden_layers)
        # The CPU a run of the script's loop costs outside its session.run:
        # with each local step of a window (or allreduce step), and between
        # a commit and the worker's next read (the runs in between).
        self.loop_s = (cluster.loop_s if scheme.kind in (WINDOW, SYNC_WINDOW, ALLREDUCE)
                       else 0.0)
        self.after_commit_s = self._after_commit_s(cluster)
        self.model_bytes = sum(shard_bytes(args.hidden_layers, 1))
        self.shards = shard_bytes(args.hidden_layers, max(self.ps, 1))
        self.eval_every = eval_every or max(1, args.train_steps // 20)
        self.progress = Progress(args.train_steps, progress)
        # What the run counts.
        self.global_step = 0
        self.clock = 0  # commits landed, the staleness clock
        self.staleness = collections.Counter()  # commits by their τ
        self.commits = [0] * workers
        self.dropped = 0
        # Bytes each task's link carried, by direction.
        self.sent, self.received = collections.Counter(), collections.Counter()
        self.curve = []
        self.finished_at = 0.0
        if learning:
            self.dataset = dataset
            self.rule = scheme.rule(args, workers)
            self.central = self.rule.central(
                rules.initial_parameters(args.hidden_layers, args.seed))
            # Made now, so that a shard smaller than a batch is said before
            # the simulation starts.
            self.batches = [self._batches(index) for index in range(workers)]
        self._evaluated_at = 0

    # --- The platform ---

    def _build(self):
        with _quiet_stderr():  # SimGrid's import says which contexts it uses
            import simgrid as sg

        self.sg = sg
        self.engine = sg.Engine(["simulator", *ENGINE_OPTIONS])
        zone = sg.NetZone.create_star_zone("cluster")
        cores = {}
        for machine in self.cluster.machines:
            host = zone.create_host(machine.name, CORE_SPEED)
            host.core_count = machine.cores
            cores[machine.name] = host.seal()
        tasks = [f"ps{index}" for index in range(self.ps)] + [
            f"worker{index}" for index in range(self.workers)]
        self.cpu, self.net = {}, {}
        for task, machine in zip(tasks, self.cluster.place(len(tasks))):
            host = zone.create_host(f"{task}-net", CORE_SPEED)
            # Full duplex: a message crosses its sender's link up and its
            # receiver's down, at the link's latency each.
            link = zone.create_split_duplex_link(f"{task}-link", machine.bytes_per_s)
            link.set_latency(machine.latency_s).seal()
            zone.add_route(host.netpoint, None, None, None,
                           [sg.LinkInRoute(link, sg.LinkInRoute.Direction.UP)], True)
            self.net[task] = host.seal()
            self.cpu[task] = cores[machine.name]
        zone.seal()

    def _after_commit_s(self, cluster):
        """The loop's CPU from a commit to the next read, by the scripts'
        loops: a hooked run (Hogwild's, Synchronous-SGD's step); a window's
        commit run and its hooked pull (the elastic schemes': the exchange
        and the hooked note); SAGN's hooked commit and its pull, and its
        barrier's run with R = W."""
        hooked, plain, kind = cluster.hooked_loop_s, cluster.loop_s, self.scheme.kind
        if kind in (EVERY_STEP, SYNC):
            return hooked
        if kind == WINDOW:
            return plain + hooked
        if kind == SYNC_WINDOW:
            return hooked + plain * (2 if self.replicas == self.workers else 1)
        return 0.0  # an allreduce step is one run, charged with its compute

    # --- The events every scheme is made of ---

    def _compute(self, seconds):
        self.sg.this_actor.execute(seconds * CORE_SPEED)

    def _local_step_time(self):
        return self.step_s * self.stragglers.factor() + self.loop_s

    def _send(self, pairs):
        """Sends (from task, to task, bytes) at once; returns when all arrived."""
        comms = []
        for source, destination, size in pairs:
            if size:
                self.sent[source] += size
                self.received[destination] += size
                comms.append(self.sg.Comm.sendto_async(
                    self.net[source], self.net[destination], int(size)))
        for comm in comms:
            comm.wait()

    def _push(self, worker):
        self._send([(f"worker{worker}", f"ps{ps}", size)
                    for ps, size in enumerate(self.shards)])

    def _pull(self, worker):
        self._send([(f"ps{ps}", f"worker{worker}", size)
                    for ps, size in enumerate(self.shards)])

    def _advance(self, steps):
        """The global step moves by `steps`; evaluates at each --eval_every."""
        self.global_step += steps
        now = self.engine.clock
        self.progress.update(self.global_step, now)
        if (self.learning and self.global_step // self.eval_every
                > self._evaluated_at // self.eval_every):
            self._evaluated_at = self.global_step
            self._evaluate(now)

    def _evaluate(self, now):
        accuracy = rules.accuracy(self._central_params(), self.dataset.test_images,
                                  self.dataset.test_labels)
        self.curve.append({"global_step": self.global_step,
                           "examples": self.global_step * self.examples_per_step,
                           "simulated_s": round(now, 6),
                           "test_accuracy": round(accuracy, 4)})

    def _central_params(self):
        return self.central.params

    def _batches(self, worker):
        """The worker's minibatches, as the scripts draw them."""
        from guide.training import data

        shard = data.shard(self.dataset.train_images, self.dataset.train_labels,
                           worker, self.workers)
        return data.Batches(*shard, self.args.batch_size, seed=self.args.seed + worker)

    # --- Asynchronous schemes: Hogwild's step, or a window and its commit ---

    def _async_worker(self, index):
        learning, rule = self.learning, getattr(self, "rule", None)
        batches = self.batches[index] if learning else None
        local = rule.new_worker(self.central.params) if learning else None
        pulled_at = 0
        every_step = self.scheme.kind == EVERY_STEP
        lock = self.lock if self.scheme.locked else None

        def pull():
            nonlocal pulled_at
            if lock:
                lock.lock()
            # The ps sends what it holds when the request reaches it.
            pulled_at, snapshot = self.clock, (self.central.params if learning
                                               else None)
            self._pull(index)
            if lock:
                lock.unlock()
            return snapshot

        if not every_step:
            snapshot = pull()
            if learning:
                rule.pull(local, snapshot)
        while self.global_step < self.args.train_steps:
            if every_step:
                snapshot = pull()
                if learning:
                    rule.pull(local, snapshot)
            for _ in range(self.window):
                self._compute(self._local_step_time())
                if learning:
                    rule.local_step(local, *batches.next())
            if self.exchange_s:
                self._compute(self.exchange_s)
            read = None
            if self.scheme.keeps_local_copy:
                read = pull()  # the elastic difference needs θ̃ as it is now
            if lock:
                lock.lock()
            update = rule.commit(local, read) if learning else None
            self._push(index)
            staleness = self.clock - pulled_at
            if learning:
                self.rule.apply(self.central, update, staleness)
            self.staleness[staleness] += 1
            self.clock += 1
            self.commits[index] += 1
            self._advance(self.window)
            if lock:
                lock.unlock()
            if self.after_commit_s:
                self._compute(self.after_commit_s)
            if self.scheme.keeps_local_copy:
                pulled_at = self.clock  # the exchange noted, as the script notes it
            elif not every_step:
                snapshot = pull()
                if learning:
                    rule.pull(local, snapshot)
        self.finished_at = max(self.finished_at, self.engine.clock)

    # --- Synchronous schemes: SyncReplicasOptimizer's accumulators and tokens ---

    def _sync_worker(self, index):
        learning, rule = self.learning, getattr(self, "rule", None)
        batches = self.batches[index] if learning else None
        local = rule.new_worker(self.central.params) if learning else None
        local_step = 0  # the step its gradient is for: its token's
        windowed = self.scheme.kind == SYNC_WINDOW
        while self.global_step < self.args.train_steps:
            self._pull(index)
            snapshot = self.central.params if learning else None
            drawn = []
            if learning and windowed:
                rule.pull(local, snapshot)
            for _ in range(self.window):
                self._compute(self._local_step_time())
                if learning:
                    if windowed:
                        rule.local_step(local, *batches.next())
                    else:
                        drawn.append(batches.next())
            if self.exchange_s:
                self._compute(self.exchange_s)
            self._push(index)
            payload = None
            if learning:
                payload = rule.commit(local, snapshot) if windowed else drawn[0]
            self._accumulate(index, local_step, payload)
            local_step = self._take_token()
            if self.barrier is not None:
                self.barrier.wait()
            if self.after_commit_s:
                self._compute(self.after_commit_s)
        # As the scripts' release_token_waiters: a token for every other worker.
        self._release_tokens(self.workers - 1)
        self.finished_at = max(self.finished_at, self.engine.clock)

    def _accumulate(self, index, local_step, payload):
        """A gradient (or commit) reaching the accumulators: dropped if it
        is for an older step; the R-th of this step makes the update, after
        which W tokens go out, one per worker."""
        if local_step < self.global_step:
            self.dropped += 1
            return
        self.fresh.append(payload)
        self.commits[index] += 1
        self.staleness[0] += 1
        if len(self.fresh) < self.replicas:
            return
        if self.learning:
            if self.scheme.kind == SYNC_WINDOW:
                self.rule.apply_together(self.central, self.fresh)
            else:  # one gradient of the R minibatches together: their mean's
                images = np.concatenate([images for images, _ in self.fresh])
                labels = np.concatenate([labels for _, labels in self.fresh])
                self.rule.apply_together(self.central, [self.rule.gradient(
                    self.central.params, images, labels)])
        self.fresh = []
        self._advance(1)
        self._release_tokens(max(self.workers, self.replicas))

    def _release_tokens(self, count):
        for _ in range(count):
            self.tokens.append(self.global_step)
            self.token_semaphore.release()

    def _take_token(self):
        self.token_semaphore.acquire()
        return self.tokens.popleft()

    # --- Multi-Worker-Mirrored-Strategy: a ring allreduce per step ---

    def _allreduce_worker(self, index):
        me, successor = f"worker{index}", f"worker{(index + 1) % self.workers}"
        batches = self.batches[index] if self.learning else None
        # A ring allreduce: W − 1 reduce-scatter and W − 1 all-gather steps,
        # each sending a W-th of the model to the next worker. The ring's
        # steps are sent as one message (a link carries the same bytes at
        # the same rate) plus the latency of the steps after the first.
        ring_bytes = 2 * (self.workers - 1) * self.model_bytes / self.workers
        latency = (self.cluster.place(self.workers)[0].latency_s * 2
                   * max(2 * (self.workers - 1) - 1, 0))
        for _ in range(self.args.train_steps):
            self._compute(self._local_step_time())
            if self.learning:
                self.drawn[index] = batches.next()
            self.barrier.wait()
            if index == 0 and self.learning:
                images = np.concatenate([images for images, _ in self.drawn])
                labels = np.concatenate([labels for _, labels in self.drawn])
                self.rule.apply_together(self.central, [self.rule.gradient(
                    self.central.params, images, labels)])
            if self.workers > 1:
                self._send([(me, successor, ring_bytes)])
                self.sg.this_actor.sleep_for(latency)
            self.barrier.wait()
            # Every worker's gradient is of the step's parameters: τ = 0.
            self.staleness[0] += 1
            self.commits[index] += 1
            if index == 0:
                self._advance(1)
        self.finished_at = max(self.finished_at, self.engine.clock)

    # --- The run ---

    def run(self):
        """Plays the run out; returns its figures (a dict)."""
        wall_start = time.perf_counter()
        self._build()
        sg = self.sg
        kind = self.scheme.kind
        self.barrier = None
        if kind in (EVERY_STEP, WINDOW):
            self.lock = sg.Mutex() if self.scheme.locked else None
            worker = self._async_worker
        elif kind in (SYNC, SYNC_WINDOW):
            self.fresh, self.tokens = [], collections.deque()
            self.token_semaphore = sg.Semaphore(0)
            # SAGN's round protocol with R = W: every worker meets the others
            # after each commit (the script's step_barrier).
            if kind == SYNC_WINDOW and self.replicas == self.workers:
                self.barrier = sg.Barrier(self.workers)
            worker = self._sync_worker
        elif kind == ALLREDUCE:
            self.barrier = sg.Barrier(self.workers)
            self.drawn = [None] * self.workers
            worker = self._allreduce_worker
        else:
            raise ValueError(f"no simulation for {kind} schemes")
        for index in range(self.workers):
            sg.Actor.create(f"worker{index}", self.cpu[f"worker{index}"], worker, index)
        self.engine.run()
        self.progress.close()
        return self._results(time.perf_counter() - wall_start)

    def _results(self, wall_s):
        simulated_s = self.finished_at
        examples = self.global_step * self.examples_per_step
        taus = self.staleness
        commits = sum(taus.values())
        results = {
            "scheme": self.scheme.name, "workers": self.workers, "ps": self.ps,
            "global_step": self.global_step, "examples": examples,
            "simulated_s": round(simulated_s, 6),
            "examples_per_s": round(examples / simulated_s, 1) if simulated_s else None,
            "commits": sum(self.commits),
            "staleness_mean": (round(sum(tau * count for tau, count in taus.items())
                                     / commits, 3) if commits else None),
            "staleness_p50": nearest_rank(taus, 50),
            "staleness_p95": nearest_rank(taus, 95),
            "staleness_max": max(taus) if commits else None,
        }
        if self.scheme.kind in (SYNC, SYNC_WINDOW):
            results["dropped"] = self.dropped
        if self.learning:
            if self._evaluated_at != self.global_step:
                self._evaluate(simulated_s)
            results["test_accuracy"] = self.curve[-1]["test_accuracy"]
            reached = [point["simulated_s"] for point in self.curve
                       if point["test_accuracy"] >= self.target]
            results["seconds_to_target"] = reached[0] if reached else None
            results["target"] = self.target
            results["accuracy_curve"] = self.curve
        else:
            results.update(test_accuracy=None, seconds_to_target=None)
        tasks = [f"ps{index}" for index in range(self.ps)] + ["worker0"]
        results.update({
            "model_bytes": self.model_bytes,
            "ps_shard_bytes": self.shards if self.ps else [],
            # Each ps's link and worker 0's, each way.
            "link_bytes": {task: {"sent": self.sent[task],
                                  "received": self.received[task]} for task in tasks},
            "busiest_link_bytes": max([*self.sent.values(), *self.received.values()],
                                      default=0),
            "step_ms": round(self.step_s * 1000, 4),
            "wall_s": round(wall_s, 2),
        })
        if math.isnan(results["simulated_s"]):
            raise RuntimeError("the simulated clock is not a number")
        return results
