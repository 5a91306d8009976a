"""The teaching promise, checked: every line an example adds to the baseline
is in a block marked `# Distributed: <what it does for the cluster>`.

A marker is a comment line of its own, `# Distributed: ` and a short
sentence, which may go on over one more comment line (the why belongs in
the example's README), above a statement, never inside an argument list.
It covers its paragraph: the
lines below it up to the first blank line, the next comment at the marker's
own depth, or a line less indented than the marker. The diff ignores
indentation, so a block that moved into a `with` is not an addition.
"""

import ast
import difflib
import io
import os
import re
import tokenize

import pytest

from conftest import REPO
from guide import examples

BASELINE = os.path.join(REPO, "Non-Distributed_Setup.py")
SCRIPTS = sorted({example.script_path for example in examples.EXAMPLES
                  if example.folder})
MARKER = re.compile(r"^(\s*)# Distributed:(.*)$")
ANY_MARKER = re.compile(r"(?<!`)#\s*Distributed:")  # not in a docstring's `code`
# Section headings in the order every script uses them; the baseline has
# all but the cluster.
SECTIONS = ["The cluster", "The data", "The graph", "Train", "Evaluate and report"]
HEADING = re.compile(r"^\s*# --- (.+?) ---$")
MAX_MARKER_LINES = 2


def read_lines(path):
    with open(path) as stream:
        return stream.read().splitlines()


def code_start(lines):
    """Index of the first line after the docstring, sys.path and imports:
    those differ by the script's place, not by what it teaches."""
    tree = ast.parse("\n".join(lines))
    for node in tree.body:
        if not isinstance(node, (ast.Expr, ast.Import, ast.ImportFrom)):
            start = node.lineno - 1
            while start > 0 and lines[start - 1].lstrip().startswith(("@", "#")):
                start -= 1
            return start
    return len(lines)


def indent(line):
    return len(line) - len(line.lstrip())


def marked_lines(lines):
    """Indices of the lines that some marker covers (the marker included)."""
    covered = set()
    for number, line in enumerate(lines):
        match = MARKER.match(line)
        if not match:
            continue
        depth = len(match.group(1))
        covered.add(number)
        follow = number + 1
        # The marker's sentence may go on over the comment lines below it.
        while follow < len(lines) and lines[follow].strip().startswith("#") \
                and indent(lines[follow]) == depth \
                and not HEADING.match(lines[follow]) \
                and not MARKER.match(lines[follow]):
            covered.add(follow)
            follow += 1
        for below in range(follow, len(lines)):
            text = lines[below]
            if not text.strip() or indent(text) < depth or (
                    indent(text) == depth and text.lstrip().startswith("#")):
                break
            covered.add(below)
    return covered


def added_lines(script_lines):
    """Indices of the script's code lines that the baseline does not have,
    compared without indentation from the end of the imports on."""
    base = read_lines(BASELINE)
    base = [line.strip() for line in base[code_start(base):]]
    start = code_start(script_lines)
    ours = [line.strip() for line in script_lines[start:]]
    matcher = difflib.SequenceMatcher(None, base, ours, autojunk=False)
    added = []
    for tag, _, _, first, last in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            added.extend(start + index for index in range(first, last)
                         if ours[index] and not ours[index].startswith("#"))
    return added


def test_every_script_is_checked():
    assert len(SCRIPTS) >= 14, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS + ["Non-Distributed_Setup.py"])
def test_markers_are_sentences_on_their_own_line(script):
    lines = read_lines(os.path.join(REPO, script))
    problems = []
    for number, line in enumerate(lines, 1):
        if not ANY_MARKER.search(line):
            continue
        match = MARKER.match(line)
        if not match:
            problems.append(f"{script}:{number}: a marker goes on a line of "
                            f"its own, above what it marks: {line.strip()}")
            continue
        sentence = [match.group(2).strip()]
        for following in lines[number:]:
            if not following.strip().startswith("#") or MARKER.match(following):
                break
            sentence.append(following.strip().lstrip("#").strip())
        text = " ".join(sentence)
        if len(text.split()) < 4 or not text.endswith((".", ")")):
            problems.append(f"{script}:{number}: say what the marked code "
                            f"does for the cluster, as a sentence: "
                            f"{line.strip()}")
        if len(sentence) > MAX_MARKER_LINES:
            problems.append(f"{script}:{number}: a marker is one line, two at "
                            f"most; the why goes to the README: {line.strip()}")
    assert not problems, "\n".join(problems)


def comments_inside_brackets(source):
    """Line numbers of comments that stand inside (), [] or {}."""
    depth, found = 0, []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.COMMENT and depth > 0:
            found.append(token.start[0])
    return found


@pytest.mark.parametrize("script", SCRIPTS + ["Non-Distributed_Setup.py"])
def test_no_marker_inside_an_argument_list(script):
    with open(os.path.join(REPO, script)) as stream:
        source = stream.read()
    lines = source.splitlines()
    inside = [f"{script}:{number}: {lines[number - 1].strip()}"
              for number in comments_inside_brackets(source)
              if ANY_MARKER.search(lines[number - 1])]
    assert not inside, ("a marker stands above the statement it marks, not "
                        "inside its argument list:\n" + "\n".join(inside))


@pytest.mark.parametrize("script", SCRIPTS)
def test_what_a_script_adds_to_the_baseline_is_marked(script):
    lines = read_lines(os.path.join(REPO, script))
    covered = marked_lines(lines)
    unmarked = [f"{script}:{index + 1}: {lines[index].strip()}"
                for index in added_lines(lines) if index not in covered]
    assert not unmarked, ("lines the baseline does not have, with no "
                          "# Distributed: marker above them:\n" +
                          "\n".join(unmarked))


@pytest.mark.parametrize("script", SCRIPTS + ["Non-Distributed_Setup.py"])
def test_sections_come_in_the_baselines_order(script):
    titles = [re.split(r"[:(]", match.group(1))[0].strip()
              for match in map(HEADING.match, read_lines(os.path.join(REPO, script)))
              if match]
    assert titles and all(title in SECTIONS for title in titles), titles
    order = [SECTIONS.index(title) for title in titles]
    assert order == sorted(order), titles
