"""Throughput placement: split a placement instance (:mod:`clusterkit.io.placement_instance`)
over ``k`` interchangeable accelerators and its ``c`` CPUs (``maxCPUs``, each a device of its
own, as the paper's DP and IP treat them) so that the largest device load is least.

The load is the one of Tarnawski et al.'s evaluator (``dp.cpp``, ``computeLoadForResultOrg``):
an accelerator's load is the accelerator latency of its nodes plus, once per node ``u``, the
transfer cost of ``u``'s output when ``u`` is on it and some consumer of ``u`` is on another
device, and when ``u`` is elsewhere and some consumer of ``u`` is on it (several consumers on one
device count once); a CPU's load is its nodes' CPU latency (it pays no transfers). Must-link
groups (``colorClass``) share a device, an accelerator holds at most ``memory_limit`` bytes,
unsupported nodes stay on the host.

*Contiguous* placements are the paper's: the devices form a chain whose sets are differences of
a chain of ideals of the forward graph with must-link groups contracted (a backward node follows
its group; a group with backward nodes only is ordered by its backward edges reversed, as the
artificial forward nodes of ``dp.cpp``). :class:`Units` holds that order: strongly connected
groups of it fused into one unit, a DAG over units. Every chain of ideals is a cut of some
topological order of the units into consecutive segments, so the fast :func:`chain_heuristic`
searches orders: it cuts several (:func:`start_orders`: the file's, as soon and as late as
possible, and two that keep the host-only units' hull together) optimally for each order by
``dp.cpp``'s program restricted to it (:func:`segment_dp` over the exact load of every segment,
:func:`accelerator_matrix`, O(n^2)), then re-cuts orders in which its best cut is itself a cut
and orders derived from it, among them ones that trade the units that run best on a CPU
into the CPU segments (:func:`improve_chain`: never worse) and moves single units between
segments (:func:`refine_chain`), by turns. Beyond :data:`EXACT_UNITS` units it cuts the
file's order by bisection on the load instead.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from clusterkit.constraints.core import Constraints, Problem
from clusterkit.engines.activations import activation_problems, check_memory, repair_activations
from clusterkit.errors import StrategyError
from clusterkit.graph.algorithms import is_acyclic, strong_components, topological_order
from clusterkit.graph.core import Graph
from clusterkit.io.placement_instance import (
    ACC_OP,
    HOST,
    PlacementInstance,
    cpu_device,
    cpu_slots,
    graph_names,
    split_text,
)
from clusterkit.result.model import Partition
from clusterkit.result.reasons import Category, Reason
from clusterkit.selection.protocol import OpsProperty, SubgraphProperty, SubgraphSelector

#: bisection steps of the heuristic (the load interval shrinks 2**-STEPS)
STEPS = 30
#: ... or until the interval is this small relative to its top
TOLERANCE = 1e-5
#: orders of at most this many units are cut optimally (dense n x n tables of loads); beyond,
#: by bisection
EXACT_UNITS = 2500
#: at most this many rounds of :func:`improve_chain`, which stops after STALL rounds in a
#: row without a better cut
ROUNDS = 40
STALL = 4
#: the orders :func:`improve_chain` cuts per round
CUTS_PER_ROUND = 7
#: the segment moves of a kick (see :func:`improve_chain`) and their odds
KICK = (-2, -1, 0, 0, 0, 0, 0, 0, 1, 2)
#: the best this many first cuts are polished (:func:`polish`), in at most TURNS turns
POLISHED = 3
TURNS = 2
#: cuts of an order of n units the heuristic makes: CUT_BUDGET / n^2 (at least 2)
CUT_BUDGET = 8e6
#: why a supported node is on the host: the placement put it there
ON_HOST = Reason(Category.CONSTRAINT, "the throughput placement runs it on the host (the CPU), "
                 "which lowers the largest device load")
#: moves the local search (:func:`refine_chain`) tries per call (fewer beyond 500 units)
EVALUATIONS = 30_000


def device_slots(inst: PlacementInstance, device: Sequence[int] | np.ndarray) -> np.ndarray:
    """Position of each node's device in :func:`device_names`' order: accelerator ``d`` is
    ``d``, CPU ``j`` (device ``HOST - j``) is ``k + j``."""
    dev = np.asarray(device, dtype=np.int64)
    return np.where(dev < 0, inst.accelerators + (HOST - dev), dev)


def load_parts(inst: PlacementInstance, device: Sequence[int] | np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Compute and transfer load of every device (``k`` accelerators, then the CPUs of
    :func:`cpu_slots`) under ``device`` (one device index per node: ``0..k-1``, or
    :func:`~clusterkit.io.placement_instance.cpu_device`), by the evaluator's definition; each
    CPU a device of its own, paying no transfers (as the paper's DP and IP)."""
    k = inst.accelerators
    nd = k + cpu_slots(inst)
    dev = np.asarray(device, dtype=np.int64)
    slot = device_slots(inst, dev)
    lat = np.where(dev < 0, inst.cpu_latency, inst.acc_latency)
    compute = np.bincount(slot, weights=lat, minlength=nd)[:nd]
    src, dst = inst.edge_src, inst.edge_dst
    cross = slot[src] != slot[dst]
    pairs = np.unique(src[cross] * nd + slot[dst[cross]])  # (u, consumer's device) once
    u, b = pairs // nd, pairs % nd
    payers = np.unique(u)
    comm = np.bincount(slot[payers], weights=inst.out_cost[payers], minlength=nd)[:nd]
    comm += np.bincount(b, weights=inst.out_cost[u], minlength=nd)[:nd]
    comm[k:] = 0.0  # the CPUs pay no transfers
    return compute, comm


def device_loads(inst: PlacementInstance, device: Sequence[int] | np.ndarray) -> np.ndarray:
    """Load of every device (:func:`load_parts`' compute plus transfers)."""
    compute, comm = load_parts(inst, device)
    return compute + comm


def latency_bound(inst: PlacementInstance) -> float:
    """A lower bound of every placement's max load, transfers, memory and must-link groups
    ignored: the least ``T`` for which the host (host-only nodes first, then the nodes of least
    CPU/accelerator time ratio, the last one split) holds at most ``T`` of CPU time and leaves
    at most ``k * T`` of accelerator time (``c * T`` of CPU time with ``c`` CPUs)."""
    k, c = inst.accelerators, inst.cpus
    if k < 1:
        return float(inst.cpu_latency.sum()) / max(c, 1)
    forced = float(inst.cpu_latency[~inst.supported].sum())
    acc, cpu = inst.acc_latency[inst.supported], inst.cpu_latency[inst.supported]
    if c < 1:
        return float(acc.sum()) / k
    order = np.argsort(cpu / np.maximum(acc, 1e-300), kind="stable")
    cpu_pre = np.concatenate(([0.0], np.cumsum(cpu[order])))
    acc_left = float(acc.sum()) - np.concatenate(([0.0], np.cumsum(acc[order])))
    lo, hi = forced / c, max(forced / c, float(acc.sum()) / k)
    for _ in range(60):
        mid = (lo + hi) / 2
        room = c * mid - forced
        j = int(np.searchsorted(cpu_pre, room, side="right")) - 1  # whole nodes on the host
        left = acc_left[j]
        if j < len(order):  # and a share of the next one
            v = order[j]
            left -= acc[v] * min(1.0, (room - cpu_pre[j]) / max(cpu[v], 1e-300))
        lo, hi = (lo, mid) if left <= k * mid else (mid, hi)
    return lo


