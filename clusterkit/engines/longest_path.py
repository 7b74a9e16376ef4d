"""Strategy ``longest-path``: 0/1 edge weights, level = longest path from the sources.

The idea (TVM's clustering by longest path): an edge weighs 0 when its two
ends may share a cluster (same device, the device's selector follows it, no constraint cuts it)
and 1 when it must be cut, except that an edge into a later class (a later device by priority,
or the fallback) and an edge between two fallback nodes weigh 0 too: they need not climb a level.
The level of a node is the longest weighted path from a source; a cluster is the nodes of one
level and one device, split into connected pieces (option ``split_components``). Acyclic by
construction: along any path levels never decrease, and a same-level edge weighs 0, so it either
joins two nodes of one piece or goes to a later class. Ordering the clusters by (level, class,
fallback nodes in topological order) therefore orders every edge between two clusters forward
(the chunks of an oversized piece follow a topological order of that piece), and the graph of
clusters has no cycle.

Constraints:

- must-cut edges, value inputs, refused selector edges, different devices, fallback ends and
  adjacent never-together pairs weigh 1;
- a never-together pair that is not adjacent and ends up in one cluster gets a virtual weight-1
  edge (oriented along a topological order) and the levels are computed again, until no pair
  collides (a dummy node between the two, in TVM's description);
- together groups are contracted to one super-node first (compiling the constraints checked that
  they are convex and that no two depend on each other, so the contracted graph is a DAG);
- ``max_size`` / ``max_const_bytes``: an oversized piece is cut into chunks that are contiguous in
  a topological order (never formed above the limit); ``min_size``: smaller clusters go back to
  the fallback (:func:`~clusterkit.engines.common.enforce_min_size`).

Refinement (option ``refine``): every node may sit anywhere between its earliest level (the
longest path) and its latest one (the longest path measured back from the sinks, with the
number of levels kept); nodes are moved, in topological order, to the level of the neighbours
they exchange the most bytes with over weight-0 edges, when that lowers the bytes cut on those
edges and keeps every ``level[v] >= level[u] + w`` (hence validity). The refined partition is kept
only if its exact ``cut_bytes`` is not higher.

Selectors: the compiled edge answers (fresh selectors) give the weights. When a device's selector
is edge-sensitive, each cluster is re-grown with one fresh selector per growing piece
(``select`` on the seed, ``select_output``/``select_input`` along inner edges); every cluster is
then passed to the selector's ``filter`` when the selector overrides it. Either may split a
cluster; :func:`convex_split` re-splits the parts by "re-entry level" so the result stays valid.

The helpers shared with the ``cycles`` engine (device plan, convex re-split, filter, exact cut)
live here too; both work on the :class:`~clusterkit.engines.super_nodes.SuperNodeGraph`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable

import numpy as np

from clusterkit._deprecated import renamed_attribute
from clusterkit.constraints.core import Problem
from clusterkit.engines.common import enforce_min_size
from clusterkit.engines.super_nodes import SuperNodeGraph
from clusterkit.errors import StrategyError
from clusterkit.graph.algorithms import pair_order, weak_components
from clusterkit.graph.core import HOST, Graph
from clusterkit.result.metrics import cut_bytes
from clusterkit.result.model import Partition
from clusterkit.result.reasons import (
    BELOW_MIN_SIZE,
    FILTER_DROPPED,
    GROUP_FITS_NO_DEVICE,
    SELECT_REFUSED,
    Category,
    Reason,
)
from clusterkit.selection.protocol import (
    SubgraphSelector,
    call_filter,
    call_select,
    call_select_input,
    call_select_output,
)

# why a supported node ends on the fallback: a code per node while the engine runs, the shared
# reason of each code on the partition's ``fallback_reasons``
FB_NONE, FB_GROUP, FB_FILTER, FB_SELECT, FB_MIN_SIZE = 0, 1, 2, 3, 4
FB_REASONS = {FB_GROUP: GROUP_FITS_NO_DEVICE, FB_FILTER: FILTER_DROPPED,
              FB_SELECT: SELECT_REFUSED, FB_MIN_SIZE: BELOW_MIN_SIZE}


# ====================================================================== shared with `cycles`
@dataclass
class Plan:
    """Per node device (``dev``, -1 = fallback) and per edge whether it may lie inside a cluster
    (``inner``: same device, contractible for it, not an adjacent never-together pair), with the
    together groups as super-nodes."""

    dev: np.ndarray
    inner: np.ndarray
    super_nodes: SuperNodeGraph
    codes: np.ndarray
    never_adjacent: int = 0

    units = renamed_attribute("super_nodes")  # the old name, deprecated


def plan(problem: Problem) -> Plan:
    """Devices in priority order (``problem.first_device``); a together group goes to the first
    device that takes all its members, follows its inner edges and may hold its constants,
    else to the fallback."""
    g = problem.graph
    n = g.n
    dev = problem.first_device.astype(np.int64)
    codes = np.zeros(n, dtype=np.int8)
    src, dst = g.edge_src, g.edge_dst
    for gi, grp in enumerate(problem.groups):
        inside = (problem.group_of[src] == gi) & (problem.group_of[dst] == gi)
        choice = -1
        for d in range(len(problem.devices)):
            if not problem.supported[d, grp].all() or not problem.edge_ok[d, inside].all():
                continue
            budget = problem.limits.max_const[d]  # the global one or the device's own
            if budget is not None and int(g.const_bytes[grp].sum()) > budget:
                continue
            choice = d
            break
        dev[grp] = choice
        if choice < 0:
            codes[grp] = np.where(problem.any_supported[grp], FB_GROUP, FB_NONE)
    d_src = dev[src]
    inner = (d_src >= 0) & (d_src == dev[dst]) & ~problem.must_cut
    if len(problem.devices) and len(src):
        inner &= problem.edge_ok[np.maximum(d_src, 0), np.arange(len(src))]
    never_adj = 0
    if len(problem.never_pairs) and len(src):
        keys = src * n + dst
        pk = problem.never_pairs[:, 0] * n + problem.never_pairs[:, 1]
        hit = np.isin(keys, pk)
        never_adj = int(hit.sum())
        inner &= ~hit
    return Plan(dev, inner, SuperNodeGraph(problem), codes, never_adj)


def convex_split(super_nodes: SuperNodeGraph, cluster: list[int], part: dict[int, int]
                 ) -> dict[int, tuple[int, int]]:
    """Split a convex cluster whose super-nodes carry part labels (``-1`` = dropped) into valid
    clusters: returns ``super-node -> (part, level)`` for the kept super-nodes, where level
    counts, along the paths inside the cluster, the edges that leave a dropped super-node or
    change part. Edges inside the cluster never lower the level and an edge that keeps it joins
    two super-nodes of one part, so the new clusters form no cycle (paths outside the cluster
    cannot come back: it was convex)."""
    uo = super_nodes.super_node_of
    inside = {int(uo[v]) for v in cluster}
    level: dict[int, int] = {}
    for u in sorted(inside, key=super_nodes.rank.__getitem__):
        best = 0
        pu = part[u]
        for p in super_nodes.pred[u]:
            if p in level:
                x = level[p] + (1 if part[p] < 0 or part[p] != pu else 0)
                if x > best:
                    best = x
        level[u] = best
    return {u: (part[u], level[u]) for u in inside if part[u] >= 0}


def _overrides(sel: SubgraphSelector, name: str) -> bool:
    return getattr(type(sel), name) is not getattr(SubgraphSelector, name)


def selector_pass(problem: Problem, plan_: Plan, labels: np.ndarray, dev: np.ndarray,
                  selectors: Callable[[int], SubgraphSelector | None] | None = None,
                  regrow: bool = False) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Re-grow (``regrow``, edge-sensitive selectors) and ``filter`` every offloaded cluster;
    dropped super-nodes go to the fallback and the rest is re-split with :func:`convex_split`.

    ``selectors(label)`` gives the grown selector of a cluster (``cycles``) or ``None`` for a
    fresh one. Returns new labels, devices and counts."""
    g = problem.graph
    super_nodes = plan_.super_nodes
    uo = super_nodes.super_node_of
    props = problem.properties
    probe = [p.create_subgraph_selector() for p in props]
    do_filter = [_overrides(s, "filter") for s in probe]
    do_grow = [regrow and s.edge_sensitive for s in probe]
    stats = {"filtered_nodes": 0, "regrow_refused_nodes": 0}
    if not any(do_filter) and not any(do_grow):
        return labels, dev, stats
    acc = np.flatnonzero(dev >= 0)
    if not len(acc):
        return labels, dev, stats
    order = np.argsort(labels[acc], kind="stable")
    members_sorted = acc[order]
    bounds = np.flatnonzero(np.diff(labels[members_sorted])) + 1
    labels = labels.copy()
    dev = dev.copy()
    next_label = int(labels.max()) + 1
    for chunk in np.split(members_sorted, bounds):
        cl = chunk.tolist()
        d = int(dev[cl[0]])
        if not (do_filter[d] or do_grow[d]):
            continue
        part: dict[int, int] = {}
        sels: list[SubgraphSelector] = []
        if do_grow[d]:
            _regrow(problem, plan_, cl, props[d], part, sels, stats)
        else:
            given = selectors(int(labels[cl[0]])) if selectors is not None else None
            if given is None:  # a fresh selector, started on the cluster's first node
                given = props[d].create_subgraph_selector()
                call_select(given, g.nodes[cl[0]])
            sels.append(given)
            for v in cl:
                part[int(uo[v])] = 0
        if do_filter[d]:
            _filter_pieces(g, uo, cl, part, sels)
        dropped = [v for v in cl if part[int(uo[v])] < 0]
        if not dropped and len(sels) <= 1:
            continue
        if do_filter[d]:
            filt = [v for v in dropped if plan_.codes[v] != FB_SELECT]
            stats["filtered_nodes"] += len(filt)
            plan_.codes[filt] = FB_FILTER
        dev[dropped] = -1
        next_label = _relabel(super_nodes, cl, part, labels, next_label)
    return labels, dev, stats


