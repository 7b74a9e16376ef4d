"""The habits of a well-kept library: the licence the package declares, the version stated once,
the design page the docstrings cite, and recipe files whose paths and names exist."""

from __future__ import annotations

import ast
import re

import pytest

import clusterkit
from support.models import REPO

tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def test_the_license_is_the_apache_text_pyproject_declares():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert meta["license"] == {"text": "Apache-2.0"}
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    sections = re.findall(r"^\s+(\d)\. [A-Z]", text, re.M)
    assert sections == [str(k) for k in range(1, 10)]
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_version_is_stated_once():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "clusterkit.__version__"}
    stated = [p for p in REPO.joinpath("clusterkit").rglob("*.py")
              if re.search(r"^__version__\s*=", p.read_text(), re.M)]
    assert stated == [REPO / "clusterkit" / "__init__.py"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", clusterkit.__version__)
    from importlib import metadata

    assert metadata.version("clusterkit") == clusterkit.__version__  # what pip installed


def test_py_typed_is_package_data():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert (REPO / "clusterkit" / "py.typed").exists()
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["clusterkit"]


def _sources():
    for folder in ("clusterkit", "selectors", "tests", "benchmarks", "examples"):
        yield from (REPO / folder).rglob("*.py")


def test_docstrings_cite_only_pages_that_exist():
    cited = set()
    for path in _sources():
        text = path.read_text()
        assert not re.search(r"(?<![/\w])DESIGN\.md", text) or path.name == "test_habits.py", \
            f"{path} cites a DESIGN.md the repository does not have"
        cited |= set(re.findall(r"\bdocs/[\w./-]+\.md", text))
    assert "docs/design.md" in cited
    assert all((REPO / page).exists() for page in cited), cited


def _backticked(text: str) -> set[str]:
    return set(re.findall(r"`([^`\s]+)`", text))


def test_contributing_names_files_and_names_that_exist():
    """Every path the recipes name exists, and every ``file.py: NAME`` is defined there."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    paths = {p.rstrip("/") for p in _backticked(text)
             if re.match(r"(clusterkit|selectors|tests|docs|benchmarks)/", p) and "NAME" not in p}
    assert len(paths) > 20
    missing = sorted(p for p in paths if not list(REPO.glob(p)))
    assert not missing, missing
    for path, name in re.findall(r"`([\w/]+\.py): (\w+)`", text):
        assert re.search(rf"^\s*(def |class )?{name}\b", (REPO / path).read_text(), re.M), \
            (path, name)
    for recipe in ("a new strategy", "a new shipped selector", "a new constraint kind"):
        assert f"## Recipe: {recipe}" in text


def _reads_limits(path) -> bool:
    """Whether a module reads a problem's ``limits`` (an attribute access, not a word)."""
    tree = ast.parse(path.read_text())
    return any(isinstance(n, ast.Attribute) and n.attr == "limits" for n in ast.walk(tree))


def test_the_constraint_recipe_names_where_the_limits_are_read():
    """Step 4 of the constraint recipe lists the modules that read ``problem.limits``: each one
    that does is named in the recipe, and step 4 names none that does not (beside the three
    homes of a limit)."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    recipe = text.split("## Recipe: a new constraint kind")[1].split("\n## ")[0]
    step4 = recipe.split("\n4. ")[1].split("\n5. ")[0]
    named = set(re.findall(r"clusterkit/[\w/]+\.py", recipe))
    readers = {str(p.relative_to(REPO)) for p in (REPO / "clusterkit").rglob("*.py")
               if _reads_limits(p)}
    assert len(readers) > 15
    assert not readers - named, sorted(readers - named)
    homes = {"clusterkit/constraints/limits.py", "clusterkit/constraints/acceptance.py",
             "clusterkit/passes/acceptable.py"}
    assert homes <= set(re.findall(r"clusterkit/[\w/]+\.py", step4))
    idle = set(re.findall(r"clusterkit/[\w/]+\.py", step4)) - readers - homes
    assert not idle, sorted(idle)


def test_the_changelog_holds_the_renamed_names_the_readme_no_longer_does():
    changelog = (REPO / "CHANGELOG.md").read_text()
    readme = (REPO / "README.md").read_text()
    assert "| before | now |" in changelog and "| before | now |" not in readme
    assert "`clusterkit.onnx_io`" in changelog and "CHANGELOG.md" in readme


def test_the_glossary_gives_one_word_per_concept():
    text = (REPO / "docs" / "glossary.md").read_text()
    words = re.findall(r"^\| \*\*([\w ._-]+)\*\* \|", text, re.M)
    assert len(words) == len(set(words)) >= 10
    for word in ("cluster", "partition", "group", "super-node", "step", "selector"):
        assert word in words
    # what was renamed is history: the changelog's, never the glossary's
    assert "renamed:" not in text.lower() and "renamed from" not in text.lower()


def test_the_code_and_docs_follow_the_glossary_for_offloaded_clusters():
    """The glossary's word is "offloaded cluster": no "accelerator cluster" in the package,
    the selectors, the docs or the README (the glossary names it once, to refuse it)."""
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *(REPO / "docs").glob("*.md"),
             *(REPO / "clusterkit").rglob("*.py"), *(REPO / "selectors").rglob("*.py")]
    said = [p.name for p in pages if p.name != "glossary.md"
            and re.search(r"accelerator\s+clusters?\b", p.read_text(), re.I)]
    assert not said, said
    assert "offloaded cluster" in (REPO / "docs" / "glossary.md").read_text()


def test_the_docs_name_no_commits():
    """README.md and docs/*.md describe what the tool does today: no commit hashes (a word of 7
    to 12, or 40, lowercase hex digits with a digit and a letter) and no "at commit"; history is
    in CHANGELOG.md and benchmarks/HISTORY.md."""
    commit = re.compile(r"(?<![\w./-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])"
                        r"(?:[0-9a-f]{7,12}|[0-9a-f]{40})(?![\w/-])")
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text()
        found = commit.findall(text) + re.findall(r"\b(?:at|of) commit\b", text)
        assert not found, f"{page.name}: {found}"
    assert commit.findall("measured at e274af8 and 1cfa77b.") == ["e274af8", "1cfa77b"]
    assert commit.findall("c9fe879" + "0" * 33) == ["c9fe879" + "0" * 33]
    assert not commit.findall("cut_bytes 1,509,280, deadbeef, 12345678, 0.000543817, abc12")
