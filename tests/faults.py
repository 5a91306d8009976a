"""Kills a random task of each example at a random moment, many times, and
counts the runs that still completed.

Not part of the test suite (it takes minutes per example); run it with
`make faults` or:

    python tests/faults.py [--runs 5] [--steps 600] [--workers 2] [EXAMPLE ...]

Each run is the example's run.sh with `--max_restarts 3`, by default on
separate disks as on separate machines (`--network hosts --disk_on_restart
empty`: a restarted task starts on an empty disk, but for the chief's
persistent one; launcher/disks.py). Once the global
step passes a random point between 20% and 70% of --steps, one task is
SIGKILLed by pid: any worker or ps 0 for the examples whose whole recovery
is shown (Hogwild, DOWNPOUR, Synchronous-SGD), a worker for the others. A
run survives when it exits 0 with the final global step at --steps or more.
Before the random kills, one run of each of those three kills worker 1,
the chief and ps 0 in turn, and one run of each allreduce example (no ps,
the whole group restarted from the last checkpoint) worker 1, then the
chief.
For each kill it measures the steps lost (the global step at the kill minus
the step the chief resumed at, 0 when nothing was rolled back) and the
seconds to recover: from the kill until the chief says where it resumed
from (a chief or ps killed), or until the restarted worker prints progress
(none if the others finished the run first).
"""

import argparse
import os
import pathlib
import random
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))

from test_recovery import Run, next_step, pause, three_kills  # noqa: E402

from conftest import read_result, task_pid  # noqa: E402
from guide import examples  # noqa: E402

WHOLE_RECOVERY = ["Hogwild", "DOWNPOUR", "Synchronous-SGD"]
# With no ps, a kill restarts every worker from the chief's last checkpoint.
GROUP_RECOVERY = [folder for folder, example in examples.BY_FOLDER.items()
                  if example.kind == examples.ALLREDUCE]
OTHERS = [folder for folder in examples.BY_FOLDER if folder not in WHOLE_RECOVERY]
PROGRESS = re.compile(r"^\[(\w+:\d+)\] global_step (\d+) ")
RESUMED = re.compile(r"^\[worker:0\] resuming at global step (\d+) ")


def lines(process, deadline):
    """Yields the launcher's output lines as they come, until `deadline`."""
    buffer = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [],
                                    deadline - time.monotonic())
        if not ready:
            return
        chunk = os.read(process.stdout.fileno(), 65536)
        if not chunk:
            return
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for raw in complete:
            yield raw.decode(errors="replace")


def victims(example, workers):
    tasks = [("worker", index) for index in range(workers)]
    if example in WHOLE_RECOVERY:
        tasks.append(("ps", 0))
    return tasks


