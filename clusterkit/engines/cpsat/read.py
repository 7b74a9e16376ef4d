"""Read: from the solved components to the result - ranks and devices per super-node, the
partition of the original nodes, and the result's figures (status, objective, proven bound).

The partition read back is checked by :meth:`Partition.validate`; the result is never worse
than the warm start (when the solver's partition is, the warm start is returned instead).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.constraints.objectives import Objective
from clusterkit.engines.cpsat.reduce import Reduction
from clusterkit.errors import ClusterkitError, StrategyError
from clusterkit.passes.acceptable import make_acceptable
from clusterkit.passes.coalesce import coalesce as coalesce_clusters
from clusterkit.result.model import Partition

if TYPE_CHECKING:
    from clusterkit.engines.cpsat.solve import ComponentSolution

#: Statuses from best to worst: a run's status is its worst component's.
_RANK = {"OPTIMAL": 0, "FEASIBLE": 1, "UNKNOWN": 2, "INFEASIBLE": 3, "MODEL_INVALID": 4}


@dataclass(frozen=True)
class SolveReport:
    """The typed figures of an exact run, attached to its partition as
    ``Partition.solve_report`` (and written to ``Partition.info`` under the same names):
    ``status`` (OPTIMAL, FEASIBLE, UNKNOWN, INFEASIBLE), ``objective`` of the partition,
    ``bound`` (a proven lower bound), ``limit`` (``deterministic_time``, ``wall_time`` or None:
    the limit that stopped the search), ``fallback_nodes``, ``objective_name`` and ``reason``."""

    status: str
    objective: float | None = None
    bound: float | None = None
    limit: str | None = None
    fallback_nodes: int | None = None
    objective_name: str = ""
    reason: str = ""

    @property
    def proven(self) -> bool:
        """Is the objective proven optimal?"""
        return self.status == "OPTIMAL"

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> "SolveReport":
        """The report of a partition that kept only its info keys (FEASIBLE when none)."""
        return cls(info.get("status", "FEASIBLE"), info.get("objective"), info.get("bound"),
                   info.get("limit"), info.get("fallback_nodes"),
                   info.get("objective_name") or "", info.get("reason", ""))

    def to_info(self) -> dict[str, Any]:
        """The ``Partition.info`` (and partition JSON) keys of the report."""
        out = {"objective_name": self.objective_name, "status": self.status,
               "objective": self.objective, "bound": self.bound,
               "fallback_nodes": self.fallback_nodes, "limit": self.limit}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class CpsatResult:
    """What the exact engine found: its report, and the partition (None only when the status
    is INFEASIBLE, or UNKNOWN without a warm start); ``info`` as written to the partition."""

    report: SolveReport
    partition: Partition | None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return self.report.status

    @property
    def objective(self) -> float | None:
        return self.report.objective

    @property
    def bound(self) -> float | None:
        return self.report.bound

    @property
    def fallback_nodes(self) -> int | None:
        return self.report.fallback_nodes

    @property
    def reason(self) -> str:
        return self.report.reason


@dataclass
class ComponentsOutcome:
    """The solved components together: rank and device per super-node and the solver's figures in
    integer model units (``const``: objective terms no variable changes)."""

    rank: dict[int, int] = field(default_factory=dict)
    device: dict[int, int] = field(default_factory=dict)
    statuses: list[str] = field(default_factory=list)
    const: int = 0
    bound: float = 0.0
    objective: float = 0.0
    phase1: dict[str, Any] = field(default_factory=dict)
    limit: str | None = None
    from_hint: bool = False
    failed: str = ""

    def add(self, sol: ComponentSolution) -> None:
        """Take one component's solution."""
        self.statuses.append(sol.status)
        self.limit = self.limit or sol.limit
        self.from_hint = self.from_hint or sol.from_hint
        self.rank.update(sol.rank)
        self.device.update(sol.device)
        if sol.bound is not None:  # integer objective: round the float bound up
            self.bound += math.ceil(sol.bound - 1e-6)
        self.objective += sol.objective or 0.0

    def status(self) -> str:
        """The worst component status (OPTIMAL when there is no component), FEASIBLE when the
        offload phase was not proven."""
        overall = max(self.statuses, key=lambda s: _RANK.get(s, 9)) if self.statuses \
            else "OPTIMAL"
        if self.phase1 and self.phase1.get("status") != "OPTIMAL" and overall == "OPTIMAL":
            overall = "FEASIBLE"
        return overall


