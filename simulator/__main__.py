"""`python -m simulator SCHEME --workers W ...` (docs/simulator.md)."""

import os
import sys

# One BLAS thread, set before NumPy loads: a minibatch's matrices are small,
# and several threads spinning on them took fifteen times the CPU of one.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from guide.training import flags  # noqa: E402
from simulator.cli import main  # noqa: E402

# The name the one-line errors start with.
sys.argv[0] = "python -m simulator"
sys.exit(flags.run_main(main))