def run_once(example, steps, timeout, logdir, rng, launcher_flags=()):
    """One run with one kill; returns (survived, victim, steps lost, seconds
    to recover, final global step)."""
    target = int(steps * rng.uniform(0.2, 0.7))
    job = index = None
    command = ["bash", os.path.join(REPO, example, "run.sh"), "--max_restarts",
               "3", *launcher_flags, "--timeout", str(timeout),
               "--train_steps", str(steps),
               "--log_every", str(max(1, steps // 60)), "--logdir", logdir]
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    killed_at = kill_time = recovered = resumed = None
    last_step = 0
    try:
        for line in lines(process, time.monotonic() + timeout + 30):
            started = re.match(r"^\[launch\] \d+ ps \+ (\d+) worker", line)
            if started and job is None:  # the task to kill, among those run
                job, index = rng.choice(victims(example, int(started[1])))
            progress = PROGRESS.match(line)
            if progress:
                last_step = max(last_step, int(progress[2]))
            if killed_at is None and last_step >= target:
                try:
                    os.kill(task_pid(logdir, job, index), signal.SIGKILL)
                except (AssertionError, ProcessLookupError):
                    target = float("inf")  # the task had already finished
                    continue
                killed_at, kill_time = last_step, time.monotonic()
                continue
            if killed_at is None:
                continue
            if RESUMED.match(line) and resumed is None:
                resumed = int(RESUMED.match(line)[1])
            # Back: the chief has said where it resumed from (a chief or ps
            # kill), or the restarted worker has made progress.
            if recovered is None and (
                    (RESUMED.match(line) and (job == "ps" or index == 0))
                    or (progress and progress[1] == f"{job}:{index}")):
                recovered = time.monotonic() - kill_time
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    final = 0
    result = os.path.join(logdir, "result.json")
    if os.path.exists(result):
        with open(result) as stream:
            final = int(re.search(r'"global_step": (\d+)', stream.read())[1])
    lost = max(0, killed_at - resumed) if killed_at and resumed is not None \
        else 0
    survived = code == 0 and final >= steps and killed_at is not None
    return survived, f"{job}:{index}", lost, recovered, final


def group_kills(logdir, folder, train_steps=600, checkpoint_steps=40,
                launcher_flags=()):
    """Runs `folder`'s run.sh (which asks for --restart_group) with
    --max_restarts 3 and SIGKILLs worker 1, then the chief, once the group
    is back; the other worker stands still (SIGSTOP) meanwhile, so that the
    launcher sees the kill first. Returns (exit code, output, the steps each
    kill lost: the step at the kill minus the one the group resumed at)."""
    logdir = pathlib.Path(logdir)
    run = Run(["bash", os.path.join(REPO, folder, "run.sh"), "--max_restarts",
               "3", *launcher_flags, "--timeout", "400",
               "--train_steps", str(train_steps),
               "--log_every", "10",
               "--save_checkpoint_steps", str(checkpoint_steps),
               "--logdir", str(logdir)])
    lost, at_least = [], train_steps // 4
    try:
        for number, index in enumerate((1, 0), 1):
            at_kill = next_step(run, f"worker:{index}", at_least=at_least)
            go_on = pause(logdir, "worker", 1 - index)
            os.kill(task_pid(logdir, "worker", index), signal.SIGKILL)
            run.next_line(rf"^\[launch\] worker:{index} died \(signal 9\); "
                          rf"restarting the whole group \({number} of 3\)",
                          timeout=60)
            go_on()
            resumed = int(run.next_line(
                r"^\[worker:0\] resuming at global step (\d+) from checkpoint",
                timeout=120)[1])
            lost.append(at_kill - resumed)
            at_least = resumed + train_steps // 4
        code, output = run.finish(timeout=240)
    finally:
        run.kill()
    return code, output, lost


def steps_for(example, steps, workers):
    """Global steps for a run of `example`: with more than 2 workers an
    asynchronous one's are shared, so it gets as many per 2 workers; each
    worker takes part in every step of a synchronous one."""
    if examples.BY_FOLDER[example].synchronous:
        return steps
    return steps * max(1, workers // 2)


def judged(logdir, code, steps=600):
    """Whether a killed run survived (it finished its `steps` with a sane
    accuracy), and what to print of it."""
    result = read_result(logdir)
    ok = code == 0 and result["global_step"] >= steps \
        and result["test_accuracy"] >= 0.8
    return ok, (f"exit {code}, global step {result['global_step']}, test "
                f"accuracy {result['test_accuracy']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", nargs="*", default=WHOLE_RECOVERY + OTHERS,
                        help="example folders (default: every distributed one)")
    parser.add_argument("--runs", type=int, default=5,
                        help="random-kill runs per example (0: only the "
                             "three kills in one run)")
    parser.add_argument("--steps", type=int, default=600,
                        help="global steps per run with 2 workers; with more, "
                             "an asynchronous example runs this many per 2 "
                             "workers, so that each still trains as long")
    parser.add_argument("--workers", type=int, default=2,
                        help="workers per run (`make faults WORKERS=16`)")
    parser.add_argument("--timeout", type=int, default=300,
                        help="seconds before a run counts as hung")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--random_only", action="store_true",
                        help="skip the runs that kill worker 1, the chief "
                             "and ps 0 in turn (an allreduce: worker 1 and "
                             "the chief)")
    parser.add_argument("--network", default="hosts",
                        help="the launcher's --network (default hosts: a "
                             "disk of its own for each task)")
    parser.add_argument("--disk_on_restart", default="empty",
                        help="with --network hosts: the launcher's "
                             "--disk_on_restart (default empty)")
    args = parser.parse_args()
    flags = ["--network", args.network]
    if args.network == "hosts":
        flags += ["--disk_on_restart", args.disk_on_restart]
    # Every worker's progress lines, which say when each is back.
    flags += ["--output", "all"]
    print(f"launcher flags: {' '.join(flags)} --workers {args.workers}",
          flush=True)
    flags_with_workers = flags + ["--workers", str(args.workers)]
    rng = random.Random(args.seed)
    scratch = tempfile.mkdtemp(prefix="faults-")
    all_survived = True
    for example in [name for name in WHOLE_RECOVERY if name in args.examples
                    and not args.random_only]:
        # Worker 1, then the chief, then ps 0, in one run.
        logdir = os.path.join(scratch, f"{example}-three-kills")
        script = os.path.join(REPO, examples.BY_FOLDER[example].script_path)
        started = time.monotonic()
        try:
            code, _, _ = three_kills(
                logdir, script,
                asynchronous=not examples.BY_FOLDER[example].synchronous,
                train_steps=steps_for(example, args.steps, args.workers),
                launcher_flags=flags, workers=args.workers)
            ok, what = judged(logdir, code, steps_for(example, args.steps,
                                                      args.workers))
        except Exception as error:  # noqa: BLE001 - reported, then the next
            ok, what = False, f"{type(error).__name__}: {error}"[:300]
        all_survived &= ok
        print(f"== {example}: worker 1, chief, ps 0 killed in one run: "
              f"{'survived' if ok else 'FAILED'} ({what}; "
              f"{time.monotonic() - started:.0f} s)", flush=True)
    for example in [name for name in GROUP_RECOVERY if name in args.examples
                    and not args.random_only]:
        # Worker 1, then the chief, in one run: the group restarts each time.
        logdir = os.path.join(scratch, f"{example}-group-kills")
        started = time.monotonic()
        try:
            code, _, lost = group_kills(logdir, example, train_steps=args.steps,
                                        launcher_flags=flags_with_workers)
            ok, what = judged(logdir, code, args.steps)
            what += f", steps lost {lost}"
        except Exception as error:  # noqa: BLE001 - reported, then the next
            ok, what = False, f"{type(error).__name__}: {error}"[:300]
        all_survived &= ok
        print(f"== {example}: worker 1, then the chief killed in one run: "
              f"{'survived' if ok else 'FAILED'} ({what}; "
              f"{time.monotonic() - started:.0f} s)", flush=True)
    for example in args.examples if args.runs else []:
        survived, lost, recover = 0, [], []
        for number in range(1, args.runs + 1):
            logdir = os.path.join(scratch, f"{example}-{number}")
            ok, victim, steps_lost, seconds, final = run_once(
                example, steps_for(example, args.steps, args.workers),
                args.timeout, logdir, rng, flags_with_workers)
            survived += ok
            lost.append(steps_lost)
            if seconds is not None:
                recover.append(seconds)
            print(f"{example} run {number}/{args.runs}: killed {victim}, "
                  f"{steps_lost} steps lost, recovered in "
                  f"{'-' if seconds is None else f'{seconds:.1f} s'}, final "
                  f"global step {final}: {'survived' if ok else 'FAILED'}"
                  f"{'' if ok else f' (logs in {logdir})'}", flush=True)
            if ok:
                shutil.rmtree(logdir, ignore_errors=True)
        all_survived &= survived == args.runs
        print(f"== {example}: {survived} of {args.runs} runs survived; steps "
              f"lost per kill: mean {statistics.mean(lost):.1f}, most "
              f"{max(lost)}; seconds to recover: median "
              f"{statistics.median(recover) if recover else float('nan'):.1f}"
              f", slowest {max(recover, default=float('nan')):.1f}", flush=True)
    if all_survived:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all_survived else 1


if __name__ == "__main__":
    sys.exit(main())