def placement_problems(inst: PlacementInstance,
                       device: Sequence[int] | np.ndarray) -> list[str]:
    """What makes ``device`` infeasible (empty when feasible): a node on no device, an
    unsupported node on an accelerator, a split must-link group, an accelerator over memory."""
    dev = np.asarray(device, dtype=np.int64)
    out = []
    bad = np.flatnonzero((dev < cpu_device(cpu_slots(inst) - 1)) | (dev >= inst.accelerators))
    if len(bad):
        out.append(f"node {inst.ids[bad[0]]} has no device ({dev[bad[0]]})")
    bad = np.flatnonzero(~inst.supported & (dev >= 0))
    if len(bad):
        out.append(f"node {inst.ids[bad[0]]} is not supported on an accelerator")
    first = np.full(int(inst.color.max(initial=-1)) + 1, -2, dtype=np.int64)
    for v in range(inst.n):
        c = inst.color[v]
        if first[c] == -2:
            first[c] = dev[v]
        elif first[c] != dev[v]:
            out.append(f"node {inst.ids[v]} is split from its colorClass")
            break
    if inst.cpus < 1 and (dev < 0).any():
        out.append("the instance allows no CPU (maxCPUs 0)")
    for d in range(inst.accelerators):
        used = float(inst.size[dev == d].sum())
        if used > inst.memory_limit:
            out.append(f"accelerator {d} holds {used:.0f} bytes, over maxSizePerFPGA "
                       f"{inst.memory_limit:.0f}")
    return out + activation_problems(inst, dev)


def load_figures(inst: PlacementInstance,
                 device: Sequence[int] | np.ndarray) -> dict[str, Any]:
    """The figures a partition JSON carries: every device's load (``loads``), split into
    ``compute`` and ``transfers``, its ``pieces`` (:func:`device_pieces`) and ``nodes`` (the
    instance's ids), the bottleneck and the max."""
    compute, comm = load_parts(inst, device)
    loads = compute + comm
    names = device_names(inst)
    worst = int(np.argmax(loads))
    slot = device_slots(inst, device)
    pieces = device_pieces(inst, device)
    return {"loads": {n: float(x) for n, x in zip(names, loads)},
            "bottleneck": names[worst], "max_load": float(loads[worst]),
            "compute": {n: float(x) for n, x in zip(names, compute)},
            "transfers": {n: float(x) for n, x in zip(names, comm)},
            "pieces": dict(zip(names, pieces)),
            "nodes": {n: np.sort(inst.ids[slot == d]).tolist() for d, n in enumerate(names)}}


def device_names(inst: PlacementInstance) -> list[str]:
    """``fpga0 .. fpga{k-1}`` then the CPUs: ``cpu`` (one CPU) or ``cpu0 .. cpu{c-1}``, the
    order of :func:`device_loads`."""
    cpus = ["cpu"] if cpu_slots(inst) == 1 else [f"cpu{j}" for j in range(inst.cpus)]
    return [f"fpga{d}" for d in range(inst.accelerators)] + cpus


def device_pieces(inst: PlacementInstance, device: Sequence[int] | np.ndarray) -> list[int]:
    """Per device (:func:`device_names`' order), its contiguous pieces in the paper's sense:
    on the units' order (:func:`build_units`), a device's units split where a path of units
    leaves the device and comes back (the most returns along a path, plus one); 0 when idle.
    A unit whose nodes sit on several devices (a non-contiguous placement may split a cycle of
    groups) counts one more piece on each device but its first node's."""
    units = build_units(inst)
    slot = device_slots(inst, device)
    u_slot = [int(slot[m[0]]) for m in units.members]
    nd = inst.accelerators + cpu_slots(inst)
    src = [a for a, bs in enumerate(units.succ) for _ in bs]
    dst = [b for bs in units.succ for b in bs]
    order = topological_order(units.count, src, dst, key=[m[0] for m in units.members])
    # ret[u][d]: the most times a path of units ending at u has entered device d
    ret: list[dict[int, int]] = [{} for _ in range(units.count)]
    for u in order:
        ret[u][u_slot[u]] = max(ret[u].get(u_slot[u], 0), 1)
        for w in units.succ[u]:
            for d, r in ret[u].items():
                step = r + (d == u_slot[w] != u_slot[u])
                if step > ret[w].get(d, 0):
                    ret[w][d] = step
    pieces = [0] * nd
    for u in range(units.count):
        pieces[u_slot[u]] = max(pieces[u_slot[u]], ret[u][u_slot[u]])
    for u, m in enumerate(units.members):  # a unit split over devices: a piece elsewhere each
        for d in set(slot[m].tolist()) - {u_slot[u]}:
            pieces[d] += 1
    return pieces


@dataclass
class Units:
    """The contiguity structure: ``unit_of[v]`` per node, ``members[u]`` per unit, the unit DAG
    (``succ``) and, per node with a transfer cost, the distinct units of its consumers other
    than its own (``out_units``); ``into[u]``: nodes of other units with a consumer in ``u``."""

    unit_of: np.ndarray
    members: list[list[int]]
    succ: list[list[int]]
    out_units: list[list[int]] = field(default_factory=list)
    into: list[list[int]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.members)


def order_arcs(inst: PlacementInstance) -> list[tuple[int, int]]:
    """Arcs between must-link groups that a contiguous placement must follow: each forward edge,
    and each backward edge touching a group without forward nodes, reversed (as ``dp.cpp``)."""
    col, bw = inst.color.tolist(), inst.backward.tolist()
    has_fwd = [False] * (max(col, default=-1) + 1)
    for v in range(inst.n):
        has_fwd[col[v]] = has_fwd[col[v]] or not bw[v]
    arcs = set()
    for u, v in zip(inst.edge_src.tolist(), inst.edge_dst.tolist()):
        cu, cv = col[u], col[v]
        if cu == cv:
            continue
        if not bw[u] and not bw[v]:
            arcs.add((cu, cv))
        elif bw[u] and bw[v] and not (has_fwd[cu] and has_fwd[cv]):
            arcs.add((cv, cu))
    return sorted(arcs)


