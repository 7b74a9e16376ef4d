"""Build a :class:`~clusterkit.graph.core.Graph` from integer arrays, fast enough for 1e6-node DAGs.

:func:`graph_from_arrays` makes the same graph as :func:`clusterkit.io.networkx.from_networkx` on a
DiGraph whose nodes ``0..n-1`` carry ``op`` and ``bytes`` (each node has one output tensor
``"<i>:out"`` of ``nbytes[i]`` bytes read by all its successors; sinks' tensors are the graph
outputs), but without the per-node dict work of :meth:`Graph.build`: edges are deduplicated and
sorted with numpy, the CSR arrays and the tensor table are computed in bulk, and the graph is put
together with :meth:`Graph.from_parts` (no per-node wiring dicts, ``all_inputs`` calls or edge
scans).

Node objects are still created (every public Graph API hands them out); to save ~120 bytes per
node they share one empty, read-only ``attrs`` dict and ``implicit_inputs`` list (synthetic nodes
have neither; changing them raises ``TypeError``). When the ids are not a topological order (some
``src >= dst``) the general route through :meth:`Graph.build` is taken, which sorts and names a
cycle if there is one.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from clusterkit.errors import GraphError
from clusterkit.graph.algorithms import edge_arrays, gc_paused
from clusterkit.graph.core import Graph, Node, Tensor, TensorTable, _mark_constants

__all__ = ["graph_from_arrays", "graph_from_dag"]


class _ReadOnlyDict(dict):
    """The empty ``attrs`` the nodes of a bulk reader share (refuses to change)."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("the attrs of a node made by a bulk reader are read-only")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = _refuse
    __ior__ = _refuse


class _ReadOnlyList(list):
    """The empty ``implicit_inputs`` every synthetic node shares (refuses to change)."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("the implicit_inputs of a node made by a bulk reader are read-only")

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = _refuse
    sort = reverse = __iadd__ = __imul__ = _refuse


_NO_ATTRS = _ReadOnlyDict()
_NO_INPUTS = _ReadOnlyList()
#: the empty ``implicit_inputs`` shared by nodes that cannot have any (read-only)
NO_INPUTS = _NO_INPUTS
#: the empty ``attrs`` shared by nodes without attributes (read-only)
NO_ATTRS = _NO_ATTRS


def graph_from_arrays(n: int, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray,
                      ops: Sequence[str], nbytes: Sequence[int] | np.ndarray,
                      name: str = "synthetic") -> Graph:
    """A Graph on nodes ``0..n-1`` (named ``"0"``, ``"1"``, ...) with edges ``src[k] -> dst[k]``
    (duplicates merged), op type ``ops[i]`` and output size ``nbytes[i]`` per node."""
    n, src, dst, ops, nbytes = _checked_arrays(n, src, dst, ops, nbytes)
    kinds = set(ops)
    if src.size and not bool(np.all(src < dst)):
        return _general(n, src, dst, ops, nbytes, name)

    src, dst = _distinct_edges(n, src, dst)
    names = [str(i) for i in range(n)]
    tnames = [s + ":out" for s in names]
    by_dst = np.argsort(dst, kind="stable")  # stable: predecessors stay in increasing order
    ins = _split(np.asarray(tnames, dtype=object)[src[by_dst]].tolist(),
                 _bounds(dst[by_dst], n))
    cons = _split(dst.tolist(), _bounds(src, n))
    nb = nbytes.tolist()
    is_out = np.bincount(src, minlength=n) == 0
    with gc_paused():  # millions of new containers would trigger useless full collections
        # positional arguments: noticeably faster than keywords for a million dataclasses
        nodes = [Node(i, nm, op, "", _NO_ATTRS, inp, [tn], _NO_INPUTS, i, None, False, None)
                 for i, nm, op, inp, tn in zip(range(n), names, ops, ins, tnames)]
        tensors = {tn: Tensor(tn, None, None, b, i, c, False, False, False, o)
                   for i, tn, b, c, o in zip(range(n), tnames, nb, cons, is_out.tolist())}
    outputs = [tnames[i] for i in np.flatnonzero(is_out).tolist()]
    const = np.zeros(n, dtype=bool)
    if "Constant" in kinds:  # only a Constant op can start a constant tensor here
        _mark_constants(nodes, tensors)
        const = np.fromiter((nd.is_constant for nd in nodes), dtype=bool, count=n)
    edge_bytes = np.where(const[src], 0, nbytes[src])
    graph = Graph.from_parts(nodes, tensors, [], outputs, src, dst, edge_bytes, name=name,
                             source="arrays")
    # cached properties computed in bulk (same values the generic code would compute)
    cache = graph.__dict__
    cache["op_types"] = ops
    cache["is_constant_node"] = const
    cache["const_bytes"] = _const_bytes(graph, const, nbytes) if const.any() else \
        np.zeros(n, dtype=np.int64)
    cache["tensor_table"] = TensorTable(
        names=tnames, producer=np.arange(n, dtype=np.int64), nbytes=nbytes.copy(),
        known=np.ones(n, dtype=bool), free=const.copy(), is_output=is_out,
        inc_tensor=graph.edge_src, inc_node=graph.edge_dst)
    return graph


def _checked_arrays(n, src, dst, ops, nbytes) -> tuple[int, np.ndarray, np.ndarray, list[str],
                                                       np.ndarray]:
    """:func:`graph_from_arrays`'s arguments as arrays and lists, checked (one-line
    :class:`~clusterkit.errors.GraphError` naming the node or edge at fault)."""
    n, src, dst = edge_arrays(n, src, dst, "graph_from_arrays")
    ops = list(ops)
    if len(ops) != n:
        raise GraphError(f"graph_from_arrays: {len(ops)} op types for {n} nodes")
    if any(not isinstance(op, str) or not op for op in set(ops)):
        bad = next(i for i, op in enumerate(ops) if not isinstance(op, str) or not op)
        raise GraphError(f"node {bad} has no op type (a non-empty string), got {ops[bad]!r}")
    nbytes = np.asarray(nbytes, dtype=np.int64).ravel()
    if nbytes.shape != (n,):
        raise GraphError(f"graph_from_arrays: {nbytes.size} byte sizes for {n} nodes")
    if n and nbytes.min() < 0:
        i = int(np.argmin(nbytes))
        raise GraphError(f"node {i}: output size must be >= 0 bytes, got {int(nbytes[i])}")
    return n, src, dst, ops, nbytes


def graph_from_dag(dag, name: str = "synthetic") -> Graph:
    """:func:`graph_from_arrays` of a :class:`clusterkit.testing.synthetic.SyntheticDAG`."""
    return graph_from_arrays(dag.n, dag.src, dag.dst, dag.ops, dag.nbytes, name=name)


def _distinct_edges(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct edges sorted by (src, dst). Sort-based: ``np.unique`` without ``return_*``
    is far slower on large int arrays in recent numpy."""
    keys = src * max(n, 1) + dst
    if keys.size > 1 and not bool(np.all(keys[1:] > keys[:-1])):
        keys = np.sort(keys)
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    return np.divmod(keys, max(n, 1))


