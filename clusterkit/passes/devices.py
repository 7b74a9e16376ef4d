"""Device choice: one device per supported node, before any clustering.

With several devices a node may be taken by more than one of them. HETERO's contract (mode
``"priority"``) puts it on the first device in priority order that takes it. Mode ``"cost"``
chooses among the supporting devices to lower the *device cut*: the ``cut_bytes`` of the
placement in which every device were one cluster (for each tensor, its bytes once per distinct
device consuming it other than its producer's; fallback nodes on the host). That is a lower
bound on the cut of any partition with that placement, and what separates neighbours on
different devices.

The cost mode is alpha-expansion (Boykov, Veksler and Zabih) started from the priority choice:
for one device ``a`` at a time, every super-node that may move to ``a`` either stays or moves, and
the best such move is one s-t minimum cut (OR-tools' ``SimpleMaxFlow``, 64-bit capacities). The
per-tensor term "once per distinct consuming device" is represented exactly with one auxiliary
node per (tensor, device) that has several consumers, so every move is optimal and a move is
kept only when it lowers the device cut. With two devices the first move to the second device
already ranges over every choice, so the result is the exact minimum; with more it is a local
optimum of the expansion moves. Together groups are one super-node and move together, on a device
that takes every member. Constraints (cut edges, value inputs, never-together pairs, refused
selector edges) are untouched: the engine that clusters the narrowed problem keeps them.

:func:`choose_devices` returns the *narrowed* problem, in which each node is supported by its
chosen device only; :func:`device_labels` the choice itself and :func:`device_cut` its cost;
:func:`widen` puts a partition of the narrowed problem back onto the original one.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.errors import StrategyError
from clusterkit.graph.algorithms import gc_paused, group_labels
from clusterkit.modes import DEVICE_MODES, DeviceMode, check_choice
from clusterkit.result.metrics import cut_bytes
from clusterkit.result.model import Partition

#: the device-choice modes (:data:`clusterkit.modes.DeviceMode`)
MODES = DEVICE_MODES
#: expansion rounds over all devices at most (each round that changes nothing ends the search)
MAX_ROUNDS = 20


def check_mode(mode: object) -> DeviceMode:
    """``mode`` when it is one of :data:`MODES`, else an error naming the choices."""
    return check_choice("devices", mode, MODES)


def choose_devices(problem: Problem, mode: DeviceMode = "cost") -> Problem:
    """``problem`` narrowed to one device per supported node, chosen by ``mode``
    (:data:`MODES`); the problem itself when it has fewer than two devices."""
    check_mode(mode)
    if len(problem.devices) < 2:
        return problem
    return narrow(problem, device_labels(problem, mode))


def narrow(problem: Problem, labels: np.ndarray) -> Problem:
    """``problem`` with node ``v`` supported by device ``labels[v]`` only (none for -1)."""
    labels = np.asarray(labels, dtype=np.int64)
    mask = np.zeros_like(problem.supported)
    on = np.flatnonzero(labels >= 0)
    mask[labels[on], on] = True
    if (mask & ~problem.supported).any():
        v = int(np.flatnonzero((mask & ~problem.supported).any(axis=0))[0])
        raise StrategyError(f"device choice puts node {problem.graph.nodes[v].name!r} on a "
                            "device that does not take it")
    return dataclasses.replace(problem, supported=mask)


def widen(part: Partition, problem: Problem) -> Partition:
    """A partition of a narrowed problem as a partition of the original ``problem`` (same
    clusters and provenance)."""
    return part if part.problem is problem else part.derive(problem=problem)


def priority_placement(problem: Problem) -> np.ndarray:
    """HETERO's automatic affinity: the first device (priority order) that takes each node."""
    dev = problem.first_device.copy()
    for members in problem.groups:
        ids = members.tolist()
        common = np.flatnonzero(problem.supported[:, ids].all(axis=1))
        dev[ids] = common[0] if len(common) else -1
    return dev


def device_cut(problem: Problem, labels: np.ndarray) -> int:
    """Bytes of the device cut of a placement (device index per node, -1 = fallback)."""
    return cut_bytes(problem.graph, np.asarray(labels, dtype=np.int64))[0]


def device_labels(problem: Problem, mode: DeviceMode = "cost") -> np.ndarray:
    """Device index per node (-1 where no device takes it, or a together group has no common
    device), chosen by ``mode``."""
    check_mode(mode)
    start = priority_placement(problem)
    if mode == "priority" or len(problem.devices) < 2:
        return start
    with gc_paused():  # many small lists per move
        return _Expansion(problem, start).run()