def build_units(inst: PlacementInstance, contiguous: bool = True) -> Units:
    """Units: must-link groups, fused along cycles of :func:`order_arcs` when ``contiguous``
    (a cycle must share one device of the chain); without it, units are the groups and the unit
    DAG is empty (no order to keep)."""
    ncol = int(inst.color.max(initial=-1)) + 1
    arcs = order_arcs(inst) if contiguous else []
    ends = np.asarray(arcs, dtype=np.int64).reshape(-1, 2)
    unit_of_col = strong_components(ncol, ends[:, 0], ends[:, 1])
    ncomp = int(unit_of_col.max(initial=-1)) + 1
    unit_of = unit_of_col[inst.color]
    members: list[list[int]] = [[] for _ in range(ncomp)]
    for v, u in enumerate(unit_of.tolist()):
        members[u].append(v)
    succ_set = {(int(unit_of_col[a]), int(unit_of_col[b])) for a, b in arcs}
    succ: list[list[int]] = [[] for _ in range(ncomp)]
    for a, b in sorted(succ_set):
        if a != b:
            succ[a].append(b)
    units = Units(unit_of, members, succ)
    _transfer_index(inst, units)
    return units


def _transfer_index(inst: PlacementInstance, units: Units) -> None:
    """Fill ``out_units`` and ``into`` of ``units`` from the instance's edges."""
    uo = units.unit_of.tolist()
    out: list[set[int]] = [set() for _ in range(inst.n)]
    for a, b in zip(inst.edge_src.tolist(), inst.edge_dst.tolist()):
        if uo[a] != uo[b]:
            out[a].add(uo[b])
    units.out_units = [sorted(s) for s in out]
    into: list[list[int]] = [[] for _ in units.members]
    for a, s in enumerate(units.out_units):
        for b in s:
            into[b].append(a)
    units.into = into


@dataclass
class UnitCosts:
    """Per unit (:class:`Units`): accelerator and CPU latency, memory, whether it holds a
    host-only node; the unit DAG as arc lists; per transfer-paying node, the units whose
    place decides whether it pays (``pay_node[t]`` with ``pay_unit[t]``: its own unit and its
    consumers' units)."""

    acc: np.ndarray
    cpu: np.ndarray
    size: np.ndarray
    host_only: np.ndarray
    src: list[int]
    dst: list[int]
    pay_node: np.ndarray
    pay_unit: np.ndarray


def unit_costs(inst: PlacementInstance, units: Units) -> UnitCosts:
    """The :class:`UnitCosts` of ``units``."""
    uo, nu = units.unit_of, units.count
    acc = np.bincount(uo, weights=inst.acc_latency, minlength=nu)
    cpu = np.bincount(uo, weights=inst.cpu_latency, minlength=nu)
    size = np.bincount(uo, weights=inst.size, minlength=nu)
    host_only = np.bincount(uo, weights=~inst.supported, minlength=nu) > 0
    src = [a for a, bs in enumerate(units.succ) for _ in bs]
    dst = [b for bs in units.succ for b in bs]
    cost, own = inst.out_cost.tolist(), uo.tolist()
    pay_node, pay_unit = [], []
    for v, outs in enumerate(units.out_units):
        if outs and cost[v] > 0:
            pay_node += [v] * (len(outs) + 1)
            pay_unit += [own[v], *outs]
    return UnitCosts(acc, cpu, size, host_only, src, dst, np.array(pay_node, dtype=np.int64),
                     np.array(pay_unit, dtype=np.int64))


def unit_depths(units: Units, costs: UnitCosts) -> tuple[list[int], list[int]]:
    """Per unit, the longest path of units from a source to it (its level) and from it to a
    sink (its height)."""
    order = topological_order(units.count, costs.src, costs.dst,
                              key=[m[0] for m in units.members])
    level, height = [0] * units.count, [0] * units.count
    for a in order:
        for b in units.succ[a]:
            level[b] = max(level[b], level[a] + 1)
    for a in reversed(order):
        for b in units.succ[a]:
            height[a] = max(height[a], height[b] + 1)
    return level, height


def ordered(units: Units, costs: UnitCosts, key: Sequence) -> list[int]:
    """The topological order of the unit DAG taking the ready unit of smallest ``key`` first."""
    return topological_order(units.count, costs.src, costs.dst, key=key)


def start_orders(units: Units, costs: UnitCosts) -> list[list[int]]:
    """Topological orders of the units to cut first, each once: by smallest first member
    (the file's order where it is topological), by level (as soon as possible), by height (as
    late as possible), and the two of :func:`hull_classes` (host-only units together)."""
    level, height = unit_depths(units, costs)
    top = max(level, default=0)
    first = [m[0] for m in units.members]
    late = [(top - h, f) for h, f in zip(height, first)]
    keys: list[Sequence[Any]] = [first, list(zip(level, first)), late]
    keys += [list(zip(cls, level, first)) for cls in hull_classes(units, costs)]
    out: list[list[int]] = []
    for key in keys:
        order = ordered(units, costs, key)
        if order not in out:
            out.append(order)
    return out


def hull_classes(units: Units, costs: UnitCosts) -> list[list[int]]:
    """A contiguous placement with one CPU puts every host-only unit on it, and with them
    every unit on a path between two of them (their hull). Classes that keep the hull in one
    stretch of an order: 0 for the ancestors of host-only units outside the hull, 1 for the
    hull, 2 for the descendants; the other units 0 in the first list, 2 in the second. None
    without host-only units. O(units + arcs)."""
    ho = np.flatnonzero(costs.host_only).tolist()
    if not ho:
        return []
    preds: list[list[int]] = [[] for _ in range(units.count)]
    for a, b in zip(costs.src, costs.dst):
        preds[b].append(a)
    anc, desc = _reach(preds, ho), _reach(units.succ, ho)
    base = [1 if a and d else 0 if a else 2 if d else -1 for a, d in zip(anc, desc)]
    return [[0 if c < 0 else c for c in base], [2 if c < 0 else c for c in base]]


def _reach(adj: list[list[int]], start: list[int]) -> list[bool]:
    """Units reachable from ``start`` along ``adj`` (``start`` included)."""
    seen = [False] * len(adj)
    stack = list(start)
    for u in start:
        seen[u] = True
    while stack:
        for w in adj[stack.pop()]:
            if not seen[w]:
                seen[w] = True
                stack.append(w)
    return seen


def transfer_matrix(inst: PlacementInstance, costs: UnitCosts, order: Sequence[int],
                    count: int) -> np.ndarray:
    """``t[i, j]`` (``i < j``): transfer load of an accelerator holding units ``order[i:j]``
    (``count`` units in all; those outside ``order`` are on no accelerator), by the
    evaluator's definition. A paying node pays exactly when the segment holds some but not
    all of the positions ``P`` of its own unit and its consumers' units (a unit outside the
    order at position ``n``, which no segment holds): ``t = total - avoid - contain``, where
    ``[i, j)`` avoids ``P`` when it lies in a gap between two positions (``i > p``, ``j <=
    p'``) and contains it when ``i <= min P`` and ``j > max P``. Each gap and each contained
    set is one point of a 2-D prefix sum: O(E log E + n^2) time and O(n^2) memory."""
    n = len(order)
    pos = np.full(count, n, dtype=np.int64)
    pos[np.asarray(order, dtype=np.int64)] = np.arange(n)
    key = np.unique(costs.pay_node * (n + 1) + pos[costs.pay_unit])
    node, p = key // (n + 1), key % (n + 1)
    first = np.r_[True, node[1:] != node[:-1]] if len(key) else np.zeros(0, dtype=bool)
    last = np.r_[first[1:], True] if len(key) else first
    c = inst.out_cost[node]
    side = n + 1
    gap_lo = np.where(first, 0, np.r_[0, p[:-1] + 1][:len(p)])
    tail = last & (p < n)
    avoid = np.bincount(np.r_[gap_lo * side + p, (p[tail] + 1) * side + n],
                        weights=np.r_[c, c[tail]], minlength=side * side).reshape(side, side)
    np.cumsum(avoid, axis=0, out=avoid)
    avoid = np.cumsum(avoid[:, ::-1], axis=1)[:, ::-1]  # sum over a <= i, b >= j
    lo = np.maximum.accumulate(np.where(first, np.arange(len(p)), 0))[tail]
    whole = np.bincount(p[lo] * side + p[tail] + 1, weights=c[tail],
                        minlength=side * side).reshape(side, side)
    whole = np.cumsum(whole[::-1], axis=0)[::-1]
    np.cumsum(whole, axis=1, out=whole)  # sum over a >= i, b <= j
    return float(c[first].sum()) - avoid - whole