def _bounds(sorted_keys: np.ndarray, n: int) -> list[int]:
    return np.searchsorted(sorted_keys, np.arange(n + 1, dtype=np.int64)).tolist()


def _split(flat: list, bounds: list[int]) -> list[list]:
    return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _const_bytes(graph: Graph, const: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Per node, bytes of the distinct constant tensors it reads (one tensor per producer)."""
    src, dst = graph.edge_src, graph.edge_dst
    keep = const[src]
    return np.bincount(dst[keep], weights=nbytes[src[keep]], minlength=graph.n).astype(np.int64)


def _general(n: int, src: np.ndarray, dst: np.ndarray, ops: list[str], nbytes: np.ndarray,
             name: str) -> Graph:
    """Ids that are not a topological order: the checked route through :meth:`Graph.build`."""
    names = [str(i) for i in range(n)]
    tnames = [s + ":out" for s in names]
    s_arr, d_arr = _distinct_edges(n, src, dst)
    inputs: list[list[str]] = [[] for _ in range(n)]
    outdeg = np.bincount(s_arr, minlength=n)
    for u, v in zip(s_arr.tolist(), d_arr.tolist()):
        inputs[v].append(tnames[u])
    nodes = [Node(index=i, name=names[i], op_type=ops[i], inputs=inputs[i], outputs=[tnames[i]],
                  source_index=i) for i in range(n)]
    tensors = {tnames[i]: Tensor(tnames[i], nbytes=int(nbytes[i])) for i in range(n)}
    outputs = [tnames[i] for i in range(n) if outdeg[i] == 0]
    return Graph.build(nodes, tensors, [], outputs, name=name, source="arrays")
