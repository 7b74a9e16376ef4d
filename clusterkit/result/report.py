"""What a partition says to people: the placement report (per device its nodes and op types,
every fallback node with its reason, kept in the partition JSON) and the one-line summary.

The report reads the partition through :class:`~clusterkit.result.cluster.PartitionLike`
only; reasons the engine recorded win over those inferred from the problem
(:func:`~clusterkit.result.reasons.infer_reason`).
"""

from __future__ import annotations

from collections import Counter
from itertools import chain
from typing import Any

import numpy as np

from clusterkit.graph.algorithms import pair_order
from clusterkit.result.cluster import PartitionLike
from clusterkit.result.reasons import Category, Reason, devices_taking_op, infer_reason


def placement_report(partition: PartitionLike) -> dict[str, Any]:
    """The placement report as a JSON-ready dict: per device its node, folded-node and cluster
    counts and op types; every fallback node that is not folded (:attr:`Graph.folded`: onnxruntime
    computes it before placement) with its reason, the most specific known (the engine's
    ``partition.fallback_reasons``, else :func:`infer_reason`, which quotes the selectors'
    ``explain``); counts per category and per category and op type; ``folded`` (count) and
    ``assignment``: per device, in onnxruntime's graph-assignment form, its non-folded nodes.
    Node ``index`` values are source indices (ONNX ``graph.node`` / node-link ``nodes``)."""
    g = partition.graph
    ops, nodes = g.op_types, g.nodes
    src = g.index_to_source
    order = _device_order(partition)
    index = {d: k for k, d in enumerate(order)}
    flat, dev = _cluster_nodes(partition, index)
    compute = flat[(dev == index[partition.fallback]) & ~g.folded[flat]].tolist()
    reasons = fallback_reasons_of(partition, compute)
    ids = np.asarray(compute, dtype=np.int64)
    ids = ids[np.argsort(src[ids], kind="stable")]     # by source index
    vs = ids.tolist()
    whys = list(map(reasons.__getitem__, vs))
    value = {c: c.value for c in Category}  # a dict lookup: Enum.value is a slow property
    reason_of = [value[w.category] for w in whys]
    op_of = list(map(ops.__getitem__, vs))
    fallen = [{"node": nodes[v].name, "index": i, "op": op, "reason": cat, "detail": w.detail}
              for v, i, op, cat, w in zip(vs, src[ids].tolist(), op_of, reason_of, whys)]
    by_reason = Counter(reason_of)
    by_op: dict[str, Counter] = {}
    for (cat, op), count in Counter(zip(reason_of, op_of)).items():
        by_op.setdefault(cat, Counter())[op] = count
    cats = [c.value for c in Category]
    return {
        "fallback": partition.fallback,
        "devices": _device_counts(partition, order, index, flat, dev),
        "reasons": {k: by_reason[k] for k in cats if by_reason[k]},
        "reasons_by_op": {k: dict(sorted(by_op[k].items(), key=lambda kv: (-kv[1], kv[0])))
                          for k in cats if k in by_op},
        "fallen_back": fallen,
        "folded": int(g.folded.sum()),
        "assignment": _assignment(partition, index, flat, dev),
    }


def fallback_reasons_of(partition: PartitionLike, nodes: list[int]) -> dict[int, Reason]:
    """The most specific known reason for each of the fallback ``nodes``: the engine's recorded
    one, unless no device takes the node and the engine only said a selector refused it (then,
    as for unrecorded nodes, :func:`infer_reason`, which quotes the selectors' ``explain``).
    Inferred refusals depend on the op type alone when no selector explains and no
    ``max_const_bytes`` applies, and are then worked out once per op type."""
    problem = partition.problem
    recorded = partition.fallback_reasons
    ops = problem.graph.op_types
    any_sup = problem.any_supported.tolist()
    ops_taken = devices_taking_op(problem)
    per_op = not problem.limits.any_bytes and not any(
        callable(getattr(prop, "explain", None)) for prop in problem.properties)
    cache: dict[str, Reason] = {}
    out: dict[int, Reason] = {}
    for v in nodes:
        why = recorded.get(v)
        if why is not None and not (why.category is Category.SELECTOR_CONDITION
                                    and not any_sup[v]):
            out[v] = why
        elif per_op and not any_sup[v]:
            if ops[v] not in cache:
                cache[ops[v]] = infer_reason(problem, v, ops_taken)
            out[v] = cache[ops[v]]
        else:
            out[v] = infer_reason(problem, v, ops_taken)
    return out


