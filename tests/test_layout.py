"""The repository's layout: the top level shows the examples, the README is
a front page, links between the pages hold, and no tracked file names a
folder of the machine it was written on."""

import glob
import os
import re
import subprocess
import tempfile

import pytest

from conftest import REPO
from guide import examples

FRONT_PAGE_LINES = 150
# An example's README says how to run, read and copy it; tuning history and
# long measurements go to docs/ and benchmarks/, and 160 lines keep them there.
EXAMPLE_README_LINES = 160
# Citations of the Hogwild paper name its four authors in their order (Niu,
# Recht, Ré and Wright), not one of them and "et al.".
SHORT_HOGWILD_CITATION = re.compile(r"\b(?:Recht|Niu)\s+et\s+al\b")
# The home folders of root, of a Linux user and of a macOS user, and
# pytest's temporary folders, not inside a longer path or a URL. Written,
# as the samples below are, so that this file does not match them.
HOME_FOLDERS = re.compile(r"(?<![\w.:/-])/(?:root|home/[^/\s]+|Users/[^/\s]+)/")
PYTEST_TMP = re.compile(r"/tmp/pytest[-]of-")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def tracked_files():
    """The paths, relative to the top, of every file git tracks here."""
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=REPO,
                                 capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout: {error}")
    return [path for path in listing.stdout.decode().split("\0")
            if path and os.path.isfile(os.path.join(REPO, path))]


def tracked_text():
    """{path: text} of every tracked file that is not binary."""
    texts = {}
    for path in tracked_files():
        with open(os.path.join(REPO, path), "rb") as stream:
            data = stream.read()
        if b"\0" not in data[:8192]:
            texts[path] = data.decode("utf-8", "replace")
    return texts


def machine_folders():
    """This checkout's own folders, as they would appear in a file written
    here: the repository, its parent, the home folder. A parent or home
    that is a shared folder everyone has (/, /tmp) says nothing about this
    machine, so is left out."""
    shared = {os.sep, "/tmp", "/var/tmp",
              os.path.realpath(tempfile.gettempdir())}
    folders = {REPO, os.path.realpath(REPO)}
    for folder in (os.path.dirname(REPO), os.path.expanduser("~")):
        if os.path.realpath(folder) not in shared:
            folders |= {folder, os.path.realpath(folder)}
    return sorted(folder.rstrip(os.sep) + os.sep for folder in folders)


def test_no_tracked_file_names_a_folder_of_this_machine():
    found = []
    folders = machine_folders()
    for path, text in tracked_text().items():
        for number, line in enumerate(text.splitlines(), 1):
            if any(folder in line for folder in folders) or \
                    HOME_FOLDERS.search(line) or PYTEST_TMP.search(line):
                found.append(f"{path}:{number}: {line.strip()[:120]}")
    assert not found, ("absolute paths of a machine; show paths a reader "
                       "would have (Hogwild/runs/..., ~/data/mnist):\n"
                       + "\n".join(found))


def test_the_checks_see_what_they_look_for():
    """The patterns above match what they are for, and not a URL."""
    home, mac_home, root = (os.path.join(os.sep, *parts) for parts in (
        ("home", "alice"), ("Users", "bob"), ("root", ".keras")))
    assert HOME_FOLDERS.search(f"logs in {home}/guide/Hogwild/runs")
    assert HOME_FOLDERS.search(f"cd {mac_home}/x && ls {root}")
    assert not HOME_FOLDERS.search(f"https://example.com{home}/x")
    assert not HOME_FOLDERS.search("~/data/mnist Hogwild/runs/1 /tmp/tfjobs")
    assert PYTEST_TMP.search("/tmp/pytest" + "-of-root/pytest-3/run")
    assert REPO + os.sep in machine_folders()


def test_the_top_level_has_no_launcher_modules():
    """The launcher is the package launcher/, run by launch.sh."""
    assert not glob.glob("launch*.py", root_dir=REPO)
    assert os.path.isfile(os.path.join(REPO, "launcher", "__main__.py"))
    assert os.path.isfile(os.path.join(REPO, "launch.sh"))


def test_the_readme_is_a_front_page():
    with open(os.path.join(REPO, "README.md")) as stream:
        lines = stream.read().splitlines()
    assert len(lines) <= FRONT_PAGE_LINES, \
        f"README.md has {len(lines)} lines; move the rest to docs/"


def example_readmes():
    """The README.md of every example folder: the top-level folders named
    with a capital, as the examples are (the rest are lower case)."""
    folders = sorted(name for name in os.listdir(REPO) if name[:1].isupper()
                     and os.path.isfile(os.path.join(REPO, name, "README.md")))
    # The check must see every example the registry knows, or it checks nothing.
    assert set(examples.BY_FOLDER) <= set(folders), folders
    return [os.path.join(name, "README.md") for name in folders]


def test_every_example_readme_is_short():
    too_long = []
    for path in example_readmes():
        with open(os.path.join(REPO, path)) as stream:
            length = len(stream.read().splitlines())
        if length > EXAMPLE_README_LINES:
            too_long.append(f"{path} has {length} lines")
    assert not too_long, (
        f"example READMEs of more than {EXAMPLE_README_LINES} lines; move "
        "tuning history and long measurements to docs/tuning.md, docs/ or "
        "benchmarks/:\n" + "\n".join(too_long))


def sources():
    """The relative path of every *.md and *.py file, outside hidden folders
    (.venv, .git) and the runs/ folders that runs leave."""
    for top, folders, files in os.walk(REPO):
        folders[:] = [name for name in folders
                      if not name.startswith(".") and name != "runs"]
        for name in files:
            if name.endswith((".md", ".py")):
                yield os.path.relpath(os.path.join(top, name), REPO)


def test_the_hogwild_paper_is_cited_by_its_four_authors():
    found = []
    for path in sources():
        with open(os.path.join(REPO, path), encoding="utf-8",
                  errors="replace") as stream:
            text = stream.read()
        for match in SHORT_HOGWILD_CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path}:{line}: {match.group(0)}")
    assert not found, ("cite the Hogwild paper as Niu, Recht, Ré and Wright, "
                       "NIPS 2011:\n" + "\n".join(found))


def test_the_citation_check_sees_what_it_looks_for():
    """Written so that this file does not match itself."""
    assert SHORT_HOGWILD_CITATION.search("(Recht" + " et al., NIPS 2011)")
    assert SHORT_HOGWILD_CITATION.search("Niu" + " et\nal. showed")
    assert not SHORT_HOGWILD_CITATION.search("Niu, Recht, Ré and Wright")
    assert "tests/test_layout.py" in set(sources())
    assert not any(path.startswith(".") or "runs" in path.split(os.sep)
                   for path in sources())


def anchors(text):
    """The anchors GitHub gives a Markdown page's headings."""
    found, fenced = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line.lstrip("#").strip())
            found.add(re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-"))
    return found


def test_links_between_the_pages_hold():
    """Every relative link in a tracked Markdown file names a file that
    exists and, into a Markdown page, a heading it has."""
    texts = tracked_text()
    broken = []
    for path in (path for path in texts if path.endswith(".md")):
        for target in LINK.findall(texts[path]):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            file_part, _, anchor = target.partition("#")
            linked = os.path.normpath(os.path.join(os.path.dirname(path),
                                                   file_part)) if file_part else path
            if not os.path.exists(os.path.join(REPO, linked)):
                broken.append(f"{path}: {target}")
            elif anchor and linked.endswith(".md") and \
                    anchor not in anchors(texts.get(linked, "")):
                broken.append(f"{path}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
