"""The node-link reader builds, without networkx, the graph networkx's route built.

The oracle is the former reader, kept here: ``networkx.node_link_graph``, then one Node and
Tensor per node with per-node dicts, then :meth:`Graph.build` (which sorts, wires and marks
constants itself). Graphs are random: shuffled and string ids, repeated edges, out-edges of
different sizes, unknown sizes, ``Constant`` sources, affinities and extra attributes.
"""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest

from clusterkit import CycleError, GraphError, from_networkx
from clusterkit.graph.core import Graph, Node, Tensor, TensorTable
from clusterkit.io.node_link import graph_from_node_link


def _oracle(data: dict) -> Graph:
    """The former reader: networkx's DiGraph, then per-node wiring and :meth:`Graph.build`."""
    g = nx.node_link_graph(dict(data, directed=True, multigraph=False), edges="edges")
    ids = list(g.nodes)
    names = [str(i) for i in ids]
    pos_of = {nid: k for k, nid in enumerate(ids)}
    nodes, tensors, outputs = [], {}, []
    inputs_of: list[list[str]] = [[] for _ in ids]
    for k, nid in enumerate(ids):
        attrs = dict(g.nodes[nid])
        out_edges = list(g.out_edges(nid, data=True))
        sizes = {d.get("bytes") for _, _, d in out_edges}
        outs = []
        if attrs.get("bytes") is not None or len(sizes) <= 1:
            t = f"{names[k]}:out"
            b = attrs.get("bytes")
            tensors[t] = Tensor(t, nbytes=b if b is not None else (sizes.pop() if sizes else None))
            outs.append(t)
            for _, v, _d in out_edges:
                inputs_of[pos_of[v]].append(t)
            if not out_edges:
                outputs.append(t)
        else:
            for _, v, d in out_edges:
                t = f"{names[k]}->{names[pos_of[v]]}"
                tensors[t] = Tensor(t, nbytes=d.get("bytes"))
                outs.append(t)
                inputs_of[pos_of[v]].append(t)
        aff = attrs.get("affinity")
        rest = {a: v for a, v in attrs.items() if a not in ("op", "affinity", "bytes")}
        nodes.append(Node(index=k, name=names[k], op_type=attrs["op"], attrs=rest, outputs=outs,
                          source_index=k, affinity=str(aff) if aff else None))
    for k, node in enumerate(nodes):
        node.inputs = inputs_of[k]
    return Graph.build(nodes, tensors, [], outputs, name="g", source="memory")


def _random_data(seed: int) -> dict:
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    hidden = list(range(n))
    rng.shuffle(hidden)  # ids in a random order, not a topological one
    style = rng.choice(["dense", "dense", "str", "sparse"])
    ids = [f"n{h}" if style == "str" else h * 1000 - 5000 if style == "sparse" else h
           for h in hidden]
    nodes = []
    for i in ids:
        d = {"id": i, "op": rng.choice(["Conv", "Relu", "Constant", "Add"])}
        if rng.random() < 0.3:
            d["bytes"] = rng.choice([None, 0, 64, 4096])
        if rng.random() < 0.2:
            d["affinity"] = rng.choice(["npu", "cpu", ""])
        if rng.random() < 0.2:
            d["alpha"] = rng.random()
        nodes.append(d)
    edges = []
    for _ in range(rng.randint(0, 3 * n)):
        a, b = sorted(rng.sample(range(n), 2)) if n > 1 else (0, 0)
        if a == b:
            continue
        e = {"source": ids[hidden.index(a)], "target": ids[hidden.index(b)]}
        if rng.random() < 0.8:
            e["bytes"] = rng.choice([None, 16, 16, 16, 256])
        edges.append(e)
    return {"nodes": nodes, "edges": edges}


def _same(got: Graph, want: Graph) -> None:
    keys = ("index", "name", "op_type", "domain", "attrs", "inputs", "outputs",
            "implicit_inputs", "source_index", "affinity", "is_constant", "is_folded")
    assert [[getattr(nd, k) for k in keys] for nd in got.nodes] == \
        [[getattr(nd, k) for k in keys] for nd in want.nodes]
    tkeys = ("name", "shape", "dtype", "nbytes", "producer", "consumers", "is_constant",
             "is_initializer", "is_input", "is_output", "is_folded")
    assert [[getattr(t, k) for k in tkeys] for t in got.tensors.values()] == \
        [[getattr(t, k) for k in tkeys] for t in want.tensors.values()]
    assert list(got.tensors) == list(want.tensors)
    assert (got.inputs, got.outputs) == (want.inputs, want.outputs)
    got_table, want_table = got.tensor_table, TensorTable.from_graph(want)
    assert got_table.names == want_table.names
    for attr in ("producer", "nbytes", "known", "free", "is_output", "inc_tensor", "inc_node"):
        assert np.array_equal(getattr(got_table, attr), getattr(want_table, attr)), attr
    for attr in ("edge_src", "edge_dst", "edge_bytes", "succ_ptr", "succ_idx", "pred_ptr",
                 "pred_idx", "pred_edge", "const_bytes", "folded", "index_to_source",
                 "source_to_index"):
        assert np.array_equal(getattr(got, attr), getattr(want, attr)), attr


