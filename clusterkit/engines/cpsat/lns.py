"""Large-neighbourhood search (LNS): the exact model of one window at a time, for models too
large to solve whole.

The pair terms of the exact model (:mod:`clusterkit.engines.cpsat.build`: partition leaders,
size and constant-byte limits) grow with the square of the super-nodes of a component, so beyond a
few hundred super-nodes the search starts from the warm start and improves it window by window:

- *State*: a valid partition, as a cluster label and a device (-1: fallback) per super-node.
- *Windows* (level 0): the clusters in a topological order of the quotient, cut into runs of
  consecutive clusters of at most ``window`` super-nodes (half a window apart, from a seeded
  offset). A run of a topological order is convex in the quotient: no path leaves it and comes
  back. So any valid partition of its super-nodes into new clusters, with everything else
  fixed, keeps the whole partition valid (a new cycle of clusters would have to leave the run
  and return), and the window's model (``ClusterModel`` on the window, with the fixed devices
  ``outside`` it) charges exactly the objective terms the window changes.
- *Merges* (level 1): every cluster contracted to one super-node (its devices: those that can
  host it whole), the same windows over those, so the model can merge neighbouring clusters of
  any size.
- A window's solve is the exact two-phase solve (fewest fallback nodes, then the objective) with
  the current state as hint; its solution replaces the window when it is lexicographically
  better. Rounds alternate the two levels; a round without improvement doubles the window, up to
  :data:`MAX_GROWTH` times the first (then the search stops: ``converged``). With the fallback
  set fixed by the reductions, a round starts only while the objective is above the bound.

The bound is :mod:`clusterkit.engines.cpsat.relax`'s; the status is FEASIBLE unless the bound
meets the objective (then OPTIMAL, proven by the bound alone).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clusterkit import modes
from clusterkit.constraints.core import Problem
from clusterkit.engines.cpsat.build import ClusterModel
from clusterkit.engines.cpsat.hints import topological_ranks
from clusterkit.engines.cpsat.read import ComponentsOutcome, assemble
from clusterkit.engines.cpsat.reduce import (
    Reduction,
    SuperGraph,
    build_supergraph,
    group_devices,
    reachability,
)
from clusterkit.engines.cpsat.relax import lower_bound
from clusterkit.engines.cpsat.solve import Clock, SolverSettings, solve_component
from clusterkit.errors import ClusterkitError
from clusterkit.graph.algorithms import quotient_edges, topological_order
from clusterkit.modes import Method
from clusterkit.result.model import Partition

#: Methods of the ``cpsat`` strategy: the full model, LNS, or the first when it is small enough.
METHODS = modes.METHODS
#: ``auto`` solves the full model when its largest component has at most this many super-nodes
#: (pair terms: the ``partitions`` weight, size or constant-byte limits) ...
PAIR_LIMIT = 250
#: ... or this many (the cut alone).
CUT_LIMIT = 20000
#: First window (super-nodes) with and without pair terms; deterministic seconds per window.
WINDOW_PAIRS = 40
WINDOW_CUT = 120
WINDOW_SECONDS = 0.1
#: Deterministic seconds charged per window for building its model and starting the solver
#: (CP-SAT's deterministic time counts neither), so the time limit bounds the windows too.
WINDOW_OVERHEAD = 0.05
#: A round without improvement doubles the window, at most this factor over the first.
MAX_GROWTH = 4
#: Reductions LNS keeps: those that merge no node (the warm start fits their super-nodes).
LNS_REDUCTIONS = ("fix", "constants", "host")


def has_pair_terms(problem: Problem, w_parts: int) -> bool:
    """Does the model need pair literals beyond the edges and shared tensors?"""
    lim = problem.limits
    return bool(w_parts) or lim.any_minimum or lim.bounded


def choose_method(method: Method, problem: Problem, red: Reduction, w_parts: int) -> Method:
    """``full`` or ``lns`` for ``method`` (``auto``: the full model when small enough)."""
    if method != "auto":
        return method
    limit = PAIR_LIMIT if has_pair_terms(problem, w_parts) else CUT_LIMIT
    return "full" if red.stats.get("largest_component", 0) <= limit else "lns"


def lns_reductions(reduce: bool | tuple[str, ...]) -> tuple[str, ...]:
    """The reductions of an LNS run among those enabled."""
    on = set(LNS_REDUCTIONS) if reduce is True else set(reduce or ())
    return tuple(r for r in LNS_REDUCTIONS if r in on)


@dataclass
class State:
    """A valid partition of the super-nodes: cluster label and device (-1: fallback)."""

    label: list[int]
    device: list[int]
    fresh: int = 0

    def new_label(self) -> int:
        self.fresh += 1
        return self.fresh - 1


@dataclass
class Search:
    """One LNS run: the problem's super-graph, weights, settings and what happened."""

    red: Reduction
    w_cut: int
    w_parts: int
    settings: SolverSettings
    clock: Clock
    rng: random.Random
    stats: dict[str, Any] = field(default_factory=lambda: {
        "windows": 0, "improved": 0, "merge_windows": 0, "merged": 0, "rounds": 0})


