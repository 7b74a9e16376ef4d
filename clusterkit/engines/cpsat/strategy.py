"""Strategy ``cpsat``: the exact optimum over all valid partitions, with OR-tools CP-SAT.

The optimum is *lexicographic*, as in :func:`clusterkit.testing.exhaustive.exhaustive_optimum`: first the
fewest fallback nodes (offload as much as possible - otherwise leaving everything on the host
would trivially win with cut 0), then the least ``w_cut * cut_bytes + w_partitions *
partitions``. It is solved in two phases on the model of :mod:`clusterkit.engines.cpsat.model`: phase 1
minimizes the fallback nodes, phase 2 keeps that count and minimizes the objective. Phase 1 is
skipped when reduction R1 of :mod:`clusterkit.engines.cpsat.reduce` proves the fallback set (``min_size <= 1``).
The problem is shrunk first (:mod:`clusterkit.engines.cpsat.reduce`), independent parts are solved one by one.

The result is warm-started (a solution hint) from the best heuristic strategy by the same
objective, is never worse than it, and carries in ``Partition.info``: ``status`` (``OPTIMAL``,
``FEASIBLE``, ``UNKNOWN`` - no solution in time, the warm start is returned - or, for
``require_offload=True`` only, ``INFEASIBLE`` with a ``reason``), ``objective``, ``bound`` (a
proven lower bound of the objective among partitions with the optimal fallback count),
``fallback_nodes``, ``warm_start`` and ``reductions``.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
from ortools.sat.python import cp_model

from clusterkit.constraints.core import Problem
from clusterkit.constraints.objectives import (Objective, integer_weights, parse_objective,
                                               partition_key)
from clusterkit.engines.cpsat.warmstart import warm_start as warm_start_partition
from clusterkit.engines.cpsat.model import STATUS, ClusterModel, PartSolution
from clusterkit.errors import ClusterkitError, StrategyError
from clusterkit.result import Partition
from clusterkit.engines.cpsat.reduce import Reduction, reachability, reduce_problem
from clusterkit.engines.coalesce import coalesce as coalesce_clusters

_RANK = {"OPTIMAL": 0, "FEASIBLE": 1, "UNKNOWN": 2, "INFEASIBLE": 3, "MODEL_INVALID": 4}


# ----------------------------------------------------------------------------- result
@dataclass
class CpsatResult:
    """What :func:`solve` found: ``partition`` is None only when ``status`` is INFEASIBLE."""

    status: str
    partition: Partition | None
    objective: float | None
    bound: float | None
    fallback_nodes: int | None
    reason: str = ""
    info: dict[str, Any] = field(default_factory=dict)


def run(problem: Problem, objective: str | Mapping[str, float] = "cut", time_limit: float = 60.0,
        workers: int = 2, seed: int = 0, warm_start: Any = True, reduce: Any = True,
        require_offload: bool = False, deterministic: bool = True, log: bool = False,
        coalesce: bool = True) -> Partition:
    """Optimal partition (see the module docstring). ``warm_start``: True (best heuristic),
    False, a strategy name or a Partition; ``reduce``: True, False or reduction names;
    ``require_offload``: every node some device takes must be offloaded (may be infeasible);
    ``deterministic``: interleave the CP-SAT workers so that the same input gives the same
    partition (False: let them race, sometimes faster); ``coalesce``: merge clusters of one
    device while valid after solving (never raises the objective: see
    :mod:`clusterkit.engines.coalesce`; it breaks ties of equal cut towards fewer
    partitions). Raises :class:`StrategyError` (with
    ``status``/``reason`` attributes) when infeasible."""
    res = solve(problem, objective, time_limit, workers, seed, warm_start, reduce,
                require_offload, deterministic, log, coalesce)
    if res.partition is None:
        err = StrategyError(f"cpsat: {res.status}: {res.reason}")
        err.status = res.status  # type: ignore[attr-defined]
        err.reason = res.reason  # type: ignore[attr-defined]
        raise err
    return res.partition


def solve(problem: Problem, objective: str | Mapping[str, float] = "cut",
          time_limit: float = 60.0, workers: int = 2, seed: int = 0, warm_start: Any = True,
          reduce: Any = True, require_offload: bool = False, deterministic: bool = True,
          log: bool = False, coalesce: bool = True) -> CpsatResult:
    """Solve; never raises for infeasibility (the status says it)."""
    start = time.perf_counter()
    w_cut, w_parts, label = parse_objective(objective)
    ic, ip, scale = integer_weights(w_cut, w_parts)
    time_limit = float(time_limit)
    if not time_limit > 0:
        raise StrategyError(f"cpsat: time_limit must be > 0, got {time_limit}")
    workers = int(workers)
    if workers < 0:
        raise StrategyError(f"cpsat: workers must be >= 0, got {workers}")
    deadline = start + time_limit
    warm, warm_info = warm_start_partition(problem, warm_start, Objective(w_cut, w_parts, label))
    if require_offload:
        reason = _offload_contradiction(problem)
        if reason:
            return _infeasible(reason, label, warm_info, start)
    red = reduce_problem(problem, w_parts=w_parts, enable=reduce,
                         require_offload=require_offload)
    sg = red.graph
    full, blocked = reachability(sg)
    solver_args = dict(workers=workers, seed=seed, log=log, deterministic=deterministic)
    rank: dict[int, int] = {}
    device: dict[int, int] = {}
    statuses: list[str] = []
    const_total = 0
    bound_total = 0.0
    model_obj = 0.0
    phase1: dict[str, Any] = {}
    hint_src = _hint_assignment(sg, warm)
    remaining = sum(len(p) for p in red.parts if len(p) > 1) or 1
    order = sorted(range(len(red.parts)), key=lambda i: (len(red.parts[i]), i))
    part_terms, part_never = _index_by_part(red)
    for i in order:
        part = red.parts[i]
        model = ClusterModel(sg, part, ic, ip, full, blocked, part_terms[i], part_never[i])
        const_total += model.const
        if model.trivial:
            s = part[0]
            rank[s] = 0
            device[s] = next(iter(model.x[s])) if model.x[s] else -1
            statuses.append("OPTIMAL")
            continue
        left = deadline - time.perf_counter()
        # small parts come first and usually finish in milliseconds; a floor keeps a tiny
        # share from starving one, and what they leave goes to the larger parts
        budget = min(left, max(min(2.0, left), left * len(part) / remaining))
        remaining -= len(part)
        if budget <= 0.005:  # out of time: the part keeps its (checked) hint, bound 0
            sol, p1 = _unsolved_part(model, hint_src), {}
        else:
            sol, p1 = _solve_part(model, hint_src, budget, red.fixed_offload, solver_args)
        if p1:
            phase1 = p1
        statuses.append(sol.status)
        if sol.status in ("INFEASIBLE", "MODEL_INVALID"):
            why = _explain_infeasible(problem, red, model) if require_offload else ""
            return _infeasible(why or f"the model of {len(part)} super-nodes is {sol.status}",
                               label, warm_info, start, red.stats)
        if sol.status == "UNKNOWN":
            break
        rank.update(sol.rank)
        device.update(sol.device)
        if sol.bound is not None:  # integer objective: round the float bound up
            bound_total += math.ceil(sol.bound - 1e-6)
        model_obj += sol.objective or 0.0
    overall = max(statuses, key=lambda s: _RANK.get(s, 9)) if statuses else "OPTIMAL"
    info: dict[str, Any] = {"objective_name": label, "weights": {"cut": w_cut,
                                                                  "partitions": w_parts},
                            "warm_start": warm_info, "reductions": red.stats,
                            "time_limit": time_limit, "workers": workers, "seed": seed}
    if phase1:
        info["offload_phase"] = phase1
        if phase1.get("status") != "OPTIMAL" and overall == "OPTIMAL":
            overall = "FEASIBLE"
    result_part = None
    if overall != "UNKNOWN":
        result_part = _assemble(problem, red, rank, device)
        try:
            result_part.validate()
        except ClusterkitError as exc:  # pragma: no cover - a bug, reported loudly
            raise StrategyError(f"internal: cpsat built an invalid partition: {exc}") from exc
    bound = (const_total + bound_total) / scale if overall in ("OPTIMAL", "FEASIBLE") else None
    chosen = result_part
    reason = ""
    if result_part is not None:
        key = partition_key(result_part.metrics(), w_cut, w_parts)
        info["model_objective"] = (const_total + model_obj) / scale
        if warm is not None and partition_key(warm.metrics(), w_cut, w_parts) < key:
            chosen = warm
            reason = "the warm start is better than the solver's solution found in time"
            if overall == "OPTIMAL":  # pragma: no cover - would contradict optimality
                overall = "FEASIBLE"
    else:
        chosen = warm
        reason = ("no solution found within the time limit; returning the warm start"
                  if warm is not None else "no solution found within the time limit")
    if chosen is None:
        return CpsatResult("UNKNOWN", None, None, None, None, reason, info)
    if coalesce:
        chosen = coalesce_clusters(chosen)
        info["coalesced_merges"] = chosen.info.get("coalesced_merges", 0)
    fb, value = partition_key(chosen.metrics(), w_cut, w_parts)
    if bound is not None:
        bound = min(bound, value)
        offload_proven = red.fixed_offload or phase1.get("status") == "OPTIMAL"
        if overall == "FEASIBLE" and offload_proven and value - bound <= 1e-9 * max(1.0, value):
            overall = "OPTIMAL"  # the bounds of the parts meet the objective: proven anyway
    info.update({"status": overall, "objective": value, "bound": bound, "fallback_nodes": fb,
                 "solver_seconds": time.perf_counter() - start})
    if reason:
        info["reason"] = reason
    out = Partition(problem, chosen.clusters, strategy="cpsat", selector=chosen.selector,
                    info=info)
    return CpsatResult(overall, out, value, bound, fb, reason, info)


# ----------------------------------------------------------------------------- pieces
def _index_by_part(red: Reduction) -> tuple[list[list], list[list]]:
    """The tensor terms and never-together pairs touching each part."""
    sg = red.graph
    part_of = [0] * sg.size
    for i, part in enumerate(red.parts):
        for s in part:
            part_of[s] = i
    terms: list[list] = [[] for _ in red.parts]
    for term in sg.terms:
        seen = {part_of[c] for c in term.consumers}
        if term.producer >= 0:
            seen.add(part_of[term.producer])
        for i in sorted(seen):
            terms[i].append(term)
    never: list[list] = [[] for _ in red.parts]
    for a, b in sg.never:
        if part_of[a] == part_of[b]:
            never[part_of[a]].append((a, b))
    return terms, never


def _hint_assignment(sg, warm: Partition | None) -> tuple[list[int], list[int]] | None:
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


def _part_hint(model: ClusterModel, src) -> tuple[dict[int, int], dict[int, int]] | None:
    """The best feasible hint for a part among: the warm start's clusters (when they fit the
    super-nodes), and longest-path ranks on the warm start's devices, on devices chosen by
    affinity with the neighbours, and on the first device of each super-node."""
    part = model.part
    cands: list[tuple[dict[int, int], dict[int, int]]] = []
    warm_dev = _devices_from(model, src[1] if src is not None else None)
    if src is not None:
        cluster = {s: (src[0][s] if warm_dev[s] >= 0 else -1 - s) for s in part}
        rank = _topological_ranks(model, cluster)
        if rank is not None and model.feasible(rank, warm_dev):
            cands.append((rank, warm_dev))
    for devs in (warm_dev, _affinity_devices(model), _devices_from(model, None)):
        rank = _longest_path_ranks(model, devs)
        if model.feasible(rank, devs):
            cands.append((rank, devs))
    if not cands:
        return None
    best = None
    for rank, devs in cands:
        vals = model.evaluate(rank, devs)
        key = (model.value(vals, "offload"), model.value(vals))
        if best is None or key < best[0]:
            best = (key, rank, devs)
    return best[1], best[2]


def _devices_from(model: ClusterModel, dev: list[int] | None) -> dict[int, int]:
    """The given device per super-node where allowed, else its first device (or the fallback
    when it cannot be offloaded)."""
    sg = model.sg
    out = {}
    for s in model.part:
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
    for term in model.part_terms:
        if term.producer >= 0:
            for c in term.consumers:
                key = (term.producer, c)
                weight[key] = weight.get(key, 0) + term.nbytes
    out = {}
    for s in model.part:
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
    for a, b in model.part_never:
        partners.setdefault(b, []).append(a)
    rank: dict[int, int] = {}
    for t in model.part:
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


def _topological_ranks(model: ClusterModel, cluster: dict[int, int]) -> dict[int, int] | None:
    """Position of each super-node's cluster in a topological order of the part's clusters;
    None when the clusters form a cycle."""
    sg = model.sg
    ids = sorted(set(cluster.values()))
    succ: dict[int, set[int]] = {c: set() for c in ids}
    indeg = {c: 0 for c in ids}
    for s in model.part:
        a = cluster[s]
        for t in sg.succ[s]:
            b = cluster.get(t)
            if b is not None and a != b and b not in succ[a]:
                succ[a].add(b)
                indeg[b] += 1
    first = {}
    for s in model.part:
        first.setdefault(cluster[s], s)
    heap = [(first[c], c) for c in ids if indeg[c] == 0]
    heapq.heapify(heap)
    pos = {}
    while heap:
        _, c = heapq.heappop(heap)
        pos[c] = len(pos)
        for w in sorted(succ[c]):
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (first[w], w))
    if len(pos) != len(ids):
        return None
    return {s: pos[cluster[s]] for s in model.part}


#: CP-SAT subsolvers interleaved (deterministically) on the workers: the core-based lower bound
#: search proves these models fastest; the two searches find solutions.
SUBSOLVERS = ("core", "default_lp", "no_lp")


def _params(budget: float, workers: int, seed: int, log: bool,
            deterministic: bool = True) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.max_time_in_seconds = max(0.01, float(budget))
    if workers:
        prm.num_workers = workers
    prm.random_seed = int(seed)
    prm.log_search_progress = bool(log)
    if deterministic:  # same input, same result - unless the time limit cuts a search short
        prm.interleave_search = True
        prm.interleave_batch_size = 1
        prm.subsolvers.extend(SUBSOLVERS)
    return solver


def _solve_part(model: ClusterModel, src, budget: float, fixed: bool, args: dict
                ) -> tuple[PartSolution, dict[str, Any]]:
    """Solve one part: phase 1 (fewest fallback nodes) unless the fallback set is fixed, then
    phase 2 (the objective). Statuses combine: OPTIMAL only if both phases are."""
    t0 = time.perf_counter()
    end = t0 + budget
    hint = _part_hint(model, src)
    phase1: dict[str, Any] = {}
    m = model.m
    status1 = "OPTIMAL"
    if model.fb_terms and not fixed:
        if hint is not None:
            model.hint(*hint)
        m.Minimize(model.offload_expr())
        solver = _params(budget / 2, **args)
        code = solver.Solve(m)
        status1 = STATUS.get(code, "UNKNOWN")
        phase1 = {"status": status1, "seconds": solver.WallTime()}
        if status1 not in ("OPTIMAL", "FEASIBLE"):
            return PartSolution({}, {}, status1, None, None, solver.WallTime()), phase1
        best = int(round(solver.ObjectiveValue()))
        phase1.update({"fallback_nodes": best, "bound": solver.BestObjectiveBound()})
        rank, device = _extract(model, solver)
        m.Add(model.offload_expr() <= best)
        hint = (rank, device)
    if hint is not None:
        model.hint(*hint)
    m.Minimize(model.objective_expr())
    solver = _params(max(0.01, end - time.perf_counter()), **args)
    code = solver.Solve(m)
    status = STATUS.get(code, "UNKNOWN")
    if status == "UNKNOWN" and hint is not None:
        # no solution in time, but the (checked) hint is one: keep it, with the proven bound
        vals = model.evaluate(*hint)
        return PartSolution(hint[0], hint[1], "FEASIBLE", model.value(vals),
                            solver.BestObjectiveBound(), solver.WallTime()), phase1
    if status not in ("OPTIMAL", "FEASIBLE"):
        return PartSolution({}, {}, status, None, None, solver.WallTime()), phase1
    rank, device = _extract(model, solver)
    if status == "OPTIMAL" and status1 != "OPTIMAL":
        status = "FEASIBLE"
    return PartSolution(rank, device, status, solver.ObjectiveValue(),
                        solver.BestObjectiveBound(), solver.WallTime()), phase1


def _unsolved_part(model: ClusterModel, src) -> PartSolution:
    """A part the time limit left no time for: its best hint when one is feasible (with the
    trivial bound 0, as every objective term is non-negative), else UNKNOWN."""
    hint = _part_hint(model, src)
    if hint is None:
        return PartSolution({}, {}, "UNKNOWN", None, None, 0.0)
    return PartSolution(hint[0], hint[1], "FEASIBLE", model.value(model.evaluate(*hint)), 0.0,
                        0.0)


def _extract(model: ClusterModel, solver: cp_model.CpSolver) -> tuple[dict, dict]:
    rank, device = {}, {}
    for s in model.part:
        r = model.r[s]
        rank[s] = r if isinstance(r, int) else int(solver.Value(r))
        device[s] = -1
        for d, lit in model.x[s].items():
            if lit is True or solver.BooleanValue(lit):
                device[s] = d
                break
    return rank, device


def _assemble(problem: Problem, red: Reduction, rank: dict[int, int], device: dict[int, int]
              ) -> Partition:
    """Labels and devices per node from the parts' ranks and devices (clusters never span
    parts); detached constant nodes become singletons on their first device, host nodes taken
    out of the model singletons on the fallback."""
    sg = red.graph
    n = problem.n
    labels = np.zeros(n, dtype=np.int64)
    devices = np.full(n, -1, dtype=np.int64)
    part_of = {}
    for i, part in enumerate(red.parts):
        for s in part:
            part_of[s] = i
    keys: dict[tuple, int] = {}
    for s in range(sg.size):
        d = device[s]
        key = (part_of[s], rank[s], d) if d >= 0 else ("fb", s)
        lab = keys.setdefault(key, len(keys))
        for v in sg.members[s]:
            labels[v] = lab
            devices[v] = d
    first = problem.first_device
    for v in sg.detached:
        labels[v] = len(keys) + v
        devices[v] = first[v]
    for v in sg.on_host:
        labels[v] = len(keys) + v
        devices[v] = -1
    return Partition.from_assignment(problem, labels, devices, strategy="cpsat")


def _offload_contradiction(problem: Problem) -> str:
    """With require_offload: a together group no device can host as one cluster."""
    from clusterkit.engines.cpsat.reduce import _group_devices

    g = problem.graph
    for gi, members in enumerate(problem.groups):
        ids = members.tolist()
        if problem.supported[:, ids].any(axis=0).all() and not _group_devices(problem, ids):
            names = ", ".join(g.nodes[v].name for v in ids[:5])
            return (f"together group {gi} ({names}) must be offloaded, but no device can host "
                    "it as one cluster (an internal edge its selector refuses, or too many "
                    "nodes or constant bytes)")
    return ""


def _explain_infeasible(problem: Problem, red: Reduction, model: ClusterModel) -> str:
    """Name the super-nodes whose forced offload contradicts the constraints: an infeasible
    core over 'offload this node' assumptions, on a model where offload is optional."""
    sg = red.graph
    from clusterkit.engines.cpsat.reduce import build_supergraph

    relaxed = build_supergraph(problem, sg.node_super, sg.members, sg.devices, sg.may_acc,
                               [True] * sg.size, sg.detached, sg.on_host)
    part = [s for s in range(relaxed.size)]
    m2 = ClusterModel(relaxed, part, 0, 0)
    assumptions = [m2.acc[s] for s in part if m2.acc[s] is not True and m2.acc[s] is not False]
    m2.m.AddAssumptions(assumptions)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 10.0
    solver.parameters.num_workers = 1
    code = solver.Solve(m2.m)
    g = problem.graph
    limits = []
    if problem.min_size > 1:
        limits.append(f"min_size {problem.min_size}")
    if problem.max_size is not None:
        limits.append(f"max_size {problem.max_size}")
    if problem.max_const_bytes is not None:
        limits.append(f"max_const_bytes {problem.max_const_bytes}")
    if len(problem.never_pairs):
        limits.append(f"{len(problem.never_pairs)} never-together pairs")
    if int(problem.must_cut.sum()):
        limits.append(f"{int(problem.must_cut.sum())} must-cut edges")
    tail = f" under {', '.join(limits)}" if limits else ""
    if code == cp_model.INFEASIBLE:
        core = solver.SufficientAssumptionsForInfeasibility()
        index = {lit.Index(): s for s, lit in ((s, m2.acc[s]) for s in part)
                 if lit is not True and lit is not False}
        nodes = sorted(v for i in core if i in index for v in relaxed.members[index[i]])
        names = ", ".join(f"{g.nodes[v].name!r} ({g.nodes[v].op_type})" for v in nodes[:8])
        more = f" and {len(nodes) - 8} more" if len(nodes) > 8 else ""
        return (f"require_offload: these nodes cannot all be offloaded{tail}: {names}{more}")
    return f"require_offload: not every supported node can be offloaded{tail}"


def _infeasible(reason: str, label: str, warm_info: dict, start: float,
                stats: dict | None = None) -> CpsatResult:
    info = {"status": "INFEASIBLE", "reason": reason, "objective_name": label,
            "warm_start": warm_info, "reductions": stats or {}, "objective": None,
            "bound": None, "solver_seconds": time.perf_counter() - start}
    return CpsatResult("INFEASIBLE", None, None, None, None, reason, info)
