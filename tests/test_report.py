"""Placement report (per device counts and op types, fallback reasons), DOT dumps, the CLI
summary, and every real model partitioned by both growth strategies."""

from __future__ import annotations

import collections
import json
import re

import networkx as nx
import pytest

import clusterkit as ck
from clusterkit.analysis.explain import explain_edge
from clusterkit.analysis.report import format_placement, get_placement
from clusterkit.cli import main as cli_main
from clusterkit.io.loader import load_graph
from clusterkit.result.dot import affinity_dot, dump_dot, subgraphs_dot
from clusterkit.result.reasons import Category
from clusterkit.result.report import placement_report
from clusterkit.selection.protocol import ContainOpSelector, SubgraphProperty
from support.models import ALL_MODELS, model_id


class _NotNamed(ContainOpSelector):
    """Takes ops A and B, except node 'refused'."""

    def select(self, node):
        return node.name != "refused" and super().select(node)

    def supported_mask(self, graph):
        return None


class _NotNamedProp(SubgraphProperty):
    def create_subgraph_selector(self):
        return _NotNamed(["A", "B"])


def reasons_graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for name, op in [("a", "A"), ("a2", "A"), ("refused", "A"), ("b", "B"), ("odd", "Z"),
                     ("c", "A"), ("lonely", "B")]:
        g.add_node(name, op=op)
    g.add_edges_from([("a", "a2"), ("a2", "refused"), ("refused", "b"), ("b", "odd"),
                      ("odd", "c"), ("c", "lonely")])
    return g


@pytest.mark.parametrize("strategy", ["hetero", "mxnet", "singleton"])
def test_reasons_for_each_category(strategy):
    cons = ck.Constraints(min_size=2, cut_edges=[("c", "lonely")])
    problem = ck.make_problem(reasons_graph(), [_NotNamedProp("acc")], constraints=cons)
    part = ck.run_strategy(problem, strategy)
    rep = placement_report(part) if strategy == "singleton" else part.placement()
    fell = {e["node"]: e["reason"] for e in rep["fallen_back"]}
    assert fell["odd"] == Category.OP_NOT_SUPPORTED        # no device takes op Z at all
    assert fell["refused"] == Category.SELECTOR_CONDITION  # other A nodes are taken
    assert fell["lonely"] == Category.CONSTRAINT           # supported, its cluster is too small
    assert rep["reasons_by_op"][Category.OP_NOT_SUPPORTED] == {"Z": 1}
    json.dumps(rep)
    total = sum(e["nodes"] for e in rep["devices"].values())
    assert total == problem.n and rep["devices"]["cpu"]["fallback"] is True


def mixed_reasons_graph() -> nx.DiGraph:
    """``reasons_graph`` plus ``pinned`` (op A, affinity to the fallback) after ``a2``."""
    g = reasons_graph()
    g.add_node("pinned", op="A", affinity="cpu")
    g.add_edge("a2", "pinned")
    return g


def expected_category(strategy: str, name: str, op: str) -> str:
    """The test's own rule: the device takes ops A and B except the node named ``refused``;
    ``pinned`` asks for the fallback (only hetero reads affinities); every other node that falls
    back is supported and kept off by min_size 2 (its cluster is alone or too small)."""
    if strategy == "hetero" and name == "pinned":
        return "manual affinity"
    if op not in ("A", "B"):
        return "op not supported"
    if name == "refused":
        return "selector condition"
    return "constraint"


