"""Node-link graphs (networkx's JSON layout) read straight into a Graph, without networkx.

The graph is the one :func:`clusterkit.io.networkx.from_networkx` makes of
``networkx.node_link_graph(data)``: nodes in list order, each with one output tensor
``"<node>:out"`` read by all its successors, or, when its out-edges carry different byte counts
and the node gives none, one tensor ``"<node>-><succ>"`` per out-edge. The one idea: the edge
list becomes integer arrays at once, and everything networkx and :meth:`Graph.build` did per node
with dicts (deduplication, adjacency order, topological sort, producers, consumers, edge bytes) is
computed on those arrays; the node and tensor objects are made once, already wired, and handed to
:meth:`Graph.from_parts`. A graph that would be refused (a self-loop, a tensor name made twice)
goes through :meth:`Graph.build`, which names the fault.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Sequence

import numpy as np

from clusterkit.errors import GraphError, ModelLoadError
from clusterkit.graph.algorithms import gc_paused, pair_order, topological_order
from clusterkit.graph.core import Graph, Node, Tensor, TensorTable, _mark_constants
from clusterkit.graph.fast import NO_ATTRS, NO_INPUTS
from clusterkit.io.files import read_input

#: the largest byte count a tensor may carry (the graph keeps them as int64)
MAX_BYTES = 2 ** 63 - 1
#: node keys that are not attributes: a node-link node's id, and what the reader itself reads
NODE_LINK_KEYS = frozenset({"id", "op", "affinity", "bytes"})
NETWORKX_KEYS = frozenset({"op", "affinity", "bytes"})


def load_node_link(path: str | os.PathLike) -> Graph:
    """Read a networkx node-link JSON file (``edges`` or ``links`` key)."""
    return node_link_of_document(read_json_document(path), path)


def read_json_document(path: str | os.PathLike) -> Any:
    """The parsed JSON of a graph file (a node-link graph or a placement instance, told apart by
    their keys once it is parsed, so a large file is parsed once)."""
    path = os.fspath(path)
    raw = read_input(path, "graph")
    with gc_paused():  # millions of small dicts: collections would find nothing to free
        try:  # decoded as json.loads decodes bytes, the bytes dropped before the parse
            text = raw.decode(json.detect_encoding(raw), "surrogatepass")
            del raw
            return json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelLoadError(f"{path!r} is not a node-link JSON graph ({exc})") from exc


def node_link_of_document(data: Any, path: str | os.PathLike) -> Graph:
    """The Graph of the node-link document ``data`` read from file ``path``
    (:func:`read_json_document`); its lists are emptied as they are read."""
    path = os.fspath(path)
    return _read(data, os.path.splitext(os.path.basename(path))[0], path, consume=True)


def graph_from_node_link(data: Any, name: str = "graph", source: str = "memory") -> Graph:
    """Build a Graph from node-link data (a dict as ``networkx.node_link_data`` writes)."""
    return _read(data, name, source, consume=False)


def _read(data: Any, name: str, source: str, consume: bool) -> Graph:
    """:func:`graph_from_node_link`; with ``consume`` the lists of ``data`` are emptied as soon
    as they are read (a file's millions of dicts need not outlive their use)."""
    with gc_paused():  # many small containers: collections would find nothing to free
        return _read_paused(data, name, source, consume)


def _read_paused(data: Any, name: str, source: str, consume: bool) -> Graph:
    if not isinstance(data, dict) or "nodes" not in data:
        raise ModelLoadError(f"{source!r} is not a node-link graph: no 'nodes' list")
    key = "edges" if "edges" in data else "links"
    nodes, edges = data["nodes"], data.get(key, [])
    pos_of = _node_positions(nodes, edges, key, source)
    if not nodes:
        raise ModelLoadError(f"node-link graph {name!r} has no nodes")
    src, dst, ebytes = _edge_lists(nodes, edges, key, source, pos_of)
    del pos_of
    if consume:
        edges.clear()
    return graph_from_lists([d["id"] for d in nodes], nodes, src, dst, ebytes, NODE_LINK_KEYS,
                            name=name, source=source, consume=consume)


def _node_positions(nodes: Any, edges: Any, key: str, source: str) -> dict:
    """Node id → position; the full check (:func:`_check_node_link`) names the fault when
    the quick one finds any."""
    try:
        pos_of = {d["id"]: k for k, d in enumerate(nodes)}
        ok = len(pos_of) == len(nodes) and all(type(i) in (str, int, float) for i in pos_of)
    except (TypeError, KeyError):
        ok = False
    if not ok or not isinstance(nodes, list) or not isinstance(edges, list):
        _check_node_link(nodes, edges, key, source)
    return pos_of


def _edge_lists(nodes: list, edges: list, key: str, source: str, pos_of: dict
                ) -> tuple[np.ndarray, np.ndarray, list]:
    """Distinct edges as source and target positions (first-listed order) and each one's
    ``bytes`` (as networkx merges a repeated edge: the last value given wins)."""
    try:
        ends = [d["source"] for d in edges], [d["target"] for d in edges]
        src, dst = (_positions(ids, pos_of) for ids in ends)
    except (TypeError, KeyError):  # names the bad edge
        _check_node_link(nodes, edges, key, source)
        raise
    ebytes = [d.get("bytes") for d in edges]
    keys = np.sort(src * len(nodes) + dst)
    if keys.size > 1 and bool(np.any(keys[1:] == keys[:-1])):
        return _merged_edges(edges, src.tolist(), dst.tolist())
    return src, dst, ebytes


def _positions(ids: list, pos_of: dict) -> np.ndarray:
    """The node position of every id; integer ids (the usual case) are looked up in an array.
    A missing id raises KeyError."""
    if set(map(type, ids)) == {int} and pos_of and set(map(type, pos_of)) == {int}:
        try:
            keys = np.fromiter(pos_of, np.int64, len(pos_of))
            want = np.asarray(ids, dtype=np.int64)
        except OverflowError:  # ids past int64: the dict answers
            return np.fromiter(map(pos_of.__getitem__, ids), np.int64, len(ids))
        lo, hi = int(keys.min()), int(keys.max())
        if hi - lo < 4 * len(keys) + 64:  # a dense table
            table = np.full(hi - lo + 1, -1, dtype=np.int64)
            table[keys - lo] = np.arange(len(keys), dtype=np.int64)
            want -= lo
            inside = (want >= 0) & (want < len(table))
            out = np.where(inside, table[np.clip(want, 0, len(table) - 1)], -1)
            if not (out < 0).any():
                return out
            raise KeyError(ids[int(np.argmax(out < 0))])
    return np.fromiter(map(pos_of.__getitem__, ids), np.int64, len(ids))


def _merged_edges(edges: list, src: list[int], dst: list[int]
                  ) -> tuple[np.ndarray, np.ndarray, list]:
    """Repeated edges merged as ``networkx.DiGraph.add_edge`` does (first position kept,
    attributes updated by every repeat)."""
    merged: dict[tuple[int, int], dict] = {}
    for d, u, v in zip(edges, src, dst):
        merged.setdefault((u, v), {}).update(d)
    pairs = list(merged)
    return (np.asarray([p[0] for p in pairs], dtype=np.int64),
            np.asarray([p[1] for p in pairs], dtype=np.int64),
            [merged[p].get("bytes") for p in pairs])


def _check_node_link(nodes: Any, edges: Any, key: str, source: str) -> None:
    """Refuse what ``networkx.node_link_graph`` would silently merge or invent: duplicate node
    ids, and edges to nodes that are not listed."""
    if not isinstance(nodes, list) or not all(isinstance(d, dict) and "id" in d for d in nodes):
        raise ModelLoadError(f"{source!r} is not a node-link graph: 'nodes' must be a list of "
                             f"objects with an 'id', got {_brief(nodes)}")
    if not isinstance(edges, list) or not all(isinstance(d, dict) and "source" in d and
                                              "target" in d for d in edges):
        raise ModelLoadError(f"{source!r} is not a node-link graph: {key!r} must be a list of "
                             f"objects with a 'source' and a 'target', got {_brief(edges)}")
    seen: set = set()
    for d in nodes:
        nid = d["id"]
        if not isinstance(nid, (str, int, float)):
            raise GraphError(f"node-link graph {source!r}: node id {nid!r} is not a string or a "
                             "number")
        if nid in seen:
            raise GraphError(f"node-link graph {source!r} has a duplicate node id {nid!r}")
        seen.add(nid)
    for d in edges:
        for end in ("source", "target"):
            nid = d[end]
            if not isinstance(nid, (str, int, float)) or nid not in seen:
                raise GraphError(f"node-link graph {source!r}: edge {d['source']!r} -> "
                                 f"{d['target']!r} names node {nid!r}, which is not in 'nodes'")


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def graph_from_lists(ids: Sequence, node_data: Sequence[dict], src: np.ndarray, dst: np.ndarray,
                     edge_bytes: Sequence, reserved: frozenset = NETWORKX_KEYS,
                     name: str = "graph", source: str = "memory", consume: bool = False
                     ) -> Graph:
    """The Graph of nodes ``ids`` (attributes ``node_data``: ``op``, optional ``affinity`` and
    ``bytes``, the rest but ``reserved`` kept as attrs) and distinct edges ``src[e] -> dst[e]``
    (positions, in adjacency order per source) of ``edge_bytes[e]`` bytes (None: unknown).
    With ``consume`` the lists ``ids``, ``node_data`` and ``edge_bytes`` are emptied once they
    are read (their millions of objects need not live while the graph is made)."""
    names = [str(i) for i in ids]
    if consume:
        ids.clear()  # type: ignore[attr-defined]  # a list when consume is set
    if len(set(names)) != len(names):
        raise GraphError("node ids must stay distinct when written as strings")
    raw_ops = [d.get("op") for d in node_data]
    _check_ops(names, raw_ops)
    op_types: list[str] = [sys.intern(str(op)) for op in raw_ops]  # _check_ops: all strings
    del raw_ops  # the document's own op strings go: the interned ones stay
    node_b = _bytes_array(list(map(_get_bytes, node_data)), lambda k: f"node {names[k]!r}")
    extra = [None if d.keys() <= reserved else {
        key if type(key) is str else str(key): v for key, v in d.items() if key not in reserved}
        for d in node_data]
    affinity = [None if not (a := d.get("affinity")) else str(a) for d in node_data]
    if consume:  # all is read: the dicts go before the nodes are made
        node_data.clear()  # type: ignore[attr-defined]  # a list when consume is set
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    edge_b = _bytes_array(list(edge_bytes),
                          lambda e: f"edge {names[src[e]]!r} -> {names[dst[e]]!r}")
    if consume:
        edge_bytes.clear()  # type: ignore[attr-defined]  # a list when consume is set
    parts = _Parts(names, src, dst, node_b, edge_b)
    nodes = parts.nodes(op_types, extra, affinity)
    kinds = set(op_types)
    del op_types, extra, affinity  # the nodes hold what they need
    if parts.refused:  # a self-loop or a tensor name made twice: the checked route names it
        return Graph.build(nodes, parts.unwired_tensors(), [], parts.outputs, name=name,
                           source=source)
    return parts.graph(nodes, kinds, name, source)


def _get_bytes(d: dict) -> Any:
    return d.get("bytes")


def _check_ops(names: list[str], ops: list) -> None:
    try:
        bad = any(not isinstance(op, str) or not op for op in set(ops))
    except TypeError:  # an unhashable op
        bad = True
    if bad:
        k = next(k for k, op in enumerate(ops) if not isinstance(op, str) or not op)
        raise GraphError(f"node {names[k]!r} has no 'op' attribute (a non-empty string)")


def _bytes_array(values: list, where) -> np.ndarray:
    """Byte counts as int64, -1 for None; a bad value raises naming ``where(position)``."""
    kinds = set(map(type, values))
    if kinds <= {int, type(None)}:
        none = np.fromiter((v is None for v in values), bool, len(values)) \
            if type(None) in kinds else None
        try:
            arr = np.asarray([0 if v is None else v for v in values] if none is not None
                             else values, dtype=np.int64).reshape(len(values))
        except OverflowError:
            arr = None
        if arr is not None and (not arr.size or arr.min() >= 0):
            if none is not None:
                arr[none] = -1
            return arr
    return np.asarray([-1 if v is None else v for v in
                       (_check_bytes(where(i), v) for i, v in enumerate(values))], dtype=np.int64)


def _check_bytes(where: str, value: Any) -> int | None:
    if value is None:
        return None
    # NaN fails both comparisons; infinity and huge numbers fail the second
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not 0 <= value <= MAX_BYTES:
        raise GraphError(f"'bytes' of {where} must be a non-negative number below 2**63, got "
                         f"{value!r}")
    return int(value)


class _Parts:
    """The tensors and the wiring of a node-link graph, computed on its edge arrays (positions
    are places in the node list; indices, places in the topological order)."""

    def __init__(self, names: list[str], src: np.ndarray, dst: np.ndarray, node_b: np.ndarray,
                 edge_b: np.ndarray):
        n = len(names)
        self.names, self.src, self.dst, self.edge_b = names, src, dst, edge_b
        #: one int object per node number, shared by every index, producer and consumer list
        self.ints = list(range(n))
        outdeg = np.bincount(src, minlength=n)
        #: where each source position's edges start in ``by_src`` (one more: the end)
        self.bounds = np.concatenate(([0], np.cumsum(outdeg))).astype(np.int64)
        self.by_src = np.argsort(src, kind="stable")  # adjacency order within each source
        lo, hi = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        has = outdeg > 0
        if src.size:
            at = self.bounds[:-1][has]
            lo[has] = np.minimum.reduceat(edge_b[self.by_src], at)
            hi[has] = np.maximum.reduceat(edge_b[self.by_src], at)
        #: sources whose out-edges carry different sizes: one tensor per out-edge
        self.split = has & (lo != hi) & (node_b < 0)
        #: bytes of each node's one tensor (-1: unknown)
        self.single_b = np.where(node_b >= 0, node_b, lo)
        self.tname = [nm + ":out" for nm in names]
        self.edge_tensor = self._edge_tensor_names()
        self.outputs = [self.tname[k] for k in np.flatnonzero(outdeg == 0).tolist()]
        #: the tensors by name; None until :meth:`graph` makes them wired, when no node is
        #: split (then tensor ``k`` is node ``k``'s one output, its name distinct as the node's)
        self.tensors: dict[str, Tensor] | None = None
        if self.split.any():
            self.tensors, self.outs = self._tensors()
            made = int(np.count_nonzero(~self.split)) + int(np.count_nonzero(self.split[src]))
            twice = len(self.tensors) < made
        else:
            self.outs, twice = [[t] for t in self.tname], False
        #: a self-loop, or a tensor name made twice: :meth:`Graph.build` names the fault
        self.refused = bool(np.any(src == dst)) or twice

    def unwired_tensors(self) -> dict[str, Tensor]:
        """The tensors, for :meth:`Graph.build` to wire."""
        return self.tensors if self.tensors is not None else self._tensors()[0]

    def _edge_tensor_names(self) -> np.ndarray:
        """The tensor each edge carries."""
        out = np.asarray(self.tname, dtype=object)[self.src]
        for e in np.flatnonzero(self.split[self.src]).tolist():
            out[e] = f"{self.names[self.src[e]]}->{self.names[self.dst[e]]}"
        return out

    def _tensors(self) -> tuple[dict[str, Tensor], list[list[str]]]:
        """Tensors in node order (a split node's in adjacency order), and each node's outputs."""
        sizes = [None if b < 0 else b for b in self.single_b.tolist()]
        if not self.split.any():
            tensors = {t: Tensor(t, None, None, b) for t, b in zip(self.tname, sizes)}
            return tensors, [[t] for t in self.tname]
        tensors, outs = {}, []
        split, by_src, bounds = self.split.tolist(), self.by_src.tolist(), self.bounds.tolist()
        for k, t in enumerate(self.tname):
            if not split[k]:
                tensors[t] = Tensor(t, None, None, sizes[k])
                outs.append([t])
                continue
            mine = [self.edge_tensor[e] for e in by_src[bounds[k]:bounds[k + 1]]]
            for e, te in zip(by_src[bounds[k]:bounds[k + 1]], mine):
                tensors[te] = Tensor(te, None, None, None if self.edge_b[e] < 0
                                     else int(self.edge_b[e]))
            outs.append(mine)
        return tensors, outs

    def nodes(self, ops: list[str], attrs: list[dict | None], affinity: list[str | None]
              ) -> list[Node]:
        """The nodes in list order (``attrs``: None for none), their inputs in the order of
        their producers' positions."""
        by_dst = pair_order(self.dst, self.src)
        flat = self.edge_tensor[by_dst].tolist()
        at = np.searchsorted(self.dst[by_dst], np.arange(len(ops) + 1)).tolist()
        return [Node(k, name, op, "", NO_ATTRS if extra is None else extra, flat[at[k]:at[k + 1]],
                     outs, NO_INPUTS, k, aff, False, None)
                for k, name, op, extra, aff, outs in zip(
                    self.ints, self.names, ops, attrs, affinity, self.outs)]

    def graph(self, nodes: list[Node], kinds: set[str], name: str, source: str) -> Graph:
        """The graph of ``nodes`` (list order), sorted and wired as :meth:`Graph.build` would."""
        n, src, dst = len(nodes), self.src, self.dst
        order = topological_order(n, src, dst, names=self.names)
        nodes = [nodes[k] for k in order]
        order_arr = np.asarray(order, dtype=np.int64)
        del order  # a million int objects: the array holds the order from here
        index = np.empty(n, dtype=np.int64)
        index[order_arr] = np.arange(n, dtype=np.int64)
        for i, nd in zip(self.ints, nodes):
            nd.index = i
        isrc, idst = index[src], index[dst]
        #: the consumer of every edge, the edges by source position, then consumer index
        readers = idst[pair_order(src, idst)]
        tensors = self.tensors
        if tensors is None:
            tensors = self.tensors = self._wired_tensors(index, readers)
        else:
            self._wire(tensors, index, idst, readers)
        folded = np.zeros(n, dtype=bool)
        if "Constant" in kinds:  # the only op that starts a constant in a node-link graph
            _mark_constants(nodes, tensors)
            folded = np.fromiter((nd.is_folded for nd in nodes), bool, n)[index]
        eb = np.where(self.split[src], self.edge_b, self.single_b[src])
        eb = np.where(folded[src] | (eb < 0), 0, eb)
        graph = Graph.from_parts(nodes, tensors, [], self.outputs, isrc, idst, eb,
                                 name=name, source=source)
        del isrc, idst, eb  # the graph holds them sorted
        cache = graph.__dict__  # views the node objects would give, one loop each, in bulk
        cache["index_to_source"] = order_arr
        cache["source_to_index"] = index
        cache["folded"] = folded[order_arr] if "Constant" in kinds else np.zeros(n, dtype=bool)
        if not self.split.any():  # one tensor per node, in node order: its table in bulk
            graph.__dict__["tensor_table"] = self._table(index, readers, folded)
        return graph

    def _table(self, index: np.ndarray, readers: np.ndarray, folded: np.ndarray
               ) -> TensorTable:
        """:class:`TensorTable` of a graph whose tensor ``k`` is node ``k``'s one output (the
        values ``TensorTable.from_graph`` computes, without a loop over the tensors);
        ``readers``: the consumer index of every edge, the edges by source, then consumer."""
        n = len(self.tname)
        outdeg = np.diff(self.bounds)
        return TensorTable(names=list(self.tname), producer=index.copy(),
                           nbytes=np.maximum(self.single_b, 0), known=self.single_b >= 0,
                           free=folded.copy(), is_output=outdeg == 0,
                           inc_tensor=np.repeat(np.arange(n, dtype=np.int64),
                                                outdeg.astype(np.int64)),
                           inc_node=readers)

    def _wired_tensors(self, index: np.ndarray, readers: np.ndarray) -> dict[str, Tensor]:
        """The tensors when no node is split, made with their producer, consumers (each once,
        in index order: ``readers`` as :meth:`_table` takes it) and output flag (the values
        :meth:`_wire` sets)."""
        cons = list(map(self.ints.__getitem__, readers.tolist()))
        prod = list(map(self.ints.__getitem__, index.tolist()))
        sizes = [None if b < 0 else b for b in self.single_b.tolist()]
        bounds = self.bounds.tolist()
        lo, hi = bounds[:-1], bounds[1:]
        return {t: Tensor(t, None, None, b, p, cons[a:z], False, False, False, a == z)
                for t, b, p, a, z in zip(self.tname, sizes, prod, lo, hi)}

    def _wire(self, tensors: dict[str, Tensor], index: np.ndarray, idst: np.ndarray,
              readers: np.ndarray) -> None:
        """Producers, consumers (each once, in index order: ``readers`` as :meth:`_table` takes
        it) and the output flags of ``tensors`` (made by :meth:`_tensors`)."""
        bounds = self.bounds.tolist()
        cons = list(map(self.ints.__getitem__, readers.tolist()))
        prod = list(map(self.ints.__getitem__, index.tolist()))
        split = self.split.tolist()
        for k, t in enumerate(self.tname):
            if not split[k]:
                ten = tensors[t]
                ten.producer = prod[k]
                ten.consumers = cons[bounds[k]:bounds[k + 1]]
        for e in np.flatnonzero(self.split[self.src]).tolist():
            ten = tensors[self.edge_tensor[e]]
            ten.producer = prod[int(self.src[e])]
            ten.consumers = [self.ints[int(idst[e])]]
        for t in self.outputs:
            tensors[t].is_output = True
