"""docs/sample-output.md's figure: which MNIST run its output comes from."""

from . import Quote
from .real_data import MAIN, dates

DOC = "docs/sample-output.md"

QUOTES = [
    Quote(DOC, "What each example printed in the MNIST benchmark run of {date}",
          lambda: {"date": dates(MAIN)}),
]
