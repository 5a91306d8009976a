"""Every wait ends: a job whose task is lost where a wait depends on it
completes (with --max_restarts), or fails in one line with a non-zero exit,
never waits silently."""

import os
import re
import runpy
import threading

import pytest
from test_recovery import Run, kill, next_step, pause, restored_step

from conftest import LAUNCHER, REPO, read_result

DYNAMIC_SGD = os.path.join(REPO, "Dynamic-SGD", "dynamic_sgd.py")
HOGWILD = os.path.join(REPO, "Hogwild", "hogwild.py")


def start(logdir, script, *flags, ps=1, network="private", steps=400,
          restarts=3):
    """A launcher run of 2 workers with --max_restarts 3, and the port of
    ps 0 (the launcher lists the ps's ports first)."""
    run = Run([*LAUNCHER, "--ps", str(ps), "--network", network,
               "--max_restarts", str(restarts), "--timeout", "300", "--", script,
               "--train_steps", str(steps), "--log_every", "10",
               "--save_checkpoint_steps", "40", "--logdir", str(logdir), *flags])
    return run, int(run.next_line(r"^\[launch\] .* ports (\d+)", 60)[1])


class LockProbe(threading.Thread):
    """Takes Dynamic-SGD's lock on ps 0 (at `port` on this machine), from a
    session of the test's own, and gives it back at once. A lock taken
    cannot be given up on, so this waits in a thread of its own: if the
    test fails meanwhile, the thread is left behind with the test process."""

    def __init__(self, port):
        import tensorflow as tf

        super().__init__(daemon=True)
        self._tf, self._port, self._took_it = tf, port, False
        self.start()

    def run(self):
        tf = self._tf
        # The script's own lock, by the script's own code.
        script = runpy.run_path(DYNAMIC_SGD)
        with tf.Graph().as_default():
            take_and_give_back = script["holding"](script["shared_lock"](), tf.no_op)
            # Only ps 0: a session waits for every task it may use to answer.
            only_ps_0 = tf.compat.v1.ConfigProto(device_filters=["/job:ps/task:0"])
            with tf.compat.v1.Session(f"grpc://127.0.0.1:{self._port}",
                                      config=only_ps_0) as session:
                session.run(take_and_give_back)
                self._took_it = True

    def took_it_within(self, seconds):
        self.join(seconds)
        return self._took_it


def probe_until_held(port, attempts=10):
    """A LockProbe still waiting after 5 s: a run holds the lock. Until a
    worker's next pull or commit takes it, the lock is free, and a probe
    that takes it shows only that none has yet; so probe again."""
    for _ in range(attempts):
        probe = LockProbe(port)
        if not probe.took_it_within(5):
            return probe
    raise AssertionError(f"no run held the lock under ps 1 in {attempts} probes "
                         f"of 5 s")


def finish(run, logdir, at_least=400):
    code, output = run.finish(timeout=240)
    assert code == 0, output[-3000:]
    assert read_result(logdir)["global_step"] >= at_least
    return output


@pytest.mark.parametrize("ps", [1, 2])
def test_dynamic_sgd_survives_a_worker_killed_holding_its_lock(run_dir, ps):
    """Worker 1, stopped while it holds the lock (a pull or a commit, one
    window a run), then killed: its run fails on ps 0, which frees the lock
    for the chief and the new worker 1, and the run completes."""
    logdir = run_dir / "run"
    run, port = start(logdir, DYNAMIC_SGD, "--communication_window", "1",
                      ps=ps, network="host", steps=4000)
    try:
        next_step(run, "worker:1", at_least=40)
        # Stop worker 1 until it is stopped inside a locked run: the chief,
        # which goes on, releases the lock within milliseconds.
        for _ in range(20):
            go_on = pause(logdir, "worker", 1)
            probe = LockProbe(port)
            if not probe.took_it_within(2):
                break
            go_on()
        else:
            raise AssertionError("worker 1 was never stopped holding the lock")
        kill(run, logdir, "worker", 1, 1)
        assert probe.took_it_within(30), "the killed worker's lock stayed taken"
        finish(run, logdir, at_least=4000)
    finally:
        run.kill()