def solve_lns(problem: Problem, red: Reduction, w_cut: int, w_parts: int,
              warm: Partition | None, settings: SolverSettings, clock: Clock,
              window: int | None = None) -> tuple[ComponentsOutcome, dict[str, Any]]:
    """Improve the warm start (or a trivial valid start) by LNS until the clock runs out or
    the search converges; the outcome of the single component of ``red`` and the search's
    figures."""
    sg = red.graph
    state = initial_state(problem, red, warm)
    if not valid_state(problem, red, state):  # only with require_offload or min_size
        outcome = ComponentsOutcome(statuses=["UNKNOWN"], limit=None)
        return outcome, {"stop": "no valid start"}
    search = Search(red, w_cut, w_parts, settings, clock, random.Random(settings.seed))
    first = window or (WINDOW_PAIRS if has_pair_terms(problem, w_parts) else WINDOW_CUT)
    size = first
    full, blocked = reachability(sg)
    bound = lower_bound(sg, w_cut, w_parts, full, blocked)
    stop = "time limit"
    while clock.left() > 0:
        if red.fixed_offload and state_value(problem, red, state, w_cut, w_parts) <= bound:
            stop = "bound reached"
            break
        search.stats["rounds"] += 1
        gained = sweep(search, sg, full, blocked, state, size, "windows", "improved")
        if clock.left() > 0 and len(set(state.label)) > 1:
            gained += merge_round(search, problem, state, size)
        if not gained:
            if size >= MAX_GROWTH * first:
                stop = "converged"
                break
            size *= 2
    outcome = ComponentsOutcome()
    outcome.rank = {s: state.label[s] for s in range(sg.size)}
    outcome.device = {s: state.device[s] for s in range(sg.size)}
    outcome.statuses.append("FEASIBLE")
    outcome.bound = float(bound)
    outcome.limit = clock.kind if stop == "time limit" else None
    search.stats.update({"stop": stop, "last_window": size, "relaxation_bound": bound})
    return outcome, search.stats


def initial_state(problem: Problem, red: Reduction, warm: Partition | None) -> State:
    """The warm start on the super-nodes (each super-node is a together group or one node, so
    the warm start fits them); a super-node the reductions offload but the warm start leaves on
    the fallback becomes a cluster of its own on its first device (a host singleton offloaded
    alone changes no path of the quotient). Without a warm start: every super-node that may
    stay on the fallback does, the others alone on their first device."""
    sg = red.graph
    label, device = [0] * sg.size, [-1] * sg.size
    if warm is not None:
        a = warm.assignment()
        dev_of = [problem.device_index(c.device) if c.device != problem.fallback else -1
                  for c in warm.clusters]
        for s in range(sg.size):
            c = int(a[sg.members[s][0]])
            label[s], device[s] = c, dev_of[c]
    state = State(label, device, max(label, default=-1) + 1 + sg.size)
    for s in range(sg.size):
        if warm is None or device[s] not in sg.devices[s] + ((-1,) if sg.may_fb[s] else ()):
            on_host = sg.may_fb[s] or not sg.devices[s]
            state.device[s] = -1 if on_host else sg.devices[s][0]
            state.label[s] = state.new_label()
    return state


def valid_state(problem: Problem, red: Reduction, state: State) -> bool:
    """Is the state a valid partition?"""
    part = assemble(problem, red, dict(enumerate(state.label)), dict(enumerate(state.device)))
    try:
        part.validate()
    except ClusterkitError:
        return False
    return True