def accelerator_matrix(inst: PlacementInstance, costs: UnitCosts, order: Sequence[int]
                       ) -> np.ndarray:
    """``m[i, j]``: accelerator load of units ``order[i:j]`` (0 when empty; inf when ``j <
    i``, over memory or holding a host-only unit)."""
    idx = np.asarray(order, dtype=np.int64)
    lat, size, host = (np.r_[0.0, np.cumsum(x[idx])] for x in
                       (costs.acc, costs.size, costs.host_only.astype(np.float64)))
    m = transfer_matrix(inst, costs, order, len(costs.acc))
    m += lat[None, :]
    m -= lat[:, None]
    # prefix sums only grow: row i is out of memory or holds a host-only unit from r[i] on
    r = np.minimum(np.searchsorted(size, size + inst.memory_limit, side="right"),
                   np.searchsorted(host, host, side="right"))
    cols = np.arange(len(idx) + 1)
    m[(cols[None, :] >= r[:, None]) | (cols[None, :] < cols[:, None])] = np.inf
    np.fill_diagonal(m, 0.0)
    return m


def segment_dp(acc: np.ndarray, cpu: np.ndarray, accelerators: int, cpus: int,
               extra: float = 0.0) -> tuple[float, list[int] | None, list[bool]]:
    """The optimal cut of an order into consecutive segments on up to ``accelerators``
    accelerators and ``cpus`` CPUs in any chain order (least max load): ``dp.cpp``'s
    program restricted to one order. ``acc``: :func:`accelerator_matrix`; ``cpu``: the CPU
    latency per position; ``extra``: load the first CPU of the chain carries besides its
    segment; ``best[a, c][j]`` = least max load of the first ``j`` units on ``a``
    accelerator and ``c`` CPU segments, O((k+1)(c+1) n^2). The forward pass keeps only the
    values (a column minimum, which numpy reduces row by row); the way back finds each
    segment's start in one column. Returns the load, the segment ends and their kinds
    (True = a CPU)."""
    n = len(cpu)
    pre = np.r_[0.0, np.cumsum(cpu)]
    host = pre[None, :] - pre[:, None]
    host[np.tril_indices(n + 1, -1)] = np.inf
    first_host = host + extra if extra else host
    start = np.full(n + 1, np.inf)
    start[0] = 0.0
    best: dict[tuple[int, int], np.ndarray] = {(0, 0): start}
    on_cpu: dict[tuple[int, int], np.ndarray] = {}
    buf = np.empty((n + 1, n + 1))
    for a in range(accelerators + 1):
        for c in range(cpus + 1):
            if a + c == 0:
                continue
            options = ([_column_min(best[(a - 1, c)], acc, buf)] if a else []) + \
                ([_column_min(best[(a, c - 1)], first_host if c == 1 else host, buf)]
                 if c else [])
            best[(a, c)] = np.minimum(*options) if a and c else options[0]
            on_cpu[(a, c)] = options[1] < options[0] if a and c else np.full(n + 1, not a)
    key = (accelerators, cpus)
    if not np.isfinite(best[key][n]):
        return np.inf, None, []
    ends, kinds, j = [], [], n
    while key != (0, 0):
        host_seg = bool(on_cpu[key][j])
        prev = (key[0], key[1] - 1) if host_seg else (key[0] - 1, key[1])
        m = (first_host if key[1] == 1 else host) if host_seg else acc
        ends.append(j)
        kinds.append(host_seg)
        key, j = prev, int(np.argmin(np.maximum(best[prev], m[:, j])))
    return float(best[(accelerators, cpus)][n]), ends[::-1], kinds[::-1]


def _column_min(prev: np.ndarray, m: np.ndarray, buf: np.ndarray) -> np.ndarray:
    """``min_i max(prev[i], m[i, j])`` per column ``j``, in ``buf``'s memory."""
    np.maximum(prev[:, None], m, out=buf)
    return buf.min(axis=0)


@dataclass
class Chain:
    """A cut of an order of units: ``seg[u]`` per unit (-1: outside the order, on the first
    CPU), each segment's device, and the true max load of the placement."""

    load: float
    seg: list[int]
    seg_dev: list[int]
    order: list[int]
    #: every device's load, in decreasing order
    loads: np.ndarray = field(default_factory=lambda: np.zeros(0))


def cut_order(inst: PlacementInstance, units: Units, costs: UnitCosts, order: list[int]
              ) -> Chain | None:
    """:func:`segment_dp` on ``order`` (units outside it on the first CPU); None when no cut
    fits memory."""
    out = np.ones(len(costs.cpu), dtype=bool)
    out[order] = False
    _, ends, kinds = segment_dp(accelerator_matrix(inst, costs, order), costs.cpu[order],
                                inst.accelerators, max(inst.cpus, 0), float(costs.cpu[out].sum()))
    if ends is None:
        return None
    return make_chain(inst, units, _segments(units, order, ends), segment_devices(kinds),
                      order)


def make_chain(inst: PlacementInstance, units: Units, seg: list[int], seg_dev: list[int],
               order: list[int]) -> Chain:
    """The :class:`Chain` of a segment per unit, with its loads."""
    loads = np.sort(device_loads(inst, _seg_devices(inst, units, seg, seg_dev)))[::-1]
    return Chain(float(loads[0]), seg, seg_dev, order, loads)


