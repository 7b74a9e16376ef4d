"""Exhaustive search over every valid partition of a small problem (the oracle for tests and for
the optimality benchmark). Exponential: meant for graphs of at most ~9 nodes.

A candidate is a set of fallback nodes plus a set partition of the others into blocks, each on a
device that takes all of its nodes. Validity is checked here directly (fast, pure Python) with
the same rules as :meth:`clusterkit.result.model.Partition.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Iterator, Mapping

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.constraints.objectives import objective_weights
from clusterkit.errors import CycleError, StrategyError
from clusterkit.graph.algorithms import topological_order
from clusterkit.graph.core import HOST
from clusterkit.result.metrics import cut_bytes
from clusterkit.result.model import Partition

MAX_NODES = 10


@dataclass
class ExhaustiveResult:
    """The best objective value, one partition reaching it, how many nodes it leaves on the
    fallback (the fewest possible), and how many valid partitions exist."""

    value: float
    partition: Partition
    valid_count: int
    fallback_nodes: int


def enumerate_valid(problem: Problem) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(labels, devices)`` for every valid partition (device -1 = fallback)."""
    n = problem.n
    if n > MAX_NODES:
        raise StrategyError(f"exhaustive search is for at most {MAX_NODES} nodes, got {n}")
    g = problem.graph
    edges = list(zip(g.edge_src.tolist(), g.edge_dst.tolist()))
    supported = problem.supported.tolist()
    nd = len(problem.devices)
    for fb_mask in range(1 << n):
        fallback = [(fb_mask >> v) & 1 == 1 for v in range(n)]
        if not _groups_agree(problem, fallback):
            continue
        rest = [v for v in range(n) if not fallback[v]]
        for blocks in _set_partitions(rest):
            options = []
            for block in blocks:
                opts = [d for d in range(nd) if all(supported[d][v] for v in block)]
                if not opts:
                    break
                options.append(opts)
            else:
                for choice in product(*options):
                    labels = [0] * n
                    devices = [-1] * n
                    for k, (block, d) in enumerate(zip(blocks, choice)):
                        for v in block:
                            labels[v] = k
                            devices[v] = d
                    nxt = len(blocks)
                    group_label: dict[int, int] = {}
                    for v in range(n):
                        if fallback[v]:
                            gid = int(problem.group_of[v])
                            if gid >= 0:
                                if gid not in group_label:
                                    group_label[gid] = nxt
                                    nxt += 1
                                labels[v] = group_label[gid]
                            else:
                                labels[v] = nxt
                                nxt += 1
                    if _valid(problem, labels, devices, blocks, choice, edges):
                        yield np.asarray(labels), np.asarray(devices)


def exhaustive_optimum(problem: Problem, objective: str | Mapping[str, float] = "cut"
                       ) -> ExhaustiveResult:
    """The minimum of ``w_cut * cut_bytes + w_partitions * partitions`` over the valid
    partitions that offload as many nodes as possible (lexicographic: fewest fallback nodes
    first — otherwise "everything on the host" would trivially win with cut 0 and no
    partitions). Ties: the first in enumeration order."""
    w_cut, w_parts = objective_weights(objective)
    best = None
    count = 0
    for labels, devices in enumerate_valid(problem):
        count += 1
        key = (int((devices < 0).sum()),
               partition_objective(problem, labels, devices, w_cut, w_parts))
        if best is None or key < best[0]:
            best = (key, labels, devices)
    if best is None:
        raise StrategyError("no valid partition exists for this problem")
    part = Partition.from_assignment(problem, best[1], best[2]).derive(strategy="exhaustive")
    return ExhaustiveResult(best[0][1], part, count, best[0][0])


def partition_objective(problem: Problem, labels, devices, w_cut: float, w_parts: float
                        ) -> float:
    """Objective of a (labels, devices) assignment."""
    labels = np.asarray(labels)
    devices = np.asarray(devices)
    units = np.where(devices >= 0, labels, HOST)
    cut = cut_bytes(problem.graph, units)[0] if w_cut else 0
    parts = len(set(labels[devices >= 0].tolist()))
    return w_cut * cut + w_parts * parts


def _groups_agree(problem: Problem, fallback: list[bool]) -> bool:
    for members in problem.groups:
        vals = {fallback[v] for v in members.tolist()}
        if len(vals) > 1:
            return False
    return True


def _set_partitions(items: list[int]) -> Iterator[list[list[int]]]:
    """All set partitions of ``items`` (restricted growth order)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _set_partitions(rest):
        yield [[first]] + part
        for k in range(len(part)):
            yield part[:k] + [[first] + part[k]] + part[k + 1:]


def _valid(problem: Problem, labels: list[int], devices: list[int], blocks, choice,
           edges: list[tuple[int, int]]) -> bool:
    p = problem
    for block, d in zip(blocks, choice):
        if not p.limits.fits(block, d):  # the global limits and the device's own
            return False
    for e, (u, v) in enumerate(edges):
        if labels[u] == labels[v]:
            if p.must_cut[e]:
                return False
            d = devices[u]
            if d >= 0 and not p.edge_ok[d, e]:
                return False
    for u, v in p.never_pairs.tolist():
        if labels[u] == labels[v]:
            return False
    for members in p.groups:
        if len({labels[v] for v in members.tolist()}) > 1:
            return False
    # acyclic graph of clusters
    pairs = {(labels[u], labels[v]) for u, v in edges if labels[u] != labels[v]}
    try:
        topological_order(max(labels) + 1, [a for a, _ in pairs], [b for _, b in pairs])
    except CycleError:
        return False
    return True
