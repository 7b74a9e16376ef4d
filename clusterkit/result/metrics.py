"""The partition's figures (docs/design.md metrics): cut bytes between transfer units, cluster
counts and sizes, offloaded and fallback nodes, folded nodes counted apart."""

from __future__ import annotations

from typing import Any

import numpy as np

from clusterkit.graph.core import HOST, Graph


def cut_bytes(graph: Graph, transfer_units: np.ndarray) -> tuple[int, int]:
    """docs/design.md cut_bytes for a transfer unit per node (HOST=-1 for fallback nodes), and the
    number of cut transfers whose tensor size is unknown (counted as 0 bytes)."""
    cut, unknown, _, _ = cut_figures(graph, transfer_units)
    return cut, unknown


def cut_figures(graph: Graph, transfer_units: np.ndarray) -> tuple[int, int, int, int]:
    """:func:`cut_bytes` and the number of unknown-size transfers, then the cut with every
    symbolic dimension at 1 (the tensors' ``estimated`` bytes) and how many of the unknown-size
    transfers that estimate sized."""
    units = transfer_units
    tt = graph.tensor_table
    prod_unit = np.where(tt.producer >= 0, units[np.maximum(tt.producer, 0)], HOST)
    cu = units[tt.inc_node]
    live = ~tt.free[tt.inc_tensor] & (cu != prod_unit[tt.inc_tensor])
    k = int(units.max()) + 2 if len(units) else 1
    pair = np.sort(tt.inc_tensor[live] * k + (cu[live] + 1))  # sort + mask beats np.unique
    if len(pair):
        pair = pair[np.concatenate(([True], pair[1:] != pair[:-1]))]
    outs = np.flatnonzero(tt.is_output & ~tt.free & (prod_unit != HOST))
    ten = np.concatenate((pair // k, outs))  # one entry per transfer
    unknown = ~tt.known[ten]
    total = int(tt.nbytes[ten].sum())
    if not unknown.any():  # nothing to estimate (every model of static shapes)
        return total, 0, total, 0
    assert tt.estimated is not None and tt.estimable is not None  # set by __post_init__
    return (total, int(unknown.sum()), int(tt.estimated[ten].sum()),
            int((unknown & tt.estimable[ten]).sum()))


def partition_metrics(graph: Graph, assignment: np.ndarray, on_device: np.ndarray,
                      transfer_units: np.ndarray) -> dict[str, Any]:
    """The metrics of a valid partition from its cluster position per node (``assignment``),
    whether each cluster is on an accelerator (``on_device``) and the transfer unit per node."""
    cut, unknown, estimated, sized = cut_figures(graph, transfer_units)
    sizes = np.bincount(assignment, minlength=len(on_device))[on_device]  # each node once
    offloaded = int(sizes.sum())
    n = graph.n
    folded = graph.folded
    compute = n - int(folded.sum())
    compute_off = int((~folded[transfer_units != HOST]).sum())
    return {
        "partitions": int(on_device.sum()),
        "cut_bytes": int(cut),
        "largest_cluster": int(sizes.max()) if len(sizes) else 0,
        "nodes_offloaded": offloaded,
        "offloaded_share": compute_off / compute if compute else float(n > 0),
        "clusters": len(on_device),
        "fallback_nodes": n - offloaded,
        "cut_tensors_unknown_size": int(unknown),
        "cut_bytes_estimated": int(estimated),
        "cut_tensors_estimated": int(sized),
        "folded_nodes": n - compute,
        "compute_nodes": compute,
        "compute_offloaded": compute_off,
        "compute_fallback": compute - compute_off,
    }


def figures_of(metrics: dict[str, Any]) -> tuple[int, int, int]:
    """(fallback nodes, cut_bytes, partitions) of :func:`partition_metrics`: the key by which
    ``auto`` and the cost device choice rank partitions."""
    return (int(metrics["fallback_nodes"]), int(metrics["cut_bytes"]),
            int(metrics["partitions"]))
