"""Accelerator memory of a throughput placement: weights and activations, and what no split fits.

An accelerator's **weights** are the ``size`` of its nodes, summed (the constants each node
reads), held to ``maxSizePerFPGA``. Its **activations** are the live set of the instance's
``tensors``: a tensor is resident on accelerator ``d`` from the first to the last of ``d``'s
nodes, in the instance's node order (a topological order), that produce or read it; ``d``'s
activation load is the largest sum of resident tensor bytes at any of its nodes (a tensor
received from another device is resident from its first reader on ``d``, one sent away from
its producer to its last reader on ``d``), held to ``maxActivationsPerFPGA``. Both limits hold
across all of ``d``'s pieces. A CPU has no limit, so an instance with a CPU always has a split
(everything on the host); only without one (``maxCPUs`` 0) can nothing fit, and
:func:`memory_shortfall` says which device and by how much.

:func:`activation_cut` gives, for a placement whose accelerator is over its activation limit,
the nodes that can never share one accelerator: their tensors are resident together wherever
they meet, whatever else that accelerator holds (CP-SAT adds it as a cut and solves again);
:func:`repair_activations` moves groups off an accelerator over its limit onto the first CPU.
"""

from __future__ import annotations

import numpy as np

from clusterkit.errors import MemoryShortfallError
from clusterkit.io.placement_instance import HOST, PlacementInstance

#: slack of the byte comparisons (sizes are integers stored as floats)
EPS = 1e-6


def _resident(inst: PlacementInstance, dev: np.ndarray, d: int
              ) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """``d``'s nodes (instance order) and, per tensor touched on ``d``, (tensor, first, last)
    positions among them."""
    on = np.flatnonzero(dev == d)
    at = np.full(inst.n, -1, dtype=np.int64)
    at[on] = np.arange(len(on))
    spans = []
    for t, nodes in enumerate(inst.tensor_nodes):
        pos = at[nodes]
        pos = pos[pos >= 0]
        if len(pos):
            spans.append((t, int(pos.min()), int(pos.max())))
    return on, spans


def _live(inst: PlacementInstance, count: int, spans: list[tuple[int, int, int]]) -> np.ndarray:
    """Resident bytes at each of ``count`` positions."""
    delta = np.zeros(count + 1)
    for t, a, b in spans:
        delta[a] += inst.tensor_size[t]
        delta[b + 1] -= inst.tensor_size[t]
    return np.cumsum(delta)[:count]


def activation_peaks(inst: PlacementInstance, device: np.ndarray) -> np.ndarray:
    """Activation load of every accelerator (``0..k-1``) under ``device`` (one per node)."""
    dev = np.asarray(device, dtype=np.int64)
    out = np.zeros(inst.accelerators)
    if not len(inst.tensor_size):
        return out
    for d in range(inst.accelerators):
        on, spans = _resident(inst, dev, d)
        if len(on):
            out[d] = float(_live(inst, len(on), spans).max())
    return out


def activation_problems(inst: PlacementInstance, device: np.ndarray) -> list[str]:
    """One line per accelerator over its activation limit (empty when none is)."""
    if not np.isfinite(inst.activation_limit):
        return []
    peaks = activation_peaks(inst, device)
    return [f"accelerator {d} holds {p:.0f} bytes of activations, over maxActivationsPerFPGA "
            f"{inst.activation_limit:.0f}" for d, p in enumerate(peaks.tolist())
            if p > inst.activation_limit + EPS]


def activation_cut(inst: PlacementInstance, device: np.ndarray, d: int) -> list[int] | None:
    """Nodes of accelerator ``d`` that can share no accelerator, or None when ``d`` is within
    its limit: the node at ``d``'s peak and, for each tensor resident there, a node of ``d``
    before or at it and one at or after it that touch the tensor (wherever these nodes meet,
    that tensor is resident at the peak's node)."""
    dev = np.asarray(device, dtype=np.int64)
    on, spans = _resident(inst, dev, d)
    if not len(on):
        return None
    live = _live(inst, len(on), spans)
    p = int(np.argmax(live))
    if live[p] <= inst.activation_limit + EPS:
        return None
    nodes = {int(on[p])}
    for _, a, b in spans:
        if a <= p <= b:
            nodes.update((int(on[a]), int(on[b])))
    return sorted(nodes)


