"""A lower bound of the objective from the super-graph alone, for models too large to prove.

Valid for every valid partition (so also among those with the fewest fallback nodes). Write
*M* for the super-nodes that are always offloaded (``may_acc`` and not ``may_fb``) and call an
edge *strict* when no device both ends may share follows it (it is cut in every partition).

- Partitions. A cluster holds every path between two of its members (convexity), so a path
  meets each cluster in one run of consecutive nodes and meets pairwise distinct clusters. Along
  a path, a node of M after a strict edge from a node of M, or after a node that is never
  offloaded, starts a new cluster; the most such starts on a path (+1 for its first node of
  M) is a longest path in the DAG. With ``max_size``: at least ``ceil(|M| / max_size)``
  clusters (|M| in original nodes).
- Cut. Per tensor of ``b`` bytes: ``b`` when it is a graph output produced by a node of M;
  ``b`` when a node of M produces it and a never-offloaded node (or one out of the model)
  consumes it; and ``b`` for each consumer of a greedy set of consumers in M that pairwise can
  never share a cluster (:func:`~clusterkit.engines.cpsat.reduce.mergeable`) and can never share
  the producer's unit (the producer is never offloaded, or cannot share a cluster with it):
  each is a distinct consuming unit other than the producer's.

The weighted bound is the weighted sum (the minimum of a sum is at least the sum of minima).

*Cut relaxation* (:func:`cut_relaxation`): the same problem without ``max_size`` and
``max_const_bytes`` has more valid partitions, so its least cut bounds the cut of ours - among
partitions with the same fewest fallback nodes, which holds when ``min_size`` is 1 and there
is no together group (then the fallback set is the nodes no device takes, with or without the
limits: every other node can be offloaded alone).
"""

from __future__ import annotations

import math

from clusterkit.constraints.core import Problem
from clusterkit.engines.cpsat.reduce import SuperGraph, mergeable, reachability


def lower_bound(sg: SuperGraph, w_cut: int, w_parts: int, full: list[int] | None = None,
                blocked: list[int] | None = None) -> int:
    """``w_cut * cut bound + w_parts * partitions bound`` (integer weights) for ``sg``."""
    total = 0
    if w_parts:
        total += w_parts * partitions_bound(sg)
    if w_cut:
        if full is None or blocked is None:
            full, blocked = reachability(sg)
        total += w_cut * cut_bound(sg, full, blocked)
    return total


def cut_relaxation(problem: Problem) -> Problem | None:
    """The problem without its size and constant-byte limits, when its least cut bounds ours
    (see the module docstring; None otherwise)."""
    if problem.limits.loosest_min > 1 or len(problem.groups):
        return None
    # the global limits rebuilt without the maxima, from the problem's loosest minimum
    return problem.with_limits(min_size=problem.limits.loosest_min, max_size=None,
                               max_const_bytes=None)


def _always_acc(sg: SuperGraph, s: int) -> bool:
    return sg.may_acc[s] and not sg.may_fb[s]


def _strict(sg: SuperGraph, a: int, b: int) -> bool:
    return not (sg.edges[(a, b)] & sg.dev_mask[a] & sg.dev_mask[b])


def partitions_bound(sg: SuperGraph) -> int:
    """The longest-path bound of the module docstring, and the ``max_size`` bound."""
    best = [0] * sg.size  # most clusters started on a path ending at s (s's own included)
    for s in range(sg.size):  # super-nodes are numbered in a topological order
        acc = _always_acc(sg, s)
        top = 1 if acc else 0
        for a in sg.pred[s]:
            step = 0
            if acc and _always_acc(sg, a):
                step = int(_strict(sg, a, s))
            elif acc and not sg.may_acc[a]:
                step = 1
            top = max(top, best[a] + step)
        best[s] = top
    bound = max(best, default=0)
    limit = sg.problem.limits.loosest_max
    if limit:
        weight = sum(sg.weight(s) for s in range(sg.size) if _always_acc(sg, s))
        bound = max(bound, math.ceil(weight / limit))
    return bound


def cut_bound(sg: SuperGraph, full: list[int], blocked: list[int]) -> int:
    """The per-tensor cut bound of the module docstring."""
    never = set(sg.never)
    total = 0
    for term in sg.terms:
        p = term.producer
        p_acc = p >= 0 and _always_acc(sg, p)
        if term.is_output and p_acc:
            total += term.nbytes
        if p_acc and (term.host_consumer or any(not sg.may_acc[c] for c in term.consumers)):
            total += term.nbytes
        picked: list[int] = []
        for c in term.consumers:
            if not _always_acc(sg, c):
                continue
            if p >= 0 and sg.may_acc[p] and mergeable(sg, p, c, full, blocked, never):
                continue
            if any(mergeable(sg, o, c, full, blocked, never) for o in picked):
                continue
            picked.append(c)
        total += term.nbytes * len(picked)
    return total