def improve_chain(inst: PlacementInstance, units: Units, costs: UnitCosts, best: Chain,
                  rounds: int, stall: int = STALL) -> Chain:
    """Iterated re-cutting: each round cuts (:func:`cut_order`) orders in which ``best`` is
    itself a cut - the units sorted by their segment, then inside a segment as soon as
    possible, as late as possible, at random or by :func:`cpu_side_keys` - and two kicked
    orders (each unit's segment moved by one or two at random; units that run best on a CPU
    moved to a CPU segment, :func:`cpu_side_keys`: cuts the others cannot reach), all seeded
    by the round; it keeps the cut whose device loads, sorted in decreasing order, are
    lexicographically least (never worse than ``best``). Stops after ``rounds`` rounds or
    ``stall`` rounds in a row without a better cut. O(rounds * :data:`CUTS_PER_ROUND` *
    (k+1)(c+1) n^2)."""
    level, height = unit_depths(units, costs)
    top = max(level, default=0)
    ratio = (costs.cpu / np.maximum(costs.acc, 1e-300)).tolist()
    idle = 0
    for r in range(rounds):
        rng = random.Random(r)
        keep = set(best.order)
        seg = best.seg
        kick = [s + rng.choice(KICK) for s in seg]
        kick2 = [s + rng.choice(KICK) for s in seg]
        pick: list[Sequence[Any]] = [list(zip(seg, level)),
                                     [(s, top - h) for s, h in zip(seg, height)],
                                     [(s, rng.random()) for s in seg],
                                     list(zip(kick, level)),
                                     [(s, top - h) for s, h in zip(kick2, height)]]
        pick += cpu_side_keys(best, ratio, level, rng)
        found = best
        for key in pick:
            order = [u for u in ordered(units, costs, key) if u in keep]
            got = cut_order(inst, units, costs, order)
            if got is not None and _smaller(got.loads, found.loads):
                found = got
        idle = 0 if found is not best else idle + 1
        best = found
        if idle >= stall:
            break
    return best


def cpu_side_keys(chain: Chain, ratio: list[float], level: list[int], rng: random.Random
                  ) -> list[list[tuple[int, float, int]]]:
    """Two order keys that put the units that run best on a CPU (least CPU/accelerator
    ``ratio``) of an accelerator segment of ``chain`` on the side of its nearest CPU segment,
    and those that run worst on a CPU of a CPU segment on the side of its nearest accelerator
    segment (ties at random), so a cut can trade them: inside a segment by ratio, falling
    toward that side. The second also moves each such unit of the better half by ratio of its
    segment into that segment, at even odds (its order then follows, with what the unit
    drags along). Empty unless the chain has both kinds."""
    dev = chain.seg_dev
    kind = [d < 0 for d in dev]
    if all(kind) or not any(kind):
        return []
    ns = len(dev)
    toward = []
    for s in range(ns):
        gap = min(abs(t - s) for t in range(ns) if kind[t] != kind[s])
        toward.append(rng.choice([t for t in (s - gap, s + gap)
                                  if 0 <= t < ns and kind[t] != kind[s]]))
    lists: list[list[float]] = [[] for _ in range(ns)]
    for u, s in enumerate(chain.seg):
        if s >= 0:
            lists[s].append(ratio[u])
    mid = [float(np.median(x)) if x else 0.0 for x in lists]
    plain, moved = [], []
    for u, s in enumerate(chain.seg):
        if s < 0:
            plain.append((s, 0.0, level[u]))
            moved.append((s, 0.0, level[u]))
            continue
        good = ratio[u] > mid[s] if kind[s] else ratio[u] < mid[s]
        # ascending key: the units to trade last when ``toward`` is after ``s``
        key = ratio[u] * (1 if kind[s] else -1) * (1 if toward[s] > s else -1)
        plain.append((s, key, level[u]))
        moved.append((toward[s] if good and rng.random() < 0.5 else s, key, level[u]))
    return [plain, moved]


class SegmentScanner:
    """Grows a segment of consecutive units of ``order`` and keeps its exact accelerator load
    (latency plus transfers, :func:`device_loads`' definition), CPU latency and memory."""

    def __init__(self, inst: PlacementInstance, units: Units, costs: UnitCosts,
                 order: Sequence[int]):
        self.order = list(order)
        self.acc, self.cpu = costs.acc.tolist(), costs.cpu.tolist()
        self.size, self.host_only = costs.size.tolist(), costs.host_only.tolist()
        self.cost = inst.out_cost.tolist()
        self.n_out = [len(s) for s in units.out_units]
        self.payers = [[v for v in m if self.n_out[v]] for m in units.members]
        self.into = units.into
        self.cin = [0] * inst.n
        self.stamp = [0] * inst.n
        self.inside = [0] * inst.n
        self.now = 0
        self.memory = inst.memory_limit

    def _pays(self, v: int) -> bool:
        cin = self.cin[v] if self.stamp[v] == self.now else 0
        if self.inside[v] == self.now:
            return cin < self.n_out[v]
        return cin > 0

    def _touch(self, v: int) -> None:
        if self.stamp[v] != self.now:
            self.stamp[v], self.cin[v] = self.now, 0

    def furthest(self, i: int, cap: float, on_host: bool) -> int:
        """The largest ``j`` such that units ``order[i:j]`` fit one device of load ``cap``
        (the host when ``on_host``; ``i`` itself when not even one unit fits)."""
        if on_host:
            lat, best = 0.0, i
            for j in range(i, len(self.order)):
                lat += self.cpu[self.order[j]]
                if lat > cap:
                    break
                best = j + 1
            return best
        fits = [j for j, load in enumerate(self.loads_from(i, cap)) if load <= cap * (1 + 1e-12)]
        return i + 1 + fits[-1] if fits else i

    def loads_from(self, i: int, cap: float) -> list[float]:
        """Accelerator loads of ``order[i:j]`` for ``j = i+1, ...`` while the latency stays
        within ``cap`` and the memory within the limit (exact transfers, as :meth:`furthest`)."""
        self.now += 1
        lat = comm = size = 0.0
        out, cost = [], self.cost
        for j in range(i, len(self.order)):
            u = self.order[j]
            lat += self.acc[u]
            size += self.size[u]
            if lat > cap or size > self.memory or self.host_only[u]:
                break
            for v in self.payers[u]:
                was = self._pays(v)
                self.inside[v] = self.now
                self._touch(v)
                comm += cost[v] * (self._pays(v) - was)
            for v in self.into[u]:
                self._touch(v)
                was = self._pays(v)
                self.cin[v] += 1
                comm += cost[v] * (self._pays(v) - was)
            out.append(lat + comm)
        return out

    def split(self, cap: float, kinds: Sequence[bool]) -> list[int] | None:
        """Segment ends for the device kinds of the chain (True = host), each at most ``cap``;
        None when the units do not all fit."""
        ends, i = [], 0
        for host in kinds:
            i = self.furthest(i, cap, host)
            ends.append(i)
        return ends if i == len(self.order) else None

def chain_kinds(inst: PlacementInstance) -> list[list[bool]]:
    """Device chains the bisection tries: the accelerators alone, and the CPUs (one or all)
    first or last."""
    acc = [False] * inst.accelerators
    if inst.cpus < 1:
        return [acc]
    kinds = [acc, [True] + acc, acc + [True]]
    if inst.cpus > 1:
        kinds += [[True] * inst.cpus + acc, acc + [True] * inst.cpus]
    return kinds


@dataclass
class HeuristicResult:
    """Device per node (:data:`HOST` = -1) of the best chain found, and its max load."""

    device: np.ndarray
    max_load: float
    contiguous: bool = True


