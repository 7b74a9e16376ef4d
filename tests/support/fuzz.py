"""Random partitioning problems described as plain data (a :class:`Spec`), so that a test can
check a partition against the description instead of against the compiled problem.

A spec names its nodes (some with non-ASCII ids), gives each an op type and its ordered producers
(position 1 of a ``Reshape`` is its value input), lists the devices with their op sets and the
quirks of their selectors (edges they refuse, nodes ``filter`` drops, subgraphs
``create_subgraph_node`` rejects, a count they keep while a cluster grows) and the constraints.
Graphs have 4..14 nodes, local edges plus long skip edges, ``Constant`` sources and nodes fed by
the graph input; the nodes reach the library in a shuffled order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

import networkx as nx

from clusterkit import (
    ConstraintError,
    Constraints,
    OpsProperty,
    Problem,
    SubgraphProperty,
    SubgraphSelector,
)
from clusterkit.graph.core import Graph, Node, Tensor

OPS = ("Conv", "Relu", "Add", "Reshape", "MatMul", "Mul", "Constant", "Unsupported")
#: node id stems: ASCII, Latin-1, CJK, Greek, an emoji, a space and a colon
STEMS = ("n", "ü", "节点", "Δx", "🙂", "a b", "x:y")
FALLBACK = "cpu"
GRAPH_INPUT = "input"


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator. ``plain`` devices are stock ``ops:`` properties; the others use
    :class:`FuzzSelector` with the quirks below."""

    name: str
    ops: frozenset[str]
    plain: bool = True
    refused: frozenset[tuple[str, str]] = frozenset()  # edges select_input/select_output refuse
    dropped: frozenset[str] = frozenset()  # nodes filter() removes from 2+ candidates
    reject_with: str | None = None  # create_subgraph_node rejects 2+ node subgraphs holding it
    limit: int | None = None  # at most this many nodes selected per growing cluster
    reject_above: int | None = None  # create_subgraph_node rejects subgraphs of more nodes
    max_nodes: int | None = None  # the property's own limits (plain devices too)
    min_nodes: int | None = None


@dataclass
class Spec:
    """A whole random problem as plain data (node ids are names)."""

    order: list[str]  # the order the nodes are handed to Graph.build (shuffled)
    ops: dict[str, str]
    preds: dict[str, list[str]]  # ordered producers of each node's inputs
    nbytes: dict[str, int]  # bytes of each node's output tensor
    devices: list[DeviceSpec]
    cut_edges: list[tuple[str, str]] = field(default_factory=list)
    never: list[tuple[str, str]] = field(default_factory=list)
    together: list[list[str]] = field(default_factory=list)
    value_inputs: bool = False  # Reshape reads its input 1 by value
    min_size: int = 1
    max_size: int | None = None

    @property
    def edges(self) -> list[tuple[str, str]]:
        return [(u, v) for v in self.order for u in self.preds[v]]

    def dag(self) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_nodes_from(self.order)
        g.add_edges_from(self.edges)
        return g


class FuzzSelector(SubgraphSelector):
    """Selects the device's op types; refuses the spec's edges; once ``limit`` nodes were
    selected it follows no more edges (state kept while a cluster grows); ``filter`` drops the
    spec's nodes from any candidate set of two or more."""

    def __init__(self, spec: DeviceSpec):
        self.spec = spec
        self.taken = 0

    def select(self, node) -> bool:
        ok = node.op_type in self.spec.ops
        self.taken += ok
        return ok

    def _follow(self, src: str, dst: str, new_node) -> bool:
        if (src, dst) in self.spec.refused:
            return False
        if self.spec.limit is not None and self.taken >= self.spec.limit:
            return False
        return self.select(new_node)

    def select_input(self, node, new_node) -> bool:
        return self._follow(new_node.name, node.name, new_node)

    def select_output(self, node, new_node) -> bool:
        return self._follow(node.name, new_node.name, new_node)

    def filter(self, candidates):
        if len(candidates) < 2:
            return list(candidates)
        return [c for c in candidates if c.name not in self.spec.dropped]

    def reset(self) -> None:
        self.taken = 0


class FuzzProperty(SubgraphProperty):
    """A device with a :class:`FuzzSelector` that may reject subgraphs."""

    def __init__(self, spec: DeviceSpec):
        self.max_nodes, self.min_nodes = spec.max_nodes, spec.min_nodes
        super().__init__(spec.name)
        self.spec = spec

    def create_subgraph_selector(self) -> FuzzSelector:
        return FuzzSelector(self.spec)

    def create_subgraph_node(self, subgraph):
        names = {subgraph.graph.nodes[v].name for v in subgraph.nodes}
        if len(names) >= 2 and self.spec.reject_with in names:
            return None
        if self.spec.reject_above is not None and len(names) > self.spec.reject_above:
            return None
        return super().create_subgraph_node(subgraph)