def _filter_pieces(g: Graph, uo: np.ndarray, cl: list[int], part: dict[int, int],
                   sels: list[SubgraphSelector]) -> None:
    """Each piece's selector ``filter`` on its nodes; a dropped node's super-node (its whole
    together group) gets part ``-1``."""
    nodes = g.nodes
    for pid, sel in enumerate(sels):
        cands = [nodes[v] for v in cl if part[int(uo[v])] == pid]
        if not cands:
            continue
        kept = {nd.index for nd in call_filter(sel, cands)}
        for nd in cands:
            if nd.index not in kept:
                part[int(uo[nd.index])] = -1


def _relabel(super_nodes: SuperNodeGraph, cl: list[int], part: dict[int, int], labels: np.ndarray,
             next_label: int) -> int:
    """New labels (from ``next_label``) for the kept nodes of cluster ``cl`` split by
    :func:`convex_split`; returns the next free label."""
    uo = super_nodes.super_node_of
    split = convex_split(super_nodes, cl, part)
    remap: dict[tuple[int, int], int] = {}
    for v in cl:
        u = int(uo[v])
        if part[u] < 0:
            continue
        k = split[u]
        if k not in remap:
            remap[k] = next_label
            next_label += 1
        labels[v] = remap[k]
    return next_label


def _regrow(problem: Problem, plan_: Plan, cl: list[int], prop, part: dict[int, int],
            sels: list[SubgraphSelector], stats: dict[str, int]) -> None:
    """Re-grow the cluster ``cl`` with one fresh selector per piece (``select`` on the seed,
    ``select_output``/``select_input`` along inner edges): fills ``part`` (super-node → piece, -1
    for a super-node whose seed the selector refused) and ``sels`` (the selector of each piece)."""
    nodes = problem.graph.nodes
    succ_l, pred_l = problem.graph.succ_lists, problem.graph.pred_lists
    super_nodes = plan_.super_nodes
    uo = super_nodes.super_node_of
    inside = set(cl)
    for seed in cl:
        u = int(uo[seed])
        if u in part:
            continue
        sel = prop.create_subgraph_selector()
        if not call_select(sel, nodes[seed]):
            part[u] = -1
            stats["regrow_refused_nodes"] += len(super_nodes.members[u])
            plan_.codes[super_nodes.members[u]] = FB_SELECT
            continue
        pid = len(sels)
        sels.append(sel)
        part[u] = pid
        queue = deque(super_nodes.members[u])
        while queue:
            x = queue.popleft()
            for y in succ_l[x]:
                if y in inside and int(uo[y]) not in part and \
                        call_select_output(sel, nodes[x], nodes[y]):
                    part[int(uo[y])] = pid
                    queue.extend(super_nodes.members[int(uo[y])])
            for y in pred_l[x]:
                if y in inside and int(uo[y]) not in part and \
                        call_select_input(sel, nodes[x], nodes[y]):
                    part[int(uo[y])] = pid
                    queue.extend(super_nodes.members[int(uo[y])])