def _assignment(partition: PartitionLike, index: dict[str, int], flat: np.ndarray,
                dev: np.ndarray) -> list[dict[str, Any]]:
    """Per device (as :func:`_device_counts` orders them), its non-folded nodes as
    ``{"name", "op_type", "domain", "index"}`` (source index), sorted by index: the form of
    onnxruntime's graph-assignment info. ``index``, ``flat``, ``dev``: the devices' positions
    and :func:`_cluster_nodes`."""
    g = partition.graph
    keep = ~g.folded[flat]
    flat, dev = flat[keep], dev[keep]
    src = g.index_to_source[flat]
    by = pair_order(dev, src)             # per device by source index, ties in cluster order
    flat, dev, src = flat[by], dev[by], src[by]
    bounds = np.searchsorted(dev, np.arange(len(index) + 1)).tolist()
    ids, idx, nodes, ops = flat.tolist(), src.tolist(), g.nodes, g.op_types
    out = []
    for dev_name, k in index.items():
        a, b = bounds[k], bounds[k + 1]
        out.append({"device": dev_name, "nodes": [
            {"name": nd.name, "op_type": op, "domain": nd.domain, "index": i}
            for nd, op, i in zip(map(nodes.__getitem__, ids[a:b]), map(ops.__getitem__, ids[a:b]),
                                 idx[a:b])]})
    return out