@pytest.mark.parametrize("strategy", ck.strategy_names())
def test_every_strategy_reports_the_expected_category(strategy):
    cons = ck.Constraints(min_size=2, cut_edges=[("c", "lonely")])
    problem = ck.make_problem(mixed_reasons_graph(), [_NotNamedProp("acc")], constraints=cons)
    options = {"fill_affinity": True} if strategy == "hetero" else {}
    part = ck.run_strategy(problem, strategy, **options)
    rep = get_placement(part)
    fell = {e["node"]: e for e in rep["fallen_back"]}
    placed = dict(zip((nd.name for nd in problem.graph.nodes), part.device_of_nodes()))
    assert set(fell) == {k for k, dev in placed.items() if dev == "cpu"}
    must_fall = {"odd", "refused"} | ({"pinned"} if strategy == "hetero" else set())
    assert must_fall <= set(fell)
    for name, e in fell.items():
        assert e["reason"] == expected_category(strategy, name, e["op"]), (name, e)
        assert e["detail"]
    # b and c can share a convex cluster with no node but pinned, and not both with it (the
    # path b -> odd -> c): one of them falls back for min_size in any valid partition
    assert {"b", "c"} & set(fell)
    counted = collections.Counter(e["reason"] for e in fell.values())
    assert rep["reasons"] == dict(counted)
    json.dumps(rep)


def test_explain_gives_the_reason_the_engine_recorded():
    problem = ck.make_problem(mixed_reasons_graph(), ["acc=ops:A,B"])
    part = ck.run_strategy(problem, "hetero", fill_affinity=True)
    pinned = problem.graph.node("pinned").index
    assert part.fallback_reasons[pinned].category == Category.MANUAL_AFFINITY
    why = explain_edge(part, "a2", "pinned")
    assert "'pinned' is on the fallback 'cpu'" in why and "affinity 'cpu'" in why


def test_cycle_reason_when_a_rolled_back_node_falls_back():
    g = nx.DiGraph()
    for i in range(1, 8):
        g.add_node(str(i), op="B" if i == 4 else "A")
    g.add_edges_from((str(u), str(v)) for u, v in
                     [(1, 2), (2, 3), (2, 4), (3, 5), (4, 5), (5, 6), (6, 7)])
    problem = ck.make_problem(g, ["first=ops:A", "second=ops:A,B"],
                              constraints=ck.Constraints(min_size=3))
    part = ck.run_strategy(problem, "hetero")
    fell = {e["node"]: e for e in part.placement()["fallen_back"]}
    # {1, 2} and {4} are below min_size; node 2 was rolled back for a self-reference
    assert set(fell) == {"1", "2", "4"}
    assert fell["2"]["reason"] == Category.CYCLE and "self-reference" in fell["2"]["detail"]
    assert fell["1"]["reason"] == Category.CONSTRAINT and "min_size 3" in fell["1"]["detail"]
    assert fell["4"]["reason"] == Category.CONSTRAINT


def test_format_placement_lines():
    problem = ck.make_problem(reasons_graph(), [_NotNamedProp("acc")],
                              constraints=ck.Constraints(min_size=2, cut_edges=[("c", "lonely")]))
    text = format_placement(ck.run_strategy(problem, "hetero"))
    lines = text.splitlines()
    assert lines[0] == "placement:"
    assert "  acc: 2 nodes in 1 clusters — A 2" in lines
    assert lines[2] == "  cpu (fallback): 5 nodes in 5 clusters — A 2, B 2, Z 1"
    assert "fell back: 5 nodes" in text and "op not supported 1" in text
    assert "    op not supported: Z 1" in lines
    assert "      node 'odd' (Z, #4): no device supports Z" in lines


def test_manual_affinity_reason_and_dumps(tmp_path):
    problem = ck.make_problem(reasons_graph(), ["acc=ops:A,B"])
    part = ck.run_strategy(problem, "hetero", affinity=["a=cpu", "b=acc"], fill_affinity=True)
    fell = {e["node"]: e for e in part.placement()["fallen_back"]}
    assert fell["a"]["reason"] == Category.MANUAL_AFFINITY
    (tmp_path / "d").mkdir()
    paths = dump_dot(part, tmp_path / "d", "m")
    assert [p.rsplit("/", 1)[1] for p in paths] == ["m_affinity.dot", "m_subgraphs.dot"]
    aff = affinity_dot(part)
    sub = subgraphs_dot(part)
    for text in (aff, sub):
        assert text.count("{") == text.count("}")
        assert all(f"n{v} [" in text for v in range(problem.n))
        assert text.count(" -> ") == problem.graph.num_edges
    assert "affinity: cpu" in aff and "subgraph cluster_" in sub
    # a node whose placement differs from its affinity is marked
    g = reasons_graph()
    g.nodes["odd"]["affinity"] = "acc"
    part = ck.run_strategy(ck.make_problem(g, ["acc=ops:A,B"]), "hetero", fill_affinity=True)
    assert "affinity: acc\nplaced on cpu" in affinity_dot(part)