@pytest.mark.parametrize("seed", range(60))
def test_reader_builds_the_graph_networkx_route_built(seed):
    data = _random_data(seed)
    _same(graph_from_node_link(data, name="g"), _oracle(data))


@pytest.mark.parametrize("seed", range(0, 60, 5))
def test_file_route_consuming_the_document_builds_the_same_graph(seed):
    """A file's document is emptied as it is read (its lists cleared as soon as they are
    used): the graph is still the oracle's, and nothing of the document stays."""
    import copy

    from clusterkit.io.node_link import node_link_of_document

    data = _random_data(seed)
    doc = copy.deepcopy(data)
    got = node_link_of_document(doc, "dir/g.json")
    want = _oracle(data)
    want.name = "g"
    _same(got, want)
    assert got.name == "g" and doc["nodes"] == [] and doc["edges"] == []


@pytest.mark.parametrize("seed", range(0, 60, 6))
def test_from_networkx_builds_the_same_graph(seed):
    data = _random_data(seed)
    g = nx.node_link_graph(dict(data, directed=True, multigraph=False), edges="edges")
    _same(from_networkx(g, name="g"), _oracle(data))


def test_repeated_edge_keeps_its_place_and_takes_the_last_size():
    data = {"nodes": [{"id": i, "op": "Relu"} for i in range(3)],
            "edges": [{"source": 0, "target": 2, "bytes": 8}, {"source": 0, "target": 1,
                                                                "bytes": 4},
                      {"source": 0, "target": 2, "bytes": 4}, {"source": 0, "target": 2}]}
    got = graph_from_node_link(data, name="g")
    _same(got, _oracle(data))
    assert got.tensors["0:out"].nbytes == 4


def test_self_loop_and_cycle_are_refused_naming_the_node():
    one = {"nodes": [{"id": "a", "op": "Relu"}], "edges": [{"source": "a", "target": "a"}]}
    with pytest.raises(CycleError, match="'a' reads its own output"):
        graph_from_node_link(one)
    two = {"nodes": [{"id": "a", "op": "Relu"}, {"id": "b", "op": "Relu"}],
           "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "a"}]}
    with pytest.raises(CycleError, match="a -> b -> a|b -> a -> b"):
        graph_from_node_link(two)


@pytest.mark.parametrize("bad", [-1, True, "8", float("nan"), 2 ** 63])
def test_bad_sizes_are_refused_naming_the_edge_or_node(bad):
    edge = {"nodes": [{"id": "a", "op": "Relu"}, {"id": "b", "op": "Relu"}],
            "edges": [{"source": "a", "target": "b", "bytes": bad}]}
    with pytest.raises(GraphError, match="'bytes' of edge 'a' -> 'b'"):
        graph_from_node_link(edge)
    node = {"nodes": [{"id": "a", "op": "Relu", "bytes": bad}], "edges": []}
    with pytest.raises(GraphError, match="'bytes' of node 'a'"):
        graph_from_node_link(node)


def test_float_sizes_and_ids_are_read_as_networkx_reads_them():
    data = {"nodes": [{"id": 1, "op": "Relu"}, {"id": 2, "op": "Relu", "bytes": 8.0}],
            "edges": [{"source": 1.0, "target": 2, "bytes": 16.0}]}
    got = graph_from_node_link(data, name="g")
    _same(got, _oracle(data))
    assert got.tensors["1:out"].nbytes == 16 and type(got.tensors["1:out"].nbytes) is int


def test_an_edge_to_an_unlisted_integer_id_is_refused():
    data = {"nodes": [{"id": 0, "op": "Relu"}, {"id": 1, "op": "Relu"}],
            "edges": [{"source": 0, "target": 7}]}
    with pytest.raises(GraphError, match="names node 7, which is not in 'nodes'"):
        graph_from_node_link(data)


def test_nodes_without_attributes_share_one_read_only_empty_attrs():
    data = {"nodes": [{"id": 0, "op": "A"}, {"id": 1, "op": "B", "k": 3}, {"id": 2, "op": "C"}],
            "edges": [{"source": 0, "target": 1}, {"source": 1, "target": 2}]}
    g = graph_from_node_link(data)
    a, b, c = (g.nodes[g.source_to_index[k]] for k in range(3))
    assert a.attrs == {} and a.attrs is c.attrs
    assert b.attrs == {"k": 3}
    with pytest.raises(TypeError, match="read-only"):
        a.attrs["k"] = 1
    assert c.attrs == {}
