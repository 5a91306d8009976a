"""The docs' figures against the stored results: every generated block is
what its results give, every quote in the prose is found in its page, and
a changed figure is caught."""

import os
import re

import pytest

from benchmarks import docs, quotes
from benchmarks.errors import UsageError
from conftest import REPO
from guide import examples


def test_every_generated_block_is_what_the_results_give():
    assert docs.stale_blocks() == []


def test_every_quoted_figure_is_what_the_results_give():
    assert docs.wrong_quotes() == []


def test_every_example_opens_its_mnist_section_with_a_generated_paragraph():
    found = {doc for doc, spec in docs.blocks() if spec.startswith("mnist example")}
    expected = {os.path.join(example.folder, "README.md")
                for example in examples.BY_FOLDER.values()
                if example.hooks and example.cluster}
    assert expected <= found


def test_a_changed_figure_is_caught(monkeypatch):
    doc = "Hogwild/README.md"
    with open(os.path.join(REPO, doc), encoding="utf-8") as stream:
        text = stream.read()
    tampered = text.replace("**0.97", "**0.96", 1)
    assert tampered != text and docs.refreshed(doc, tampered) == text
    moved = quotes.Quote("README.md", "about {kb} KB per example",
                         lambda: {"kb": "9.9"})
    monkeypatch.setattr(quotes, "QUOTES", [moved])
    assert docs.wrong_quotes() == [("README.md", "about 9.9 KB per example")]


@pytest.mark.parametrize("spec, message", [
    ("mnist", "needs a results folder and a snippet"),
    ("mnist example", "the snippet 'example' takes 1 argument(s), not 0"),
    ("mnist nope", "no snippet 'nope' for benchmarks/results/mnist; its snippets: "
                   "table, short, example"),
])
def test_a_malformed_block_is_named_with_the_fix(spec, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        docs.generate(spec, "README.md")


def test_a_quote_that_cannot_be_computed_names_its_module(monkeypatch):
    broken = quotes.Quote("README.md", "{x}", lambda: {}[0])
    monkeypatch.setattr(quotes, "QUOTES", [broken])
    [(doc, said)] = docs.wrong_quotes()
    assert doc == "README.md" and "test_benchmark_docs.py: cannot" in said
    assert "cannot be computed from the results: KeyError(0)" in said