def test_cli_prints_generic_placement_for_other_strategies(tmp_path, capsys):
    model = tmp_path / "g.json"
    model.write_text(json.dumps(nx.node_link_data(reasons_graph(), edges="edges")))
    out = tmp_path / "out.json"
    assert cli_main(["partition", str(model), "--strategy", "singleton", "--selector",
                     "acc=ops:A", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["placement"]["fallen_back"]    # every strategy writes its placement block
    lines = text.splitlines()
    at = lines.index("placement:")
    # plain columns (stdout is not a terminal): the header, then one row per device
    assert re.split(r"\s{2,}", lines[at + 1]) == ["device", "nodes", "folded", "clusters",
                                                   "op types"]
    rows = {r[0]: r for r in (re.split(r"\s{2,}", line.strip()) for line in lines[at + 2:at + 4])}
    acc = [len(c["nodes"]) for c in doc["clusters"] if c["device"] == "acc"]
    assert rows["acc"] == ["acc", str(sum(acc)), "0", str(len(acc)), f"A {sum(acc)}"]
    assert rows["cpu (fallback)"][:2] == ["cpu (fallback)", "3"]
    fell = {e["node"]: e for e in doc["placement"]["fallen_back"]}
    assert f"fell back: {len(fell)} nodes" in text
    at = lines.index(next(line for line in lines if line.startswith("node ")))
    shown = [re.split(r"\s{2,}", line.strip(), maxsplit=4) for line in lines[at + 1:]]
    assert {r[0] for r in shown} == set(fell)
    for name, op, index, reason, detail in shown:
        e = fell[name]
        assert [op, int(index), reason, detail] == [e["op"], e["index"], e["reason"], e["detail"]]
    assert "\x1b" not in text


_GRAPHS: dict = {}


def _graph(path):
    if path not in _GRAPHS:
        _GRAPHS[path] = load_graph(path)
    return _GRAPHS[path]


@pytest.mark.parametrize("path", ALL_MODELS, ids=model_id)
def test_real_models_partition_validly_with_both_strategies(path):
    graph = _graph(path)
    top = [op for op, _ in collections.Counter(graph.op_types).most_common(2)]
    problem = ck.make_problem(graph, [f"npu=ops:{top[0]}", f"gpu=ops:{top[1]}"])
    sizes = {}
    for strategy in ("hetero", "mxnet"):
        part = ck.run_strategy(problem, strategy)      # validated
        rep = part.placement()
        assert sum(e["nodes"] for e in rep["devices"].values()) == graph.n
        assert rep["devices"]["npu"]["op_types"].keys() <= {top[0]}
        cpu = rep["devices"]["cpu"]
        assert len(rep["fallen_back"]) == cpu["nodes"] - cpu["folded"]  # folded: no fallback
        sizes[strategy] = part.metrics()["nodes_offloaded"]
        json.dumps(part.to_json())
    # both place every supported node at min_size 1
    assert sizes["hetero"] == sizes["mxnet"] == int(problem.any_supported.sum())


def test_placement_is_a_view_of_the_clusters():
    g = nx.DiGraph()
    for name, op in [("a0", "A"), ("a1", "A"), ("z", "Z"), ("b0", "A"), ("b1", "A")]:
        g.add_node(name, op=op)
    g.add_edges_from([("a0", "a1"), ("b0", "b1"), ("z", "b0")])
    problem = ck.make_problem(g, ["acc=ops:A"])
    part = ck.run_strategy(problem, "mxnet")
    assert part.placement()["devices"]["acc"]["clusters"] == 2
    acc = [c.nodes for c in part.clusters if c.device == "acc"]
    merged = ck.Partition.from_clusters(problem, [("acc", acc[0] + acc[1])] +
                                        [(c.device, c.nodes) for c in part.clusters
                                         if c.device != "acc"], info=dict(part.info))
    merged.validate()
    text = format_placement(merged)
    assert "acc: 4 nodes in 1 clusters" in text
    assert merged.placement()["devices"]["acc"]["clusters"] == 1
    assert merged.placement()["fallen_back"][0]["reason"] == Category.OP_NOT_SUPPORTED


def test_refused_gather_quotes_the_selector_explanation_on_bert_base():
    from support.models import BUNDLED_MODELS

    problem = ck.make_problem(BUNDLED_MODELS / "bert_base.onnx", ["nnapi"])
    part = ck.run_strategy(problem, "cycles")
    graph, prop = problem.graph, problem.properties[0]
    fell = {e["node"]: e for e in part.to_json()["placement"]["fallen_back"]}
    gathers = [nd for nd in graph.nodes if nd.op_type == "Gather" and nd.name in fell]
    assert gathers
    for nd in gathers:
        said = prop.explain(nd, graph)            # the selector's own words
        assert said and said.removeprefix(f"{prop.device}: ") in fell[nd.name]["detail"]
        assert f"{prop.device}: {prop.device}:" not in fell[nd.name]["detail"]  # named once
        assert fell[nd.name]["reason"] == Category.SELECTOR_CONDITION.value
    ids = fell["/m/embeddings/word_embeddings/Gather"]["detail"]
    assert "input 1 ('input_ids') must be constant" in ids
    # an op the NNAPI table does not list is "op not supported", with the selector's words
    norm = next(e for e in fell.values() if e["op"] == "LayerNormalization")
    assert norm["reason"] == Category.OP_NOT_SUPPORTED.value
    assert prop.explain(graph.node(norm["node"]), graph) in norm["detail"]
    # an op the table lists but whose every node failed a condition says so
    cast = next(e for e in fell.values() if e["op"] == "Cast")
    assert cast["reason"] == Category.SELECTOR_CONDITION.value
    assert cast["detail"].startswith("every Cast node failed a condition of nnapi")
    assert not any(v for v in problem.supported[0][[nd.index for nd in graph.nodes
                                                     if nd.op_type == "Cast"]])


def test_every_strategy_writes_the_same_placement_block(tmp_path):
    from clusterkit.engines import strategy_names
    from support.models import BUNDLED_MODELS

    path = BUNDLED_MODELS / "resnet18.onnx"
    graph = load_graph(path)
    folded = set(graph.index_to_source[graph.folded].tolist())
    assert folded
    for strategy in strategy_names():
        out = tmp_path / f"{strategy}.json"
        assert cli_main(["partition", str(path), "--strategy", strategy, "--selector", "coreml",
                         "--json", str(out)]) == 0, strategy
        doc = json.loads(out.read_text())
        rep = doc["placement"]
        assert {"fallback", "devices", "reasons", "fallen_back", "folded",
                "assignment"} <= rep.keys(), strategy
        seen: collections.Counter = collections.Counter()
        cluster_dev = {v: c["device"] for c in doc["clusters"] for v in c["nodes"]}
        for entry in rep["assignment"]:
            for nd in entry["nodes"]:
                assert set(nd) == {"name", "op_type", "domain", "index"}
                proto = graph.nodes[int(graph.source_to_index[nd["index"]])]
                assert (nd["name"], nd["op_type"], nd["domain"]) == \
                    (proto.name, proto.op_type, proto.domain)
                assert cluster_dev[nd["index"]] == entry["device"]
                seen[nd["index"]] += 1
        fallen = {e["index"] for e in rep["fallen_back"]}
        cpu = next(e for e in rep["assignment"] if e["device"] == "cpu")
        assert {nd["index"] for nd in cpu["nodes"]} == fallen, strategy
        assert set(seen) == set(range(graph.n)) - folded and max(seen.values()) == 1, strategy
        assert not fallen & folded and rep["folded"] == len(folded) == len(doc["folded"])
