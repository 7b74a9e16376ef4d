"""Strategy ``cycles``: edge contraction over a dynamic topological order (TensorFlow/XLA's
GraphCycles, :class:`clusterkit.graph.graphcycles.GraphCycles`).

Every node starts as its own cluster. Edges whose two ends may share a cluster (same device, the
device's selector follows the edge, no constraint cuts it) are contracted, largest tensor first,
each contraction refused when it would close a cycle (another path joins the two clusters) or
break a constraint (never-together pair, ``max_size``, ``max_const_bytes``, a stateful selector
saying no). As in TVM's description of this clustering, an edge that must be cut between two
nodes of one device is routed through a dummy node that is never contracted, so that merging its
two ends is refused as a cycle.

Details:

- Order: edges are taken in windows of ``window`` consecutive consumer positions (topological
  order), largest tensor first inside a window (``window=None``: one window, the global
  largest-first order). Contracting front to back keeps the re-ranking of the dynamic order local;
  on a graph smaller than the window this is exactly "largest tensor first".
- Edges spanning more than ``far_span`` positions are tried last, each with a bounded search
  (``far_budget`` nodes on each side of the rank window): when the two cones are small the
  contraction is decided exactly, otherwise it is refused (``info["refused_budget"]``). This keeps
  the cost of long skip edges of 1e6-node graphs bounded; ``far_span=None`` tries every edge
  exactly.
- ``passes``: contractions refused for a cycle are retried (clusters that grew meanwhile may have
  absorbed the other path).
- Together groups are merged first (one cluster each); never-together pairs are checked per
  contraction; ``merge_non_adjacent`` also merges clusters of one device that no path joins:
  first clusters reading one tensor (largest first: it is then transferred once, lower
  cut_bytes), then neighbours in topological order (fewer partitions).
- Selectors: devices whose selector is not edge-sensitive use the compiled answers (``select``
  of both ends is the ``supported`` mask, the edge answers ``edge_ok``), which keeps 1e6 nodes
  fast. For an edge-sensitive (possibly stateful) selector, every cluster keeps the fresh
  selector it was started with (``select`` on its first node) and grows one node at a time: the
  grower's ``select_output``/``select_input`` is asked for the contracted edge, after the cycle
  check (so a refusal never leaves the selector thinking it took the node); two clusters of
  several nodes are not merged (``info["refused_selector"]``). Afterwards each
  cluster goes through its selector's ``filter``; dropped nodes go to the fallback and the rest is
  re-split into convex pieces (:func:`~clusterkit.engines.longest_path.convex_split`).
- ``min_size``: smaller clusters go back to the fallback.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.engines.level_bound import LevelBound
from clusterkit.engines.longest_path import Plan, finish, plan, selector_pass
from clusterkit.errors import StrategyError
from clusterkit.graph.algorithms import UnionFind, gc_paused, roots
from clusterkit.graph.core import Graph
from clusterkit.graph.graphcycles import GraphCycles
from clusterkit.result.model import Partition
from clusterkit.selection.protocol import (
    SubgraphSelector,
    call_select,
    call_select_input,
    call_select_output,
)


def run(problem: Problem, *, merge_non_adjacent: bool = False, window: int | None = 1024,
        far_span: int | None = 1024, far_budget: int = 16, passes: int = 1,
        levels: bool = False) -> Partition:
    """GraphCycles edge contraction (see the module docstring).

    ``info`` records ``contractions``, ``refused_contractions`` and its parts
    (``refused_cycle``, ``refused_size``, ``refused_const_bytes``, ``refused_never``,
    ``refused_selector``, ``refused_budget``), ``far_edges``, ``dummy_nodes``, ``passes``,
    ``non_adjacent_merges``, ``filtered_nodes`` and ``min_size_fallback_nodes``; with
    ``levels``, also ``refused_levels`` and ``level_bound``."""
    _check_options(window=window, far_span=far_span, far_budget=far_budget, passes=passes)
    with gc_paused():  # the contraction allocates millions of small sets and lists
        engine = _Contraction(problem, window, far_span, far_budget)
    return _run(engine, levels, merge_non_adjacent, passes)


def _run(engine: _Contraction, levels: bool, merge_non_adjacent: bool,
         passes: int) -> Partition:
    """:func:`run` on an engine that has not started."""
    with gc_paused():
        engine.start()
        engine.merge_groups()
        if levels:
            engine.bound_levels()
        engine.contract(passes)
        if merge_non_adjacent:
            engine.merge_independent()
        labels = engine.labels()
        ranks = engine.ranks(labels)
        # freed before the partition is built (the level bound holds the graph too)
        engine.cycles_graph, engine.levels = None, None  # type: ignore[assignment]
    return _partition(engine, (labels, ranks), dict(engine.info))


def run_both(problem: Problem, *, window: int | None = 1024, far_span: int | None = 1024,
             far_budget: int = 16, passes: int = 1, levels: bool = False,
             then_levels: bool = False) -> tuple[Partition, Partition] | tuple[
                 Partition, Partition, Callable[[], Partition]]:
    """The partitions of :func:`run` without and with ``merge_non_adjacent`` from one
    contraction (the non-adjacent merges come after it). Equal to two calls of :func:`run`;
    with an edge-sensitive selector it is two calls (its selectors hold state). With
    ``then_levels`` a third item: a function returning :func:`run` with ``levels`` (and no
    ``merge_non_adjacent``), which starts from a copy of the same graph instead of building
    it again."""
    opts: dict[str, Any] = dict(window=window, far_span=far_span, far_budget=far_budget,
                                passes=passes, levels=levels)
    found = _shared(problem, opts, True, then_levels)
    return tuple(found)


def run_then_levels(problem: Problem, *, window: int | None = 1024,
                    far_span: int | None = 1024, far_budget: int = 16, passes: int = 1,
                    levels: bool = False) -> tuple[Partition, Callable[[], Partition]]:
    """:func:`run` and a function returning :func:`run` with ``levels``, which starts from a
    copy of the same graph instead of building it again (:func:`run_both` without the
    non-adjacent merges)."""
    opts: dict[str, Any] = dict(window=window, far_span=far_span, far_budget=far_budget,
                                passes=passes, levels=levels)
    plain, later = _shared(problem, opts, False, True)
    return plain, later


def _shared(problem: Problem, opts: dict[str, Any], non_adjacent: bool,
            then_levels: bool) -> list[Any]:
    """:func:`run` with ``opts``, then (``non_adjacent``) with ``merge_non_adjacent`` from
    the same contraction, then (``then_levels``) a function returning :func:`run` with
    ``levels`` from a copy of the graph before the contraction."""
    _check_options(**{k: v for k, v in opts.items() if k != "levels"})
    passes = opts["passes"]
    with gc_paused():
        engine = _Contraction(problem, opts["window"], opts["far_span"], opts["far_budget"])
        if any(engine.edge_sensitive):  # the selectors hold state: separate runs
            found: list[Any] = [run(problem, **opts)]
            if non_adjacent:
                found.append(run(problem, merge_non_adjacent=True, **opts))
            if then_levels:
                found.append(lambda: run(problem, **dict(opts, levels=True)))
            return found
        start = engine.copy() if then_levels else None
        engine.start()
        engine.merge_groups()
        if opts["levels"]:
            engine.bound_levels()
        engine.contract(passes)
        labels = engine.labels()
        plain, plain_info = (labels, engine.ranks(labels)), dict(engine.info)
        if non_adjacent:
            engine.merge_independent()
            labels = engine.labels()
            merged = (labels, engine.ranks(labels))
        engine.cycles_graph, engine.levels = None, None  # type: ignore[assignment]  # as in _run
    found = [_partition(engine, plain, plain_info)]
    if non_adjacent:
        found.append(_partition(engine, merged, dict(engine.info)))
    if start is not None:
        found.append(lambda: _run(start, True, False, passes))
    return found


def _partition(engine: _Contraction, found: tuple[np.ndarray, np.ndarray],
               info: dict[str, Any]) -> Partition:
    """The selector pass and the partition for contraction labels (on a copy of the plan's
    fallback codes, which :func:`finish` updates); ``found``: the labels and the rank of each
    node's contracted node, whose order the partition keeps as its cluster order when it is
    one (:meth:`Partition.record_order`: the clusters the selector pass left as they were)."""
    problem = engine.problem
    labels, ranks = found
    plan_ = dataclasses.replace(engine.plan, codes=engine.plan.codes.copy())
    labels, dev, stats = selector_pass(problem, plan_, labels, engine.node_device,
                                       selectors=engine.selector_of)
    info.update(stats)
    part = finish(problem, plan_, labels, dev, info)
    if len(part.clusters) > 1:
        rank = np.empty(len(part.clusters), dtype=np.int64)
        rank[part.assignment()] = ranks
        part.record_order(np.argsort(rank, kind="stable"))
    return part


def _dummy_routed(g: Graph, pl: Plan) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """The GraphCycles graph of ``g`` under the plan ``pl``: each forbidden edge between two
    nodes of one device routed through a dummy node. Returns the dummies' count, each node's
    GraphCycles id and the edge arrays. The dummies of the edges into v are numbered just
    before v, so the ids stay a topological order (no re-sort inside GraphCycles)."""
    n, dev = g.n, pl.dev
    src, dst = g.edge_src, g.edge_dst
    d_src = dev[src]
    dummy = (~pl.inner) & (d_src >= 0) & (d_src == dev[dst])
    k = int(dummy.sum())
    kin = np.bincount(dst[dummy], minlength=n)
    gid = np.arange(n, dtype=np.int64) + np.cumsum(kin)
    de = np.flatnonzero(dummy)
    de = de[np.argsort(dst[de], kind="stable")]
    ds = dst[de]
    j = np.arange(k) - np.searchsorted(ds, ds, side="left")
    did = gid[ds] - kin[ds] + j
    keep = ~dummy
    gs = np.concatenate([gid[src[keep]], gid[src[de]], did])
    gd = np.concatenate([gid[dst[keep]], did, gid[ds]])
    return k, gid, gs, gd


class _Contraction:
    """Union-find over the nodes on top of a GraphCycles of the whole graph (+ dummies)."""

    NEIGHBOURS = 8  # clusters looked back at by merge_non_adjacent

    def __init__(self, problem: Problem, window: int | None, far_span: int | None,
                 far_budget: int):
        self.problem = p = problem
        g = problem.graph
        n = g.n
        self.n = n
        self.plan = pl = plan(problem)
        self.node_device = pl.dev
        dev = pl.dev
        k, gid, gs, gd = _dummy_routed(g, pl)
        # to build the same GraphCycles again (:meth:`copy`), until :meth:`start`
        self.graph_edges: tuple[int, np.ndarray, np.ndarray] | None = (n + k, gs, gd)
        #: what this contraction and its copies compute alike (read only once made)
        self.shared: dict[str, Any] = {}
        self.cycles_graph = GraphCycles.from_edges(n + k, gs, gd)
        self.graph_id = gid.tolist() if k else None  # node -> GraphCycles id (None: identity)
        orig = np.full(n + k, -1, dtype=np.int64)
        orig[gid] = np.arange(n)
        self.node_of_graph_id = orig.tolist() if k else None
        # clusters; a root is its GraphCycles survivor. The ids are a topological order, so the
        # graph's first ranks are 0..n-1: the parents start from them (one int object per node)
        self.union_find = UnionFind(n, identity=self.cycles_graph.ranks()[:n])
        self.find = self.union_find.find
        self.size = self.union_find.size         # nodes per cluster (at its root)
        lim = p.limits  # per node: its device's node and byte limits (global or its own)
        self.const_bytes = g.const_bytes.tolist() if lim.any_bytes else None
        # per node (None: no device has that limit, then no list of a million Nones is held)
        self.max_nodes = [lim.max_nodes[d] if d >= 0 else None for d in dev.tolist()] \
            if lim.any_maximum else None
        self.max_const = [lim.max_const[d] if d >= 0 else None for d in dev.tolist()] \
            if lim.any_bytes else None
        self.never: dict[int, set[int]] = {}
        for a, b in p.never_pairs.tolist():
            self.never.setdefault(a, set()).add(b)
            self.never.setdefault(b, set()).add(a)
        ndev = len(p.devices)
        self.edge_sensitive = [p.properties[d].create_subgraph_selector().edge_sensitive
                               for d in range(ndev)]
        self.selectors: dict[int, SubgraphSelector] = {}
        self.window = window
        self.far_span = far_span
        self.far_budget = far_budget
        self.info: dict[str, Any] = {
            "dummy_nodes": k, "contractions": 0, "refused_contractions": 0,
            "refused_cycle": 0, "refused_size": 0, "refused_const_bytes": 0, "refused_never": 0,
            "refused_selector": 0, "refused_budget": 0, "far_edges": 0, "passes": 0,
            "non_adjacent_merges": 0}
        self.in_group = np.zeros(n, dtype=bool)
        for grp in p.groups:
            self.in_group[grp] = True
        self.levels: LevelBound | None = None

    def copy(self) -> _Contraction:
        """This contraction before it started, to run again with other options: its own
        GraphCycles, union-find and bookkeeping; the plan and arrays read only are shared. Its
        GraphCycles is built again from the edge arrays when it starts (:meth:`start`), as
        fast as a copy, so that two of them are never held at once."""
        other = copy.copy(self)
        other.cycles_graph = None  # type: ignore[assignment]  # built when it starts
        other.union_find = UnionFind(self.n)
        other.find, other.size = other.union_find.find, other.union_find.size
        other.const_bytes = list(self.const_bytes) if self.const_bytes is not None else None
        other.never = {v: set(partners) for v, partners in self.never.items()}
        other.selectors, other.info, other.levels = {}, dict(self.info), None
        return other

    def start(self) -> None:
        """Build the GraphCycles of a copy (:meth:`copy`), then drop the edge arrays (no
        copy is made once the contraction starts)."""
        if self.cycles_graph is None:
            assert self.graph_edges is not None, "a copy is made before the contraction starts"
            self.cycles_graph = GraphCycles.from_edges(*self.graph_edges)
        self.graph_edges = None

    def bound_levels(self) -> None:
        """Refuse from now on every merge that would raise the number of levels
        (:mod:`clusterkit.engines.level_bound`); dummies are barriers."""
        ndev = len(self.problem.devices)
        cls = np.full(self.cycles_graph.num_nodes, ndev, dtype=np.int64)
        dev = np.where(self.node_device >= 0, self.node_device, ndev)
        cls[np.arange(self.n) if self.graph_id is None else np.asarray(self.graph_id)] = dev
        self.levels = LevelBound(self.cycles_graph, cls.tolist(), ndev)
        self.info.update(refused_levels=0, level_bound=self.levels.bound)

    def _level_ok(self, x: int, y: int) -> bool:
        """The level bound allows merging GraphCycles nodes ``x`` and ``y`` (counts refusals)."""
        if self.levels is None or self.levels.allows(x, y):
            return True
        self.info["refused_levels"] += 1
        return False

    def _level_merged(self, s: int | None, x: int, y: int) -> None:
        if self.levels is not None and s is not None:
            self.levels.merged(s, x, y)

    # ------------------------------------------------------------------ id translation
    def to_graph_id(self, v: int) -> int:
        """GraphCycles id of node ``v``."""
        return v if self.graph_id is None else self.graph_id[v]

    def from_graph_id(self, x: int | None) -> int | None:
        """Node of GraphCycles id ``x`` (None stays None)."""
        if x is None or self.node_of_graph_id is None:
            return x
        return self.node_of_graph_id[x]

    def _absorbed(self, keep: int, gone: int) -> None:
        """Book-keeping after the GraphCycles merged cluster ``gone`` into ``keep``."""
        self.union_find.link(keep, gone)
        if self.const_bytes is not None:
            self.const_bytes[keep] += self.const_bytes[gone]
        nv = self.never
        if gone in nv:
            mine = nv.pop(gone)
            if keep in nv:
                nv[keep] |= mine
            else:
                nv[keep] = mine
        if gone in self.selectors:
            s = self.selectors.pop(gone)
            self.selectors.setdefault(keep, s)

    def _fits(self, a: int, b: int) -> str | None:
        """Why clusters ``a`` and ``b`` may not be merged (size, bytes, never pair), or None."""
        hi = self.max_nodes[a] if self.max_nodes is not None else None
        cb = self.max_const[a] if self.max_const is not None else None
        if hi is not None and self.size[a] + self.size[b] > hi:
            return "refused_size"
        held = self.const_bytes  # constant bytes per cluster root (None: no byte limit)
        if cb is not None and held is not None and held[a] + held[b] > cb:
            return "refused_const_bytes"
        nv = self.never
        if a in nv or b in nv:
            pa, pb = nv.get(a, ()), nv.get(b, ())
            scan, other = (pa, b) if len(pa) <= len(pb) else (pb, a)
            find = self.find
            if any(find(x) == other for x in scan):
                return "refused_never"
        return None

    # ------------------------------------------------------------------ together groups
    def merge_groups(self) -> None:
        """One cluster per together group (members merged in topological order)."""
        gcy = self.cycles_graph
        g = self.problem.graph
        for gi, grp in enumerate(self.problem.groups):
            ids = grp.tolist()
            c = self.find(ids[0])
            for m in ids[1:]:
                cm = self.find(m)
                if cm == c:
                    continue
                gc_, gm = self.to_graph_id(c), self.to_graph_id(cm)
                if gcy.has_edge(gc_, gm):
                    s = self.from_graph_id(gcy.contract_edge(gc_, gm))
                elif gcy.has_edge(gm, gc_):
                    s = self.from_graph_id(gcy.contract_edge(gm, gc_))
                else:
                    s = self.from_graph_id(gcy.merge(gc_, gm))
                if s is None:  # compile refuses non-convex groups and groups in a cycle
                    raise StrategyError(f"internal: together group {gi} could not be merged")
                self._absorbed(s, cm if s == c else c)
                c = s
            d = int(self.node_device[ids[0]])
            if d >= 0 and self.edge_sensitive[d]:
                sel = self.problem.properties[d].create_subgraph_selector()
                call_select(sel, g.nodes[ids[0]])
                self.selectors[c] = sel

    # ------------------------------------------------------------------ contraction
    def _order(self) -> tuple[np.ndarray, int]:
        """Candidate edges in contraction order; returns (edge ids, number of far edges, which
        come last). Sorted once: a copy (:meth:`copy`) shares the answer."""
        if "order" not in self.shared:
            self.shared["order"] = self._sort_candidates()
        return self.shared["order"]

    def _sort_candidates(self) -> tuple[np.ndarray, int]:
        """:meth:`_order`, computed."""
        p = self.problem
        g = p.graph
        src, dst = g.edge_src, g.edge_dst
        cand = self.plan.inner.copy()
        if self.in_group.any():
            uo = self.plan.super_nodes.super_node_of
            cand &= uo[src] != uo[dst]
        e = np.flatnonzero(cand)
        far = np.zeros(len(e), dtype=bool)
        if self.far_span is not None:
            far = (dst[e] - src[e]) > self.far_span
        win = dst[e] // self.window if self.window else np.zeros(len(e), dtype=np.int64)
        order = np.lexsort((e, -g.edge_bytes[e], win, far))
        return e[order], int(far.sum())

    CHUNK = 1 << 16  # edges turned into Python ints at a time (bounds memory on 1e6 nodes)

    def contract(self, passes: int) -> None:
        """Contract the candidate edges in order; ``passes`` > 1 retries cycle refusals."""
        g = self.problem.graph
        edges, nfar = self._order()
        info = self.info
        info["far_edges"] = nfar
        first_far = len(edges) - nfar
        try_ = self._try
        plain = self._plain()
        for p in range(max(1, passes)):
            info["passes"] = p + 1
            retry: list[int] = []
            done_before = info["contractions"]
            for start in range(0, len(edges), self.CHUNK):
                chunk = edges[start:start + self.CHUNK]
                us, vs = g.edge_src[chunk].tolist(), g.edge_dst[chunk].tolist()
                stop = min(len(chunk), max(0, first_far - start))
                if plain:  # the common case, inlined: near edges, then far ones
                    if stop:
                        retry.extend(i + start for i in
                                     self._contract_plain(us[:stop], vs[:stop], False))
                    if stop < len(chunk):
                        retry.extend(i + start + stop for i in
                                     self._contract_plain(us[stop:], vs[stop:], True))
                    if p + 1 >= passes:
                        retry.clear()
                    continue
                for i, (u, v) in enumerate(zip(us, vs), start):
                    if try_(u, v, i >= first_far) == "refused_cycle" and p + 1 < passes:
                        retry.append(i)
            if not retry or info["contractions"] == done_before:
                break
            keep = np.asarray(retry, dtype=np.int64)
            first_far = int(np.searchsorted(keep, first_far))
            edges = edges[keep]
        info["refused_contractions"] = sum(info.get(k, 0) for k in (
            "refused_cycle", "refused_size", "refused_const_bytes", "refused_never",
            "refused_selector", "refused_budget", "refused_levels"))

    def _plain(self) -> bool:
        """No size limits, never-together pairs or edge-sensitive selectors: every refusal
        is a cycle, and :meth:`_contract_plain` can skip the per-edge checks."""
        return (not self.problem.limits.any_maximum and self.const_bytes is None and not self.never
                and not any(self.edge_sensitive))

    def _contract_plain(self, us: list[int], vs: list[int], far: bool) -> list[int]:
        """:meth:`_try` for edges without constraints to check (the level bound, for ``far``
        edges the bounded search, the contraction); returns the positions refused for a
        cycle."""
        # bound locally: this is the hot loop of the contraction
        parent, link = self.union_find.parent, self.union_find.link
        graph, budget = self.cycles_graph, self.far_budget
        contract = graph.contract_live_edge
        gid, orig = self.graph_id, self.node_of_graph_id
        lb = self.levels
        asap, alap = (lb.asap, lb.alap) if lb is not None else ([], [])
        refused: list[int] = []
        done = level_refused = over_budget = 0
        for i, (a, b) in enumerate(zip(us, vs)):
            while parent[a] != a:  # UnionFind.find inlined (path halving)
                parent[a] = a = parent[parent[a]]
            while parent[b] != b:
                parent[b] = b = parent[parent[b]]
            if a == b:
                continue
            ga, gb = (a, b) if gid is None else (gid[a], gid[b])
            if lb is not None:  # LevelBound.allows inlined
                ax, ay, lx, ly = asap[ga], asap[gb], alap[ga], alap[gb]
                if (ax if ax > ay else ay) > (lx if lx < ly else ly):
                    level_refused += 1
                    continue
            if far:  # decided exactly when both cones are small, else refused
                verdict = _bounded_search(graph, ga, gb, budget)
                if verdict == "budget":
                    over_budget += 1
                    continue
                if verdict == "path":
                    refused.append(i)
                    continue
            s = contract(ga, gb)
            if s is None:
                refused.append(i)
                continue
            if lb is not None:
                lb.merged(s, ga, gb)
            if orig is not None:
                s = orig[s]
            link(s, b if s == a else a)
            done += 1
        info = self.info
        info["contractions"] += done
        info["refused_cycle"] += len(refused)
        info["refused_budget"] += over_budget
        if level_refused:
            info["refused_levels"] += level_refused
        return refused

    def _try(self, u: int, v: int, far: bool) -> str | None:
        """Try to contract the clusters of edge ``u -> v``; returns the refusal reason."""
        find = self.find
        a, b = find(u), find(v)
        if a == b:
            return None
        info = self.info
        why = self._fits(a, b)
        if why is not None:
            info[why] += 1
            return why
        gcy = self.cycles_graph
        if not self._level_ok(self.to_graph_id(a), self.to_graph_id(b)):
            return "refused_levels"
        if far:
            verdict = _bounded_search(gcy, self.to_graph_id(a), self.to_graph_id(b),
                                      self.far_budget)
            if verdict != "none":
                why = "refused_cycle" if verdict == "path" else "refused_budget"
                info[why] += 1
                return why
        d = int(self.node_device[u])
        if self.edge_sensitive[d]:
            return self._try_selector(u, v, a, b, d)
        ga, gb = self.to_graph_id(a), self.to_graph_id(b)
        sg = gcy.contract_edge(ga, gb)
        s = self.from_graph_id(sg)
        if s is None:
            info["refused_cycle"] += 1
            return "refused_cycle"
        self._level_merged(sg, ga, gb)
        self._absorbed(s, b if s == a else a)
        info["contractions"] += 1
        return None

    def _selector(self, c: int) -> SubgraphSelector | None:
        """The growing selector of cluster ``c`` (a fresh one that selected its node when ``c``
        is a single node)."""
        sel = self.selectors.get(c)
        if sel is None:
            d = int(self.node_device[c])
            sel = self.problem.properties[d].create_subgraph_selector()
            if not call_select(sel, self.problem.graph.nodes[c]):
                return None
            self.selectors[c] = sel
        return sel

    def _try_selector(self, u: int, v: int, a: int, b: int, d: int) -> str | None:
        """Contraction for an edge-sensitive (possibly stateful) selector: one side must be a
        single node, which the other side's selector is asked about."""
        info = self.info
        single_a = self.size[a] == 1 and not self.in_group[a]
        single_b = self.size[b] == 1 and not self.in_group[b]
        if not (single_a or single_b):
            info["refused_selector"] += 1
            return "refused_selector"
        gcy = self.cycles_graph
        if not gcy.can_contract_edge(self.to_graph_id(a), self.to_graph_id(b)):
            info["refused_cycle"] += 1
            return "refused_cycle"
        nodes = self.problem.graph.nodes
        if single_b:
            grower = a
            sel = self._selector(a)
            ok = sel is not None and call_select_output(sel, nodes[u], nodes[v])
        else:
            grower = b
            sel = self._selector(b)
            ok = sel is not None and call_select_input(sel, nodes[v], nodes[u])
        if not ok:
            info["refused_selector"] += 1
            return "refused_selector"
        ga, gb = self.to_graph_id(a), self.to_graph_id(b)
        sg = gcy.contract_edge(ga, gb)
        s = self.from_graph_id(sg)
        if s is None:  # pragma: no cover - can_contract_edge said yes just before
            info["refused_cycle"] += 1
            return "refused_cycle"
        self._level_merged(sg, ga, gb)
        other = b if grower == a else a
        self.selectors.pop(other, None)
        grown = self.selectors.pop(grower)
        self._absorbed(s, b if s == a else a)
        self.selectors[s] = grown
        info["contractions"] += 1
        return None

    # ------------------------------------------------------------------ non-adjacent merges
    def merge_independent(self) -> None:
        """Merge clusters of one device that no path joins, when the constraints allow: first
        clusters reading one tensor (largest first: it is then sent once), then each cluster
        with one of the few clusters before it in topological order (fewer partitions)."""
        ok_dev = [not es for es in self.edge_sensitive]
        dev_l = self.node_device.tolist()
        self._merge_readers(ok_dev, dev_l)
        parent = self.union_find.parent
        by_dev: dict[int, list[int]] = {}
        for c in range(self.n):
            if parent[c] == c and dev_l[c] >= 0:
                by_dev.setdefault(dev_l[c], []).append(c)
        for d in sorted(by_dev):
            if ok_dev[d]:
                self._merge_window(by_dev[d])

    def _attempt(self, o: int, c: int) -> int | None:
        """Merge clusters ``o`` and ``c`` (of one device) unless the constraints, the level
        bound or a path between them forbid it; returns the merged cluster or None."""
        go, gc_ = self.to_graph_id(o), self.to_graph_id(c)
        if o == c or self._fits(o, c) is not None or not self._level_ok(go, gc_):
            return None
        sg = self.cycles_graph.merge(go, gc_)  # None (graph unchanged) when a path joins them
        if sg is None:
            return None
        self._level_merged(sg, go, gc_)
        s = self.from_graph_id(sg)
        assert s is not None  # sg is a node
        self._absorbed(s, c if s == o else o)
        self.info["non_adjacent_merges"] += 1
        return s

    def _merge_readers(self, ok_dev: list[bool], dev_l: list[int]) -> None:
        """Per tensor read at least twice and not free (largest first), merge its readers of
        one device into the first one's cluster where allowed."""
        find, attempt = self.find, self._attempt
        tt = self.problem.graph.tensor_table
        t_order = np.lexsort((np.arange(len(tt.nbytes)), -tt.nbytes))
        inc_t, inc_n = tt.inc_tensor, tt.inc_node
        if len(inc_t) > 1 and not bool(np.all(inc_t[1:] >= inc_t[:-1])):
            by_t = np.argsort(inc_t, kind="stable")
            inc_t, inc_n = inc_t[by_t], inc_n[by_t]
        bounds = np.searchsorted(inc_t, np.arange(len(tt.nbytes) + 1))
        consumers = inc_n.tolist()
        b_list = bounds.tolist()
        shared = (np.diff(bounds)[t_order] >= 2) & ~tt.free[t_order]  # read twice, not free
        for t in t_order[shared].tolist():
            first: dict[int, int] = {}
            for v in consumers[b_list[t]:b_list[t + 1]]:
                d = dev_l[v]
                if d < 0 or not ok_dev[d]:
                    continue
                c = find(v)
                o = first.get(d)
                if o is None:
                    first[d] = c
                    continue
                o = find(o)
                s = attempt(o, c)
                first[d] = s if s is not None else o

    def _merge_window(self, clusters: list[int]) -> None:
        """Each cluster of one device, in topological order, with one of the ``NEIGHBOURS``
        latest open clusters before it (the latest first)."""
        open_: list[int] = []
        rank, to_graph_id = self.cycles_graph.ranks(), self.to_graph_id
        for c in sorted(clusters, key=lambda x: rank[to_graph_id(x)]):
            for j in range(len(open_) - 1, max(-1, len(open_) - 1 - self.NEIGHBOURS), -1):
                s = self._attempt(open_[j], c)
                if s is not None:
                    open_[j] = s
                    break
            else:
                open_.append(c)

    # ------------------------------------------------------------------ result
    def labels(self) -> np.ndarray:
        """The root of every node's cluster (pointer jumping on the union-find parents)."""
        return roots(self.union_find.parent)

    def ranks(self, labels: np.ndarray) -> np.ndarray:
        """Per node, the rank of its cluster's GraphCycles node now (a topological order of
        the clusters; ``labels``: :meth:`labels`)."""
        at = labels if self.graph_id is None else np.asarray(self.graph_id)[labels]
        return np.asarray(self.cycles_graph.ranks(), dtype=np.int64)[at]

    def selector_of(self, label: int) -> SubgraphSelector | None:
        """The grown selector of the cluster labelled ``label`` (its GraphCycles id)."""
        return self.selectors.get(label)


