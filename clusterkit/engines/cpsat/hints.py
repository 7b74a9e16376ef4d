"""Hints for the solver: assignments of a component built from the warm start and from longest-path
ranks, the best of them by the model's own objective.

A hint only has to lie within the model's variables (:meth:`ClusterModel.in_domain`): CP-SAT
checks and repairs it. When a hint is returned as a solution (no time to solve a component), the
assembled partition is checked by :meth:`Partition.validate`.
"""

from __future__ import annotations

from clusterkit.engines.cpsat.build import ClusterModel
from clusterkit.engines.cpsat.reduce import SuperGraph
from clusterkit.errors import CycleError
from clusterkit.graph.algorithms import topological_order
from clusterkit.result.model import Partition

#: A component's assignment: rank and device (-1: fallback) per super-node.
Assignment = tuple[dict[int, int], dict[int, int]]
#: Cluster position and device per super-node of the whole super-graph, from the warm start.
WarmHint = tuple[list[int], list[int]]


def hint_assignment(sg: SuperGraph, warm: Partition | None) -> WarmHint | None:
    """Cluster position and device per super-node from the warm start (its first member's)."""
    if warm is None:
        return None
    a = warm.assignment()
    p = sg.problem
    dev_of = [p.device_index(c.device) if c.device != p.fallback else -1 for c in warm.clusters]
    cl, dv = [], []
    for s in range(sg.size):
        v = sg.members[s][0]
        cl.append(int(a[v]))
        dv.append(dev_of[int(a[v])])
    return cl, dv


def component_hint(model: ClusterModel, src: WarmHint | None) -> Assignment | None:
    """The best hint for a component among: the warm start's clusters (when they fit the
    super-nodes), and longest-path ranks on the warm start's devices, on devices chosen by
    affinity with the neighbours, and on the first device of each super-node."""
    component = model.component
    cands: list[Assignment] = []
    warm_dev = _devices_from(model, src[1] if src is not None else None)
    if src is not None:
        cluster = {s: (src[0][s] if warm_dev[s] >= 0 else -1 - s) for s in component}
        rank = topological_ranks(model, cluster)
        if rank is not None and model.in_domain(rank, warm_dev):
            cands.append((rank, warm_dev))
    for devs in (warm_dev, _affinity_devices(model), _devices_from(model, None)):
        rank = _longest_path_ranks(model, devs)
        if model.in_domain(rank, devs):
            cands.append((rank, devs))
    if not cands:
        return None
    best = None
    for rank, devs in cands:
        vals = model.evaluate(rank, devs)
        key = (model.value(vals, "offload"), model.value(vals))
        if best is None or key < best[0]:
            best = (key, rank, devs)
    assert best is not None  # cands is not empty
    return best[1], best[2]


def _devices_from(model: ClusterModel, dev: list[int] | None) -> dict[int, int]:
    """The given device per super-node where allowed, else its first device (or the fallback
    when it cannot be offloaded)."""
    sg = model.sg
    out = {}
    for s in model.component:
        d = dev[s] if dev is not None else -2
        allowed = list(model.x[s])
        if d >= 0 and d not in allowed or d == -2 or d < 0 and not sg.may_fb[s]:
            d = allowed[0] if allowed else -1
        out[s] = d
    return out


def _affinity_devices(model: ClusterModel) -> dict[int, int]:
    """Per super-node, the allowed device shared with the most neighbour bytes (the edges that
    could stay inside a cluster on it)."""
    sg = model.sg
    weight: dict[tuple[int, int], int] = {}
    for term in model.component_terms:
        if term.producer >= 0:
            for c in term.consumers:
                key = (term.producer, c)
                weight[key] = weight.get(key, 0) + term.nbytes
    out = {}
    for s in model.component:
        allowed = list(model.x[s])
        if not allowed:
            out[s] = -1
            continue
        score = {d: 0 for d in allowed}
        nbrs = [(s, t) for t in sg.succ[s] if t in model.inside] + \
               [(t, s) for t in sg.pred[s] if t in model.inside]
        for a, b in nbrs:
            other = b if a == s else a
            mask = sg.edges[(a, b)]
            for d in allowed:
                if (mask >> d) & 1 and d in model.x[other]:
                    score[d] += weight.get((a, b), 0) + 1
        out[s] = max(allowed, key=lambda d: (score[d], -d))
    return out


def _longest_path_ranks(model: ClusterModel, device: dict[int, int]) -> dict[int, int]:
    """Longest-path ranks on fixed devices: an edge stays inside a cluster when both ends share a
    device that follows it; never-together partners are pushed apart."""
    sg = model.sg
    partners: dict[int, list[int]] = {}
    for a, b in model.component_never:
        partners.setdefault(b, []).append(a)
    rank: dict[int, int] = {}
    for t in model.component:
        r = model.lo[t]
        for a in sg.pred[t]:
            if a not in model.inside:
                continue
            lit = model.edge_lit[(a, t)]
            together_ok = (lit is not False and device[a] >= 0 and device[a] == device[t]
                           and (sg.edges[(a, t)] >> device[t]) & 1)
            r = max(r, rank[a] + (0 if together_ok else 1))
        while any(device[a] >= 0 and device[a] == device[t] and rank[a] == r
                  for a in partners.get(t, ())):
            r += 1
        rank[t] = r
    return rank


def topological_ranks(model: ClusterModel, cluster: dict[int, int]) -> dict[int, int] | None:
    """Position of each super-node's cluster in a topological order of the component's clusters
    (the cluster of the smallest super-node first among the ready ones); None when the clusters
    form a cycle."""
    sg = model.sg
    ids = sorted(set(cluster.values()))
    index = {c: i for i, c in enumerate(ids)}
    first = [0] * len(ids)
    for s in reversed(model.component):
        first[index[cluster[s]]] = s
    src, dst = [], []
    for s in model.component:
        for t in sg.succ[s]:
            if t in model.inside and cluster[t] != cluster[s]:
                src.append(index[cluster[s]])
                dst.append(index[cluster[t]])
    try:
        order = topological_order(len(ids), src, dst, key=first)
    except CycleError:
        return None
    pos = [0] * len(ids)
    for p, c in enumerate(order):
        pos[c] = p
    return {s: pos[index[cluster[s]]] for s in model.component}
