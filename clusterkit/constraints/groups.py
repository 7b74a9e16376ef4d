"""Together groups closed over the nodes between their members, as ExecuTorch's
``GroupBasedPartitioner`` treats its must-link groups.

A group must end in one cluster, and a cluster must be convex, so every node on a path between
two members has to join the group. :func:`close_groups` adds those nodes when a device that
takes every member also takes them, and refuses with one line naming the node otherwise. One
step is enough: the nodes between are the descendants of the members that are also their
ancestors, and a path between two nodes of that union only meets such nodes. A node added that
belongs to another group merges the two groups (both must then share the cluster), and the
merged group is closed again.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from clusterkit.errors import ConstraintError
from clusterkit.graph.convexity import nodes_between
from clusterkit.graph.core import Graph


def close_groups(graph: Graph, groups: list[list[int]], supported: np.ndarray,
                 devices: Sequence[str]) -> list[list[int]]:
    """``groups`` (topological indices) each with the nodes between its members added.

    ``supported[d, v]``: device ``d`` takes node ``v``. A group that no device takes whole is
    returned as it is (the caller reports that contradiction). Raises :class:`ConstraintError`
    naming a node between the members of a group that no device of the group takes with them."""
    out = [sorted(set(g)) for g in groups]
    gi = 0
    while gi < len(out):
        between = nodes_between(graph.succ_lists, graph.pred_lists, out[gi])
        if not between or not _devices_of(supported, out[gi]).size:
            gi += 1
            continue
        _check_taken(graph, gi, out[gi], between, supported, devices)
        merged = set(out[gi]) | set(between)
        others = [j for j in range(len(out)) if j != gi and merged.intersection(out[j])]
        for j in others:
            merged.update(out[j])
        out[gi] = sorted(merged)
        out = [g for j, g in enumerate(out) if j not in others]
        gi -= sum(j < gi for j in others)  # the merged group is closed again
    return out


def _devices_of(supported: np.ndarray, members: list[int]) -> np.ndarray:
    """Indices of the devices that take every member (all of them when there are none: the
    fallback takes everything)."""
    if supported.shape[0] == 0:
        return np.zeros(1, dtype=np.int64)
    return np.flatnonzero(supported[:, members].all(axis=1))


def _check_taken(graph: Graph, gi: int, members: list[int], between: list[int],
                 supported: np.ndarray, devices: Sequence[str]) -> None:
    """Raise unless one device of the group takes every node of ``between`` too."""
    if supported.shape[0] == 0:
        return
    mine = _devices_of(supported, members)
    taken = supported[np.ix_(mine, np.asarray(between, dtype=np.int64))]
    if taken.all(axis=1).any():
        return
    names = [nd.name for nd in graph.nodes]
    devs = ", ".join(devices[d] for d in mine.tolist())
    refused = [v for v, ok in zip(between, taken.any(axis=0).tolist()) if not ok]
    if refused:
        v = refused[0]
        why = f"which no device of the group ({devs}) takes"
    else:
        best = int(np.argmax(taken.sum(axis=1)))
        v = between[int(np.argmin(taken[best]))]
        why = f"and no one device of the group ({devs}) takes it with the others in between"
    raise ConstraintError(f"together group {gi} is not convex: a path between its members "
                          f"passes through node {names[v]!r} ({graph.nodes[v].op_type}), {why}; "
                          "drop a member or let a device of the group take it")