class _Expansion:
    """Alpha-expansion over super-nodes (together groups contracted) for the device cut."""

    def __init__(self, problem: Problem, start: np.ndarray):
        self.problem = problem
        self.super_node_of = group_labels(problem.group_of)
        nu = int(self.super_node_of.max()) + 1 if problem.n else 0
        self.options = np.ones((len(problem.devices), nu), dtype=bool)
        for d in range(len(problem.devices)):
            np.logical_and.at(self.options[d], self.super_node_of, problem.supported[d])
        self.label = np.full(nu, -1, dtype=np.int64)
        self.label[self.super_node_of] = start
        self.options &= (self.label >= 0)[None, :]
        self.tensors = _unit_tensors(problem, self.super_node_of)
        self.t_prod = np.asarray([p for _, p, _ in self.tensors], dtype=np.int64)
        self.t_cons = np.asarray([c for _, _, cs in self.tensors for c in cs], dtype=np.int64)
        self.t_ptr = np.cumsum([0] + [len(cs) for _, _, cs in self.tensors])[:-1]

    def node_labels(self) -> np.ndarray:
        return self.label[self.super_node_of]

    def run(self) -> np.ndarray:
        """Expansion moves until a round over the devices lowers the device cut no more. With
        two devices, priority leaves every super-node the second takes free to move to it, so that
        one move ranges over every choice and is the whole search."""
        best = device_cut(self.problem, self.node_labels())
        nd = len(self.problem.devices)
        alphas = [1] if nd == 2 else list(range(nd))
        for _ in range(1 if nd == 2 else MAX_ROUNDS):
            before = best
            for alpha in alphas:
                best = self._try(alpha, best)
            if best == before:
                break
        return self.node_labels()

    def _try(self, alpha: int, best: int) -> int:
        """Make the best move to ``alpha`` when it lowers the device cut below ``best``; return
        the device cut after it."""
        moved = self._move(alpha)
        if moved is None:
            return best
        old = self.label[moved].copy()
        self.label[moved] = alpha
        cost = device_cut(self.problem, self.node_labels())
        if cost < best:
            return cost
        self.label[moved] = old
        return best

    def _touched(self, free: np.ndarray) -> np.ndarray:
        """Tensors with a free producer or consumer: the others cost the same either way."""
        if not self.tensors:
            return np.zeros(0, dtype=np.int64)
        hit = np.logical_or.reduceat(free[self.t_cons], self.t_ptr)
        hit |= (self.t_prod >= 0) & free[np.maximum(self.t_prod, 0)]
        return np.flatnonzero(hit)

    def _move(self, alpha: int) -> np.ndarray | None:
        """Super-nodes that move to ``alpha`` in the best expansion move, or ``None`` when none may
        move or the best move moves none."""
        free = self.options[alpha] & (self.label != alpha)
        if not free.any():
            return None
        net = _MoveNetwork(free, self.label, alpha)
        tensors = self.tensors
        for k in self._touched(free).tolist():
            w, p, consumers = tensors[k]
            net.add_tensor(w, p, consumers)
        moved = net.solve()
        return moved if len(moved) else None


def _unit_tensors(problem: Problem, super_node_of: np.ndarray) -> list[tuple[int, int, list[int]]]:
    """(bytes, producer super-node or -1, distinct consumer super-nodes other than the producer's)
    of every non-free tensor of non-zero size that some other super-node consumes."""
    tt = problem.graph.tensor_table
    live = ~tt.free[tt.inc_tensor]
    ten = tt.inc_tensor[live]
    cons = super_node_of[tt.inc_node[live]]
    prod = np.where(tt.producer >= 0, super_node_of[np.maximum(tt.producer, 0)], -1)
    keep = cons != prod[ten]
    ten, cons = ten[keep], cons[keep]
    if not len(ten):
        return []
    order = np.lexsort((cons, ten))
    ten, cons = ten[order], cons[order]
    first = np.concatenate(([True], (ten[1:] != ten[:-1]) | (cons[1:] != cons[:-1])))
    ten, cons = ten[first], cons[first]
    bounds = np.flatnonzero(np.concatenate(([True], ten[1:] != ten[:-1], [True])))
    nbytes, prod_l, cons_l, ten_l = tt.nbytes.tolist(), prod.tolist(), cons.tolist(), ten.tolist()
    out = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        t = ten_l[a]
        if nbytes[t] > 0:
            out.append((int(nbytes[t]), prod_l[t], cons_l[a:b]))
    return out