# ---------------------------------------------------------------------- drawing a spec
def random_spec(rng: random.Random, min_nodes: int = 4, max_nodes: int = 14,
                max_devices: int = 3) -> Spec:
    """A random spec; each constraint kind and selector quirk is drawn independently, except
    that one spec in four has every kind at once."""
    n = rng.randint(min_nodes, max_nodes)
    every = rng.random() < 0.25
    names = [f"{rng.choice(STEMS)}{i}" for i in range(n)]  # topological rank = position
    ops = {v: rng.choice(OPS) for v in names}
    preds = {v: _producers(rng, names, ops, j) for j, v in enumerate(names)}
    devices = [_device(rng, f"dev{d}", names, preds, every and d == 0)
               for d in range(rng.randint(1, max_devices))]
    spec = Spec(order=rng.sample(names, n), ops=ops, preds=preds,
                nbytes={v: rng.choice((16, 64, 256, 1024, 4096)) for v in names},
                devices=devices)
    edges = spec.edges
    spec.value_inputs = every or rng.random() < 0.6
    cuts = rng.choice((1, 2) if every else (0, 0, 1, 2))
    spec.cut_edges = rng.sample(edges, min(len(edges), cuts))
    for _ in range(rng.choice((1, 2, 3) if every else (0, 1, 2, 3))):
        a, b = rng.sample(names, 2)
        spec.never.append((a, b))
    spec.min_size = rng.choice((1, 1, 1, 2))
    spec.max_size = rng.choice((2, 3, 5) if every else (None, None, 2, 3, 5))
    if spec.max_size is not None and spec.max_size < spec.min_size:
        spec.max_size = None
    spec.together = _groups(rng, spec.dag(), every)
    return spec


def _producers(rng: random.Random, names: list[str], ops: dict[str, str], j: int) -> list[str]:
    """Producers of node ``j``: some of the three before it, sometimes one far back."""
    if ops[names[j]] == "Constant":
        return []
    found = [names[i] for i in range(max(0, j - 3), j) if rng.random() < 0.45]
    if j > 4 and rng.random() < 0.35:
        far = names[rng.randrange(0, j - 3)]
        if far not in found:
            found.append(far)
    rng.shuffle(found)
    return found


def _device(rng: random.Random, name: str, names: list[str], preds: dict[str, list[str]],
            every: bool) -> DeviceSpec:
    """A device taking 2..5 op types; ``every``: a custom selector with every quirk."""
    ops = frozenset(rng.sample(OPS[:-1], rng.randint(2, 5)))
    if not every and rng.random() < 0.4:
        return DeviceSpec(name, ops)
    edges = [(u, v) for v in names for u in preds[v]]
    return DeviceSpec(
        name, ops, plain=False,
        refused=frozenset(e for e in edges if rng.random() < 0.2),
        dropped=frozenset(v for v in names if rng.random() < 0.15),
        reject_with=rng.choice(names) if every or rng.random() < 0.3 else None,
        limit=rng.choice((2, 3, 4) if every else (None, None, 2, 3, 4)))


def _groups(rng: random.Random, dag: nx.DiGraph, every: bool) -> list[list[str]]:
    """Up to two disjoint convex node sets of at most three nodes, each grown from an edge."""
    groups: list[set[str]] = []
    edges = list(dag.edges)
    for _ in range(rng.choice((1, 2) if every else (0, 1, 1, 2)) if edges else 0):
        a, b = rng.choice(edges)
        hull = {a, b} | (nx.descendants(dag, a) & nx.ancestors(dag, b))
        if len(hull) <= 3 and not any(hull & g for g in groups):
            groups.append(hull)
    return [sorted(g) for g in groups]


# ---------------------------------------------------------------------- building the problem
def constants(spec: Spec) -> set[str]:
    """``Constant`` nodes and nodes computed from constants alone, counted from the
    spec itself (independently of the code under test)."""
    const: set[str] = set()
    for v in nx.topological_sort(spec.dag()):
        preds = spec.preds[v]
        if spec.ops[v] == "Constant" or (preds and all(u in const for u in preds)):
            const.add(v)
    return const


#: the unit of every fallback node in :func:`spec_cut`
HOST = "<host>"


