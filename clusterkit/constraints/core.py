"""Constraints, and the compiled :class:`Problem` every engine consumes.

:class:`Constraints` is what a user writes (node names or topological indices);
:meth:`Constraints.compile` checks it against a graph and the devices' properties and returns a
:class:`Problem`: integer arrays only (supported mask per device, must-cut edges, never-together
pairs, together groups, size limits). Selectors are compiled into it too.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence, Union

import numpy as np

from clusterkit._deprecated import renamed_attribute
from clusterkit.constraints.groups import close_groups
from clusterkit.constraints.limits import Limits
from clusterkit.errors import ConstraintError, CycleError
from clusterkit.graph.algorithms import group_labels, quotient, topological_order
from clusterkit.graph.core import Graph
from clusterkit.selection.protocol import (
    SubgraphProperty,
    call_select,
    call_select_input,
    call_select_output,
)

NodeRef = Union[int, str]

#: Inputs whose *values* the usual accelerators must know (shape, repeats, slice bounds, scales).
DEFAULT_VALUE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Resize": (1, 2, 3),
    "Upsample": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2), "OneHot": (1,),
    "TopK": (1,), "Pad": (1, 2, 3),
}

# reasons an edge must be cut (codes in Problem.cut_reason)
CUT_NONE, CUT_EXPLICIT, CUT_VALUE = 0, 1, 2


@dataclass(frozen=True)
class Constraints:
    """Placement constraints, frozen: checked once when built.

    - ``cut_edges``: (producer, consumer) pairs that must be in different clusters.
    - ``never_together``: pairs of nodes never in one cluster (adjacent or not).
    - ``value_inputs``: op type → input positions whose producer must be constant or sit in
      another cluster (e.g. Reshape's shape, input 1).
    - ``together``: groups that must share one cluster; a node on a path between two members
      joins its group when a device of the group takes it, else the group is an error.
    - ``min_size``/``max_size``: nodes per offloaded cluster, the user's settings (compiled into
      the problem's :attr:`~clusterkit.constraints.limits.Limits.global_min` /
      :attr:`~clusterkit.constraints.limits.Limits.global_max`); ``max_const_bytes``: bytes of
      the constants one cluster may hold. A cluster below ``min_size`` goes back to the fallback.

    Lists given are kept as tuples and ``value_inputs`` as a read-only mapping, so a built
    object cannot change after its check. What needs no graph is checked when the object is
    built (:func:`check_constraints`: an error names the setting); :meth:`compile` checks the
    rest against the graph. Derive another with :func:`dataclasses.replace`, which checks again.
    """

    cut_edges: Sequence[tuple[NodeRef, NodeRef]] = ()
    never_together: Sequence[tuple[NodeRef, NodeRef]] = ()
    value_inputs: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    together: Sequence[Sequence[NodeRef]] = ()
    min_size: int = 1
    max_size: int | None = None
    max_const_bytes: int | None = None
    __hash__ = None  # type: ignore[assignment]  # frozen, but value_inputs is a mapping

    def __post_init__(self) -> None:
        check_constraints(self)
        frozen = {"cut_edges": tuple(tuple(p) for p in self.cut_edges),
                  "never_together": tuple(tuple(p) for p in self.never_together),
                  "together": tuple(tuple(sorted(g, key=str)) if isinstance(g, (set, frozenset))
                                    else tuple(g) for g in self.together),
                  "value_inputs": MappingProxyType({op: tuple(pos) for op, pos in
                                                    self.value_inputs.items()})}
        for name, value in frozen.items():
            object.__setattr__(self, name, value)

    def __reduce__(self) -> tuple:
        """Pickled (a sweep's worker, an isolated child) as the call that builds it again."""
        values = (getattr(self, f.name) for f in dataclasses.fields(self))
        return type(self), tuple(dict(v) if isinstance(v, Mapping) else v for v in values)

    @classmethod
    def default(cls, **kwargs) -> "Constraints":
        """Constraints with :data:`DEFAULT_VALUE_INPUTS`."""
        return cls(value_inputs=dict(DEFAULT_VALUE_INPUTS), **kwargs)

    def compile(self, graph: Graph, properties: Sequence[SubgraphProperty] = (),
                fallback: str = "cpu") -> "Problem":
        """Check against ``graph`` and compile with the devices' ``properties`` (priority order)."""
        return compile_problem(graph, self, list(properties), fallback)


#: the global limits of :attr:`Problem.limits` (:meth:`Problem.with_limits` sets them)
LIMIT_FIELDS = ("min_size", "max_size", "max_const_bytes")


@dataclass
class Problem:
    """Compiled constraints over integer node ids (topological indices).

    ``supported[d, v]``: device ``d`` takes node ``v``; ``edge_ok[d, e]``: device ``d``'s selector
    follows edge ``e`` (indices into ``graph.edge_src``); ``must_cut[e]`` with ``cut_reason[e]``;
    ``never_pairs`` (k×2, u<v); ``group_of[v]`` (-1 or a together-group id) with ``groups``.

    ``limits`` (:class:`~clusterkit.constraints.limits.Limits`) holds the active size and
    constant limits, global and per device (a property's ``max_nodes`` / ``min_nodes`` /
    ``max_const_bytes``): the one source of every limit, asked by every engine and pass (the
    loosest of the devices' limits, what every cluster must meet whatever its device, is
    ``limits.loosest_max`` and so on; the tighter limit of a device is kept by the final pass,
    :func:`clusterkit.passes.acceptable.make_acceptable`). :meth:`with_limits` gives a copy with
    other global limits. (``min_size`` / ``max_size`` / ``max_const_bytes`` are deprecated
    names of the loosest limits.)
    """

    graph: Graph
    properties: list[SubgraphProperty]
    devices: list[str]
    fallback: str
    supported: np.ndarray
    edge_ok: np.ndarray
    must_cut: np.ndarray
    cut_reason: np.ndarray
    never_pairs: np.ndarray
    groups: list[np.ndarray]
    group_of: np.ndarray
    constraints: Constraints
    limits: Limits
    #: seconds the selectors took answering on the graph while compiling (``query``, the
    #: edges): part of every partition's :attr:`~clusterkit.Partition.seconds`
    selector_seconds: float = 0.0

    min_size = renamed_attribute("limits.loosest_min")
    max_size = renamed_attribute("limits.loosest_max")
    max_const_bytes = renamed_attribute("limits.loosest_bytes")

    def with_limits(self, **limits: int | None) -> Problem:
        """A copy of the problem with some global limits (keywords among :data:`LIMIT_FIELDS`)
        set anew and the others kept; each device's own tighter limit stays."""
        unknown = sorted(set(limits) - set(LIMIT_FIELDS))
        if unknown:
            raise TypeError(f"with_limits() takes {', '.join(LIMIT_FIELDS)}, not {unknown[0]}")
        lim = self.limits
        glob = {"min_size": lim.global_min, "max_size": lim.global_max,
                "max_const_bytes": lim.global_bytes, **limits}
        new = Limits.build(self.graph, glob["min_size"], glob["max_size"],  # type: ignore[arg-type]
                           glob["max_const_bytes"], self.properties)
        return dataclasses.replace(self, limits=new)

    @property
    def n(self) -> int:
        return self.graph.n

    @property
    def any_supported(self) -> np.ndarray:
        """Nodes some device takes."""
        if not len(self.devices):
            return np.zeros(self.n, bool)
        return np.asarray(self.supported.any(axis=0))  # an array (numpy's hints say maybe a bool)

    @property
    def first_device(self) -> np.ndarray:
        """Index of the first device (priority order) that takes each node, -1 for none."""
        if not self.devices:
            return np.full(self.n, -1, dtype=np.int64)
        first = np.argmax(self.supported, axis=0).astype(np.int64)
        first[~self.any_supported] = -1
        return first

    def device_index(self, name: str) -> int:
        """Index of a device by name; the fallback is -1."""
        if name == self.fallback:
            return -1
        try:
            return self.devices.index(name)
        except ValueError:
            raise ConstraintError(f"unknown device {name!r} (devices: "
                                  f"{', '.join(self.devices)}; fallback {self.fallback})") from None

    def contractible(self, d: int) -> np.ndarray:
        """Edges that may lie inside one cluster of device ``d``: both ends supported, the
        selector follows the edge, no constraint cuts it."""
        g = self.graph
        return (self.supported[d][g.edge_src] & self.supported[d][g.edge_dst]
                & self.edge_ok[d] & ~self.must_cut)

    @property
    def never_sets(self) -> list[set[int]]:
        """Per node, the nodes it may never share a cluster with."""
        out: list[set[int]] = [set() for _ in range(self.n)]
        for u, v in self.never_pairs.tolist():
            out[u].add(v)
            out[v].add(u)
        return out


def resolve_node(graph: Graph, ref: NodeRef, what: str) -> int:
    """Topological index of a node given by index or name. A name that several nodes carry is
    an error naming them; ``"#K"`` names the node at source position ``K`` (the ONNX model's
    ``graph.node`` index, as in the partition JSON), which is how to pick one of them."""
    if isinstance(ref, (int, np.integer)) and not isinstance(ref, bool):
        if 0 <= int(ref) < graph.n:
            return int(ref)
        raise ConstraintError(f"{what}: no node with index {ref} (graph has {graph.n} nodes)")
    if not isinstance(ref, str):
        raise ConstraintError(f"{what}: a node is an index or a name, got {ref!r}")
    same = graph.duplicate_names.get(ref)
    if same is not None:
        where = ", ".join(f"#{k}" for k in same)
        raise ConstraintError(f"{what}: node name {ref!r} is ambiguous, nodes {where} carry it "
                              f"(name one by its graph.node index, e.g. '#{same[0]}')")
    idx = graph.name_to_index.get(ref)
    if idx is not None:
        return idx
    if ref.startswith("#") and ref[1:].isdigit():
        pos = int(ref[1:])
        if pos < graph.n:
            return int(graph.source_to_index[pos])
        raise ConstraintError(f"{what}: no node at graph.node index {pos} (graph has {graph.n} "
                              "nodes)")
    raise ConstraintError(f"{what}: no node named {ref!r}")


def check_constraints(cons: Constraints) -> None:
    """The checks that need no graph: counts that cannot be counts, malformed pairs and groups,
    a malformed ``value_inputs``. Each error is one line naming the setting."""
    _check_limits(cons)
    _check_value_inputs(cons.value_inputs)
    _check_pairs(cons.cut_edges, "cut_edges")
    _check_pairs(cons.never_together, "never_together")
    _check_together(cons.together)


#: what a list of pairs, a pair, a group or a tuple of positions may be
_SEQUENCES = (list, tuple, np.ndarray)


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _is_ref(x: object) -> bool:
    """A node reference: a topological index or a name."""
    return _is_int(x) or isinstance(x, str)


def _check_limits(cons: Constraints) -> None:
    """Size and byte limits are counts: refuse what cannot be one."""
    for name in ("min_size", "max_size", "max_const_bytes"):
        value = getattr(cons, name)
        if not _is_int(value) and not (value is None and name != "min_size"):
            raise ConstraintError(f"{name} must be an integer, got {value!r}")
    if cons.min_size < 1:
        raise ConstraintError(f"min_size must be >= 1, got {cons.min_size}")
    if cons.max_size is not None and cons.max_size < cons.min_size:
        raise ConstraintError(f"max_size {cons.max_size} is below min_size {cons.min_size}")
    if cons.max_const_bytes is not None and cons.max_const_bytes < 0:
        raise ConstraintError(f"max_const_bytes must be >= 0, got {cons.max_const_bytes}")


def _check_value_inputs(value_inputs: object) -> None:
    """``value_inputs`` maps op types to tuples of input positions >= 0."""
    if not isinstance(value_inputs, Mapping):
        raise ConstraintError("value_inputs must map op types to input positions, got "
                              f"{value_inputs!r}")
    for op, positions in value_inputs.items():
        if not isinstance(op, str):
            raise ConstraintError(f"value_inputs: op type {op!r} is not a string")
        if not isinstance(positions, _SEQUENCES):
            raise ConstraintError(f"value_inputs of {op}: expected a tuple of input positions, "
                                  f"got {positions!r}")
        bad = [p for p in positions if not _is_int(p) or p < 0]
        if bad:
            raise ConstraintError(f"value input of {op}: input position {bad[0]} is not an "
                                  "index >= 0")


def _check_pairs(pairs: object, name: str) -> None:
    """``pairs`` is a list of (node, node) pairs, each node an index or a name."""
    if not isinstance(pairs, _SEQUENCES):
        raise ConstraintError(f"{name} must be a list of node pairs, got {pairs!r}")
    for pair in pairs:
        if not isinstance(pair, _SEQUENCES) or len(pair) != 2:
            raise ConstraintError(f"{name}: {pair!r} is not a pair of nodes")
        bad = [x for x in pair if not _is_ref(x)]
        if bad:
            raise ConstraintError(f"{name}: a node is an index or a name, got {bad[0]!r}")
        if name == "never_together" and pair[0] == pair[1]:
            raise ConstraintError(f"never_together pair names node {pair[0]!r} twice")


def _check_together(groups: object) -> None:
    """``together`` is a list of groups, each a list of nodes (indices or names)."""
    if not isinstance(groups, _SEQUENCES):
        raise ConstraintError(f"together must be a list of node groups, got {groups!r}")
    for group in groups:
        if not isinstance(group, _SEQUENCES + (set, frozenset)):
            raise ConstraintError(f"together: {group!r} is not a group of nodes (a list)")
        bad = [x for x in group if not _is_ref(x)]
        if bad:
            raise ConstraintError(f"together: a node is an index or a name, got {bad[0]!r}")


def compile_problem(graph: Graph, cons: Constraints, properties: list[SubgraphProperty],
                    fallback: str) -> Problem:
    """See :meth:`Constraints.compile`."""
    devices = [p.device for p in properties]
    if len(set(devices)) != len(devices):
        raise ConstraintError(f"device names must be distinct, got {devices}")
    if fallback in devices:
        raise ConstraintError(f"fallback device {fallback!r} is also an accelerator device")
    limits = Limits.build(graph, cons.min_size, cons.max_size, cons.max_const_bytes, properties)
    n, m = graph.n, graph.num_edges
    supported = np.zeros((len(properties), n), dtype=bool)
    edge_ok = np.ones((len(properties), m), dtype=bool)
    start = time.perf_counter()
    for d, prop in enumerate(properties):
        supported[d] = prop.query(graph)
        if limits.max_const[d] is not None:  # a node that alone holds too much fits nowhere
            supported[d] &= graph.const_bytes <= limits.max_const[d]
        edge_ok[d] = _edge_answers(graph, prop, supported[d])
    selector_seconds = time.perf_counter() - start
    must_cut = np.zeros(m, dtype=bool)
    reason = np.zeros(m, dtype=np.int8)
    for u_ref, v_ref in cons.cut_edges:
        u = resolve_node(graph, u_ref, "cut edge")
        v = resolve_node(graph, v_ref, "cut edge")
        try:
            e = graph.edge_index(u, v)
        except Exception:
            raise ConstraintError(f"cut edge {graph.nodes[u].name!r} -> {graph.nodes[v].name!r}:"
                                  " there is no such edge") from None
        must_cut[e] = True
        reason[e] = CUT_EXPLICIT
    _cut_value_inputs(graph, cons, properties, supported, edge_ok, must_cut, reason)
    pairs = set()
    for a_ref, b_ref in cons.never_together:
        a = resolve_node(graph, a_ref, "never-together pair")
        b = resolve_node(graph, b_ref, "never-together pair")
        if a == b:
            raise ConstraintError(f"never-together pair names node {graph.nodes[a].name!r} twice")
        pairs.add((min(a, b), max(a, b)))
    never = np.asarray(sorted(pairs), dtype=np.int64).reshape(-1, 2)
    group_of = np.full(n, -1, dtype=np.int64)
    given: list[list[int]] = []
    for members in cons.together:
        ids = sorted({resolve_node(graph, r, "together group") for r in members})
        for v in ids:
            if group_of[v] >= 0:
                raise ConstraintError(f"node {graph.nodes[v].name!r} is in two together groups")
            group_of[v] = len(given)
        given.append(ids)
    groups = [np.asarray(ids, dtype=np.int64)
              for ids in close_groups(graph, given, supported, devices)]
    group_of[:] = -1
    for gi, group in enumerate(groups):
        group_of[group] = gi
    problem = Problem(graph, properties, devices, fallback, supported, edge_ok, must_cut, reason,
                      never, groups, group_of, cons, limits, selector_seconds)
    _check_groups(problem)
    _check_group_cycles(problem)
    return problem


def _edge_answers(graph: Graph, prop: SubgraphProperty, supported: np.ndarray) -> np.ndarray:
    """Per edge: does the selector follow it (``select_output`` from the producer and
    ``select_input`` from the consumer, each on a fresh selector that selected its node)?"""
    m = graph.num_edges
    probe = prop.create_subgraph_selector()
    if not probe.edge_sensitive:
        return np.ones(m, dtype=bool)
    out = np.zeros(m, dtype=bool)
    nodes = graph.nodes
    for e, (u, v) in enumerate(zip(graph.edge_src.tolist(), graph.edge_dst.tolist())):
        if not (supported[u] and supported[v]):
            continue
        sel = prop.create_subgraph_selector()
        if not (call_select(sel, nodes[u]) and call_select_output(sel, nodes[u], nodes[v])):
            continue
        sel = prop.create_subgraph_selector()
        out[e] = call_select(sel, nodes[v]) and call_select_input(sel, nodes[v], nodes[u])
    return out


def _cut_value_inputs(graph: Graph, cons: Constraints, properties: list[SubgraphProperty],
                      supported: np.ndarray, edge_ok: np.ndarray, must_cut: np.ndarray,
                      reason: np.ndarray) -> None:
    """The value-input cuts (``cons.value_inputs`` and each device's ``value_inputs``), in
    place. An edge is a cut for every device, except where a device that declares
    ``computes_value_inputs`` takes both ends (and the input is not one of its own
    ``value_inputs``): there the two may share its cluster, and only the other devices that
    take both ends are kept from following the edge (``edge_ok``)."""
    value_inputs = dict(cons.value_inputs)
    for prop in properties:
        for op, pos in getattr(prop, "value_inputs", {}).items():
            value_inputs[op] = tuple(sorted(set(value_inputs.get(op, ())) | set(pos)))
    inside = [d for d, p in enumerate(properties) if getattr(p, "computes_value_inputs", False)]
    for e, op, pos in _value_input_edges(graph, value_inputs):
        u, v = int(graph.edge_src[e]), int(graph.edge_dst[e])
        both = supported[:, u] & supported[:, v]
        waived = [d for d in inside if both[d]
                  and pos not in getattr(properties[d], "value_inputs", {}).get(op, ())]
        if waived:
            keep = both.copy()
            keep[waived] = False
            edge_ok[keep, e] = False
        elif not must_cut[e]:
            must_cut[e] = True
            reason[e] = CUT_VALUE


def _value_input_edges(graph: Graph, value_inputs: dict[str, tuple[int, ...]]
                       ) -> list[tuple[int, str, int]]:
    """(edge, op type, input position) of each edge producer→consumer carrying a non-constant
    tensor into a value input."""
    out = []
    for node in graph.nodes:
        positions = value_inputs.get(node.op_type)
        if not positions:
            continue
        for pos in positions:
            if pos >= len(node.inputs) or not node.inputs[pos]:
                continue
            ten = graph.tensors[node.inputs[pos]]
            if ten.producer is None or ten.is_constant:
                continue
            out.append((graph.edge_index(ten.producer, node.index), node.op_type, pos))
    return out


def _check_groups(p: Problem) -> None:
    """Contradictions: a together group with a never-together pair or a must-cut edge inside,
    no device common to all members, or larger than max_size (a group is convex by now:
    :func:`~clusterkit.constraints.groups.close_groups` absorbed the nodes between its members
    or refused)."""
    g = p.graph
    names = [nd.name for nd in g.nodes]
    for gi, members in enumerate(p.groups):
        inside = set(members.tolist())
        for u, v in p.never_pairs.tolist():
            if u in inside and v in inside:
                raise ConstraintError(f"contradiction: nodes {names[u]!r} and {names[v]!r} must be"
                                      f" together (group {gi}) and never together")
        for e in np.flatnonzero(p.must_cut).tolist():
            u, v = int(g.edge_src[e]), int(g.edge_dst[e])
            if u in inside and v in inside:
                why = "a cut edge" if p.cut_reason[e] == CUT_EXPLICIT else "a value input"
                raise ConstraintError(f"contradiction: edge {names[u]!r} -> {names[v]!r} must be "
                                      f"cut ({why}) but both ends are in together group {gi}")
        if p.limits.loosest_max is not None and len(inside) > p.limits.loosest_max:
            raise ConstraintError(f"contradiction: together group {gi} has {len(inside)} nodes,"
                                  f" above max_size {p.limits.loosest_max}")
        if len(inside) > 1 and p.devices and not p.supported[:, members].all(axis=1).any():
            raise ConstraintError(f"contradiction: no device takes every node of together group "
                                  f"{gi} ({', '.join(names[v] for v in members[:5].tolist())}...)")


def _check_group_cycles(p: Problem) -> None:
    """Two together groups that depend on each other (a path leaves one, enters the other and
    comes back) cannot both be whole in an acyclic partition: name both and a path each way."""
    if len(p.groups) < 2:
        return
    g = p.graph
    super_node_of = group_labels(p.group_of)
    qsrc, qdst, _ = quotient(super_node_of, g.edge_src, g.edge_dst)
    try:
        topological_order(int(super_node_of.max()) + 1, qsrc, qdst)
    except CycleError as err:
        cycle = [int(u) for u in err.cycle]
    else:
        return
    group_of_super_node = np.full(int(super_node_of.max()) + 1, -1, dtype=np.int64)
    group_of_super_node[super_node_of] = p.group_of
    on_cycle = [int(group_of_super_node[u]) for u in cycle if group_of_super_node[u] >= 0]
    first = min(range(len(on_cycle)), key=lambda i: int(p.groups[on_cycle[i]][0]))
    a, b = on_cycle[first], on_cycle[(first + 1) % len(on_cycle)]
    names = [nd.name for nd in g.nodes]

    def label(gi: int) -> str:
        ids = p.groups[gi].tolist()
        return "{" + ",".join(names[v] for v in ids[:5]) + (",..." if len(ids) > 5 else "") + "}"

    there = " -> ".join(names[v] for v in _shortest_path(g, p.groups[a], p.groups[b]))
    back = " -> ".join(names[v] for v in _shortest_path(g, p.groups[b], p.groups[a]))
    raise ConstraintError(f"together groups {label(a)} and {label(b)} depend on each other: "
                          f"{there} and {back}")


def _shortest_path(g: Graph, starts: np.ndarray, targets: np.ndarray) -> list[int]:
    """Fewest edges from a node of ``starts`` to a node of ``targets`` (breadth first)."""
    goal = set(targets.tolist())
    parent = {v: -1 for v in starts.tolist()}
    queue = list(starts.tolist())
    succ = g.succ_lists
    for v in queue:
        for w in succ[v]:
            if w in parent:
                continue
            parent[w] = v
            if w in goal:
                path = [w]
                while parent[path[-1]] >= 0:
                    path.append(parent[path[-1]])
                return path[::-1]
            queue.append(w)
    return []