def _cluster_nodes(partition: PartitionLike, index: dict[str, int]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Every cluster's nodes, in cluster order, and parallel to them ``index`` of the cluster's
    device."""
    clusters = partition.clusters
    sizes = [len(c.nodes) for c in clusters]
    flat = np.fromiter(chain.from_iterable(c.nodes for c in clusters), dtype=np.int64,
                       count=sum(sizes))
    dev = np.repeat(np.asarray([index[c.device] for c in clusters], dtype=np.int64), sizes)
    return flat, dev


def _device_order(partition: PartitionLike) -> list[str]:
    """Devices in priority order, then the fallback, then any other a cluster names."""
    order = list(partition.problem.devices) + [partition.fallback]
    for c in partition.clusters:
        if c.device not in order:
            order.append(c.device)
    return order


def _device_counts(partition: PartitionLike, order: list[str], index: dict[str, int],
                   flat: np.ndarray, dev_k: np.ndarray) -> dict[str, dict[str, Any]]:
    """Per device (``order``, :func:`_device_order`): nodes, folded nodes among them, clusters
    and the op types it took, most frequent first (counted with numpy: one pass for a million
    nodes). ``index``, ``flat``, ``dev_k``: the devices' positions and :func:`_cluster_nodes`."""
    g = partition.graph
    clusters = Counter(c.device for c in partition.clusters)
    dev = np.zeros(g.n, dtype=np.int64)
    dev[flat] = dev_k
    ops = g.op_types if all(type(op) is str for op in set(g.op_types)) else \
        [str(op) for op in g.op_types]
    names = sorted(set(ops))  # the distinct op types, each numbered by its place here
    code = {op: k for k, op in enumerate(names)}
    op_code = np.fromiter(map(code.__getitem__, ops), dtype=np.int64, count=len(ops))
    pairs = np.bincount(dev * len(names) + op_code.ravel(),
                        minlength=len(order) * len(names)).reshape(len(order), len(names))
    n_folded = np.bincount(dev, weights=g.folded, minlength=len(order))
    devs: dict[str, dict[str, Any]] = {}
    for k, d in enumerate(order):
        taken = {str(names[j]): int(pairs[k, j]) for j in np.flatnonzero(pairs[k]).tolist()}
        entry = {"nodes": int(pairs[k].sum()), "folded": int(n_folded[k]),
                 "clusters": clusters[d],
                 "op_types": dict(sorted(taken.items(), key=lambda kv: (-kv[1], kv[0])))}
        if d == partition.fallback:
            entry["fallback"] = True
        devs[d] = entry
    return devs


def summary_line(partition: PartitionLike) -> str:
    """One line for people. Its figures count compute nodes only (folded nodes, see
    :attr:`Graph.folded`, are neither offloaded nor fallen back, wherever a strategy put
    them), so they mean the same for every selector and with ``--optimize``."""
    m = partition.metrics()
    per_dev = _compute_nodes_per_device(partition)
    devs = ", ".join(f"{d} {k}" for d, k in sorted(  # the fallback last
        per_dev.items(), key=lambda item: item[0] == partition.fallback))
    return (f"{partition.graph.name}: strategy {partition.strategy}, "
            f"{plural(m['partitions'], 'partition')}, largest {m['largest_cluster']} nodes, "
            f"{m['compute_offloaded']}/{m['compute_nodes']} compute nodes offloaded"
            f"{folded_note(m)}, {_cut_or_transfers(partition, m)} (compute nodes: {devs}), "
            f"{partition.seconds:.3f}s")


def _cut_or_transfers(partition: PartitionLike, metrics: dict[str, Any]) -> str:
    """:func:`cut_note`, or for a throughput placement whose instance gives no edge sizes (only
    their costs) the total transfer load instead of a cut of unknown size."""
    fig = partition.info.get("throughput")
    if not fig or not metrics.get("cut_tensors_unknown_size") or "transfers" not in fig:
        return cut_note(metrics)
    return (f"transfers {sum(fig['transfers'].values()):.6g} (the instance gives edge costs, "
            "not sizes)")


def _compute_nodes_per_device(partition: PartitionLike) -> dict[str, int]:
    """Per device, in the order its first cluster comes, its compute (not folded) nodes."""
    clusters = partition.clusters
    index: dict[str, int] = {}
    for c in clusters:
        index.setdefault(c.device, len(index))
    flat, dev = _cluster_nodes(partition, index)
    own = np.bincount(dev[~partition.graph.folded[flat]], minlength=len(index))
    return {d: int(own[k]) for d, k in index.items()}


def plural(count: int, word: str) -> str:
    """``1 partition``, ``2 partitions``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def folded_note(metrics: dict[str, Any]) -> str:
    """``, 93 folded`` when some nodes are folded, else ``""`` (``metrics`` as
    :meth:`Partition.metrics` gives them)."""
    return f", {metrics['folded_nodes']} folded" if metrics.get("folded_nodes") else ""


def cut_note(metrics: dict[str, Any]) -> str:
    """``cut_bytes 1,024``, or ``cut_bytes ≥ 1,024, 12 cut tensors of unknown size`` when some
    cut tensors have no known size (counted as 0 bytes), or, when some of those are unknown only
    through symbolic dimensions, ``cut_bytes ≥ 1,024, about 5,120 with symbolic dimensions at 1``
    (the cut with each of them at 1; ``, 2 cut tensors not estimated`` for the others)."""
    unknown = int(metrics.get("cut_tensors_unknown_size") or 0)
    if not unknown:
        return f"cut_bytes {metrics['cut_bytes']:,}"
    sized = int(metrics.get("cut_tensors_estimated") or 0)
    if not sized:
        return (f"cut_bytes ≥ {metrics['cut_bytes']:,}, "
                f"{plural(unknown, 'cut tensor')} of unknown size")
    rest = f", {plural(unknown - sized, 'cut tensor')} not estimated" if unknown > sized else ""
    return (f"cut_bytes ≥ {metrics['cut_bytes']:,}, about "
            f"{metrics['cut_bytes_estimated']:,} with symbolic dimensions at 1{rest}")
