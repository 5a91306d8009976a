"""A session recreated after an error is never silent, and never loses the
run: MonitoredSession recovers from AbortedError and UnavailableError (a
remote call that failed, as under load) by closing the session and making a
new one, and the examples recover the same way from a request that reached
a worker twice (a CancelledError). Each example that trains in a
MonitoredSession gets each of the three injected into its chief mid-run,
with the old session's close delayed so that whatever its stop sets off
reaches the ps first (tests/with_injected_error.py): the synchronous ones
with their two workers, the asynchronous ones with the chief alone, which
no other worker can outrun. The job must complete with its result, and the
chief's log must name the error."""

import os
import re

import pytest

from conftest import LAUNCHER, REPO, read_result, run
from guide.examples import BY_NAME, EXAMPLES

# Above each run's own 300 s bound, which pytest's 300 s net would cut short.
pytestmark = pytest.mark.timeout(360)

INJECT = os.path.join(REPO, "tests", "with_injected_error.py")
STEPS = 600
# MonitoredSession's chief in a cluster with a ps: the examples it recreates.
IN_MONITORED_SESSIONS = [example for example in EXAMPLES
                         if example.ps > 0 and example.hooks
                         and not example.coordinator]
# Injected: what the chief's log must then say it recovered from.
ERRORS = {"AbortedError": "AbortedError: injected by with_injected_error.py",
          "UnavailableError": "UnavailableError: injected by with_injected_error.py",
          "DuplicateRequest": "AbortedError: The same RunGraph (Worker) request "
                              "was received twice."}


def launch(example, logdir, error, at_run="1", workers=None):
    # An asynchronous chief that evaluates as it goes can be outrun by the
    # other worker, which may train every step before the chief's first:
    # there the chief trains alone, so that the error lands in its training.
    # A synchronous chief takes part in every step.
    if workers is None:
        workers = example.workers if example.synchronous else 1
    flags = ["--ps", str(example.ps), "--workers", str(workers),
             "--timeout", "240"]
    if example.gpu_per_worker:
        flags.append("--gpu_per_worker")
    # By default after the chief's first run with hooks (a minibatch, or a
    # window's commit).
    return [*LAUNCHER, *flags, "--", INJECT, error, at_run, "1",
            os.path.join(REPO, example.script_path), *example.flags,
            "--train_steps", str(STEPS), "--logdir", str(logdir)]


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("example", IN_MONITORED_SESSIONS, ids=lambda e: e.name)
def test_a_recreated_session_says_so_and_the_run_completes(example, error,
                                                           run_dir):
    logdir = run_dir / "run"
    result = run(launch(example, logdir, error), timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert f"injecting {error}" in output, output[-4000:]
    assert f"session recreated after {ERRORS[error]}" in output, output[-4000:]
    outcome = read_result(logdir)
    assert outcome["algorithm"] == example.algorithm
    if example.synchronous:
        assert outcome["global_step"] == STEPS
    else:
        assert outcome["global_step"] >= STEPS


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("name", ["Hogwild", "Synchronous-SGD"])
def test_a_call_that_fails_in_the_final_wait_is_made_again(name, error, run_dir):
    """The chief's wait for the other workers runs in sessions of its own,
    outside MonitoredSession: a call there that fails while ps 0 keeps its
    state is made again, instead of ending the job as a lost ps would."""
    example = BY_NAME[name]
    logdir = run_dir / "run"
    result = run(launch(example, logdir, error, at_run="wait", workers=2),
                 timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert f"injecting {error}" in output, output[-4000:]
    seen_as = "UnavailableError" if error == "UnavailableError" else "AbortedError"
    assert (f"the chief's wait for worker 1 failed ({seen_as}), but ps 0 kept "
            f"its state: it waits again") in output, output[-4000:]
    if example.synchronous:
        assert read_result(logdir)["global_step"] == STEPS, output[-4000:]
    else:
        assert read_result(logdir)["global_step"] >= STEPS, output[-4000:]


def test_a_session_recreated_again_and_again_ends_the_task(run_dir):
    """An error on every run would keep MonitoredSession recreating the
    session forever: the tenth time within ten minutes, the chief gives up
    in one line, exit code 75, and the job fails."""
    example = BY_NAME["Hogwild"]
    result = run(launch(example, run_dir / "run", "AbortedError+"), timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-4000:]
    said = re.findall(r"^\[worker:0\] session recreated after AbortedError",
                      output, re.MULTILINE)
    assert len(said) == 9, output[-4000:]
    assert ("error: the session was recreated 10 times within 10 minutes, the "
            "last after AbortedError: injected by with_injected_error.py; the "
            "task gives up rather than retry forever") in output, output[-4000:]
    assert "worker:0 exited with code 75" in output, output[-4000:]


@pytest.mark.parametrize("example", IN_MONITORED_SESSIONS, ids=lambda e: e.name)
def test_a_session_that_stays_broken_is_left_behind(example, run_dir):
    """A session whose ps was lost mid-call keeps failing, and so does its
    close. MonitoredSession then runs the step again with the session it
    first gave it: the examples' steps outside the hooks take the new one,
    so the session is recreated once, not forever."""
    logdir = run_dir / "run"
    result = run(launch(example, logdir, "UnavailableError!"), timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    said = re.findall(r"^\[worker:0\] session recreated after UnavailableError",
                      output, re.MULTILINE)
    assert len(said) == 1, output[-4000:]
    assert "An error occurred when attempting to close the session" in output
    assert read_result(logdir)["global_step"] >= STEPS
