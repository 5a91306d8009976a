"""A session recreated after an error is never silent, and never loses the
run: MonitoredSession recovers from AbortedError and UnavailableError (a
remote call that failed, as under load) by closing the session and making a
new one. Each example that trains in a MonitoredSession gets each of the two
injected into its chief mid-run, with the old session's close delayed so
that whatever its stop sets off reaches the ps first (tests/
with_injected_error.py). The job must complete with its result, and the
chief's log must name the error."""

import os

import pytest

from conftest import LAUNCHER, REPO, read_result, run
from guide.examples import EXAMPLES

INJECT = os.path.join(REPO, "tests", "with_injected_error.py")
STEPS = 150
# MonitoredSession's chief in a cluster with a ps: the examples it recreates.
IN_MONITORED_SESSIONS = [example for example in EXAMPLES
                         if example.ps > 0 and example.hooks
                         and not example.coordinator]
ERRORS = ("AbortedError", "UnavailableError")


def launch(example, logdir, error):
    flags = ["--ps", str(example.ps), "--workers", str(example.workers),
             "--timeout", "240"]
    if example.gpu_per_worker:
        flags.append("--gpu_per_worker")
    return [*LAUNCHER, *flags, "--", INJECT, error, "40", "1",
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
    assert f"injecting {error} at global step" in output, output[-4000:]
    assert (f"session recreated after {error}: injected by "
            f"with_injected_error.py") in output, output[-4000:]
    outcome = read_result(logdir)
    assert outcome["algorithm"] == example.algorithm
    if example.synchronous:
        assert outcome["global_step"] == STEPS
    else:
        assert outcome["global_step"] >= STEPS
