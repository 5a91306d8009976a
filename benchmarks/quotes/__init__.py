"""Every figure the docs quote in their prose from the stored results: the
page, the text as it reads there with the figures as fields, and how each
field is computed from a results folder (benchmarks/results/FOLDER). `python
-m benchmarks docs --check`, and a test, compute every quote from
runs.jsonl and look for it in its page, whitespace aside.

A figure a page quotes from a run that is not stored is not quoted: the
page says what it is, or leaves it out. Tables are generated blocks
instead (benchmarks/docs.py).
"""

import dataclasses
import importlib
import pkgutil


@dataclasses.dataclass(frozen=True)
class Quote:
    doc: str          # the page, from the repository's top
    text: str         # as the page reads, each figure a {field}
    figures: object   # () -> {field: text}, from the stored results

    def render(self):
        return self.text.format(**self.figures())


def collected():
    """The QUOTES of every module in this package, one per page or part."""
    quotes = []
    for module in pkgutil.iter_modules(__path__):
        quotes += importlib.import_module(f"{__name__}.{module.name}").QUOTES
    return quotes


QUOTES = collected()
