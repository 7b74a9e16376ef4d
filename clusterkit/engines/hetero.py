"""Strategy ``hetero``: OpenVINO HETERO's affinity and subgraph selection.

1. Affinity (:mod:`clusterkit.constraints.affinity`): the fallback policy puts each node on the
   first device, in priority order, whose query takes it; manual affinities (node attributes,
   rules) replace the policy unless ``fill_affinity`` asks it to place the remaining nodes.
2. Subgraph selection, device by device in priority order, exactly as OpenVINO's HETERO design
   notes describe it:

   - a *round* picks roots in topological order among the device's nodes not yet taken and not
     in a subgraph built earlier in the round; from each root a subgraph grows through adjacent
     nodes (depth first, successors before predecessors, smaller index first) keeping a rejected
     list: a node of another affinity, already taken, or breaking a constraint is rejected;
   - after every step the global condition is checked — no rejected node on a path between two
     members (a ``GrowthTracker``, no transitive closure); while it fails the last added node
     is rolled back onto the rejected list;
   - the largest subgraph of the round is kept (the first built among equals), its nodes are
     taken, and rounds repeat until the device has no nodes left.

   A growth reads nothing outside its members and its rejected list, so a subgraph grown in
   one round is reused in the next unless the kept subgraph took a super-node the growth accepted
   (a super-node it rejected at first sight, or added and at once rolled back alone with no effect
   from its pushes, would leave the same steps once taken), and only the roots such a change
   reaches are visited again (:meth:`_Selector.run_device`): the result is the same as
   re-running every round. A growth that must run again repeats the old one's logged steps
   without checks up to the first that accepted a super-node taken since (:meth:`_Selector._grow`).
3. Constraints act during growth: must-cut edges and edges a selector refuses are never taken
   inside, never-together nodes, ``max_size`` and ``max_const_bytes`` reject the node; together
   groups are grown as one super-node. Clusters that depend on each other through other clusters
   (the design notes only check one subgraph at a time) are split, and clusters below ``min_size``
   go back to the fallback (:func:`~clusterkit.engines.common.close_growth`).

Every fallback node's reason is on ``Partition.fallback_reasons`` (manual affinity, a together
group no device takes, a rollback or split for a cycle, ``min_size``), which the placement
report (``Partition.placement()``) quotes; ``info["hetero"]`` counts rounds, growths and
rollbacks, ``info["affinity"]`` the affinity mode and the nodes whose device differs from their
affinity; ``trace=True`` adds ``info["trace"]``, the design notes' step list (root, merge,
reject, rollback, subgraph, select).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from clusterkit.constraints.affinity import Affinity, compute_affinity, resolve_device
from clusterkit.constraints.core import Problem
from clusterkit.engines.common import close_growth
from clusterkit.engines.growth import (
    GrowingCluster,
    GrowthState,
    GrowthTracker,
    apart,
    refused_neighbours,
)
from clusterkit.engines.super_nodes import SuperNodeGraph
from clusterkit.graph.algorithms import gc_paused
from clusterkit.result.model import Partition
from clusterkit.result.reasons import Category, Reason


def run(problem: Problem, *, affinity: Iterable[str] | None = None, fill_affinity: bool = False,
        trace: bool = False) -> Partition:
    """OpenVINO HETERO partitioning. ``affinity``: manual rules (``NAME=DEVICE``,
    ``re:REGEX=DEVICE``, ``I-J=DEVICE``); ``fill_affinity``: with manual affinities, place the
    other nodes by the fallback policy instead of sending them to the fallback; ``trace``:
    record the selection steps in ``info["trace"]``."""
    with gc_paused():   # many small lists and tuples; any cycles are collected afterwards
        return _run(problem, affinity, fill_affinity, trace)


def _run(problem: Problem, affinity: Iterable[str] | None, fill_affinity: bool,
         trace: bool) -> Partition:
    aff, contracted, sel, reasons = _select(problem, affinity, fill_affinity, trace)
    rolled = dict.fromkeys(contracted.nodes_of(sel.rolled_back), "rolled back for a self-reference")
    part, split = close_growth(problem, contracted, sel.pieces, reasons, rolled)
    part.info["hetero"] = {"rounds": sel.rounds, "growths": sel.growths,
                           "reused_growths": sel.reused, "rollbacks": sel.rollbacks,
                           "clusters_split_for_cycles": split}
    part.info["affinity"] = _affinity_info(problem, aff, part.device_of_nodes())
    if trace:
        part.info["trace"] = sel.trace
    return part


def subgraphs(problem: Problem, *, affinity: Iterable[str] | None = None,
              fill_affinity: bool = False) -> list[tuple[str, list[int]]]:
    """The subgraphs HETERO selects, in selection order, as ``(device, node ids)`` — before
    clusters that depend on each other are split and before ``min_size``."""
    _, contracted, sel, _ = _select(problem, affinity, fill_affinity, False)
    return [(problem.devices[p.device], contracted.nodes_of(p.super_nodes)) for p in sel.pieces]


def _select(problem: Problem, affinity: Iterable[str] | None, fill_affinity: bool,
            trace: bool) -> tuple[Affinity, SuperNodeGraph, "_Selector", dict[int, Reason]]:
    aff = compute_affinity(problem, list(affinity or ()), fill=fill_affinity)
    contracted = SuperNodeGraph(problem)
    device_of, reasons = _super_node_affinity(problem, contracted, aff)
    sel = _Selector(problem, contracted, device_of, trace)
    for d in range(len(problem.devices)):
        sel.run_device(d)
    return aff, contracted, sel, reasons


def _affinity_info(problem: Problem, aff: Affinity, placed: list[str]) -> dict:
    """Mode, manual count, and ``{source index: affinity}`` for the nodes not placed on their
    affinity (the device a manual affinity asked for, else the policy's choice); ``placed`` is
    the device name of every node."""
    names = list(problem.devices) + [problem.fallback]
    src = problem.graph.index_to_source.tolist()
    wanted = aff.device.tolist()
    for v, req in enumerate(aff.requested):
        if req is not None:
            wanted[v] = resolve_device(problem, req, "affinity")
    diff = {str(src[v]): names[w] for v, w in enumerate(wanted) if names[w] != placed[v]}
    return {"mode": aff.mode, "manual_nodes": aff.manual_count, "differs_from_placement": diff}


def _super_node_affinity(problem: Problem, contracted: SuperNodeGraph, aff: Affinity
                         ) -> tuple[list[int], dict[int, Reason]]:
    """Device per super-node. A together group whose members ask for different devices (or for
    one that cannot take the whole group) goes to the first device a member asked for that can,
    else (without manual-only mode) the first device in priority order that can, else the
    fallback."""
    reasons = dict(aff.fallback_reasons)
    ndev = len(problem.devices)
    if not contracted.has_groups:
        return _node_affinity(problem, contracted, aff, reasons), reasons
    dev = aff.device.tolist()
    out = [-1] * contracted.n
    for u in range(contracted.n):
        mem = contracted.members[u]
        if len(mem) == 1:
            d = dev[mem[0]]
            if d >= 0 and not contracted.feasible[d][u]:
                reasons[mem[0]] = Reason(Category.CONSTRAINT,
                                         f"{problem.devices[d]} cannot take it alone")
                d = -1
            out[u] = d
            continue
        wanted = {dev[v] for v in mem}
        if len(wanted) == 1:
            d = next(iter(wanted))
            if d < 0 or contracted.feasible[d][u]:
                out[u] = d
                continue
        cands = []
        for v in mem:
            req = aff.requested[v]
            if req is not None:
                name = problem.graph.nodes[v].name
                d = resolve_device(problem, req, f"affinity of node {name!r}")
                if d >= 0 and contracted.feasible[d][u] and d not in cands:
                    cands.append(d)
        if not cands and aff.mode != "manual":
            cands = [d for d in range(ndev) if contracted.feasible[d][u]]
        pick = cands[0] if cands else -1
        out[u] = pick
        gi = int(problem.group_of[mem[0]])
        if pick < 0:
            for v in mem:
                reasons[v] = Reason(Category.CONSTRAINT, f"together group {gi}: no device its "
                                    "members ask for can take the whole group")
    return out, reasons


def _node_affinity(problem: Problem, contracted: SuperNodeGraph, aff: Affinity,
                   reasons: dict[int, Reason]) -> list[int]:
    """:func:`_super_node_affinity` without together groups (a super-node is a node): its affinity,
    unless that device cannot take it alone (then the fallback, with a reason)."""
    dev = np.asarray(aff.device, dtype=np.int64)
    out = dev.copy()
    refused: list[tuple[int, int]] = []
    for d in range(len(problem.devices)):
        bad = np.flatnonzero((dev == d) & ~np.asarray(contracted.feasible[d], dtype=bool))
        out[bad] = -1
        refused.extend((v, d) for v in bad.tolist())
    for v, d in sorted(refused):
        reasons[v] = Reason(Category.CONSTRAINT, f"{problem.devices[d]} cannot take it alone")
    return out.tolist()


_NONE: list[int] = []   # no super-node rolled back (never changed)
# single rollback steps before GrowthTracker.settle labels the whole window at once: on wide
# windows (long edges) the labelling costs more than re-checking the few suspects per step
_BATCH_AFTER = 256


@dataclass(eq=False)
class _Log:
    """The steps of one growth: the super-node each step met (``~super-node`` when it was
    rejected), how many super-nodes the rollback after a step removed (steps without a rollback are
    absent), the depth of the stack frame each accepting step came from (``(step, depth)``, in
    order), and the steps whose pusher had been rolled back (``(step, pusher)``)."""

    seen: list[int]
    removed: dict[int, int]
    pushed: list[tuple[int, int]] = field(default_factory=list)
    dead: list[tuple[int, int]] = field(default_factory=list)


@dataclass(eq=False)
class _Growth:
    root: int
    members: list[int]
    size: int
    rolled: list[int]
    serial: int = 0
    watched: list[int] | None = None
    log: _Log | None = None


class _Selector:
    """Rounds of growth per device (see the module docstring)."""

    def __init__(self, problem: Problem, contracted: SuperNodeGraph, device_of: list[int],
                 trace: bool):
        self.problem = problem
        self.contracted = contracted
        self.affinity = device_of  # per super-node the device index it has affinity for
        self.tracker = GrowthTracker(contracted)
        self.taken = [False] * contracted.n
        self.pieces: list[GrowingCluster] = []
        self.rolled_back: list[int] = []
        self.trace: list | None = [] if trace else None
        self.rounds = self.growths = self.reused = self.rollbacks = 0
        # per super-node: of the affinity of device _current_device, not taken
        self._free: list[bool] = []
        self._current_device = -1
        self._serial = 0
        # GrowthState needs no bookkeeping without size, constant or never-together limits;
        # then only a super-node with an edge the device may not take inside can fail ``fits``
        lim = problem.limits  # per device: the global limits, or its own when tighter
        self.plain = not contracted.never and all(hi is None and cb is None
                                          for hi, cb in zip(lim.max_nodes, lim.max_const))
        self._risky: dict[int, list[list[int]]] = {}
        # successors, then predecessors
        self._adj = [s + p for s, p in zip(contracted.succ, contracted.pred)]
        nodes = problem.graph.nodes
        self._label = (lambda u: "+".join(nodes[v].name for v in contracted.members[u]))

    # ------------------------------------------------------------------ rounds
    def run_device(self, d: int) -> None:
        """Select every subgraph of device ``d``.

        The subgraphs of a round are fixed by one rule, by induction on rank: a node is a root
        iff it is free, of this affinity, and in no subgraph grown from an earlier root. So
        the round is kept as that set of roots with their subgraphs, ``cover[v]`` counting the
        subgraphs of earlier roots that hold ``v``; after the kept subgraph is taken, only
        roots whose subgraph accepted a taken node, and nodes whose cover changes, are visited
        again (in rank order, so every change only moves forward). The result is that of
        re-running every round; the work is that of the nodes the changes reach."""
        self._device(d)
        state = _Rounds(self, d)
        state.first_pass()
        while state.used:
            g = state.largest()
            self.rounds += 1
            self._finalize(d, g)
            state.take(g)
            state.settle()

    def _watched(self, g: _Growth) -> list[int]:
        """Super-nodes whose being taken later would change the growth: members and the super-nodes
        rolled back that mattered (see :meth:`_grow`). A super-node it rejected at first sight
        would be rejected at the same step once taken, so the growth would run the same."""
        return g.members + (g.watched or [])

    def _finalize(self, d: int, g: _Growth) -> None:
        contracted = self.contracted
        self._device(d)
        free = self._free
        for u in g.members:
            self.taken[u] = True
            free[u] = False
        members = sorted(g.members, key=contracted.rank.__getitem__)
        self.pieces.append(GrowingCluster(d, members))
        self.rolled_back.extend(g.rolled)
        if self.trace is not None:
            self.trace.append(("select", self.problem.devices[d], self._names(members)))

    def _names(self, super_nodes: list[int]) -> list[str]:
        return [self._label(u) for u in sorted(super_nodes, key=self.contracted.rank.__getitem__)]

    # ------------------------------------------------------------------ one growth
    def _grow(self, d: int, root: int, old: _Growth | None = None) -> _Growth:
        """Grow from ``root``, or resume ``old``, a growth from it that a taken super-node
        invalidated, at its first step that accepted a super-node taken since (:meth:`_resume`).
        The stack holds per accepted super-node an iterator over its successors, then predecessors
        (the order pushing them all and popping meets them; a member or rejected super-node stays
        one of the two, so the pop-time test alone skips the same entries)."""
        T, st = self.tracker, self._start(d, root)
        # bound to locals for speed: the loop below reads them often
        gid, mem, rej = T.growth_id, T.member_stamp, T.rejected_stamp
        adj, free = self._adj, self._free
        if old is not None and self.trace is None:
            frames, lone, mattered, log = self._resume(old, st)
        else:
            frames = [(root, iter(adj[root]))]
            lone, mattered, log = set(), set(), _Log([], {})
        seen, cut, pushed, dead = log.seen, log.removed, log.pushed, log.dead
        fast = self.trace is None
        plain, risky = self.plain, self._risky_of(d)
        add, reject = T.add, T.reject
        i = len(seen)       # steps so far
        while frames:
            by, it = frames[-1]
            for v in it:
                if mem[v] == gid or rej[v] == gid:
                    continue
                if mem[by] != gid:      # its pusher rolled back: still next to a member?
                    for w in adj[v]:
                        if mem[w] == gid:
                            break
                    else:
                        continue
                    mattered.add(by)    # (a living pusher was not rolled back alone)
                    dead.append((i, by))
                if fast:
                    added = free[v] and ((not risky[v] or apart(risky[v], mem, gid)) if plain
                                         else st.fits(v, T))
                    if added:
                        if not plain:
                            st.add(v)
                        add(v)
                    else:
                        reject(v)
                    removed = self._settle(st) if T.violated else _NONE
                else:
                    added, removed = self._step(d, v, st)
                if removed:
                    cut[i] = len(removed)
                    if added and len(removed) == 1 and removed[0] == v:
                        lone.add(v)
                if added:
                    seen.append(v)
                    pushed.append((i, len(frames) - 1))
                    frames.append((v, iter(adj[v])))
                    i += 1
                    break
                seen.append(~v)
                i += 1
            else:
                frames.pop()
        return self._done(root, lone, mattered, log)

    def _resume(self, old: _Growth, st: GrowthState
                ) -> tuple[list, set[int], set[int], _Log]:
        """The state of a new growth from ``old``'s root just before its first step ``i`` that
        accepted a super-node taken since (:meth:`_replayable`): every earlier step reads the same
        state, so it has the same outcome, applied here without checks and without walking
        the stack. Step ``i`` accepted, so the pushes log its frame depth ``D``; the frame at
        depth ``L <= D`` was pushed by the latest accepting step at depth ``L - 1`` before
        the one that pushed frame ``L + 1`` (no step at a depth below ``L + 1`` runs while
        that frame lives), and that step's entry is where frame ``L - 1`` stands."""
        i, plain = self._replayable(old), self.plain
        ol = old.log
        assert ol is not None  # a growth that is resumed was logged
        seen, removed = ol.seen, ol.removed
        if plain:
            self.rollbacks += len(self.tracker.replay(seen, removed, i))
        else:
            for j in range(i):
                self._replay_state(seen[j], removed.get(j, 0), st)
        # a rollback of one super-node right after it joined removes that super-node
        lone = {seen[j] for j, k in removed.items() if k == 1 and j < i and seen[j] >= 0}
        at = bisect_left(ol.pushed, (i, -1))    # the pushes are in step order
        frames = self._frames(old, at) if i < len(seen) else []
        log = _Log(seen[:i], {j: k for j, k in removed.items() if j < i},
                   ol.pushed[:at], [e for e in ol.dead if e[0] < i])
        return frames, lone, {by for _, by in log.dead}, log

    def _replay_state(self, v: int, k: int, st: GrowthState) -> None:
        """One logged step (``v``, ``~super-node`` when rejected, then ``k`` rollbacks) on the
        tracker and the size/constant bookkeeping, without checks."""
        T = self.tracker
        if v >= 0:
            st.add(v)
            T.add(v, check=False)
        else:
            T.reject(~v, check=False)
        for _ in range(k):
            st.remove(T.undo())
        self.rollbacks += k

    def _frames(self, old: _Growth, at: int) -> list:
        """The stack of ``old``'s growth when it met the super-node of its accepting step number
        ``at`` (see :meth:`_resume`)."""
        assert old.log is not None  # as in _resume
        seen, pushed = old.log.seen, old.log.pushed
        i, need = pushed[at]
        chain = [seen[i]]       # the entry each frame stands at, top first
        super_nodes = []              # the super-node of each frame, top first
        if need:
            for j, depth in reversed(pushed[:at]):
                if depth == need - 1:
                    super_nodes.append(seen[j])
                    chain.append(seen[j])
                    need -= 1
                    if not need:
                        break
        super_nodes.append(old.root)
        adj = self._adj
        frames = []
        for n in range(len(super_nodes) - 1, -1, -1):
            a = adj[super_nodes[n]]
            p = a.index(chain[n]) + (n > 0)   # the top frame stands at step i's super-node itself
            frames.append((super_nodes[n], iter(a[p:])))
        return frames

    def _risky_of(self, d: int) -> list[list[int]]:
        """Per super-node: its neighbours across an edge that device ``d`` may not take inside a
        cluster, among super-nodes of affinity ``d`` (only they ever join; see
        :func:`~clusterkit.engines.growth.refused_neighbours`)."""
        risky = self._risky.get(d)
        if risky is None:
            risky = refused_neighbours(self.contracted, d, np.asarray(self.affinity) == d)
            self._risky[d] = risky
        return risky

    def _device(self, d: int) -> None:
        """Select device ``d`` for the ``free`` flags (kept by :meth:`_finalize`)."""
        if self._current_device != d:
            self._current_device = d
            self._free = [a == d and not t for a, t in zip(self.affinity, self.taken)]

    def _start(self, d: int, root: int) -> GrowthState:
        """A new growth holding ``root`` alone."""
        self._device(d)
        self.growths += 1
        self.tracker.begin()
        lim = self.problem.limits
        st = GrowthState(self.contracted, d, lim.max_nodes[d], lim.max_const[d])
        if self.trace is not None:
            self.trace.append(("root", self.problem.devices[d], self._label(root)))
        st.add(root)
        self.tracker.add(root)
        return st

    def _replayable(self, old: _Growth) -> int:
        """Steps of ``old`` that a new growth from its root repeats: those before the first
        that accepted a super-node taken since."""
        taken, log = self.taken, old.log
        assert log is not None  # as in _resume
        for i, v in enumerate(log.seen):
            if v >= 0 and taken[v]:
                return i
        return len(log.seen)

    def _step(self, d: int, v: int, st: GrowthState) -> tuple[bool, list[int]]:
        """Accept or reject ``v``, then roll back until the condition holds."""
        T, tr = self.tracker, self.trace
        added = self._free[v] and st.fits(v, T)
        if added:
            if not self.plain:
                st.add(v)
            T.add(v)
        else:
            T.reject(v)
        if tr is not None:
            tr.append(("merge" if added else "reject", self._label(v)))
        if not T.violated:
            return added, _NONE
        return added, self._settle(st)

    def _done(self, root: int, lone: set[int], mattered: set[int], log: "_Log") -> _Growth:
        T = self.tracker
        members = list(T.members)
        # a super-node added and at once rolled back alone, whose pushes were all skipped, left the
        # same state as rejecting it: taking it later changes nothing
        watched = [u for u in T.rolled if u not in lone or u in mattered]
        if self.trace is not None:
            self.trace.append(("subgraph", self._names(members)))
        self._serial += 1
        usize = self.contracted.size
        return _Growth(root, members, sum(map(usize.__getitem__, members)), list(T.rolled),
                       self._serial, watched, log)

    def _settle(self, st: GrowthState) -> list[int]:
        """Roll back until the condition holds; return the super-nodes removed."""
        removed = self.tracker.settle(_BATCH_AFTER)
        self.rollbacks += len(removed)
        if not self.plain:
            for x in removed:
                st.remove(x)
        if self.trace is not None:
            for x in removed:
                self.trace.append(("rollback", self._label(x)))
        return removed


class _Rounds:
    """The rounds of one device (see :meth:`_Selector.run_device`): the roots in use with their
    growths, the growths kept for reuse or replay, who watches which super-node, how many growths of
    earlier roots cover each super-node, the heap of sizes and the super-nodes to look at again, in
    rank order. A super-node is a root iff it is free (:attr:`_Selector._free`) and covered by
    none."""

    def __init__(self, sel: _Selector, d: int):
        self.selector, self.device = sel, d
        self.rank = sel.contracted.rank
        self.cover = [0] * sel.contracted.n
        self.flagged = [False] * sel.contracted.n   # in ``dirty``
        self.used: dict[int, _Growth] = {}
        self.cache: dict[int, _Growth] = {}
        self.stale: dict[int, _Growth] = {}   # invalidated growths, replayed in part (_grow)
        # super-node -> watchers
        self.watch: list[list[_Growth]] = [[] for _ in range(sel.contracted.n)]
        self.best: list[tuple[int, int, int, int]] = []
        self.dirty: list[tuple[int, int]] = []

    def first_pass(self) -> None:
        """Every root in rank order. It marks nothing: a change only reaches later super-nodes, all
        still to come and none yet a root."""
        free, cover = self.selector._free, self.cover
        for u in self.selector.contracted.order:
            if free[u] and cover[u] == 0:
                self.use(u)

    def largest(self) -> _Growth:
        """The largest current growth (the earliest root among equals)."""
        best, used = self.best, self.used
        while True:
            _, _, r, serial = best[0]
            g = used.get(r)
            if g is not None and g.serial == serial:
                return g
            heapq.heappop(best)

    def take(self, g: _Growth) -> None:
        """After ``g`` is taken: its super-nodes that were roots, and the roots whose growth
        watched one of them (now stale), are looked at again."""
        used, cache, stale, watch, mark = self.used, self.cache, self.stale, self.watch, \
            self.mark
        for u in g.members:
            if u in used:   # a taken super-node matters only as a root
                mark(u)
            gs = watch[u]
            if not gs:
                continue
            watch[u] = []
            for old in gs:
                r2 = old.root
                # an entry of a growth since replaced does not concern the current one
                if cache.get(r2) is old:
                    del cache[r2]
                    stale[r2] = old
                    if r2 in used:
                        mark(r2)

    def mark(self, v: int) -> None:
        flagged = self.flagged
        if not flagged[v]:
            flagged[v] = True
            heapq.heappush(self.dirty, (self.rank[v], v))

    def use(self, v: int) -> None:
        """Make ``v`` a root: its growth (cached or grown) covers its later members."""
        sel, rank, cover, used = self.selector, self.rank, self.cover, self.used
        cur = used.pop(v, None)     # an invalidated growth of ``v`` (cache has a new one)
        g = self.cache.get(v)
        if g is None:
            g = sel._grow(self.device, v, self.stale.pop(v, None))
            self.cache[v] = g
            watch = self.watch
            for u in sel._watched(g):
                watch[u].append(g)
        else:
            sel.reused += 1
            if sel.trace is not None:
                sel.trace.append(("reuse", sel._names(g.members)))
        used[v] = g
        heapq.heappush(self.best, (-g.size, rank[v], v, g.serial))
        rv = rank[v]
        for m in g.members:     # a covered super-node matters only as a root
            if rank[m] > rv:
                cover[m] += 1
                if cover[m] == 1 and m in used:
                    self.mark(m)
        if cur is not None:     # after the new cover: super-nodes in both never reach 0
            self.drop(cur, rv)

    def drop(self, g: _Growth, rv: int) -> None:
        """Take back the cover of ``g``, the growth of the root of rank ``rv``."""
        rank, cover, taken = self.rank, self.cover, self.selector.taken
        for m in g.members:
            # a taken super-node freed of cover is no root; one still a root is marked already
            if rank[m] > rv:
                cover[m] -= 1
                if cover[m] == 0 and not taken[m]:
                    self.mark(m)

    def settle(self) -> None:
        """Look at the marked super-nodes again, in rank order."""
        dirty, used, cache = self.dirty, self.used, self.cache
        free, cover, flagged = self.selector._free, self.cover, self.flagged
        while dirty:
            _, v = heapq.heappop(dirty)
            flagged[v] = False
            want = free[v] and cover[v] == 0
            cur = used.get(v)
            if want:
                if cur is None or cache.get(v) is not cur:
                    self.use(v)
            elif cur is not None:
                del used[v]
                self.drop(cur, self.rank[v])
