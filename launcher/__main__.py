"""`python -m launcher [OPTIONS] -- SCRIPT [FLAGS...]`: see job.py."""

import sys

from .job import main

sys.exit(main(sys.argv[1:]))
