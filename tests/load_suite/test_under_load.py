"""Every example completes under CPU load, started as a user starts it:
`bash run.sh`, each task a new Python, the whole job held to half a CPU's
worth of time in bursts (tests/load.py), about four times slower than on
two free cores. A run that fails, hangs or ends without its result fails
the test, with the output that says why."""

import pytest
from test_examples import EXAMPLES, check_example

from conftest import users_environment
from load import CpuQuota

CPUS = 0.5


@pytest.mark.timeout(960)  # above the run's own 900 s bound
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_completes_under_load(name, run_dir):
    with CpuQuota(CPUS) as quota:
        # The launcher and every task it starts, in the quota's cgroup.
        check_example(name, run_dir, env=users_environment(), timeout=900,
                      wrap=quota.command)
        assert quota.throttled_s() > 0, "the quota never held the job back"