def finish(problem: Problem, plan_: Plan, labels: np.ndarray, dev: np.ndarray, info: dict
           ) -> Partition:
    """``min_size`` (to the fallback), then the Partition with ``info`` and fallback codes."""
    placed = dev
    dev = enforce_min_size(problem, labels, dev)
    small = (placed >= 0) & (dev < 0)
    if small.any():
        plan_.codes[small] = FB_MIN_SIZE
    info["min_size_fallback_nodes"] = int(small.sum())
    coded = np.flatnonzero((plan_.codes != FB_NONE) & (dev < 0)).tolist()
    reasons = {v: FB_REASONS[c] for v, c in zip(coded, plan_.codes[coded].tolist())}
    reasons.update(_own_minimum_reasons(problem, placed, small))
    return Partition.from_assignment(problem, labels, dev, info=info, fallback_reasons=reasons)


def _own_minimum_reasons(problem: Problem, placed: np.ndarray, small: np.ndarray
                         ) -> dict[int, Reason]:
    """For the nodes ``small`` sent back from a device with a minimum of its own
    (``min_nodes`` above ``min_size``), a reason naming that device's limit."""
    lim, out = problem.limits, {}
    for v in np.flatnonzero(small).tolist():
        d = int(placed[v])
        if lim.min_nodes[d] != lim.global_min:
            out[v] = Reason(Category.CONSTRAINT, f"its cluster on {problem.devices[d]} was "
                            f"below {lim.setting(d, 'min')} {lim.min_nodes[d]}")
    return out