def assemble(problem: Problem, red: Reduction, rank: dict[int, int], device: dict[int, int]
             ) -> Partition:
    """Labels and devices per node from the components' ranks and devices (clusters never span
    components); detached constant nodes become singletons on their first device, host nodes taken
    out of the model singletons on the fallback."""
    sg = red.graph
    n = problem.n
    labels = np.zeros(n, dtype=np.int64)
    devices = np.full(n, -1, dtype=np.int64)
    component_of = {}
    for i, component in enumerate(red.components):
        for s in component:
            component_of[s] = i
    keys: dict[tuple, int] = {}
    for s in range(sg.size):
        d = device[s]
        key = (component_of[s], rank[s], d) if d >= 0 else ("fb", s)
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
    return Partition.from_assignment(problem, labels, devices)



def read_result(problem: Problem, red: Reduction, outcome: ComponentsOutcome, objective: Objective,
                scale: int, warm: Partition | None, info: dict[str, Any], coalesce: bool,
                start: float) -> CpsatResult:
    """The result of a run from its solved components: the solver's partition or the warm start
    (whichever is better), optionally coalesced, with status, objective and proven bound."""
    overall = outcome.status()
    if outcome.phase1:
        info["offload_phase"] = outcome.phase1
    solved = None if overall == "UNKNOWN" else _checked_partition(problem, red, outcome)
    if solved is None:
        overall = "UNKNOWN"
    bound = (outcome.const + outcome.bound) / scale if overall in ("OPTIMAL", "FEASIBLE") \
        else None
    chosen, reason = solved, ""
    if solved is not None:
        info["model_objective"] = (outcome.const + outcome.objective) / scale
        if warm is not None and objective.key(warm.metrics()) < objective.key(solved.metrics()):
            chosen = warm
            reason = "the warm start is better than the solver's solution found in time"
            if overall == "OPTIMAL":  # pragma: no cover - would contradict optimality
                overall = "FEASIBLE"
    else:
        chosen = warm
        reason = ("no solution found within the time limit; returning the warm start"
                  if warm is not None else "no solution found within the time limit")
    if chosen is None:
        report = SolveReport("UNKNOWN", limit=outcome.limit, objective_name=objective.label,
                             reason=reason)
        info.update(report.to_info())
        return CpsatResult(report, None, info)
    if coalesce:
        chosen = coalesce_clusters(chosen)
        info["coalesced_merges"] = chosen.info.get("coalesced_merges", 0)
    fb, value = objective.key(chosen.metrics())
    if bound is not None:
        bound = min(bound, value)
        offload_proven = red.fixed_offload or outcome.phase1.get("status") == "OPTIMAL"
        if overall == "FEASIBLE" and offload_proven and value - bound <= 1e-9 * max(1.0, value):
            overall = "OPTIMAL"  # the bounds of the components meet the objective: proven anyway
    report = SolveReport(overall, value, bound, outcome.limit, fb, objective.label, reason)
    info.update(report.to_info())
    info["solver_seconds"] = time.perf_counter() - start
    out = chosen.derive(info=info, keep_info=False, solve_report=report)
    return CpsatResult(report, out, out.info)  # one record: the partition's


#: the reason of a result the acceptance split changed
RELAXED = ("the acceptance split changed the solver's answer: its optimum was for the relaxed "
           "problem (the model does not know the devices' verdicts on whole subgraphs)")