class _MoveNetwork:
    """The s-t network of one expansion move to device ``alpha``.

    ``x_u = 1`` (sink side) moves free super-node ``u`` to ``alpha``. An arc ``i -> j`` of capacity
    ``c`` is paid when ``i`` is on the source side and ``j`` on the sink side. The cost of a
    tensor of ``w`` bytes is ``w`` per device ``b`` that some consumer is on and the producer is
    not; for ``b = alpha`` that is ``w * OR(x_c) * (1 - x_p)``, for another ``b`` it is
    ``w * OR(1 - x_c for c on b) * [x_p when the producer is on b]``. An OR over several
    consumers gets an auxiliary node tied to them by arcs of infinite capacity."""

    SOURCE, SINK = 0, 1

    def __init__(self, free: np.ndarray, label: np.ndarray, alpha: int):
        self.free = free.tolist()
        self.label = label.tolist()
        self.alpha = alpha
        self.node_of = {u: 2 + k for k, u in enumerate(np.flatnonzero(free).tolist())}
        self.next = 2 + len(self.node_of)
        self.tails: list[int] = []
        self.heads: list[int] = []
        self.caps: list[int] = []

    def arc(self, i: int, j: int, cap: int) -> None:
        self.tails.append(i)
        self.heads.append(j)
        self.caps.append(cap)

    def add_tensor(self, w: int, p: int, consumers: list[int]) -> None:
        """The terms of one tensor of ``w`` bytes from super-node ``p`` (-1: a graph input)."""
        alpha, label, free = self.alpha, self.label, self.free
        on_alpha = [c for c in consumers if free[c] or label[c] == alpha]
        if on_alpha:
            self._to_alpha(w, p, on_alpha)
        by_label: dict[int, list[int]] = {}
        for c in consumers:
            if label[c] >= 0 and label[c] != alpha:  # the host's share never changes
                by_label.setdefault(label[c], []).append(c)
        for b, cs in by_label.items():
            self._stay_on(w, p, b, cs)

    def _to_alpha(self, w: int, p: int, cs: list[int]) -> None:
        """``w * OR(super-nodes of cs on alpha) * (producer not on alpha)``."""
        p_free = p >= 0 and self.free[p]
        if p >= 0 and not p_free and self.label[p] == self.alpha:
            return
        if any(not self.free[c] for c in cs):  # a consumer already on alpha
            if p_free:
                self.arc(self.node_of[p], self.SINK, w)
            return
        tail = self.node_of[p] if p_free else self.SOURCE
        if len(cs) == 1:
            self.arc(tail, self.node_of[cs[0]], w)
            return
        z = self._aux()
        for c in cs:
            self.arc(z, self.node_of[c], -1)
        self.arc(tail, z, w)

    def _stay_on(self, w: int, p: int, b: int, cs: list[int]) -> None:
        """``w * OR(super-nodes of cs stay on b) * (producer not on b)`` for ``b != alpha``."""
        p_on_b = p >= 0 and self.label[p] == b
        if p_on_b and not self.free[p]:
            return
        stays = [c for c in cs if self.free[c]]
        if len(stays) < len(cs):  # a consumer that cannot move stays on b
            if p_on_b:
                self.arc(self.SOURCE, self.node_of[p], w)
            return
        head = self.node_of[p] if p_on_b else self.SINK
        if len(stays) == 1:
            self.arc(self.node_of[stays[0]], head, w)
            return
        y = self._aux()
        for c in stays:
            self.arc(self.node_of[c], y, -1)
        self.arc(y, head, w)

    def _aux(self) -> int:
        self.next += 1
        return self.next - 1

    def solve(self) -> np.ndarray:
        """Super-nodes on the sink side of a minimum cut (the super-nodes that move)."""
        if not self.tails:
            return np.zeros(0, dtype=np.int64)
        caps = np.asarray(self.caps, dtype=np.int64)
        caps[caps < 0] = int(caps[caps > 0].sum()) + 1
        from ortools.graph.python import max_flow  # a heavy import, paid on use

        flow = max_flow.SimpleMaxFlow()
        flow.add_arcs_with_capacity(np.asarray(self.tails, dtype=np.int64),
                                    np.asarray(self.heads, dtype=np.int64), caps)
        status = flow.solve(self.SOURCE, self.SINK)
        if status != flow.OPTIMAL:  # pragma: no cover - capacities stay far below 2**62
            raise StrategyError(f"device choice: the max-flow solver returned {status}")
        source_side = np.zeros(self.next, dtype=bool)
        source_side[np.asarray(flow.get_source_side_min_cut(), dtype=np.int64)] = True
        super_nodes = np.asarray(list(self.node_of), dtype=np.int64)
        nodes = np.asarray(list(self.node_of.values()), dtype=np.int64)
        return super_nodes[~source_side[nodes]]
