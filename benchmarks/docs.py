"""The docs' figures, from the stored results.

    python -m benchmarks docs           # rewrite every generated block
    python -m benchmarks docs --check   # exit 1 if a block or a quote is stale

Two ways a page takes its figures from a results folder:

- a generated block, between `<!-- benchmarks: FOLDER SNIPPET [ARG] -->`
  and `<!-- /benchmarks -->`, which this rewrites from the folder's
  runs.jsonl (FOLDER is under benchmarks/results; the snippets are the
  reports' `snippets`);
- a quote in the prose, listed in a module of quotes/ with the results it
  comes from and how it is computed; --check recomputes each and looks for
  it in its page.

The snippets: `mnist table`, `mnist short`, `mnist example NAME` (any
folder of the `mnist` suite), `synthetic table` (the main table of any
`compare` folder), `steps table BATCH`.
"""

import os
import re
import subprocess

from . import store
from .errors import UsageError
from .reports import KINDS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "results")
BLOCK = re.compile(r"(<!-- benchmarks: (?P<spec>[^>]*?) -->\n)(?P<body>.*?)"
                   r"(<!-- /benchmarks -->)", re.S)


class Results:
    """A results folder's latest code version: its records, and helpers
    to pick runs and figures from them."""

    def __init__(self, folder):
        self.folder = folder
        path = os.path.join(RESULTS, folder)
        records = store.read(path)
        if not records:
            raise UsageError(f"benchmarks/results/{folder} holds no runs.jsonl")
        self.kind = KINDS[records[0]["report"]]
        # A suite of many hours: each run's newest record, whatever its code.
        if getattr(self.kind, "SPANS_CODE", False):
            self.records = store.newest(records)
        else:
            self.records = next(iter(store.latest(records).values()))

    def runs(self, scheme=None, **where):
        """The successful records of `scheme` whose run has every setting
        in `where`."""
        return [record for record in self.records if record["status"] == "ok"
                and (scheme is None or record["run"].get("scheme") == scheme)
                and all(record["run"].get(key) == value
                        for key, value in where.items())]

    def measure(self, scheme, key, **where):
        """One run's figure; UsageError unless exactly one run matches."""
        matched = self.runs(scheme, **where)
        if len(matched) != 1:
            raise UsageError(f"{self.folder}: {len(matched)} runs of {scheme} "
                             f"with {where}, not one")
        return matched[0]["measures"].get(key)


_cache = {}


def results(folder):
    if folder not in _cache:
        _cache[folder] = Results(folder)
    return _cache[folder]


def link_from(doc):
    """A function turning a repository path into a link from `doc`."""
    base = os.path.dirname(doc)
    return lambda path: os.path.relpath(path, base or ".")


def generate(spec, doc):
    """The body of the block `spec` in `doc` (a path from the repository)."""
    parts = spec.split()
    if len(parts) < 2:
        raise UsageError(f"{doc}: the block '{spec}' needs a results folder and a "
                         f"snippet, as in '<!-- benchmarks: mnist table -->'")
    folder, snippet, args = parts[0], parts[1], parts[2:]
    source = results(folder)
    if snippet not in source.kind.SNIPPETS:
        raise UsageError(f"{doc}: no snippet {snippet!r} for benchmarks/results/"
                         f"{folder}; its snippets: "
                         f"{', '.join(source.kind.SNIPPETS) or 'none'}")
    if len(args) != source.kind.SNIPPETS[snippet]:
        raise UsageError(f"{doc}: the snippet {snippet!r} takes "
                         f"{source.kind.SNIPPETS[snippet]} argument(s), not "
                         f"{len(args)}")
    text = source.kind.snippet(snippet, args, source, link_from(doc))
    return text.rstrip("\n") + "\n"


def markdown_files():
    listed = subprocess.run(["git", "-C", REPO, "ls-files", "*.md"],
                            capture_output=True, text=True, check=True,
                            timeout=60).stdout.split()
    return [path for path in listed if os.path.exists(os.path.join(REPO, path))]


def pages():
    """(page, its text) of every tracked markdown file."""
    for doc in markdown_files():
        with open(os.path.join(REPO, doc), encoding="utf-8") as stream:
            yield doc, stream.read()


def refreshed(doc, text):
    """`text` with every block regenerated."""
    return BLOCK.sub(lambda match: match[1] + generate(match["spec"], doc)
                     + match[4], text)


def stale_blocks():
    """[(doc, spec)] of every block whose body is not what it generates."""
    stale = []
    for doc, text in pages():
        for match in BLOCK.finditer(text):
            if match["body"] != generate(match["spec"], doc):
                stale.append((doc, match["spec"]))
    return stale


def blocks():
    """[(doc, spec)] of every block."""
    return [(doc, match["spec"]) for doc, text in pages()
            for match in BLOCK.finditer(text)]


def flat(text):
    return " ".join(text.split())


def wrong_quotes():
    """[(doc, expected text)] of every quote not found in its page."""
    from . import quotes

    pages, wrong = {}, []
    for quote in quotes.QUOTES:
        if quote.doc not in pages:
            with open(os.path.join(REPO, quote.doc), encoding="utf-8") as stream:
                pages[quote.doc] = flat(stream.read())
        where = getattr(quote.figures, "__module__", "?").replace(".", "/")
        try:
            expected = quote.render()
        except (ArithmeticError, LookupError, TypeError, ValueError,
                UsageError) as error:
            wrong.append((quote.doc, f"{quote.text} (from {where}.py: cannot be "
                                     f"computed from the results: {error!r})"))
            continue
        if flat(expected) not in pages[quote.doc]:
            wrong.append((quote.doc, expected))
    return wrong


def main(check):
    if check:
        problems = [f"{doc}: block '{spec}' is not what the results give; run "
                    f"python -m benchmarks docs" for doc, spec in stale_blocks()]
        problems += [f"{doc}: does not quote '{text}' as the results give it"
                     for doc, text in wrong_quotes()]
        for line in problems:
            print(line)
        if not problems:
            from . import quotes
            print(f"{len(blocks())} generated blocks and {len(quotes.QUOTES)} "
                  f"quotes, every one as the results give it")
        return 1 if problems else 0
    changed = []
    for doc, text in pages():
        new = refreshed(doc, text)
        if new != text:
            with open(os.path.join(REPO, doc), "w", encoding="utf-8") as stream:
                stream.write(new)
            changed.append(doc)
    print(f"{len(changed)} pages rewritten" + (f": {', '.join(changed)}"
                                               if changed else ""))
    return 0
