"""The final pass of every strategy: every offloaded cluster acceptable to its device.

A cluster its device does not accept (:mod:`clusterkit.constraints.acceptance`: a stateful
selector that would not grow it, a ``filter`` that drops a node, a limit of the device, a
``create_subgraph_node`` that returns ``None``) is split into acceptable pieces rather than sent
whole to the fallback: from its first remaining node (topological order), a piece is grown
again with the device's selector inside the cluster (MXNet's order, within the device's
limits), cut to its convex part (everything before the first node a path re-enters it at), and
shrunk along its growth order until the device accepts it; a node that starts no acceptable
piece falls back with the device's reason. Pieces of one convex cluster can only depend on each
other inside it; when they do in a cycle, the cluster is carved again with each piece closed
under its remaining producers, which orders the pieces (every edge between two goes from the
earlier to the later).
"""

from __future__ import annotations

from clusterkit.constraints.acceptance import Acceptance, acceptance, grow
from clusterkit.constraints.core import Problem
from clusterkit.errors import CycleError
from clusterkit.graph.algorithms import topological_order
from clusterkit.graph.convexity import first_reentry
from clusterkit.result.model import Partition
from clusterkit.result.reasons import Category, Reason

Carving = tuple[list[list[int]], dict[int, str]]  # acceptable pieces, fallen node -> why


def make_acceptable(partition: Partition, cache: dict | None = None) -> Partition:
    """``partition`` with every offloaded cluster acceptable to its device (see the module
    docstring). Returns ``partition`` itself when every cluster already is (always, at no cost,
    for devices :meth:`Acceptance.plain` vouches for), else a new partition
    (:meth:`Partition.derive`) with the fallen nodes' reasons added. ``cache`` is accepted for
    callers of the former ``reject_subgraphs`` and unused: the verdicts are cached on the
    problem."""
    p = partition.problem
    acc = acceptance(p)
    if all(acc.plain(d) for d in range(len(p.devices))):
        return partition
    dev_index = {dev: d for d, dev in enumerate(p.devices)}
    carved: dict[int, Carving] = {}
    for pos, c in enumerate(partition.clusters):
        d = dev_index.get(c.device, -1)
        if d < 0 or acc.plain(d) or acc.verdict(c.nodes, d) is None:
            continue
        carved[pos] = split_cluster(p, acc, d, list(c.nodes))
    if not carved:
        return partition
    return _rebuilt(partition, carved)


def _rebuilt(partition: Partition, carved: dict[int, Carving]) -> Partition:
    """``partition`` with the carved clusters replaced by their pieces and fallen nodes."""
    labels = partition.assignment()
    devices = partition.device_indices()[labels]
    nxt = len(partition.clusters)
    reasons: dict[int, Reason] = {}
    for pieces, fallen in carved.values():
        for piece in pieces:
            labels[piece] = nxt
            nxt += 1
        for v, why in fallen.items():
            devices[v] = -1
            cat = Category.CONSTRAINT if " min_" in why else Category.SUBGRAPH_REJECTED
            reasons[v] = Reason(cat, why)
    return partition.derive(labels, devices, reasons=reasons, info={"acceptance": {
        "clusters_split": len(carved), "nodes_to_fallback": len(reasons)}})


def split_cluster(problem: Problem, acc: Acceptance, d: int, nodes: list[int]) -> Carving:
    """Acceptable pieces of the convex cluster ``nodes`` on device ``d`` (in the order carved)
    and the nodes in none, each with the device's reason."""
    pieces, fallen = _carve(problem, acc, d, nodes, closed=False)
    if len(pieces) + len(fallen) > 1 and _cyclic(problem, nodes, pieces):
        pieces, fallen = _carve(problem, acc, d, nodes, closed=True)
        if _cyclic(problem, nodes, pieces):  # only a together group can be taken unclosed
            why = acc.verdict(nodes, d) or ""
            return [], dict.fromkeys(nodes, why)
    return pieces, fallen


def _carve(problem: Problem, acc: Acceptance, d: int, nodes: list[int], closed: bool) -> Carving:
    """Pieces from each remaining node in topological order (``closed``: each piece holds
    every remaining producer of its nodes)."""
    rest = set(nodes)
    pieces: list[list[int]] = []
    fallen: dict[int, str] = {}
    for seed in sorted(nodes):
        if seed not in rest:
            continue
        piece, why = _largest_piece(problem, acc, d, rest, seed, closed)
        if piece:
            pieces.append(piece)
            rest.difference_update(piece)
            continue
        super_node = _super_node(problem, seed, rest)
        for v in super_node:
            fallen[v] = why or ""
        rest.difference_update(super_node)
    return pieces, fallen


