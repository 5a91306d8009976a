"""What the quotes share: the stored results, their rows, and the ways a
page rounds a figure."""

from guide import examples

from ..docs import results
from ..reports import network

QUOTES = []
KIND = {example.name: example.kind for example in examples.EXAMPLES}
PER_MINIBATCH = (examples.EVERY_STEP, examples.SYNC)


def network_rows():
    return network.rows_of(results("network").records)[0]


def pick(rows, *, kinds=None, schemes=None, **where):
    """The rows of those kinds or schemes with every value in `where`."""
    return [row for row in rows
            if (kinds is None or KIND[row["scheme"]] in kinds)
            and (schemes is None or row["scheme"] in schemes)
            and all(row.get(key) == value for key, value in where.items())]


def values(rows, key):
    return [row[key] for row in rows if row.get(key) is not None]


def span(numbers, digits=0, unit=""):
    """'low to high', rounded as the page rounds them."""
    low, high = min(numbers), max(numbers)
    shown = [f"{value:,.{digits}f}" for value in (low, high)]
    return shown[0] + unit if shown[0] == shown[1] else \
        f"{shown[0]}{unit} to {shown[1]}{unit}"


def kb(value):
    return f"{value / 1000:.1f}"


def number(value, digits=0):
    return f"{value:,.{digits}f}"
