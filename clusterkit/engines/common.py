"""Helpers shared by the engines: ``min_size``, the closing steps of the growth engines, and the
post-pass that applies the devices' whole-subgraph rejections."""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.engines.cycle_repair import break_cycles
from clusterkit.engines.growth import Piece
from clusterkit.engines.units import UnitGraph
from clusterkit.graph.subgraph import Subgraph
from clusterkit.reasons import Category, Reason, placement_report
from clusterkit.result import Partition
from clusterkit.selection.protocol import SubgraphProperty, call_create_subgraph_node

SPLIT_FOR_CYCLE = "its cluster was split to break a cycle between clusters"


def enforce_min_size(problem: Problem, labels: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """Send accelerator clusters below ``problem.min_size`` back to the fallback (device -1).

    Splitting a convex cluster of an acyclic cluster graph into single nodes keeps the cluster
    graph acyclic: a cycle through the pieces would have been a cycle through the whole cluster.
    Returns the new device array."""
    devices = np.asarray(devices, dtype=np.int64).copy()
    if problem.min_size <= 1:
        return devices
    acc = devices >= 0
    if not acc.any():
        return devices
    _, inv, counts = np.unique(labels[acc], return_inverse=True, return_counts=True)
    small = counts[inv] < problem.min_size
    idx = np.flatnonzero(acc)
    devices[idx[small]] = -1
    return devices


def close_growth(problem: Problem, ug: UnitGraph, pieces: list[Piece], strategy: str,
                 reasons: dict[int, Reason], cycle_why: Mapping[int, str]
                 ) -> tuple[Partition, int]:
    """The closing steps of an engine that grows pieces of units (``hetero``, ``mxnet``).

    Pieces that depend on each other through other pieces are split (``break_cycles``), clusters
    below ``min_size`` go to the fallback, and each node that falls back there gets its reason in
    ``reasons`` (updated in place): ``"cycle"`` when the engine moved it to avoid a cycle
    (``cycle_why[v]`` says how) or its cluster was split for one, else ``"constraint"``. Returns
    the partition — with ``fallback_reasons`` and ``info["placement"]`` — and the number of
    clusters split."""
    pieces, split = break_cycles(ug, pieces)
    labels, devices = ug.node_labels(pieces)
    placed = devices.copy()
    devices = enforce_min_size(problem, labels, devices)
    split_nodes = set(ug.nodes_of([u for p in pieces if p.tag.get("split") for u in p.units]))
    sizes = np.bincount(labels)
    for v in np.flatnonzero((placed >= 0) & (devices < 0)).tolist():
        size = int(sizes[labels[v]])
        why = cycle_why.get(v) or (SPLIT_FOR_CYCLE if v in split_nodes else None)
        if why is not None:
            reasons[v] = Reason(Category.CYCLE, f"{why}; the {size}-node cluster it ended in "
                                f"is below min_size {problem.min_size}")
        else:
            reasons[v] = Reason(Category.CONSTRAINT, f"its {size}-node cluster on "
                                f"{problem.devices[int(placed[v])]} is below min_size "
                                f"{problem.min_size}")
    part = Partition.from_assignment(problem, labels, devices, strategy=strategy,
                                     fallback_reasons=reasons)
    part.info["placement"] = placement_report(part)
    return part, split


def reject_subgraphs(partition: Partition,
                     cache: dict[tuple[int, tuple[int, ...]], str | None] | None = None
                     ) -> Partition:
    """Ask each accelerator cluster's property for its fused node; send the clusters it rejects
    (``create_subgraph_node`` returned ``None``) to the fallback.

    A whole-partition rule of a backend (a lone copy op, a subgraph fed by constants only) is
    decided on the finished cluster, so it is applied here, after any strategy. Splitting a
    cluster of an acyclic cluster graph into fallback nodes keeps it acyclic (as for
    ``min_size``). Each moved node gets a ``"subgraph rejected"`` reason: the property's
    ``explain_subgraph(subgraph)`` when it has one, else a generic sentence. Returns
    ``partition`` itself when nothing is rejected, else a new partition with the same metadata
    (and ``info["placement"]`` rebuilt when it was there).

    ``cache`` (optional, updated in place): (property id, nodes) → the verdict, for a caller that
    checks many partitions of one problem (``auto``'s members): a cluster already judged is
    not asked again, so the property sees each distinct cluster once."""
    p = partition.problem
    props = {prop.device: prop for prop in p.properties}
    reasons: dict[int, Reason] = {}
    for c in partition.clusters:
        prop = props.get(c.device)
        if prop is None or c.device == p.fallback or not _may_reject(prop):
            continue
        key = (id(prop), tuple(c.nodes))
        if cache is not None and key in cache:
            why = cache[key]
        else:
            why = _rejection(prop, Subgraph.from_nodes(p.graph, c.nodes, c.device, c.id))
            if cache is not None:
                cache[key] = why
        if why is not None:
            reasons.update((v, Reason(Category.SUBGRAPH_REJECTED, why)) for v in c.nodes)
    if not reasons:
        return partition
    labels = partition.assignment()
    dev_index = {dev: d for d, dev in enumerate(p.devices)}
    devices = np.asarray([dev_index.get(c.device, -1) for c in partition.clusters],
                         dtype=np.int64)[labels]
    devices[sorted(reasons)] = -1
    fresh = Partition.from_assignment(p, labels, devices)
    out = replace(partition, clusters=fresh.clusters,
                  fallback_reasons={**partition.fallback_reasons, **reasons},
                  info=dict(partition.info))
    if "placement" in out.info:
        out.info["placement"] = placement_report(out)
    return out


def _may_reject(prop: SubgraphProperty) -> bool:
    """False for a property that keeps the default (accept-all) ``create_subgraph_node``."""
    return type(prop).create_subgraph_node is not SubgraphProperty.create_subgraph_node


def _rejection(prop: SubgraphProperty, sub: Subgraph) -> str | None:
    """Why ``prop`` rejects ``sub``, or ``None`` when it makes a node for it."""
    where = (f"cluster {sub.cluster_id} (device {sub.device!r}, {len(sub)} nodes, first node "
             f"{sub.graph.nodes[sub.nodes[0]].name!r})")
    if call_create_subgraph_node(prop, sub, where) is not None:
        return None
    explain = getattr(prop, "explain_subgraph", None)
    why = explain(sub) if callable(explain) else None
    return why or (f"{sub.device}'s create_subgraph_node rejected its {len(sub)}-node "
                   "subgraph")