def repair_activations(inst: PlacementInstance, device: np.ndarray) -> np.ndarray:
    """``device`` with groups (``colorClass``) moved from accelerators over their activation
    limit to the first CPU, each time the group at the peak whose move lowers the peak most
    (ties: least accelerator latency), until every accelerator fits. Raises
    :class:`MemoryShortfallError` when an accelerator is over and there is no CPU."""
    dev = np.array(device, dtype=np.int64)
    if not np.isfinite(inst.activation_limit):
        return dev
    for d in range(inst.accelerators):
        while (cut := activation_cut(inst, dev, d)) is not None:
            if inst.cpus < 1:
                peak = activation_peaks(inst, dev)[d]
                raise MemoryShortfallError(
                    f"fpga{d} holds {peak:.0f} bytes of activations, "
                    f"{peak - inst.activation_limit:.0f} over its limit "
                    f"{inst.activation_limit:.0f}, and the instance has no CPU to move "
                    "nodes to")
            dev = _best_move(inst, dev, d, cut)
    return dev


def _best_move(inst: PlacementInstance, dev: np.ndarray, d: int, cut: list[int]) -> np.ndarray:
    """``dev`` with the group of a node of ``cut`` on the host: the one lowering ``d``'s
    activation peak most."""
    best, best_key = dev, None
    for c in sorted({int(inst.color[v]) for v in cut}):
        trial = dev.copy()
        members = np.flatnonzero(inst.color == c)
        trial[members] = HOST
        key = (float(activation_peaks(inst, trial)[d]),
               float(inst.acc_latency[members].sum()))
        if best_key is None or key < best_key:
            best, best_key = trial, key
    return best


def node_activations(inst: PlacementInstance) -> np.ndarray:
    """Bytes of the tensors each node touches (its own live set, the least any accelerator
    holding it needs)."""
    out = np.zeros(inst.n)
    for b, nodes in zip(inst.tensor_size.tolist(), inst.tensor_nodes):
        out[nodes] += b
    return out


def memory_shortfall(inst: PlacementInstance) -> str | None:
    """Why no split fits the accelerators' memory, in one line (None when that is not known
    to be so): only without a CPU, a must-link group whose weights or a node whose own
    activations exceed an accelerator's limit, or weights beyond all accelerators together."""
    if inst.cpus >= 1:
        return None
    k, limit = inst.accelerators, inst.memory_limit
    devices = "fpga0" if k == 1 else f"each of fpga0..fpga{k - 1}"
    weights = np.bincount(inst.color, weights=inst.size)
    worst = int(np.argmax(weights)) if len(weights) else 0
    if len(weights) and weights[worst] > limit + EPS:
        v = int(np.flatnonzero(inst.color == worst)[0])
        return (f"no placement fits: node {inst.names[v]!r} (with its colorClass) needs "
                f"{weights[worst]:.0f} bytes of weights, {weights[worst] - limit:.0f} over "
                f"the limit {limit:.0f} of {devices}, and the instance has no CPU")
    total = float(inst.size.sum())
    if k and total > k * limit + EPS:
        return (f"no placement fits: the nodes need {total:.0f} bytes of weights, "
                f"{total - k * limit:.0f} over the {k} x {limit:.0f} of fpga0..fpga{k - 1} "
                "together, and the instance has no CPU")
    own = node_activations(inst)
    v = int(np.argmax(own)) if inst.n else 0
    if inst.n and own[v] > inst.activation_limit + EPS:
        return (f"no placement fits: node {inst.names[v]!r} alone touches {own[v]:.0f} bytes "
                f"of activations, {own[v] - inst.activation_limit:.0f} over the limit "
                f"{inst.activation_limit:.0f} of {devices}, and the instance has no CPU")
    return None


def check_memory(inst: PlacementInstance) -> None:
    """Raise :class:`MemoryShortfallError` when :func:`memory_shortfall` finds a reason."""
    why = memory_shortfall(inst)
    if why is not None:
        raise MemoryShortfallError(f"instance {inst.name!r}: {why}", why)