def _super_node(problem: Problem, v: int, rest: set[int]) -> list[int]:
    """``v``'s together group (its members in ``rest``), or ``v`` alone."""
    g = int(problem.group_of[v])
    if g < 0:
        return [v]
    return [u for u in problem.groups[g].tolist() if u in rest]


def _largest_piece(problem: Problem, acc: Acceptance, d: int, rest: set[int], seed: int,
                   closed: bool) -> tuple[list[int], str | None]:
    """The largest acceptable piece grown from ``seed`` inside ``rest`` (sorted), or ``[]``
    and why the device takes no piece starting there."""
    super_node = _super_node(problem, seed, rest)
    if len(super_node) > 1:           # a together group is carved whole or not at all
        why = acc.verdict(sorted(super_node), d)
        return (sorted(super_node), None) if why is None else ([], why)
    taken, _ = grow(problem, d, rest, seed, _Room(problem, d, rest, closed))
    if not taken:
        return [], acc.verdict([seed], d)

    def candidate(k: int) -> list[int]:
        return convex_prefix(problem, sorted(taken[:k]))

    best = candidate(len(taken))
    why = acc.verdict(best, d)
    if why is None:
        return best, None
    lo, hi = 1, len(taken) - 1   # the largest k whose candidate the device accepts
    below_min = acc.problem.limits.min_nodes[d]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        cand = candidate(mid)
        if len(cand) < below_min or acc.verdict(cand, d) is None:
            lo = mid
        else:
            hi = mid - 1
    best = candidate(lo)
    why = acc.verdict(best, d)
    return (best, None) if why is None else ([], why)


def convex_prefix(problem: Problem, members: list[int]) -> list[int]:
    """The members (sorted node ids) before the first one a path leaving the set re-enters:
    a convex set (a path between two of them through a later member would end later)."""
    hit = first_reentry(problem.graph.succ_lists, members)
    if hit is None:
        return members
    return [v for v in members if v < hit[0]]


class _Room:
    """Whether a growing piece may take one more node before the selector is asked: the
    device's node and constant-byte limits, together groups (never taken in a growth), and
    with ``closed`` every remaining producer of the node already in the piece."""

    def __init__(self, problem: Problem, d: int, rest: set[int], closed: bool):
        lim = problem.limits
        self.graph, self.group_of, self.rest, self.closed = (problem.graph, problem.group_of,
                                                             rest, closed)
        self.max_nodes, self.max_const = lim.max_nodes[d], lim.max_const[d]
        self.seen: set[str] = set()   # constant tensors the piece reads
        self.inside: set[int] = set()
        self.held = self.synced = 0

    def __call__(self, taken: list[int], w: int) -> bool:
        if self.max_nodes is not None and len(taken) >= self.max_nodes:
            return False
        if self.group_of[w] >= 0:
            return False
        self._sync(taken)
        if self.closed and any(x in self.rest and x not in self.inside
                               for x in self.graph.pred_lists[w]):
            return False
        return self.max_const is None or self.held + self._bytes(w, set()) <= self.max_const

    def _sync(self, taken: list[int]) -> None:
        """Count the nodes taken since the last call."""
        for v in taken[self.synced:]:
            self.inside.add(v)
            self.held += self._bytes(v, self.seen)
        self.synced = len(taken)

    def _bytes(self, v: int, into: set[str]) -> int:
        """Bytes of ``v``'s constant inputs not counted yet (recorded in ``into``)."""
        total = 0
        tensors = self.graph.tensors
        for t in self.graph.nodes[v].all_inputs():
            ten = tensors[t]
            if ten.is_constant and t not in self.seen and t not in into:
                into.add(t)
                total += ten.nbytes or 0
        return total


def piece_order(problem: Problem, nodes: list[int], pieces: list[list[int]]
                ) -> list[list[int]] | None:
    """The pieces of ``nodes`` and its other nodes (each alone) in an order where every edge
    between two goes from the earlier to the later, or ``None`` when they depend on each other
    in a cycle (only edges inside ``nodes`` matter: the cluster was convex)."""
    label = {v: k for k, piece in enumerate(pieces) for v in piece}
    alone = [v for v in nodes if v not in label]
    label.update((v, len(pieces) + i) for i, v in enumerate(alone))
    succ = problem.graph.succ_lists
    src, dst = [], []
    for v in nodes:
        for w in succ[v]:
            if w in label and label[w] != label[v]:
                src.append(label[v])
                dst.append(label[w])
    units = [list(p) for p in pieces] + [[v] for v in alone]
    try:
        order = topological_order(len(units), src, dst, key=[min(u) for u in units])
    except CycleError:
        return None
    return [units[k] for k in order]


def _cyclic(problem: Problem, nodes: list[int], pieces: list[list[int]]) -> bool:
    """Whether the pieces of ``nodes`` (the other nodes alone) depend on each other in a
    cycle."""
    return piece_order(problem, nodes, pieces) is None