def exact_cut(graph: Graph, labels: np.ndarray, dev: np.ndarray) -> int:
    """``cut_bytes`` for a labelling (:func:`clusterkit.result.metrics.cut_bytes`)."""
    labels = np.asarray(labels, dtype=np.int64)
    low = int(labels.min()) if len(labels) else 0
    units = np.where(dev >= 0, labels - low, HOST).astype(np.int64)
    return cut_bytes(graph, units)[0]


# ====================================================================== longest path
def run(problem: Problem, *, split_components: bool = True, join_siblings: bool = True,
        refine: bool = True, refine_rounds: int = 12) -> Partition:
    """Longest-path clustering (see the module docstring).

    - ``split_components``: split the nodes of one level and device into connected pieces
      (default); ``False`` keeps each (level, device) class together.
    - ``join_siblings``: with ``split_components``, also join pieces of one level and device
      that read the same tensor (default on: the tensor is then transferred once).
    - ``refine``: move nodes within their slack to lower cut bytes (default on);
      ``refine_rounds`` bounds the rounds of moves.
    """
    _check_options(split_components, join_siblings, refine, refine_rounds)
    g = problem.graph
    n = g.n
    pl = plan(problem)
    dev = pl.dev
    super_nodes = pl.super_nodes
    uo = super_nodes.super_node_of
    info: dict = {"never_adjacent_cut": pl.never_adjacent}
    if n == 0:
        return finish(problem, pl, np.zeros(0, np.int64), dev, info)
    lp = _LevelProblem(g, pl)
    never = _unit_pairs(problem, uo)
    virtual: list[tuple[int, int]] = []
    rounds = 0
    refined_used = False
    while True:
        rounds += 1
        lp.set_virtual(virtual)
        level = lp.longest()
        ulab = lp.clusters(level, split_components, join_siblings)
        if refine:
            lvl_r, moved = lp.refine(level, never, refine_rounds)
            if moved:
                ulab_r = lp.clusters(lvl_r, split_components, join_siblings)
                if exact_cut(g, ulab_r[uo], dev) <= exact_cut(g, ulab[uo], dev):
                    level, ulab = lvl_r, ulab_r
                    refined_used = True
                    info["refine_moves"] = moved
        clash = [(a, b) for a, b in never if ulab[a] == ulab[b] and lp.dev[a] >= 0]
        if not clash:
            break
        for a, b in clash:  # orient along the topological order: stays acyclic
            virtual.append((a, b) if lp.position(a) < lp.position(b) else (b, a))
    info["never_virtual_edges"] = len(virtual)
    info["level_rounds"] = rounds
    info["refined"] = refined_used
    info["levels"] = int(max(level)) + 1 if len(level) else 0
    ulab, chunks = lp.enforce_max(ulab, problem)
    info["max_limit_splits"] = chunks
    labels = ulab[uo].astype(np.int64)
    labels, dev, stats = selector_pass(problem, pl, labels, dev, regrow=True)
    info.update(stats)
    return finish(problem, pl, labels, dev, info)


