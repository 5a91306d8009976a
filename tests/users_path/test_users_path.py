"""Every example trains to completion the way a user's `bash run.sh` runs
it: each task a new Python that imports TensorFlow itself, as on separate
machines. The rest of the suite forks its tasks from a fork server with
TensorFlow loaded (tests/fork_server.py), which is faster but not this path.
"""

import pytest
from test_examples import EXAMPLES, check_example

from conftest import users_environment


@pytest.mark.timeout(360)  # above the run's own 300 s bound
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_trains_as_a_user_runs_it(name, run_dir):
    check_example(name, run_dir, env=users_environment(), timeout=300)