def chain_heuristic(inst: PlacementInstance, units: Units | None = None,
                    exact_units: int = EXACT_UNITS) -> HeuristicResult:
    """The best chain found: up to ``exact_units`` units, each of :func:`start_orders` cut
    optimally for that order (:func:`cut_order`), the best :data:`POLISHED` of them improved
    by :func:`polish`;
    beyond, the first order cut by bisection on the load (:func:`bisect_chain`); then
    :func:`refine_chain`. Units holding a host-only node stay in the order (a CPU segment
    takes them), and are also tried outside it, on the first CPU (then the split may not be
    contiguous). O(R (k+1)(c+1) n^2) for ``n`` units and ``R`` <= :data:`ROUNDS` rounds.
    Raises :class:`StrategyError` when memory admits no chain."""
    units = units or build_units(inst)
    costs = unit_costs(inst, units)
    rounds = 0
    if units.count > exact_units:
        found: list[Chain | None] = [bisect_chain(inst, units, costs)]
    else:
        budget = max(2, int(CUT_BUDGET / max(units.count, 1) ** 2))
        orders = _with_host_only_apart(inst, costs, start_orders(units, costs))
        orders = orders[:max(2, budget // 2)]
        rounds = min(ROUNDS, (budget - len(orders)) // (CUTS_PER_ROUND * POLISHED * TURNS))
        found = [cut_order(inst, units, costs, order) for order in orders]
    ranked = sorted((c for c in found if c is not None), key=lambda c: _ranked(c, units))
    chains = [polish(inst, units, costs, c, rounds) for c in ranked[:POLISHED]]
    if not chains:
        raise StrategyError(f"instance {inst.name!r}: no chain of {inst.accelerators} "
                            f"accelerators holds the nodes within maxSizePerFPGA "
                            f"{inst.memory_limit:.0f}")
    best = min(chains, key=lambda c: _ranked(c, units))
    device = _seg_devices(inst, units, best.seg, best.seg_dev)
    slots = device_slots(inst, device)
    contiguous = device_chain(units, [int(slots[m[0]]) for m in units.members]) is not None
    return HeuristicResult(device, best.load, contiguous)


def polish(inst: PlacementInstance, units: Units, costs: UnitCosts, chain: Chain,
           rounds: int, turns: int = TURNS) -> Chain:
    """:func:`improve_chain` and :func:`refine_chain` by turns while either helps (at most
    ``turns`` turns; with no ``rounds``, the local search only)."""
    for _ in range(turns):
        if rounds:
            chain = improve_chain(inst, units, costs, chain, rounds)
        got = refine_chain(inst, units, costs, chain,
                           min(EVALUATIONS, int(EVALUATIONS * 500 / max(units.count, 1))))
        if not _smaller(got.loads, chain.loads):
            break
        chain = got
    return chain


def _ranked(chain: Chain, units: Units) -> tuple[float, bool]:
    """By the true load (a cut without the host-only units omits theirs), a full order on
    ties."""
    return chain.load, len(chain.order) != units.count


def _with_host_only_apart(inst: PlacementInstance, costs: UnitCosts,
                          orders: list[list[int]]) -> list[list[int]]:
    """Each order, and (with a CPU and host-only units) the same without those units."""
    if inst.cpus < 1 or not costs.host_only.any():
        return orders
    ho = costs.host_only.tolist()
    return [x for order in orders for x in (order, [u for u in order if not ho[u]])]


def bisect_chain(inst: PlacementInstance, units: Units, costs: UnitCosts) -> Chain | None:
    """The best greedy cut of the first of :func:`start_orders` over :func:`chain_kinds`:
    the least load cap that greedy segments meet, by bisection (O(STEPS * n * d) for ``d``
    the largest number of consumer units of a node)."""
    order = ordered(units, costs, [m[0] for m in units.members])
    scans = [SegmentScanner(inst, units, costs, order)]
    if inst.cpus >= 1 and costs.host_only.any():
        scans.append(SegmentScanner(inst, units, costs, [u for u in order
                                                  if not costs.host_only[u]]))
    best = None
    for scan in scans:
        for kinds in chain_kinds(inst):
            got = _bisect(inst, scan, kinds)
            if got is None:
                continue
            chain = make_chain(inst, units, _segments(units, scan.order, got[1]),
                               segment_devices(kinds), scan.order)
            if best is None or _ranked(chain, units) < _ranked(best, units):
                best = chain
    return best


def _segments(units: Units, order: Sequence[int], ends: Sequence[int]) -> list[int]:
    """Segment per unit of a cut of ``order`` at ``ends`` (-1: a unit outside the order)."""
    seg = [-1] * units.count
    start = 0
    for k, end in enumerate(ends):
        for u in order[start:end]:
            seg[u] = k
        start = end
    return seg


def device_chain(units: Units, dev: list[int]) -> list[int] | None:
    """The used devices (``dev``: one per unit) in an order every arc between two of them
    follows, smallest first among the ready ones; None when there is none."""
    before: dict[int, set[int]] = {d: set() for d in set(dev)}
    for a in range(units.count):
        for b in units.succ[a]:
            if dev[a] != dev[b]:
                before[dev[b]].add(dev[a])
    chain: list[int] = []
    while len(chain) < len(before):
        ready = sorted(d for d in before if d not in chain and before[d] <= set(chain))
        if not ready:
            return None
        chain.append(ready[0])
    return chain


def segment_devices(kinds: Sequence[bool]) -> list[int]:
    """The device of each segment of a chain (True = a CPU): accelerators and CPUs each
    numbered in chain order."""
    out, acc, cpu = [], 0, 0
    for host in kinds:
        out.append(cpu_device(cpu) if host else acc)
        cpu += host
        acc += not host
    return out


def _bisect(inst: PlacementInstance, scan: SegmentScanner, kinds: Sequence[bool]
            ) -> tuple[float, list[int]] | None:
    """The least cap :meth:`SegmentScanner.split` meets (to ``2**-STEPS``) with its ends."""
    lo = 0.0
    hi = float(inst.acc_latency.sum() + inst.cpu_latency.sum() + 2 * inst.out_cost.sum()) + 1.0
    ends = scan.split(hi, kinds)
    if ends is None:
        return None
    for _ in range(STEPS):
        if hi - lo <= TOLERANCE * hi:
            break
        mid = (lo + hi) / 2
        got = scan.split(mid, kinds)
        if got is None:
            lo = mid
        else:
            hi, ends = mid, got
    return hi, ends


class MoveSearch:
    """Single-unit moves between the segments of a chain, each evaluated exactly in time
    proportional to the nodes it touches: a node ``v`` with consumers pays its transfer cost
    on every accelerator of ``D(v)`` = its device and its consumers' devices when ``D(v)``
    has two or more (the evaluator's definition), so moving unit ``u`` changes only the
    terms of ``u``'s nodes and their producers."""

    def __init__(self, inst: PlacementInstance, units: Units, costs: UnitCosts,
                 chain: Chain):
        self.inst, self.units, self.costs = inst, units, costs
        self.seg = list(chain.seg)
        self.seg_dev = chain.seg_dev
        self.seg_slot = device_slots(inst, chain.seg_dev).tolist()
        self.k = inst.accelerators
        device = _seg_devices(inst, units, self.seg, self.seg_dev)
        self.slot = device_slots(inst, device).tolist()
        self.loads = device_loads(inst, device).tolist()
        self.cost = inst.out_cost.tolist()
        cons = [sorted(set(c)) for c in inst.consumers()]
        self.cnt: list[dict[int, int]] = [{} for _ in range(inst.n)]
        for v, cs in enumerate(cons):
            for w in cs:
                d = self.slot[w]
                self.cnt[v][d] = self.cnt[v].get(d, 0) + 1
        uo = units.unit_of.tolist()
        into: list[dict[int, int]] = [{} for _ in range(units.count)]
        for v, cs in enumerate(cons):
            for w in cs:
                into[uo[w]][v] = into[uo[w]].get(v, 0) + 1
        #: per unit: (node, how many of its consumers the unit holds) of the nodes it touches
        self.touch = [sorted({**{v: 0 for v in m if cons[v]}, **into[u]}.items())
                      for u, m in enumerate(units.members)]
        self.used = [0.0] * len(self.seg_dev)
        for u, s in enumerate(self.seg):
            if s >= 0:
                self.used[s] += float(costs.size[u])
        self.preds: list[list[int]] = [[] for _ in range(units.count)]
        for a, b in zip(costs.src, costs.dst):
            self.preds[b].append(a)

    def _paid(self, slot: int, cnt: dict[int, int], cost: float, out: list[float],
              sign: float) -> None:
        devs = {d for d, c in cnt.items() if c > 0} | {slot}
        if len(devs) > 1:
            for d in devs:
                if d < self.k:
                    out[d] += sign * cost

    def trial(self, u: int, to: int) -> list[float]:
        """Every device's load with unit ``u`` in segment ``to``."""
        a, b = self.slot[self.units.members[u][0]], self.seg_slot[to]
        loads = list(self.loads)
        lat = self.costs.acc if a < self.k else self.costs.cpu
        loads[a] -= float(lat[u])
        lat = self.costs.acc if b < self.k else self.costs.cpu
        loads[b] += float(lat[u])
        uo = self.units.unit_of
        for v, m in self.touch[u]:
            cnt, cost = self.cnt[v], self.cost[v]
            if cost <= 0:
                continue
            self._paid(self.slot[v], cnt, cost, loads, -1.0)
            new = dict(cnt)
            if m:
                new[a] = new.get(a, 0) - m
                new[b] = new.get(b, 0) + m
            self._paid(b if uo[v] == u else self.slot[v], new, cost, loads, 1.0)
        return loads

    def apply(self, u: int, to: int, loads: list[float]) -> None:
        """Move unit ``u`` to segment ``to`` (``loads``: :meth:`trial`'s)."""
        a, b = self.slot[self.units.members[u][0]], self.seg_slot[to]
        for v, m in self.touch[u]:
            if m:
                self.cnt[v][a] = self.cnt[v].get(a, 0) - m
                self.cnt[v][b] = self.cnt[v].get(b, 0) + m
        for v in self.units.members[u]:
            self.slot[v] = b
        self.used[self.seg[u]] -= float(self.costs.size[u])
        self.used[to] += float(self.costs.size[u])
        self.seg[u] = to
        self.loads = loads

    def targets(self, u: int) -> range:
        """The segments unit ``u`` may move to and keep the chain's order."""
        seg = self.seg
        lo = max((seg[p] for p in self.preds[u] if seg[p] >= 0), default=0)
        hi = min((seg[w] for w in self.units.succ[u] if seg[w] >= 0),
                 default=len(self.seg_dev) - 1)
        return range(lo, hi + 1)

    def allowed(self, u: int, to: int) -> bool:
        """Segment ``to`` takes unit ``u`` (host-only units on CPUs, memory)."""
        if self.seg_dev[to] < 0:
            return True
        return not self.costs.host_only[u] and \
            self.used[to] + float(self.costs.size[u]) <= self.inst.memory_limit


def refine_chain(inst: PlacementInstance, units: Units, costs: UnitCosts, chain: Chain,
                 evaluations: int) -> Chain:
    """Local search on a chain: sweep the units (by segment) and move each to the segment,
    among those the order allows, that makes the device loads sorted in decreasing order
    lexicographically least, while a sweep helps and at most ``evaluations`` moves are
    tried; each trial costs O(nodes it touches x their consumers)."""
    ms = MoveSearch(inst, units, costs, chain)
    key = sorted(ms.loads, reverse=True)
    left = evaluations
    while left > 0:
        better = False
        for u in sorted(range(units.count), key=lambda x: (ms.seg[x], x)):
            if ms.seg[u] < 0:
                continue
            best = None
            for to in ms.targets(u):
                if to == ms.seg[u] or not ms.allowed(u, to):
                    continue
                left -= 1
                loads = ms.trial(u, to)
                got = sorted(loads, reverse=True)
                if _smaller(got, key if best is None else best[2]):
                    best = (to, loads, got)
            if best is not None:
                ms.apply(u, best[0], best[1])
                key, better = best[2], True
            if left <= 0:
                break
        if not better:
            break
    return make_chain(inst, units, ms.seg, chain.seg_dev, chain.order)


def _seg_devices(inst: PlacementInstance, units: Units, seg: list[int], seg_dev: list[int]
                 ) -> np.ndarray:
    device = np.full(inst.n, HOST, dtype=np.int64)
    for u, s in enumerate(seg):
        device[units.members[u]] = seg_dev[s] if s >= 0 else HOST
    return device


def _smaller(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> bool:
    """``a`` lexicographically smaller than ``b`` beyond rounding noise."""
    for x, y in zip(list(a), list(b)):
        if x < y - 1e-12 * max(1.0, abs(y)):
            return True
        if x > y + 1e-12 * max(1.0, abs(y)):
            return False
    return False


# ---------------------------------------------------------------- the bridge to partitions
def instance_of(problem: Problem) -> PlacementInstance | None:
    """The placement instance a problem's graph was read from, if any."""
    model = problem.graph.model
    return model if isinstance(model, PlacementInstance) else None


class SupportedSelector(SubgraphSelector):
    """Selects the nodes an instance supports on an accelerator (by graph node name)."""

    def __init__(self, names: frozenset[str]):
        self.names = names

    def select(self, node: Any) -> bool:
        return node.name in self.names


class SupportedProperty(SubgraphProperty):
    """An accelerator of an instance whose nodes carry the model's op types: it takes the
    nodes ``supportedOnFpga`` marks, whatever their op type."""

    name = "instance"

    def __init__(self, names: frozenset[str], device: str):
        super().__init__(device)
        self.names = names

    def create_subgraph_selector(self) -> SubgraphSelector:
        return SupportedSelector(self.names)

    def __repr__(self) -> str:
        return f"SupportedProperty({self.device}: supportedOnFpga)"


def instance_properties(inst: PlacementInstance) -> list[SubgraphProperty]:
    """One device per accelerator, ``fpga0 .. fpga{k-1}``, each taking every supported node
    (by op type :data:`ACC_OP`, or by name when the nodes carry the model's op types)."""
    names = device_names(inst)[:inst.accelerators]
    if inst.op_types is None:
        return [OpsProperty([ACC_OP], device=name) for name in names]
    taken = frozenset(n for n, ok in zip(graph_names(inst), inst.supported.tolist()) if ok)
    return [SupportedProperty(taken, device=name) for name in names]


def instance_problem(graph: Graph, properties: list[SubgraphProperty] | None = None,
                     constraints: Constraints | None = None) -> Problem:
    """The compiled problem of an instance graph: its accelerators (unless ``properties`` are
    given) and the host ``cpu`` as fallback (every CPU of ``maxCPUs``: which one runs a node
    is in ``info["throughput"]["nodes"]``). Must-link groups stay in the instance (a group
    of a training graph need not be convex, which a ``together`` constraint requires)."""
    inst = graph.model
    if not isinstance(inst, PlacementInstance):
        raise StrategyError(f"graph {graph.name!r} was not read from a placement instance")
    props = properties or instance_properties(inst)
    return (constraints or Constraints()).compile(graph, props, fallback="cpu")


def graph_positions(problem: Problem, inst: PlacementInstance) -> np.ndarray:
    """``pos[i]``: the instance index of graph node ``i`` (named by :func:`graph_names`)."""
    index = {name: k for k, name in enumerate(graph_names(inst))}
    return np.array([index[nd.name] for nd in problem.graph.nodes], dtype=np.int64)


def to_partition(problem: Problem, inst: PlacementInstance, device: np.ndarray,
                 figures: dict[str, Any]) -> Partition:
    """A partition with ``device`` (per instance node), every CPU's nodes on the fallback: one
    cluster per accelerator where that keeps the clusters a DAG, else an accelerator's nodes
    split by the number of device changes on the longest path to them (so no path leaves a
    cluster and comes back); ``figures`` go to ``info["throughput"]`` with every device's
    load (:func:`load_figures`)."""
    pos = graph_positions(problem, inst)
    names = device_names(inst)
    index = {name: d for d, name in enumerate(problem.devices)}
    per_node = device[pos]
    dev = np.array([-1 if d < 0 else index.get(names[d], -2) for d in per_node.tolist()],
                   dtype=np.int64)
    if (dev == -2).any():
        raise StrategyError(f"instance {inst.name!r}: the problem lacks device "
                            f"{names[int(per_node[dev == -2][0])]!r}")
    labels = cluster_labels(problem.graph, dev)
    info = {"throughput": {**figures, **load_figures(inst, device)}}
    chosen = np.flatnonzero((dev == -1) & inst.supported[pos]).tolist()
    return Partition.from_assignment(problem, labels, dev, info=info,
                                     fallback_reasons={v: ON_HOST for v in chosen})


def cluster_labels(graph: Graph, dev: np.ndarray) -> np.ndarray:
    """A cluster label per node: its device when the graph of devices (each fallback node,
    ``dev`` -1, a unit of its own) has no cycle, else device and :func:`change_levels`."""
    unit = np.where(dev >= 0, dev, int(dev.max(initial=0)) + 1 + np.arange(graph.n))
    src, dst = unit[graph.edge_src], unit[graph.edge_dst]
    apart = src != dst
    if is_acyclic(int(unit.max(initial=0)) + 1, src[apart], dst[apart]):
        return dev + 1
    return change_levels(graph, dev) * (int(dev.max(initial=0)) + 2) + dev + 1


def change_levels(graph: Graph, dev: np.ndarray) -> np.ndarray:
    """Per node, the most device changes along a path from a source to it (nodes are in
    topological order)."""
    level = np.zeros(graph.n, dtype=np.int64)
    src, dst = graph.edge_src.tolist(), graph.edge_dst.tolist()
    lv, dv = level.tolist(), dev.tolist()
    for a, b in sorted(zip(src, dst)):
        step = lv[a] + (dv[a] != dv[b])
        if step > lv[b]:
            lv[b] = step
    return np.array(lv, dtype=np.int64)


def partition_devices(part: Partition, inst: PlacementInstance) -> np.ndarray:
    """Device per instance node of a partition of an instance graph: its accelerators' by
    their clusters, its fallback nodes on the CPU ``info["throughput"]["nodes"]`` names
    (:data:`HOST` when it names none)."""
    pos = graph_positions(part.problem, inst)
    names = device_names(inst)
    by_name = {n: d for d, n in enumerate(names[:inst.accelerators])}
    device = np.full(inst.n, HOST, dtype=np.int64)
    for c in part.clusters:
        if c.device in by_name:
            device[pos[list(c.nodes)]] = by_name[c.device]
    listed = part.info.get("throughput", {}).get("nodes", {})
    index = {int(i): k for k, i in enumerate(inst.ids.tolist())}
    for j, name in enumerate(names[inst.accelerators:]):
        at = np.array([index[int(i)] for i in listed.get(name, ())], dtype=np.int64)
        at = at[device[at] == HOST] if len(at) else at
        device[at] = cpu_device(j)
    return device


def partition_split_text(part: Partition) -> str:
    """The paper's split file of a partition of a placement instance, with its figures."""
    inst = instance_of(part.problem)
    if inst is None:
        raise StrategyError(f"--split: graph {part.graph.name!r} is not a placement instance")
    device = partition_devices(part, inst)
    figures = {k: v for k, v in load_figures(inst, device).items() if k != "nodes"}
    return split_text(inst, device, {"strategy": part.strategy, **figures})


def heuristic_placement(inst: PlacementInstance) -> HeuristicResult:
    """:func:`chain_heuristic`, then groups moved to the host where an accelerator is over its
    activation limit (:func:`~clusterkit.engines.activations.repair_activations`)."""
    res = chain_heuristic(inst)
    if not activation_problems(inst, res.device):
        return res
    device = repair_activations(inst, res.device)
    units = build_units(inst)
    slots = device_slots(inst, device)
    contiguous = device_chain(units, [int(slots[m[0]]) for m in units.members]) is not None
    return HeuristicResult(device, float(device_loads(inst, device).max()), contiguous)


def run_heuristic(problem: Problem) -> Partition:
    """The fast answer on a placement instance (``auto`` gives it): :func:`chain_heuristic`."""
    inst = instance_of(problem)
    if inst is None:
        raise StrategyError(f"graph {problem.graph.name!r} is not a placement instance")
    check_memory(inst)
    res = heuristic_placement(inst)
    problems = placement_problems(inst, res.device)
    if problems:
        raise StrategyError(f"auto: instance {inst.name!r}: the chain heuristic found no "
                            f"feasible placement ({problems[0]}); try --strategy cpsat "
                            "--objective throughput")
    figures = {"objective": "throughput", "method": "chain_heuristic", "status": "FEASIBLE",
               "contiguous": res.contiguous, "bound": None}
    return to_partition(problem, inst, res.device, figures)