def _bytes_at(level_of: np.ndarray, edges: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per super-node ``v``, the bytes of the weight-0 edges ``(ls, ld, s0, d0, b0)`` (current
    levels of both ends, the ends, the bytes) joining ``v`` at level ``level_of[v]`` to a
    neighbour on that level."""
    ls, ld, s0, d0, b0 = edges
    n = len(level_of)
    into = ls == level_of[d0]
    out = ld == level_of[s0]
    return (np.bincount(d0[into], weights=b0[into], minlength=n)
            + np.bincount(s0[out], weights=b0[out], minlength=n))


def _independent(mover: np.ndarray, delta: np.ndarray, cs: np.ndarray, cd: np.ndarray,
                 pos: np.ndarray) -> np.ndarray:
    """``mover`` without the loser of every conflict pair ``(cs[k], cd[k])`` where both move:
    the smaller gain ``delta`` loses, on a tie the later ``pos``."""
    both = mover[cs] & mover[cd]
    if both.any():
        a, b = cs[both], cd[both]
        a_loses = (delta[a] < delta[b]) | ((delta[a] == delta[b]) & (pos[a] > pos[b]))
        mover = mover.copy()
        mover[np.where(a_loses, a, b)] = False
    return mover


def _check_options(split_components: object, join_siblings: object, refine: object,
                   refine_rounds: object) -> None:
    """One-line StrategyError for an option of the wrong kind."""
    for key, value in (("split_components", split_components), ("refine", refine),
                       ("join_siblings", join_siblings)):
        if not isinstance(value, (bool, np.bool_)):
            raise StrategyError(f"strategy 'longest-path': option {key} must be true or false,"
                                f" got {value!r}")
    if isinstance(refine_rounds, bool) or not isinstance(refine_rounds, (int, np.integer)) \
            or refine_rounds < 0:
        raise StrategyError("strategy 'longest-path': option refine_rounds must be an integer"
                            f" >= 0, got {refine_rounds!r}")


def _unit_pairs(problem: Problem, uo: np.ndarray) -> list[tuple[int, int]]:
    """Never-together pairs as super-node pairs (adjacent ones are already weight-1 edges)."""
    out = set()
    for a, b in problem.never_pairs.tolist():
        ua, ub = int(uo[a]), int(uo[b])
        if ua != ub:
            out.add((min(ua, ub), max(ua, ub)))
    return sorted(out)


class _LevelProblem:
    """The super-node graph with 0/1 weights, in plain lists ordered for the level sweeps."""

    def __init__(self, g: Graph, pl: Plan):
        self.g = g
        self.pl = pl
        super_nodes = pl.super_nodes
        self.n = super_nodes.n
        w = (~pl.inner).astype(np.int64)
        b = g.edge_bytes
        # a super-node edge weighs 1 if one of its edges does; bytes add up
        if super_nodes.has_groups:
            outer = np.flatnonzero(super_nodes.edge_of >= 0)
            eo = super_nodes.edge_of[outer]
            uw = np.zeros(len(super_nodes.esrc), dtype=np.int64)
            np.maximum.at(uw, eo, w[outer])
            ub = np.zeros(len(super_nodes.esrc), dtype=b.dtype)
            np.add.at(ub, eo, b[outer])
            w, b = uw, ub
        self.us, self.ud, self.w, self.b = super_nodes.esrc, super_nodes.edst, w, b
        self.pos = np.asarray(super_nodes.rank, dtype=np.int64)
        self.by_dst = pair_order(self.pos[self.ud], self.pos[self.us])  # targets in order
        self.dev = pl.dev[super_nodes.first]  # device per super-node
        self.w = self._class_weights(self.w)
        self.virtual: list[tuple[int, int]] = []

    def _class_weights(self, w: np.ndarray) -> np.ndarray:
        """An edge that leaves a device for a later class (a later device, the fallback) or
        joins two fallback super-nodes weighs 0: ordering clusters by (level, device, fallback last)
        keeps it forward, and the levels need not climb for it."""
        ndev = int(self.dev.max()) + 1 if self.n else 0
        cls = np.where(self.dev >= 0, self.dev, ndev)
        cs, cd = cls[self.us], cls[self.ud]
        return np.where((cs < cd) | ((cs == ndev) & (cd == ndev)), 0, w).astype(np.int64)

    def position(self, u: int) -> int:
        return int(self.pos[u])

    def set_virtual(self, virtual: list[tuple[int, int]]) -> None:
        self.virtual = list(virtual)

    def _edges_for_sweep(self, order: np.ndarray):
        s = self.us[order].tolist()
        d = self.ud[order].tolist()
        w = self.w[order].tolist()
        return s, d, w

    def longest(self) -> list[int]:
        """Earliest level of every super-node (other ids copy nothing: they are never read)."""
        level = [0] * self.n
        if self.virtual:
            return self._longest_with_virtual(level)
        s, d, w = self._edges_for_sweep(self.by_dst)
        for a, b_, c in zip(s, d, w):
            x = level[a] + c
            if x > level[b_]:
                level[b_] = x
        return level

    def _edges_with_virtual(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sources, targets and weights of the super-node edges and the virtual ones (weight 1)."""
        vs = np.asarray([a for a, _ in self.virtual], dtype=np.int64)
        vd = np.asarray([b for _, b in self.virtual], dtype=np.int64)
        return (np.concatenate([self.us, vs]), np.concatenate([self.ud, vd]),
                np.concatenate([self.w, np.ones(len(vs), dtype=np.int64)]))

    def _longest_with_virtual(self, level: list[int]) -> list[int]:
        pos = self.pos
        s, d, w = self._edges_with_virtual()
        order = np.argsort(pos[d], kind="stable")
        for a, b_, c in zip(s[order].tolist(), d[order].tolist(), w[order].tolist()):
            x = level[a] + c
            if x > level[b_]:
                level[b_] = x
        return level

    def clusters(self, level: list[int], split: bool, siblings: bool = True) -> np.ndarray:
        """Cluster label per super-node id: connected pieces of weight-0 same-level edges, where
        ``siblings`` also joins accelerator super-nodes of one level and device that read the same
        tensor (it is then sent once); or one class per level and device (``split`` False).
        Fallback super-nodes alone. Any union inside one (level, device) class stays valid."""
        n = self.n
        lv = np.asarray(level, dtype=np.int64)
        dev = self.dev
        if split:
            same = (self.w == 0) & (lv[self.us] == lv[self.ud]) & \
                (dev[self.us] == dev[self.ud])
            a, b = self.us[same], self.ud[same]
            if siblings:
                sa, sb = self._siblings(lv)
                a, b = np.concatenate([a, sa]), np.concatenate([b, sb])
            lab = weak_components(n, a, b)
        else:
            ndev = int(dev.max()) + 2 if n else 1
            lab = lv * ndev + (dev + 1)
        lab = np.where(dev >= 0, lab, -1 - np.arange(n))  # fallback super-nodes alone
        return lab

    def _siblings(self, lv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pairs of accelerator super-nodes on one level and device that read one non-constant
        tensor (consecutive consumers in (tensor, level, device) order)."""
        tt = self.g.tensor_table
        uo = self.pl.super_nodes.super_node_of
        dev = self.dev
        c = uo[tt.inc_node]
        t = tt.inc_tensor
        keep = (dev[c] >= 0) & ~tt.free[t] & (tt.producer[t] >= 0)
        c, t = c[keep], t[keep]
        if len(c) < 2:
            return c[:0], c[:0]
        nd = int(dev.max()) + 1
        top = int(lv.max()) + 1
        key = (t * top + lv[c]) * nd + dev[c]
        order = np.lexsort((c, key))
        key, c = key[order], c[order]
        pair = (key[1:] == key[:-1]) & (c[1:] != c[:-1])
        return c[:-1][pair], c[1:][pair]

    # -------------------------------------------------------------- refinement
    def refine(self, level: list[int], never: list[tuple[int, int]], rounds: int
               ) -> tuple[list[int], int]:
        """Moves within the slack, in vectorized rounds; returns the new levels and the number
        of moves.

        A super-node ``v`` may sit anywhere in ``[lo, hi]``: ``lo`` = max over in-edges of
        ``level[u] + w``, ``hi`` = min over out-edges of ``level[s] - w`` (the top level for a
        sink). A weight-0 in-neighbour sits at most at ``lo`` and an out-neighbour at least at
        ``hi``, so the only levels where ``v`` can join neighbours are ``lo`` and ``hi``: ``v``
        wants to move there when the bytes it exchanges with the neighbours on that level beat
        the bytes it exchanges with the neighbours on its own level. Each round moves an
        independent set of such super-nodes (no edge and no never-together pair between two of them,
        the larger gain wins), so every move sees fixed neighbours, keeps all bounds and lowers
        the bytes cut on weight-0 edges."""
        n = self.n
        s, d, w = self._edges_with_virtual()
        w0 = np.flatnonzero(w == 0)
        s0, d0, b0 = s[w0], d[w0], self.b[w0]  # virtual edges weigh 1: never in w0
        cur = np.asarray(level, dtype=np.int64)
        if not len(s0):
            return level, 0
        top = int(cur.max())
        dev = self.dev
        pos = self.pos
        pa = np.asarray([a for a, _ in never], dtype=np.int64)
        pb = np.asarray([b for _, b in never], dtype=np.int64)
        same_dev = dev[pa] == dev[pb] if len(pa) else np.zeros(0, bool)
        pa, pb = pa[same_dev], pb[same_dev]
        cs = np.concatenate([s, pa])  # conflict pairs: edges and never-together pairs
        cd = np.concatenate([d, pb])
        moves = 0
        for _ in range(max(0, rounds)):
            lo = np.zeros(n, dtype=np.int64)
            np.maximum.at(lo, d, cur[s] + w)
            hi = np.full(n, top, dtype=np.int64)
            np.minimum.at(hi, s, cur[d] - w)
            edges = (cur[s0], cur[d0], s0, d0, b0)
            here = _bytes_at(cur, edges)
            g_lo = np.where(lo < cur, _bytes_at(lo, edges), -1.0)
            g_hi = np.where(hi > cur, _bytes_at(hi, edges), -1.0)
            to_hi = g_hi > g_lo
            target = np.where(to_hi, hi, lo)
            delta = np.where(to_hi, g_hi, g_lo) - here
            mover = delta > 0
            if len(pa):  # a never-together partner already on the target level
                clash = np.zeros(n, dtype=bool)
                clash[pa[cur[pb] == target[pa]]] = True
                clash[pb[cur[pa] == target[pb]]] = True
                mover &= ~clash
            idx = np.flatnonzero(_independent(mover, delta, cs, cd, pos))
            if not len(idx):
                break
            cur = cur.copy()
            cur[idx] = target[idx]
            moves += len(idx)
        return cur.tolist(), moves

    # -------------------------------------------------------------- size limits
    def enforce_max(self, ulab: np.ndarray, problem: Problem) -> tuple[np.ndarray, int]:
        """Cut clusters above their device's node or byte limit (``max_size`` /
        ``max_const_bytes`` or the device's own) into chunks contiguous in a topological order
        (each super-node whole)."""
        lim = problem.limits
        if not lim.bounded:
            return ulab, 0
        super_nodes = self.pl.super_nodes
        n = self.n
        size = np.asarray(super_nodes.size, dtype=np.int64)
        cb = np.zeros(n, dtype=np.int64)
        if lim.any_bytes:
            cb = np.bincount(super_nodes.super_node_of, weights=self.g.const_bytes, minlength=n
                             ).astype(np.int64)
        acc = np.flatnonzero(self.dev >= 0)
        if not len(acc):
            return ulab, 0
        lab = ulab[acc]
        tot = np.bincount(lab - lab.min(), weights=size[acc])
        ctot = np.bincount(lab - lab.min(), weights=cb[acc])
        cap_n, cap_b = (np.zeros(len(tot)), np.zeros(len(tot)))  # per cluster: its device's
        cap_n[lab - lab.min()] = _caps(lim.max_nodes)[self.dev[acc]]
        cap_b[lab - lab.min()] = _caps(lim.max_const)[self.dev[acc]]
        bad = np.flatnonzero((tot > cap_n) | (ctot > cap_b)) + lab.min()
        if not len(bad):
            return ulab, 0
        ulab = ulab.copy()
        nxt = int(ulab.max()) + 1
        pos = self.pos
        chunks = 0
        for c in bad.tolist():
            hi, budget = cap_n[c - lab.min()], cap_b[c - lab.min()]
            mem = acc[lab == c]
            mem = mem[np.argsort(pos[mem], kind="stable")].tolist()
            cnt = 0
            byt = 0
            for u in mem:
                su, bu = int(size[u]), int(cb[u])
                if cnt and (cnt + su > hi or byt + bu > budget):
                    nxt += 1
                    chunks += 1
                    cnt = byt = 0
                cnt += su
                byt += bu
                ulab[u] = nxt
            nxt += 1
        return ulab, chunks


def _caps(limits: tuple[int | None, ...]) -> np.ndarray:
    """Per device index its limit as a float (``inf`` for none)."""
    return np.asarray([np.inf if x is None else x for x in limits], dtype=float)
