"""How benchmarks/README.md rounds and lists its figures, for the quotes of
bench_network.py and bench_synthetic.py: a figure the reports' tables show
is quoted as they show it; one the page works out from them is rounded as a
decimal, halves up."""

import decimal

from guide import examples

from ..docs import results

DOC = "benchmarks/README.md"
FAST_LINK = "1gbit"
EVERY_STEP, SYNC = (examples.EVERY_STEP,), (examples.SYNC,)
WINDOW, SYNC_WINDOW = (examples.WINDOW,), (examples.SYNC_WINDOW,)
MIRRORED = "Multi-Worker-Mirrored-Strategy"
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six",
         7: "seven", 8: "eight", 9: "nine", 10: "ten"}
TIMES = {1: "as much as", 2: "twice", 3: "three times"}


# How the page rounds and lists.

def rounded(value, digits=0):
    """`value` to `digits` decimals (negative: to tens, hundreds...), halves
    up, thousands separated: the stored figures are decimals, and the page
    rounds them as decimals (a median of 4.35 s is 4.4 s)."""
    exact = decimal.Decimal(str(value)).scaleb(digits).quantize(
        decimal.Decimal(1), decimal.ROUND_HALF_UP).scaleb(-digits)
    return f"{exact:,.{max(digits, 0)}f}"


def spread(numbers, digits=0, dash=" to ", form=rounded):
    """'low to high', or one figure where both round alike."""
    low, high = (form(value, digits) for value in (min(numbers), max(numbers)))
    return low if low == high else f"{low}{dash}{high}"


def kilobytes(numbers):
    return spread([value / 1000 for value in numbers], 1, "–")


def beside_target(value, met, digits):
    """`value` to `digits` decimals, or more where those would put it on
    the other side of its target, `met` (a throughput of 0.795 where 0.8 is
    the target is not 0.80, nor a gap of 1.04 points 1.0 where 1 is)."""
    while met(float(rounded(value, digits).replace(",", ""))) != met(value):
        digits += 1
    return rounded(value, digits)


def listed(items):
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def machine(folder):
    """The cores and processor of a results folder's latest runs, as the
    results pages name them: '2 cores (Intel(R) Xeon(R) Processor)'."""
    return listed(sorted({f"{record['machine']['cores']} cores "
                          f"({record['machine']['cpu']})"
                          for record in results(folder).records}))


QUOTES = []