def state_value(problem: Problem, red: Reduction, state: State, w_cut: int, w_parts: int
                ) -> int:
    """The objective of the state's partition (integer weights)."""
    part = assemble(problem, red, dict(enumerate(state.label)), dict(enumerate(state.device)))
    m = part.metrics()
    return w_cut * int(m["cut_bytes"]) + w_parts * int(m["partitions"])


def cluster_order(sg: SuperGraph, state: State) -> list[list[int]]:
    """The clusters of ``state`` (lists of super-nodes, host ones alone) in a topological order
    of the quotient (the cluster of the smallest super-node first among the ready ones)."""
    keys: dict[tuple[int, int], int] = {}
    comp = np.empty(sg.size, dtype=np.int64)
    members: list[list[int]] = []
    for s in range(sg.size):
        key = (state.label[s], state.device[s]) if state.device[s] >= 0 else (-1 - s, -1)
        c = keys.setdefault(key, len(keys))
        if c == len(members):
            members.append([])
        members[c].append(s)
        comp[s] = c
    src = np.fromiter((a for a in range(sg.size) for _ in sg.succ[a]), dtype=np.int64)
    dst = np.fromiter((b for a in range(sg.size) for b in sg.succ[a]), dtype=np.int64)
    qa, qb = quotient_edges(comp, src, dst)
    order = topological_order(len(members), qa.tolist(), qb.tolist(),
                              key=[m[0] for m in members])
    return [members[c] for c in order]