def test_dynamic_sgd_survives_a_ps_lost_under_its_lock(run_dir):
    """With 2 ps, ps 1 stopped (a pull or a commit then holds the lock on
    ps 0 while it waits for ps 1), then killed: that run fails, which frees
    the lock, and the chief restores the last checkpoint into the new ps 1
    with nothing to put back in the lock."""
    logdir = run_dir / "run"
    # 4,000 steps: 400 took about 3 s here, so on a loaded machine the run
    # could end between the chief's line at step 80 and the pause, and then
    # no run is left to hold the lock.
    run, port = start(logdir, DYNAMIC_SGD, ps=2, network="host", steps=4000)
    try:
        next_step(run, "worker:0", at_least=80)
        pause(logdir, "ps", 1)
        probe = probe_until_held(port)
        kill(run, logdir, "ps", 1, 1)
        assert probe.took_it_within(30), "the failed run's lock stayed taken"
        restored_step(run)
        finish(run, logdir, at_least=4000)
    finally:
        run.kill()


def test_hogwild_survives_ps_0_lost_after_worker_1_finished(run_dir):
    """Worker 1 finishes training while the chief stands still, and ps 0 is
    killed: the new ps 0 has lost worker 1's "training finished", but worker
    1 stays until the chief has finished, so it says it again. The chief
    restores the last checkpoint, trains the lost steps alone, finds the
    signal and completes the run. On separate disks, ps 0 restarted on an
    empty one."""
    logdir = run_dir / "run"
    run, _ = start(logdir, HOGWILD, "--disk_on_restart", "empty", network="hosts")
    try:
        next_step(run, "worker:0", at_least=80)
        go_on = pause(logdir, "worker", 0)
        run.next_line(r"^\[worker:1\] worker 1 has finished training; it "
                      r"waits for the chief", timeout=120)
        kill(run, logdir, "ps", 0, 1)
        # (Most likely said before the launcher restarted ps 0.)
        run.wait_for_line(r"^\[worker:1\] worker 1: ps 0 was lost, and with "
                          r"it this worker's \"training finished\": it says "
                          r"it again", timeout=60)
        go_on()
        restored_step(run)
        finish(run, logdir)
    finally:
        run.kill()


def test_a_chief_gives_up_on_a_worker_that_never_finishes(run_dir):
    """Worker 1 stands still (SIGSTOP) for good: the chief trains to the
    end, waits PEER_TIMEOUT_S for worker 1 to say it has finished, then
    gives up in one line with exit code 75, and the launcher (no restarts
    left) fails the job."""
    from guide.distributed.protocol import EXIT_PEER_LOST, PEER_TIMEOUT_S

    logdir = run_dir / "run"
    line = (f"hogwild.py: error: worker 1 did not say it had finished training "
            f"within {PEER_TIMEOUT_S} s of the chief; the chief gives up rather "
            f"than wait for it forever")
    run, _ = start(logdir, HOGWILD, restarts=0)
    try:
        next_step(run, "worker:1", at_least=40)
        go_on = pause(logdir, "worker", 1)
        run.next_line(rf"^\[worker:0\] {re.escape(line)}$",
                      timeout=PEER_TIMEOUT_S + 120)
        go_on()
        code, output = run.finish(timeout=60)
    finally:
        run.kill()
    assert code == 1, output[-3000:]
    assert (f"[launch] worker:0 exited with code {EXIT_PEER_LOST}; stopped "
            f"every other task") in output
    # That line, and nothing after it: no traceback.
    log = (logdir / "logs" / "worker-0.log").read_text().rstrip().splitlines()
    assert log[-1] == line, log[-5:]
