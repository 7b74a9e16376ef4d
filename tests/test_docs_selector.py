"""``docs/writing-a-selector.md`` shows what the commands print: every ``$ command`` of the page
is run from the repository root and its output (stdout and stderr) compared with the lines shown
under it, where a line ending in ``...`` matches any line that starts the same way and a line
``...`` alone any number of lines. The page's Python blocks run too."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import clusterkit as ck

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "writing-a-selector.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(PAGE.read_text()) if lang == language]


def commands() -> list[tuple[str, list[str]]]:
    """``(command, shown output lines)`` for every ``$`` line of the page's plain blocks."""
    out: list[tuple[str, list[str]]] = []
    for body in blocks(""):
        for line in body.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
    return out


def matches(shown: list[str], actual: list[str]) -> bool:
    """Does ``actual`` fit ``shown`` with its ``...`` elisions?"""

    @functools.lru_cache(maxsize=None)
    def fit(i: int, j: int) -> bool:
        if i == len(shown):
            return j == len(actual)
        line = shown[i]
        if line == "...":
            return any(fit(i + 1, k) for k in range(j, len(actual) + 1))
        if j == len(actual):
            return False
        same = (actual[j].startswith(line[:-3]) if line.endswith("...")
                else actual[j] == line)
        return same and fit(i + 1, j + 1)

    return fit(0, 0)


def test_the_matcher_elides_only_what_it_says():
    assert matches(["a ...", "...", "z"], ["a b", "x", "y", "z"])
    assert not matches(["a ...", "z"], ["a b", "x", "z"])
    assert not matches(["a"], ["a", "b"])


def test_the_page_is_linked_from_the_readme_first_screen():
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    assert "docs/writing-a-selector.md" in first_screen
    assert len(commands()) >= 4 and all(shown for _, shown in commands())


@pytest.mark.parametrize("command, shown", [pytest.param(c, s, id=c[11:70]) for c, s in commands()])
def test_each_command_prints_what_the_page_shows(command, shown):
    argv = shlex.split(command)
    assert argv[0] == "clusterkit"
    res = subprocess.run([sys.executable, "-m", "clusterkit", *argv[1:]], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=300)
    assert matches(shown, res.stdout.splitlines()), res.stdout


def test_the_python_blocks_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    limits, capped, suite = blocks("python")
    names: dict = {"ck": ck}
    exec(limits, names)
    assert (names["MyNpu"].max_nodes, names["MyNpu"].max_const_bytes) == (64, 8 << 20)
    exec(capped, names)
    graph = ck.load_graph(str(ROOT / "tests" / "data" / "models" / "resnet18.onnx"))
    prop = names["CappedNpu"]()
    assert prop.create_subgraph_node(ck.Subgraph.from_nodes(graph, list(range(41)), "acc", 0)) \
        is None
    assert prop.create_subgraph_node(ck.Subgraph.from_nodes(graph, [32, 33], "acc", 0)) \
        is not None
    exec(suite, names)
    names["test_the_npu_selector_conforms"]()
    for rule, check in names["CHECKS"]:
        names["test_each_rule"](rule, check)