def next_window(clusters: list[list[int]], size: int, start: int) -> tuple[list[int], int]:
    """The run of consecutive clusters from ``start`` of at most ``size`` super-nodes (none
    when the first is larger) and where the next run starts (half a run later)."""
    taken, count, end = [], 0, start
    while end < len(clusters) and count + len(clusters[end]) <= size:
        taken.extend(clusters[end])
        count += len(clusters[end])
        end += 1
    step = max(1, (end - start) // 2)
    return sorted(taken), start + step


def sweep(search: Search, sg: SuperGraph, full: list[int], blocked: list[int], state: State,
          size: int, counter: str, gains: str) -> int:
    """Solve every window of one pass (from a seeded offset); the number of improvements."""
    clusters = cluster_order(sg, state)
    touching = terms_by_super_node(sg)
    start = search.rng.randrange(max(1, min(len(clusters), size // 2)))
    gained = 0
    while start < len(clusters) and search.clock.left() > 0:
        window, nxt = next_window(clusters, size, start)
        if len(window) > 1 and any(sg.may_acc[s] for s in window):
            search.stats[counter] += 1
            if solve_window(search, sg, full, blocked, touching, state, window):
                gained += 1
                search.stats[gains] += 1
                at = len(clusters)
                clusters = cluster_order(sg, state)
                nxt = max(start + 1, nxt - (at - len(clusters)))
        start = nxt
    return gained


def solve_window(search: Search, sg: SuperGraph, full: list[int], blocked: list[int],
                 touching: list[list[int]], state: State, window: list[int]) -> bool:
    """Re-solve one window with the rest fixed; True when its solution replaced the state's."""
    search.clock.charge_overhead(WINDOW_OVERHEAD)
    model = window_model(sg, (full, blocked), touching, state, window,
                         (search.w_cut, search.w_parts))
    if model.trivial:
        return False
    cluster = {s: state.label[s] if state.device[s] >= 0 else -1 - s for s in window}
    rank = topological_ranks(model, cluster)
    device = {s: state.device[s] for s in window}
    if rank is None or not model.in_domain(rank, device):  # pragma: no cover - a valid state
        return False
    before = _key(model, rank, device)
    budget = min(WINDOW_SECONDS, search.clock.left())
    sol, _ = solve_component(model, (state.label, state.device), budget, search.red.fixed_offload,
                        search.settings, search.clock)
    if sol.status not in ("OPTIMAL", "FEASIBLE") or sol.from_hint:
        return False
    if _key(model, sol.rank, sol.device) >= before:
        return False
    labels: dict[tuple[int, int], int] = {}
    for s in window:
        d = sol.device[s]
        state.device[s] = d
        state.label[s] = labels.setdefault((sol.rank[s], d), state.new_label()) if d >= 0 \
            else state.new_label()
    return True


def window_model(sg: SuperGraph, reach: tuple[list[int], list[int]],
                 touching: list[list[int]], state: State, window: list[int],
                 weights: tuple[int, int]) -> ClusterModel:
    """The exact model of a window (a run of whole clusters) with everything outside fixed as
    in ``state``: its objective is the full objective minus terms the window cannot change."""
    inside = set(window)
    terms = [sg.terms[i] for i in sorted({i for s in window for i in touching[s]})]
    outside = {}
    for t in terms:
        for s in ((t.producer,) if t.producer >= 0 else ()) + t.consumers:
            if s not in inside:
                outside[s] = state.device[s]
    never = [(a, b) for a, b in sg.never if a in inside and b in inside]
    return ClusterModel(sg, window, weights[0], weights[1], reach[0], reach[1], terms, never,
                        outside)


def _key(model: ClusterModel, rank: dict[int, int], device: dict[int, int]) -> tuple[int, int]:
    vals = model.evaluate(rank, device)
    return model.value(vals, "offload"), model.value(vals)


def terms_by_super_node(sg: SuperGraph) -> list[list[int]]:
    """Indices of the tensor terms each super-node produces or consumes."""
    out: list[list[int]] = [[] for _ in range(sg.size)]
    for i, t in enumerate(sg.terms):
        if t.producer >= 0:
            out[t.producer].append(i)
        for c in t.consumers:
            out[c].append(i)
    return out


def merge_round(search: Search, problem: Problem, state: State, size: int) -> int:
    """Level 1: contract every cluster of the state into one super-node and sweep windows of
    those (merges and device changes of whole clusters); map the result back."""
    red = search.red
    sg = red.graph
    coarse, of = coarse_graph(problem, red, state)
    cstate = State(list(range(coarse.size)),
                   [state.device[coarse_first(coarse, sg, c)] for c in range(coarse.size)],
                   coarse.size)
    full, blocked = reachability(coarse)
    gained = sweep(search, coarse, full, blocked, cstate, size, "merge_windows", "merged")
    if gained:
        base = state.fresh
        state.fresh = base + cstate.fresh
        for s in range(sg.size):
            c = of[s]
            state.device[s] = cstate.device[c]
            state.label[s] = base + cstate.label[c] if cstate.device[c] >= 0 \
                else state.new_label()
    return gained


def coarse_first(coarse: SuperGraph, sg: SuperGraph, c: int) -> int:
    """A super-node of ``sg`` inside the coarse super-node ``c``."""
    return int(sg.node_super[coarse.members[c][0]])


def coarse_graph(problem: Problem, red: Reduction, state: State
                 ) -> tuple[SuperGraph, list[int]]:
    """The super-graph whose super-nodes are the state's clusters (host super-nodes alone; an
    offloaded cluster may go to every device that can host it whole, never to the fallback),
    and the coarse super-node of every super-node."""
    sg = red.graph
    keys: dict[tuple[int, int], int] = {}
    comp = [0] * sg.size
    for s in range(sg.size):
        key = (state.label[s], state.device[s]) if state.device[s] >= 0 else (-1 - s, -1)
        comp[s] = keys.setdefault(key, len(keys))
    node_super = np.full(problem.n, -1, dtype=np.int64)
    members: list[list[int]] = [[] for _ in keys]
    for s in range(sg.size):
        members[comp[s]].extend(sg.members[s])
    for c, ms in enumerate(members):
        node_super[ms] = c
    devices: list[tuple[int, ...]] = []
    may_acc: list[bool] = []
    for ms in members:
        s = int(sg.node_super[ms[0]])
        d = state.device[s]
        devs = tuple(sorted(set(group_devices(problem, ms)) | {d})) if d >= 0 else ()
        devices.append(devs)
        may_acc.append(d >= 0)
    may_fb = [not a for a in may_acc]
    coarse = build_supergraph(problem, node_super, members, devices, may_acc, may_fb,
                              sg.detached, sg.on_host)
    of = [int(coarse.node_super[sg.members[s][0]]) for s in range(sg.size)]
    return coarse, of
