"""``docs/writing-a-selector.md``: its Python blocks run and do what the page says, and the page is
linked from the README's first screen. Its ``$ clusterkit ...`` commands are run and compared
with the page by ``tests/test_readme.py``, as every docs page's."""

from __future__ import annotations

import re
from pathlib import Path

import clusterkit as ck

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "writing-a-selector.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(PAGE.read_text()) if lang == language]


def test_the_page_is_linked_from_the_readme_first_screen():
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    assert "docs/writing-a-selector.md" in first_screen
    assert sum(line.startswith("$ clusterkit ") for line in PAGE.read_text().splitlines()) >= 4


def test_the_python_blocks_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    limits, policy, capped, suite = blocks("python")
    names: dict = {"ck": ck}
    exec(limits, names)
    assert (names["MyNpu"].max_nodes, names["MyNpu"].max_const_bytes) == (64, 8 << 20)
    exec(policy, names)
    assert names["MyNpu"].computes_value_inputs is True
    assert ck.SubgraphProperty.computes_value_inputs is False
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
