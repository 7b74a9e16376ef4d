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
groups of it fused into one unit, a DAG over units. The fast :func:`chain_heuristic` cuts a
topological order of the units into consecutive segments - by bisection on the load, then
(up to :data:`EXACT_UNITS` units) optimally for that order by ``dp.cpp``'s program restricted to
it - and moves single units between segments while that helps; a segment's load is kept exactly
while it grows (per node: its consumers' units inside the segment).
"""

from __future__ import annotations

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
#: orders of at most this many units are also cut optimally (a dense n x n table of loads)
EXACT_UNITS = 2500
#: why a supported node is on the host: the placement put it there
ON_HOST = Reason(Category.CONSTRAINT, "the throughput placement runs it on the host (the CPU), "
                 "which lowers the largest device load")
#: the local search tries the first and last this many units of the loaded segment
MOVE_EDGE = 32


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


def unit_orders(units: Units) -> list[list[int]]:
    """Topological orders of the unit DAG the heuristic tries: by smallest first member (the
    file's order where it is topological) and by level (longest path from a source)."""
    src = [a for a, bs in enumerate(units.succ) for _ in bs]
    dst = [b for bs in units.succ for b in bs]
    first = [m[0] for m in units.members]
    by_first = topological_order(units.count, src, dst, key=first)
    level = [0] * units.count
    for a in by_first:
        for b in units.succ[a]:
            level[b] = max(level[b], level[a] + 1)
    top = max(first, default=0) + 1
    by_level = topological_order(units.count, src, dst,
                                 key=[lv * top + f for lv, f in zip(level, first)])
    return [by_first] if by_level == by_first else [by_first, by_level]


class SegmentScanner:
    """Grows a segment of consecutive units of ``order`` and keeps its exact accelerator load
    (latency plus transfers, :func:`device_loads`' definition), CPU latency and memory."""

    def __init__(self, inst: PlacementInstance, units: Units, order: Sequence[int]):
        self.order = list(order)
        mem = [np.asarray(m, dtype=np.int64) for m in units.members]
        self.acc = [float(inst.acc_latency[m].sum()) for m in mem]
        self.cpu = [float(inst.cpu_latency[m].sum()) for m in mem]
        self.size = [float(inst.size[m].sum()) for m in mem]
        self.host_only = [bool((~inst.supported[m]).any()) for m in mem]
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

    def load_matrix(self, cap: float) -> np.ndarray:
        """``m[i, j]``: accelerator load of units ``order[i:j]`` (0 when empty; inf when
        ``j < i``, over ``cap`` in latency, over memory or holding a host-only unit)."""
        n = len(self.order)
        m = np.full((n + 1, n + 1), np.inf)
        np.fill_diagonal(m, 0.0)
        for i in range(n):
            row = self.loads_from(i, cap)
            m[i, i + 1:i + 1 + len(row)] = row
        return m

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
    first or last (:func:`_segment_dp` places the CPUs anywhere)."""
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
    """The best chain found over :func:`unit_orders` and :func:`chain_kinds`: cut each order
    by bisection on the load (greedy segments), and where the order has at most
    ``exact_units`` units also optimally for that order (:func:`_segment_dp`); then
    :func:`refine_chain`. Units holding a host-only node stay in the order (a CPU segment
    takes them), and are also tried outside it, on the first CPU (then the split may not be
    contiguous). Raises :class:`StrategyError` when memory admits no chain."""
    units = units or build_units(inst)
    found: list[tuple[float, int, list[int], list[bool]]] = []  # cap, scan, ends, kinds
    scans = _scans(inst, units, exact_units)
    for o, scan in enumerate(scans):
        for kinds in chain_kinds(inst):
            got = _bisect(inst, scan, kinds)
            if got is not None:
                found.append((got[0], o, got[1], list(kinds)))
    if not found:
        raise StrategyError(f"instance {inst.name!r}: no chain of {inst.accelerators} "
                            f"accelerators holds the nodes within maxSizePerFPGA "
                            f"{inst.memory_limit:.0f}")
    cap = min(f[0] for f in found)
    for o, scan in enumerate(scans):
        if len(scan.order) <= exact_units:
            c, ends, kinds = _segment_dp(scan, inst.accelerators, inst.cpus, cap)
            if ends is not None:
                found.append((c, o, ends, kinds))
    segs = [_segments(units, scans[o].order, ends) for _, o, ends, _ in found]
    loads = [float(device_loads(inst, _seg_devices(inst, units, seg, segment_devices(kinds)))
                   .max()) for seg, (_, _, _, kinds) in zip(segs, found)]
    # by the true load (a scan without host-only units omits theirs), a full order on ties
    best = min(range(len(found)), key=lambda i: (loads[i], len(scans[found[i][1]].order)
                                                 != units.count))
    device = refine_chain(inst, units, segs[best], segment_devices(found[best][3]))
    slots = device_slots(inst, device)
    contiguous = device_chain(units, [int(slots[m[0]]) for m in units.members]) is not None
    return HeuristicResult(device, float(device_loads(inst, device).max()), contiguous)


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


def _scans(inst: PlacementInstance, units: Units, exact_units: int) -> list[SegmentScanner]:
    """A scanner per order of :func:`unit_orders` (the first only beyond ``exact_units``
    units), with every unit, and without the host-only ones when there are any (with a CPU)."""
    orders = unit_orders(units)
    scans = []
    for order in orders if units.count <= exact_units else orders[:1]:
        scan = SegmentScanner(inst, units, order)
        scans.append(scan)
        if inst.cpus >= 1 and any(scan.host_only):
            apart = SegmentScanner(inst, units, order)
            apart.order = [u for u in order if not apart.host_only[u]]
            scans.append(apart)
    return scans


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


def _segment_dp(scan: SegmentScanner, accelerators: int, cpus: int, cap: float
                ) -> tuple[float, list[int] | None, list[bool]]:
    """The optimal cut of ``scan.order`` into consecutive segments on up to ``accelerators``
    accelerators and ``cpus`` CPUs in any chain order (least max load), among
    segments of load at most ``cap``: ``dp.cpp``'s program restricted to one order,
    ``best[a, c][j]`` = least max load of the first ``j`` units on ``a`` accelerator and ``c``
    host segments. Returns the load, the segment ends and their kinds (True = host)."""
    n = len(scan.order)
    acc = scan.load_matrix(cap)
    pre = np.concatenate(([0.0], np.cumsum([scan.cpu[u] for u in scan.order])))
    cpu = pre[None, :] - pre[:, None]
    cpu[np.tril_indices(n + 1, -1)] = np.inf
    start = np.full(n + 1, np.inf)
    start[0] = 0.0
    best: dict[tuple[int, int], np.ndarray] = {(0, 0): start}
    back: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for a in range(accelerators + 1):
        for c in range(cpus + 1):
            if a + c == 0:
                continue
            steps = [(best[(a - 1, c)], acc, 0)] if a else []
            steps += [(best[(a, c - 1)], cpu, 1)] if c else []
            cand = [np.maximum(prev[:, None], m) for prev, m, _ in steps]
            vals = np.stack([x.min(axis=0) for x in cand])
            which = vals.argmin(axis=0)
            args = np.stack([x.argmin(axis=0) for x in cand])
            best[(a, c)] = vals.min(axis=0)
            back[(a, c)] = (np.array([steps[w][2] for w in which.tolist()]),
                            args[which, np.arange(n + 1)])
    key = (accelerators, cpus)
    if not np.isfinite(best[key][n]):
        return np.inf, None, []
    ends, kinds, j = [], [], n
    while key != (0, 0):
        host, i = back[key][0][j], int(back[key][1][j])
        ends.append(j)
        kinds.append(bool(host))
        key, j = ((key[0], key[1] - 1) if host else (key[0] - 1, key[1])), i
    return float(best[(accelerators, cpus)][n]), ends[::-1], kinds[::-1]


def refine_chain(inst: PlacementInstance, units: Units, seg: list[int], seg_dev: list[int],
                 rounds: int = 400) -> np.ndarray:
    """Local search on a chain: move one unit of the most loaded segment to another segment
    when the order allows it (no predecessor after it, no successor before it) and the loads,
    sorted in decreasing order, get lexicographically smaller.
    ``seg[u]``: segment per unit (-1: host-only unit on the host); returns a device per node."""
    preds: list[list[int]] = [[] for _ in range(units.count)]
    for a, succs in enumerate(units.succ):
        for c in succs:
            preds[c].append(a)
    mem = [float(inst.size[m].sum()) for m in units.members]
    host_only = [bool((~inst.supported[m]).any()) for m in units.members]
    device = _seg_devices(inst, units, seg, seg_dev)
    best = np.sort(device_loads(inst, device))[::-1]
    for _ in range(rounds):
        loads = device_loads(inst, device)
        worst = int(np.argmax(loads))
        slots = device_slots(inst, seg_dev).tolist()
        b = next((s for s, d in enumerate(slots) if d == worst), None)
        if b is None:
            break
        move = _best_move(inst, units, (seg, seg_dev, device), b, (preds, mem, host_only), best)
        if move is None:
            break
        u, to, best = move
        seg[u] = to
        device[units.members[u]] = seg_dev[to]
    return device


def _seg_devices(inst: PlacementInstance, units: Units, seg: list[int], seg_dev: list[int]
                 ) -> np.ndarray:
    device = np.full(inst.n, HOST, dtype=np.int64)
    for u, s in enumerate(seg):
        device[units.members[u]] = seg_dev[s] if s >= 0 else HOST
    return device


def _best_move(inst: PlacementInstance, units: Units, state: tuple, b: int, facts: tuple,
               best: np.ndarray) -> tuple[int, int, np.ndarray] | None:
    """The improving move of a unit out of segment ``b`` with the smallest sorted loads."""
    seg, seg_dev, device = state
    preds, mem, host_only = facts
    found = None
    used = {s: 0.0 for s in range(len(seg_dev))}
    for u, s in enumerate(seg):
        if s >= 0:
            used[s] += mem[u]
    inside = [u for u, s in enumerate(seg) if s == b]
    if len(inside) > 2 * MOVE_EDGE:  # large segments: the units near its two ends
        inside = inside[:MOVE_EDGE] + inside[-MOVE_EDGE:]
    for u in inside:
        low = max((seg[p] for p in preds[u]), default=0)
        high = min((seg[w] for w in units.succ[u]), default=len(seg_dev) - 1)
        for to in range(max(low, 0), high + 1):
            if to == b or (host_only[u] and seg_dev[to] >= 0):
                continue
            if seg_dev[to] >= 0 and used[to] + mem[u] > inst.memory_limit:
                continue
            device[units.members[u]] = seg_dev[to]
            key = np.sort(device_loads(inst, device))[::-1]
            device[units.members[u]] = seg_dev[b]
            if _smaller(key, best if found is None else found[2]):
                found = (u, to, key)
    return found


def _smaller(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` lexicographically smaller than ``b`` beyond rounding noise."""
    for x, y in zip(a.tolist(), b.tolist()):
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
                 strategy: str, figures: dict[str, Any]) -> Partition:
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
    return Partition.from_assignment(problem, labels, dev, strategy=strategy, info=info,
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
    return to_partition(problem, inst, res.device, "auto", figures)