def spec_cut(spec: Spec, unit: dict[str, object]) -> int:
    """Bytes between units as docs/design.md counts them, from the spec itself: ``unit`` maps each
    node to its unit (``HOST`` for every fallback node); graph inputs come from the host, graph
    outputs go to it, constants are free."""
    const = constants(spec)
    consumers: dict[str, set] = {v: set() for v in spec.order}
    readers = set()
    for v in spec.order:
        for u in spec.preds[v]:
            consumers[u].add(unit[v])
        if not spec.preds[v] and spec.ops[v] != "Constant":
            readers.add(unit[v])
    total = 64 * len(readers - {HOST})  # the graph input
    for u in spec.order:
        if u not in const:
            total += spec.nbytes[u] * len((consumers[u] or {HOST}) - {unit[u]})
    return total


def build_graph(spec: Spec) -> Graph:
    """The spec as a Graph: one output tensor per node; sources that are not ``Constant`` read
    the graph input; nodes nobody reads are graph outputs."""
    tensors = {GRAPH_INPUT: Tensor(GRAPH_INPUT, nbytes=64)}
    nodes = []
    for i, v in enumerate(spec.order):
        ins = [f"{u}:out" for u in spec.preds[v]]
        if not ins and spec.ops[v] != "Constant":
            ins = [GRAPH_INPUT]
        tensors[f"{v}:out"] = Tensor(f"{v}:out", nbytes=spec.nbytes[v])
        nodes.append(Node(index=i, name=v, op_type=spec.ops[v], inputs=ins, outputs=[f"{v}:out"]))
    read = {u for v in spec.order for u in spec.preds[v]}
    outputs = [f"{v}:out" for v in spec.order if v not in read]
    return Graph.build(nodes, tensors, [GRAPH_INPUT], outputs, name="fuzz")


def properties(spec: Spec) -> list[SubgraphProperty]:
    return [_ops_property(d) if d.plain else FuzzProperty(d) for d in spec.devices]


def _ops_property(d: DeviceSpec) -> SubgraphProperty:
    """A stock ``ops:`` property with the device's own limits."""
    prop = OpsProperty(sorted(d.ops), device=d.name)
    prop.max_nodes, prop.min_nodes = d.max_nodes, d.min_nodes
    return prop


def contract_spec(rng: random.Random, min_nodes: int = 4, max_nodes: int = 14) -> Spec:
    """A random spec whose devices carry the selector contract's cases: a count kept while a
    cluster grows (``limit``), ``filter`` drops, subgraphs rejected above a size, and the
    property's own ``max_nodes`` / ``min_nodes``; the plain devices keep their stock selector
    but may declare limits."""
    spec = random_spec(rng, min_nodes, max_nodes)
    devices = []
    for d in spec.devices:
        hi = rng.choice((None, 2, 3, 5))
        lo = rng.choice((None, None, 1, 2)) if hi is None or hi >= 2 else None
        if d.plain and rng.random() < 0.5:
            devices.append(DeviceSpec(d.name, d.ops, max_nodes=hi, min_nodes=lo))
            continue
        devices.append(DeviceSpec(d.name, d.ops, plain=False, refused=d.refused,
                                  dropped=d.dropped, reject_with=d.reject_with,
                                  limit=rng.choice((None, 2, 3, 4)),
                                  reject_above=rng.choice((None, 2, 3, 4)),
                                  max_nodes=hi, min_nodes=lo))
    spec.devices = devices
    return spec


def build_problem(spec: Spec) -> Problem:
    """Compile the spec; together groups that contradict another constraint (or each other)
    are dropped from the spec, so the spec stays the truth the checker reads."""
    graph = build_graph(spec)
    cons = Constraints(cut_edges=list(spec.cut_edges), never_together=list(spec.never),
                       value_inputs={"Reshape": (1,)} if spec.value_inputs else {},
                       together=[list(g) for g in spec.together], min_size=spec.min_size,
                       max_size=spec.max_size)
    try:
        problem = cons.compile(graph, properties(spec), fallback=FALLBACK)
        if not _groups_depend(spec):
            return problem
    except ConstraintError as exc:
        if not spec.together:
            raise
        assert "together group" in str(exc) or "contradiction" in str(exc), exc
    spec.together = []
    return replace(cons, together=()).compile(graph, properties(spec), fallback=FALLBACK)


def _groups_depend(spec: Spec) -> bool:
    """Contracting the together groups leaves a cycle: no partition can keep them all."""
    rep = {v: grp[0] for grp in spec.together for v in grp}
    q = nx.DiGraph()
    q.add_nodes_from(rep.get(v, v) for v in spec.order)
    q.add_edges_from((rep.get(u, u), rep.get(v, v)) for u, v in spec.edges
                     if rep.get(u, u) != rep.get(v, v))
    return not nx.is_directed_acyclic_graph(q)
