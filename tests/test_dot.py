"""DOT output (clusterkit.result.dot), read back by a small DOT reader written here: every node
once, every edge once, each offloaded cluster a box holding exactly its nodes, one colour per
device in every picture, names with quotes and backslashes intact; the SVG Graphviz draws from it,
read back as XML."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from xml.etree import ElementTree

import networkx as nx
import pydot
import pytest

import clusterkit as ck
from clusterkit.cli import main as cli_main
from clusterkit.errors import RenderError
from clusterkit.result.dot import (
    affinity_dot,
    dot_quote,
    dot_to_svg,
    dump_dot,
    graph_dot,
    partition_dot,
    partition_svg,
    subgraphs_dot,
)

NODE = re.compile(r'n(\d+) \[label="((?:[^"\\]|\\.)*)"(?:, fillcolor="([^"]*)")?', re.S)
EDGE = re.compile(r"n(\d+) -> n(\d+)( \[style=bold\])?")
CLUSTER = re.compile(r"subgraph cluster_(\w+)")
LABEL = re.compile(r'label="((?:[^"\\]|\\.)*)"', re.S)


def statements(text: str) -> list[str]:
    """DOT statements and braces, split at ``;``, newlines and braces outside quoted strings."""
    out: list[str] = []
    buf, quoted, escaped = "", False, False
    for ch in text:
        if quoted:
            buf += ch
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted, buf = True, buf + ch
        elif ch in ";\n{}":
            if buf.strip():
                out.append(buf.strip())
            if ch in "{}":
                out.append(ch)
            buf = ""
        else:
            buf += ch
    assert not quoted and not buf.strip()
    return out


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def read_dot(text: str) -> dict:
    """Nodes (label, colour, enclosing cluster), edges (with boldness) and cluster labels."""
    nodes: dict[int, tuple[str, str | None, str | None]] = {}
    edges: dict[tuple[int, int], bool] = {}
    labels: dict[str, str] = {}
    stack: list[str | None] = []
    previous = ""
    for st in statements(text):
        if st == "{":
            m = CLUSTER.fullmatch(previous)
            stack.append(m.group(1) if m else None)
        elif st == "}":
            stack.pop()
        elif m := NODE.match(st):
            v = int(m.group(1))
            assert v not in nodes, f"node n{v} written twice"
            box = stack[-1] if stack else None
            nodes[v] = (_unquote(m.group(2)), m.group(3), box)
        elif m := EDGE.fullmatch(st):
            key = (int(m.group(1)), int(m.group(2)))
            assert key not in edges, f"edge {key} written twice"
            edges[key] = bool(m.group(3))
        elif (m := LABEL.fullmatch(st)) and stack and stack[-1] is not None:
            labels[stack[-1]] = _unquote(m.group(1))
        previous = st
    assert not stack and text.startswith("digraph ")
    return {"nodes": nodes, "edges": edges, "labels": labels}


def _graph() -> nx.DiGraph:
    g = nx.DiGraph()
    ops = {"in": "Conv", 'q"uote': "Relu", "back\\slash": "Add", "mid": "Cpu", "x": "MatMul",
           "y": "Relu", "out": "Conv"}
    for name, op in ops.items():
        g.add_node(name, op=op)
    g.add_edges_from([("in", 'q"uote'), ('q"uote', "back\\slash"), ("back\\slash", "mid"),
                      ("mid", "x"), ("x", "y"), ("in", "y"), ("y", "out")])
    return g


@pytest.fixture(scope="module")
def part():
    problem = ck.make_problem(_graph(), ["npu=ops:Conv,Relu,Add", "gpu=ops:MatMul,Relu"])
    return ck.run_strategy(problem, "singleton")


def test_dot_quote_escapes_quotes_and_backslashes():
    assert dot_quote('a"b\\c') == '"a\\"b\\\\c"'
    assert dot_quote(3) == '"3"'


def test_graph_dot_has_every_node_and_edge_once(part):
    g = part.graph
    doc = read_dot(graph_dot(g))
    assert {v: label for v, (label, _, _) in doc["nodes"].items()} == {
        v: f"{nd.op_type}\n{nd.name}" for v, nd in enumerate(g.nodes)}
    names = {nd.name: v for v, nd in enumerate(g.nodes)}
    expected = {(names[u], names[v]) for u, v in _graph().edges}
    assert set(doc["edges"]) == expected and not any(doc["edges"].values())


def _cluster_of_node(part) -> dict[int, int]:
    return {v: c.id for c in part.clusters for v in c.nodes}


def test_partition_dot_boxes_hold_exactly_the_offloaded_clusters(part):
    doc = read_dot(partition_dot(part))
    boxes: dict[str, set[int]] = {}
    for v, (_, _, box) in doc["nodes"].items():
        if box is not None:
            boxes.setdefault(box, set()).add(v)
    expected = {str(c.id): set(c.nodes) for c in part.clusters if c.device != "cpu"}
    assert boxes == expected
    for c in part.clusters:
        if c.device != "cpu":
            assert doc["labels"][str(c.id)] == f"{c.device} #{c.id} ({len(c.nodes)} nodes)"
    fallback = {v for c in part.clusters if c.device == "cpu" for v in c.nodes}
    assert {v for v, (_, _, box) in doc["nodes"].items() if box is None} == fallback
    assert len(doc["nodes"]) == part.graph.n and len(doc["edges"]) == part.graph.num_edges
    assert not any(doc["edges"].values())


def test_one_palette_for_every_picture(part):
    device = dict(enumerate(part.device_of_nodes()))
    colours: dict[str, set[str]] = {}
    for text in (partition_dot(part), subgraphs_dot(part), affinity_dot(part)):
        for v, (_, colour, _) in read_dot(text)["nodes"].items():
            colours.setdefault(device[v], set()).add(colour)
    assert all(len(c) == 1 for c in colours.values()), colours
    assert colours["cpu"] == {"#d9d9d9"}
    assert len({next(iter(c)) for c in colours.values()}) == len(colours)  # devices differ


def test_one_palette_with_more_devices_than_colours():
    g = nx.DiGraph()
    for k in range(12):
        g.add_node(f"v{k}", op=f"Op{k}")
    g.add_edges_from((f"v{k}", f"v{k + 1}") for k in range(11))
    part = ck.run_strategy(ck.make_problem(g, [f"d{k}=ops:Op{k}" for k in range(12)]), "singleton")
    device = part.device_of_nodes()
    seen: dict[str, set[str]] = {}
    for text in (partition_dot(part), subgraphs_dot(part), affinity_dot(part)):
        for v, (_, colour, _) in read_dot(text)["nodes"].items():
            seen.setdefault(device[v], set()).add(colour)
    assert len(seen) == 12 and all(len(c) == 1 for c in seen.values()), seen


def test_subgraphs_dot_bolds_exactly_the_edges_between_clusters(part):
    doc = read_dot(subgraphs_dot(part))
    cluster = _cluster_of_node(part)
    assert doc["edges"] == {(u, v): cluster[u] != cluster[v] for (u, v) in doc["edges"]}
    assert any(doc["edges"].values())
    assert "subgraph cluster_legend" in subgraphs_dot(part)
    assert "legend" not in partition_dot(part)


def test_affinity_dot_labels_every_node_with_its_device(part):
    doc = read_dot(affinity_dot(part))
    placed = part.device_of_nodes()
    for v, (label, _, box) in doc["nodes"].items():
        nd = part.graph.nodes[v]
        assert label == f"{nd.op_type}\n{nd.name}\naffinity: {placed[v]}" and box is None


def test_dump_dot_writes_both_files(part, tmp_path):
    (tmp_path / "d").mkdir()
    paths = dump_dot(part, tmp_path / "d", "m")
    assert [p.rsplit("/", 1)[1] for p in paths] == ["m_affinity.dot", "m_subgraphs.dot"]
    assert (tmp_path / "d" / "m_subgraphs.dot").read_text() == subgraphs_dot(part)
    assert (tmp_path / "d" / "m_affinity.dot").read_text() == affinity_dot(part)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_dot_parser_accepts_every_picture(part):
    """pydot's grammar (an independent DOT parser) reads every picture, with every node and
    cluster; Graphviz's own ``dot`` renders them too where it is installed."""
    pictures = (graph_dot(part.graph), partition_dot(part), subgraphs_dot(part),
                affinity_dot(part))
    for text in pictures:
        parsed = pydot.graph_from_dot_data(text)
        assert parsed and len(parsed) == 1, text[:200]
        names = {n.get_name().strip('"') for n in _all_nodes(parsed[0])}
        ops = {n for n in names if not n.startswith("legend_")}
        assert ops == {f"n{v}" for v in range(part.graph.n)}, sorted(names)
    if shutil.which("dot") is not None:
        for text in pictures:
            done = subprocess.run(["dot", "-Tplain"], input=text, capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 0, done.stderr


def _all_nodes(graph) -> list:
    nodes = list(graph.get_nodes())
    for sub in graph.get_subgraphs():
        nodes += _all_nodes(sub)
    return [n for n in nodes if n.get_name() not in ("node", "edge", "graph")]


# ---------------------------------------------------------------------- SVG through Graphviz
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")
SVG = "{http://www.w3.org/2000/svg}"


def _groups(root, kind: str) -> dict[str, object]:
    """The ``<g class=kind>`` elements of an SVG tree by their ``<title>`` (the DOT id)."""
    return {g.find(f"{SVG}title").text: g for g in root.iter(f"{SVG}g") if g.get("class") == kind}


@needs_dot
def test_partition_svg_is_xml_with_one_group_per_node_and_cluster(part):
    root = ElementTree.fromstring(partition_svg(part))
    assert root.tag == f"{SVG}svg"
    nodes = _groups(root, "node")
    assert set(nodes) == {f"n{v}" for v in range(part.graph.n)}
    boxes = _groups(root, "cluster")
    assert set(boxes) == {f"cluster_{c.id}" for c in part.clusters if c.device != "cpu"}
    edges = _groups(root, "edge")
    names = {nd.name: v for v, nd in enumerate(part.graph.nodes)}
    assert set(edges) == {f"n{names[u]}->n{names[v]}" for u, v in _graph().edges}
    for v, g in nodes.items():       # each label, quotes and backslashes intact
        nd = part.graph.nodes[int(v[1:])]
        assert [t.text for t in g.iter(f"{SVG}text")] == [nd.op_type, nd.name]


@needs_dot
def test_cli_partition_svg_writes_the_picture(part, tmp_path):
    model = tmp_path / f"{part.graph.name}.json"       # the graph's name is the file's
    model.write_text(json.dumps(nx.node_link_data(_graph(), edges="edges")))
    out = tmp_path / "p.svg"
    assert cli_main(["partition", str(model), "--strategy", "singleton", "--selector",
                     "npu=ops:Conv,Relu,Add", "--selector", "gpu=ops:MatMul,Relu",
                     "--svg", str(out)]) == 0
    assert out.read_text() == partition_svg(part)


def test_missing_graphviz_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    model = tmp_path / "g.json"
    model.write_text(json.dumps(nx.node_link_data(_graph(), edges="edges")))
    monkeypatch.setenv("PATH", str(tmp_path))          # no dot program to be found
    with pytest.raises(RenderError, match="dot program is not installed"):
        dot_to_svg("digraph { a -> b }")
    capsys.readouterr()
    assert cli_main(["partition", str(model), "--selector", "ops:Conv", "--json",
                     str(tmp_path / "p.json"), "--svg", str(tmp_path / "p.svg")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("clusterkit: error: cannot draw SVG: Graphviz's dot program is not "
                   "installed (Debian and Ubuntu: apt-get install graphviz)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]   # all outputs or none


@needs_dot
def test_a_graphviz_failure_is_a_render_error():
    with pytest.raises(RenderError, match="failed"):
        dot_to_svg("digraph { a -> }")