def accepted_result(res: CpsatResult, warm: Partition | None, objective: Objective
                    ) -> CpsatResult:
    """``res`` with every cluster acceptable to its device (the split of
    :mod:`clusterkit.passes.acceptable`, which the front door would apply anyway). When the
    split changes the answer, the model's optimum was for a relaxed problem: ``relaxed_status``
    keeps the model's status, the status is at best FEASIBLE (OPTIMAL only if the split answer
    still meets the bound), the bound stays (the real problem is the more constrained one)
    unless the split sent nodes to the fallback, and the warm start is taken when better."""
    part = res.partition
    if part is None:
        return res
    split = make_acceptable(part)
    if split is part:
        return res
    chosen, reason = split, RELAXED
    if warm is not None and objective.key(warm.metrics()) < objective.key(split.metrics()):
        chosen, reason = warm, RELAXED + "; the warm start is better and is returned"
    fb, value = objective.key(chosen.metrics())
    bound = res.bound if fb == res.fallback_nodes else None
    status = "FEASIBLE" if res.status == "OPTIMAL" else res.status
    if bound is not None:
        bound = min(bound, value)
        if res.status == "OPTIMAL" and value - bound <= 1e-9 * max(1.0, value):
            status = "OPTIMAL"
    report = SolveReport(status, value, bound, res.report.limit, fb, objective.label, reason)
    info = dict(res.info)
    info.update(report.to_info())
    info["relaxed_status"] = res.status
    info["acceptance"] = split.info.get("acceptance")
    out = chosen.derive(info=info, keep_info=False, solve_report=report)
    return CpsatResult(report, out, out.info)  # one record: the partition's


def status_line(info: dict[str, Any]) -> str:
    """The one line an exact run's status is said in: ``OPTIMAL``, ``FEASIBLE (gap <= X% to
    bound B)`` or ``UNKNOWN``, with what changed it (the acceptance split, the warm start) and
    its wall seconds against its limit."""
    status, value, bound = info.get("status"), info.get("objective"), info.get("bound")
    text = f"{status}"
    if status == "FEASIBLE" and value is not None and bound is not None:
        gap = (value - bound) / value if value else 0.0
        text += f" (gap <= {100 * gap:.1f}% to bound {bound:,.6g})"
    elif status == "FEASIBLE":
        text += " (no proven bound)"
    notes = []
    if info.get("relaxed_status") == "OPTIMAL" and status != "OPTIMAL":
        notes.append("OPTIMAL for the relaxed problem, before the acceptance split")
    warm = info.get("warm_start") or {}
    if warm.get("strategy") and (status == "UNKNOWN" or "warm start" in info.get("reason", "")):
        notes.append(f"the answer is the warm start from {warm['strategy']}")
    elif warm.get("strategy"):
        notes.append(f"started from {warm['strategy']}")
    if info.get("wall_seconds") is not None and info.get("time_limit") is not None:
        notes.append(f"{info['wall_seconds']:.1f} s of a {info['time_limit']:g} s wall limit")
    return text + "".join(f"; {n}" for n in notes)


def _checked_partition(problem: Problem, red: Reduction, outcome: ComponentsOutcome
                       ) -> Partition | None:
    """The partition of the components' assignment, checked by :meth:`Partition.validate`. An
    unimproved hint may be invalid (None: the caller falls back to the warm start); the
    solver's own solution never is."""
    part = assemble(problem, red, outcome.rank, outcome.device)
    try:
        part.validate()
    except ClusterkitError as exc:
        if outcome.from_hint:
            return None
        raise StrategyError(f"internal: cpsat built an invalid partition: {exc}") from exc
    return part


def infeasible_result(reason: str, objective: Objective, info: dict[str, Any], start: float
                      ) -> CpsatResult:
    """An INFEASIBLE result (only with ``require_offload``) saying why."""
    report = SolveReport("INFEASIBLE", objective_name=objective.label, reason=reason)
    info.update(report.to_info())
    info["solver_seconds"] = time.perf_counter() - start
    return CpsatResult(report, None, info)