def _check_options(**opts: Any) -> None:
    """Option values: ints (``window``/``far_span`` may be None), ``far_budget``/``passes``
    at least 1, ``window`` at least 1, ``far_span`` at least 0."""
    lows = {"window": 1, "far_span": 0, "far_budget": 1, "passes": 1}
    for key, value in opts.items():
        if value is None and key in ("window", "far_span"):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
                value < lows[key]:
            raise StrategyError(f"strategy 'cycles': option {key} must be an integer >= "
                                f"{lows[key]}" + (" or None" if key in ("window", "far_span")
                                                  else "") + f", got {value!r}")


def _bounded_search(gcy: GraphCycles, x: int, y: int, budget: int) -> str:
    """Another path ``x ~> y`` besides the edge? ``"path"``, ``"none"`` (both cones of the rank
    window explored within ``budget`` nodes), or ``"budget"`` (a cone is larger)."""
    # bound locally (live nodes only below): this search runs once per far edge
    rank, succs, preds = gcy.ranks(), gcy.successor_sets(), gcy.predecessor_sets()
    lo, hi = rank[x], rank[y]
    fseen = {x}
    stack = [x]
    while stack:
        u = stack.pop()
        nbrs = succs[u]
        for w in (sorted(nbrs) if len(nbrs) > 1 else nbrs):  # one neighbour needs no sort
            if w == y:
                if u == x:
                    continue
                return "path"
            if w not in fseen and rank[w] < hi:
                if len(fseen) >= budget:
                    return "budget"
                fseen.add(w)
                stack.append(w)
    bseen = {y}
    stack = [y]
    while stack:
        u = stack.pop()
        nbrs = preds[u]
        for w in (sorted(nbrs) if len(nbrs) > 1 else nbrs):
            if w == x:
                if u == y:
                    continue
                return "path"
            if w in fseen:
                return "path"
            if w not in bseen and rank[w] > lo:
                if len(bseen) >= budget:
                    return "budget"
                bseen.add(w)
                stack.append(w)
    return "none"
