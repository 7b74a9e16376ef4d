"""Why a ``require_offload`` run is infeasible: a together group no device can host, or an
infeasible core of "offload this node" assumptions on a relaxed model, named node by node."""

from __future__ import annotations

from ortools.sat.python import cp_model

from clusterkit.constraints.core import Problem
from clusterkit.engines.cpsat.build import ClusterModel
from clusterkit.engines.cpsat.reduce import Reduction, build_supergraph, group_devices


def offload_contradiction(problem: Problem) -> str:
    """With require_offload: a together group no device can host as one cluster."""
    g = problem.graph
    for gi, members in enumerate(problem.groups):
        ids = members.tolist()
        if problem.supported[:, ids].any(axis=0).all() and not group_devices(problem, ids):
            names = ", ".join(g.nodes[v].name for v in ids[:5])
            return (f"together group {gi} ({names}) must be offloaded, but no device can host "
                    "it as one cluster (an internal edge its selector refuses, or too many "
                    "nodes or constant bytes)")
    return ""


def explain_infeasible(problem: Problem, red: Reduction) -> str:
    """Name the super-nodes whose forced offload contradicts the constraints: an infeasible
    core over 'offload this node' assumptions, on a model where offload is optional."""
    sg = red.graph
    relaxed = build_supergraph(problem, sg.node_super, sg.members, sg.devices, sg.may_acc,
                               [True] * sg.size, sg.detached, sg.on_host)
    component = [s for s in range(relaxed.size)]
    m2 = ClusterModel(relaxed, component, 0, 0)
    assumptions = [m2.acc[s] for s in component if m2.acc[s] is not True and m2.acc[s] is not False]
    m2.m.AddAssumptions(assumptions)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 10.0
    solver.parameters.num_workers = 1
    code = solver.Solve(m2.m)
    g = problem.graph
    tail = _active_limits(problem)
    if code == cp_model.INFEASIBLE:
        core = solver.SufficientAssumptionsForInfeasibility()
        index = {lit.Index(): s for s, lit in ((s, m2.acc[s]) for s in component)
                 if lit is not True and lit is not False}
        nodes = sorted(v for i in core if i in index for v in relaxed.members[index[i]])
        names = ", ".join(f"{g.nodes[v].name!r} ({g.nodes[v].op_type})" for v in nodes[:8])
        more = f" and {len(nodes) - 8} more" if len(nodes) > 8 else ""
        return (f"require_offload: these nodes cannot all be offloaded{tail}: {names}{more}")
    return f"require_offload: not every supported node can be offloaded{tail}"


def _active_limits(problem: Problem) -> str:
    """`` under min_size 2, ...``: the constraints that can forbid an offload ('' if none)."""
    limits = problem.limits.phrases()
    if len(problem.never_pairs):
        limits.append(f"{len(problem.never_pairs)} never-together pairs")
    if int(problem.must_cut.sum()):
        limits.append(f"{int(problem.must_cut.sum())} must-cut edges")
    return f" under {', '.join(limits)}" if limits else ""
