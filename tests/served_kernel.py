"""A Jupyter kernel forked by the test process's fork server (fork_server.py),
which has imported TensorFlow already: a notebook's `import tensorflow` then
costs nothing. The kernel spec that the notebook tests use runs

    python served_kernel.py -f CONNECTION_FILE

It passes SIGINT and SIGTERM on to the kernel and exits with its exit code;
if this process is killed, the fork server kills the kernel.
"""

import importlib.util
import os
import signal
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from launcher.forking import PRELOAD, Served  # noqa: E402


def main(args):
    # Found, not imported: importing it would start a kernel here.
    launcher = importlib.util.find_spec("ipykernel_launcher").origin
    kernel = Served([launcher, *args], os.environ, None, "kernel",
                    os.environ[PRELOAD], output=sys.stdout.fileno())
    for sent in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sent, lambda number, frame: os.kill(kernel.pid, number))
    code = kernel.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
