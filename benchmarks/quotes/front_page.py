"""README.md's figures beyond what the network costs (readme.py): the test
accuracy every example reaches on MNIST with its defaults."""

import math

from ..docs import results
from . import Quote
from .real_data import MAIN

DOC = "README.md"


def accuracy():
    """The whole percents the final test accuracies lie between."""
    finals = [record["measures"]["test_accuracy"]
              for record in results(MAIN).records if record["status"] == "ok"]
    return {"low": math.floor(min(finals) * 100),
            "high": math.ceil(max(finals) * 100)}


QUOTES = [
    Quote(DOC, "Every example reaches {low}% to {high}% test accuracy on MNIST "
               "with its defaults", accuracy),
]
