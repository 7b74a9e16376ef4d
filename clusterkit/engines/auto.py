"""Strategy ``auto``: a portfolio of the heuristics, each coalesced, and the best of them.

Each member strategy runs on the problem and its partition is coalesced (same-device clusters
merged while valid, pairs and whole levels, which never raises ``cut_bytes`` or the number of
partitions, so a coalesced member is never worse than the raw one; members that found the same
clusters are coalesced once). The member ``cycles+levels`` contracts only while the fewest
partitions stay reachable (:mod:`clusterkit.engines.level_bound`). The result is the member
partition that is lexicographically best by (fallback nodes, ``cut_bytes``, partitions), or with
``prefer="partitions"`` by (fallback nodes, partitions, ``cut_bytes``); ties go to the earlier
member, so the answer is deterministic. Where some cut tensors have sizes unknown only through
symbolic dimensions, the cut with each of those at 1 (``cut_bytes_estimated``) breaks the ties
of ``cut_bytes``, and the count of cut tensors of unknown size the last ties; a member at the
lower bound then stops the portfolio only when its estimate adds nothing to its known cut.
When a device
is *restrictive* (a stateful selector or limits of its own:
:meth:`~clusterkit.constraints.acceptance.Acceptance.restrictive`) the ranking is always
partitions before ``cut_bytes``, so that the default never forms more partitions than
its ``mxnet`` member at as few fallback nodes (the refinement and the polish are kept by the same
ranking; ``info["auto"]["ranking"]`` says which one ran). The growth strategies (``mxnet``,
``hetero``) are members on graphs of at most ``growth_limit`` nodes (default
:data:`GROWTH_LIMIT`, above every bundled and light model; None: at every size). They come last,
so on a one-device problem they run only when no cheaper member reached the lower bound below.
On graphs of more than ``scale_limit`` nodes (default :data:`SCALE_LIMIT`, above every
bundled and light model; None: at every size) the members of :data:`SCALE_SKIPPED` are left out
too, unless ``members`` names them: there ``auto`` is one contraction under the level bound
(``cycles+levels``) and its refinement, not ``cycles+merge_non_adjacent`` (whose non-adjacent
merges grow much faster than the graph), nor a second contraction (``cycles``) or
``longest-path``. ``info["auto"]["skipped_for_size"]`` lists the default members a size left
out (growth and scale alike). The answer is the best of the members that ran, as always.

Members are ranked after the clusters a device rejects whole have gone to the fallback (as the
front door does after every strategy), so by what they give.

With ``devices="cost"`` (the default) and two or more devices every member also runs on the
problem narrowed by :func:`clusterkit.passes.devices.choose_devices` (named ``member@cost``;
after the others on ties).

On a one-device problem the members stop once one reaches
:func:`~clusterkit.engines.level_bound.figures_lower_bound` (no partition has fewer fallback nodes,
and none with as few has a lower cut or fewer partitions, so a later member could only tie).
``cycles`` and ``cycles+merge_non_adjacent`` share one contraction.

Unless a member reaches that bound, the best member is then *refined*
(:func:`clusterkit.passes.refine.refine`: closed node sets move between adjacent clusters of
one device while the cut drops; the fallback nodes stay, the partitions never grow), recorded as
a member ``refine``. When the result is still not proven within 1% of the optimum cut by the
bound (or there is no bound) on a graph of at most ``polish_limit`` nodes, a last member
``cpsat-polish`` runs CP-SAT on the cut objective for ``polish`` deterministic seconds,
warm-started from the best so far (so never worse than it, and deterministic); ``polish=0`` turns
both steps off.

With ``min_size`` above 1, ``auto`` also runs without it and sends the clusters below it to the
fallback afterwards (member ``auto+drop-small``), so a size limit never gives a worse answer
than dropping the small clusters after the fact would.

``info["auto"]`` records the winner, every member run with its figures (fallback nodes,
cut_bytes, partitions, seconds), the ``lower_bound`` (None with several devices) and
``at_lower_bound``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Sequence

import numpy as np

from clusterkit.constraints.acceptance import acceptance
from clusterkit.constraints.core import Problem
from clusterkit.constraints.objectives import parse_objective
from clusterkit.engines import get_strategy, registered_specs, strategy_spec
from clusterkit.engines.common import enforce_min_size
from clusterkit.engines.cycles import run_both, run_then_levels
from clusterkit.engines.level_bound import figures_lower_bound
from clusterkit.errors import StrategyError
from clusterkit.graph.algorithms import gc_paused
from clusterkit.io.placement_instance import PlacementInstance
from clusterkit.modes import PREFERENCES, DeviceMode, Prefer, check_choice
from clusterkit.passes.devices import check_mode, choose_devices, widen
from clusterkit.passes.manager import run_pass, run_passes, run_pipeline
from clusterkit.result.model import Partition
from clusterkit.result.reasons import BELOW_MIN_SIZE


def portfolio_members() -> dict[str, tuple[str, dict[str, Any]]]:
    """Member name → (strategy, options): every strategy whose spec is ``in_portfolio`` (its
    plain run, then its ``variants``), in registry order, which breaks ties."""
    return dict(m for spec in registered_specs() for m in spec.members())


def growth_members() -> tuple[str, ...]:
    """The members of the strategies whose spec says ``growth`` (run up to ``growth_limit``)."""
    return tuple(name for name, (strategy, _) in portfolio_members().items()
                 if strategy_spec(strategy).growth)


def __getattr__(name: str) -> Any:
    """``MEMBERS`` and ``GROWTH``: :func:`portfolio_members` and :func:`growth_members`, read
    when asked for (the registry may have grown)."""
    if name == "MEMBERS":
        return portfolio_members()
    if name == "GROWTH":
        return growth_members()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: the growth members run on graphs of at most this many nodes: every bundled and light model
#: (the largest, llama_48l_dynamic, has 11,298), so that ``auto`` is never worse than any member
#: on them (``benchmarks/bench_auto_members.py``). Above it their searches cost most of the
#: portfolio's time (hetero 10 s of 21 s on the 1e5-node long-edge DAG, where neither won)
GROWTH_LIMIT: int | None = 20000
#: the polish runs unless the best member is proven within this share of the optimum cut
POLISH_GAIN = 0.01
#: the CP-SAT polish runs on graphs of at most this many nodes (its wall-clock cost per
#: deterministic second grows with the model, beyond the refinement's)
POLISH_LIMIT = 300
#: the polish's wall-clock guard: this multiple of its deterministic seconds plus this margin
#: (as the placement engine's solves; cpsat is not imported before the polish runs)
POLISH_GUARD = (10.0, 30.0)
#: the member that runs without ``min_size`` and drops the small clusters afterwards
DROPPED = "auto+drop-small"
#: members computed together (one contraction)
PAIRED = {"cycles": "cycles+merge_non_adjacent", "cycles+merge_non_adjacent": "cycles"}
#: members left out on graphs of more than ``scale_limit`` nodes, where the portfolio is one
#: contraction under the level bound and the refinement of its answer: the non-adjacent merges'
#: reachability searches and Pearce-Kelly reorders cross the long edges' wide rank windows and
#: grow much faster than the graph; the plain contraction (a second GraphCycles run) and
#: longest-path (with their coalescing) would double the portfolio's cost there, and
#: ``cycles+levels`` refined was at least as good as each of them alone on every large graph
#: measured (``benchmarks/bench_auto_scale.py`` runs them alone and says so)
SCALE_SKIPPED = ("cycles+merge_non_adjacent", "cycles", "longest-path")
#: above every bundled and light model (and ``GROWTH_LIMIT``)
SCALE_LIMIT: int | None = 50000
#: the member that starts from a copy of the pair's graph
LEVELS = "cycles+levels"
#: (fallback nodes, cut_bytes, partitions, cut_bytes_estimated, cut tensors of unknown size)
Figures = tuple[int, int, int, int, int]


def run(problem: Problem, *, members: Sequence[str] | None = None,
        growth_limit: int | None = GROWTH_LIMIT, devices: DeviceMode = "cost",
        prefer: Prefer = "cut", polish: float = 0.5, polish_limit: int = POLISH_LIMIT,
        scale_limit: int | None = SCALE_LIMIT, objective: str | None = None) -> Partition:
    """The best coalesced member partition (see the module docstring). ``members``: names from
    :func:`portfolio_members` (default: all, the growth ones only up to ``growth_limit`` nodes,
    when given; the :data:`SCALE_SKIPPED` ones only up to ``scale_limit`` nodes, unless named
    in ``members``);
    ``devices``: ``"cost"`` (default: also try the cut-lowering device choice) or
    ``"priority"`` (each node on its first supporting device); ``prefer``: ``"cut"`` (default:
    rank by fallback nodes, cut_bytes, partitions) or ``"partitions"`` (fallback nodes,
    partitions, cut_bytes); ``polish``: CP-SAT's deterministic seconds for the last member, on
    graphs of at most ``polish_limit`` nodes (0: neither it nor the refinement);
    ``objective``: the spelling every strategy shares (``--objective``): ``throughput`` (a
    placement instance's default) or ``latency`` (:mod:`clusterkit.engines.latency`),
    ``cut`` / ``partitions`` (the same as ``prefer``) or cpsat's weights
    (checked; ``auto`` then ranks by ``prefer``)."""
    prefer = _objective_preference(problem, objective, prefer)
    if isinstance(problem.graph.model, PlacementInstance):
        return _placement(problem, objective)
    if polish < 0:
        raise StrategyError(f"auto: option polish must be >= 0 seconds, got {polish}")
    check_choice("auto: option prefer", prefer, PREFERENCES)
    names = [(name, problem) for name in _member_names(problem, members,
                                                        (growth_limit, scale_limit))]
    chosen = {name for name, _ in names}  # the default members this size left out, if any:
    skipped = [] if members is not None else [m for m in portfolio_members() if m not in chosen]
    if check_mode(devices) == "cost" and len(problem.devices) > 1:
        narrowed = choose_devices(problem, "cost")
        names += [(name + "@cost", narrowed) for name, _ in names]
    ranking = _ranking(problem, prefer)
    bound = figures_lower_bound(problem)
    verdicts: dict[tuple[int, tuple[int, ...]], str | None] = {}  # clusters judged once
    figures: list[dict[str, Any]] = []
    with gc_paused():  # thousands of small clusters per member: no full collector passes
        best, best_key, winner = _portfolio(problem, names, (bound, ranking), verdicts, figures)
        if polish > 0 and prefer == "cut":  # the refinement's sets: no collector passes either
            best, best_key, winner = _polish_steps(problem, (best, best_key, winner),
                                                   (bound, ranking), (polish, polish_limit),
                                                   verdicts, figures)
    if problem.limits.global_min > 1:  # never worse than dropping small clusters (global min)
        options = {"members": members, "growth_limit": growth_limit, "devices": devices,
                   "prefer": prefer, "polish": polish, "polish_limit": polish_limit,
                   "scale_limit": scale_limit}
        best, best_key, winner = _dropped_member(problem, options, (best, best_key, winner),
                                                 ranking, figures)
    record: dict[str, Any] = {"winner": winner, "members": figures, "ranking": ranking,
                              "lower_bound": list(bound) if bound is not None else None,
                              "at_lower_bound": best_key[:3] == bound}
    if skipped:  # only when the size left members out: small graphs keep their info as it was
        record["skipped_for_size"] = skipped
    return best.derive(info={"auto": record})


def _objective_preference(problem: Problem, objective: str | None, prefer: Prefer) -> Prefer:
    """``prefer`` as ``objective`` says (None: as it is); an objective ``auto`` cannot rank
    by on this problem is an error naming it."""
    instance = isinstance(problem.graph.model, PlacementInstance)
    if objective is None or (instance and objective in ("throughput", "latency")):
        return prefer
    if instance:
        raise StrategyError(f"auto: a placement instance has objectives throughput and "
                            f"latency only, got {objective!r}")
    if objective in ("throughput", "latency"):
        raise StrategyError(f"auto: objective {objective} needs a placement instance (a "
                            "maxFPGAs/nodes/edges .json file)")
    if objective in PREFERENCES:
        return check_choice("auto: option objective", objective, PREFERENCES)
    parse_objective(objective)  # weights are cpsat's: checked, and auto ranks by ``prefer``
    return prefer


def _portfolio(problem: Problem, names: list[tuple[str, Problem]],
               goal: tuple[tuple[int, int, int] | None, str], verdicts: dict,
               figures: list[dict[str, Any]]) -> tuple[Partition, Figures, str]:
    """Each member in turn, coalesced (each distinct raw partition once), until one reaches
    the bound (``goal``: the bound and the ranking); records each in ``figures`` and returns
    the best partition, its figures and its member name."""
    bound, ranking = goal
    best: Partition | None = None
    best_key: Figures | None = None
    done: dict[tuple[bool, bytes], Partition] = {}  # raw partition -> its coalesced one
    shared: dict[str, Any] = {}  # raw partitions found along with another member's (or makers)
    memo: dict = {}  # node levels for the refits, by node devices (one graph)
    winner = ""
    for name, prob in names:
        start = time.perf_counter()
        raw = _raw(name, prob, {n for n, _ in names}, shared)
        fingerprint = (prob is not problem, _fingerprint(raw))
        coalesced = done.get(fingerprint) or run_pass(raw, ("coalesce", {
            "memo": memo, "floor": bound[2] if bound is not None else None}))
        done[fingerprint] = coalesced
        part = widen(run_pass(coalesced, ("reject_subgraphs", {"cache": verdicts})), problem)
        key = _figures(part)
        figures.append(_entry(name, key, start))
        if best_key is None or _rank(key, ranking) < _rank(best_key, ranking):
            best, best_key, winner = part, key, name
        if _at_bound(best_key, bound):  # no member beats it in any figure: the rest could tie
            break
    assert best is not None and best_key is not None
    return best, best_key, winner


def _placement(problem: Problem, objective: str | None) -> Partition:
    """The fast answer on a placement instance: the throughput heuristic, or the latency one
    (imported here: the throughput engine imports networkx, which nothing else of auto needs,
    a tenth of a CPU second)."""
    if objective == "latency":
        from clusterkit.engines.latency import run_latency_heuristic
        return run_latency_heuristic(problem)
    from clusterkit.engines.throughput import run_heuristic
    return run_heuristic(problem)


def _dropped_member(problem: Problem, options: dict[str, Any],
                    state: tuple[Partition, Figures, str], ranking: str,
                    figures: list[dict[str, Any]]) -> tuple[Partition, Figures, str]:
    """The member :data:`DROPPED` (:func:`_dropped_after` with ``auto``'s ``options``),
    recorded in ``figures`` and kept over ``state`` (the best so far) when better."""
    start = time.perf_counter()
    part = _dropped_after(problem, options)
    key = _figures(part)
    figures.append(_entry(DROPPED, key, start))
    return (part, key, DROPPED) if _rank(key, ranking) < _rank(state[1], ranking) else state


def _dropped_after(problem: Problem, options: dict[str, Any]) -> Partition:
    """``auto`` on ``problem`` without its ``min_size``, then every offloaded cluster below
    it sent to the fallback: what dropping the small clusters afterwards gives."""
    free = dataclasses.replace(  # the limits rebuilt from the loosest ones, without min_size
        problem.with_limits(min_size=1, max_size=problem.limits.loosest_max,
                            max_const_bytes=problem.limits.loosest_bytes),
        constraints=dataclasses.replace(problem.constraints, min_size=1))
    part = run(free, **options)
    labels = part.assignment()
    devices = enforce_min_size(problem, labels, part.device_indices()[labels])
    reasons = dict.fromkeys(np.flatnonzero(
        (devices < 0) & (part.device_indices()[labels] >= 0)).tolist(), BELOW_MIN_SIZE)
    return part.derive(labels, devices, problem=problem, reasons=reasons)


def _entry(name: str, key: Figures, start: float) -> dict[str, Any]:
    """A member's record in ``info["auto"]``: its figures and the seconds since ``start``."""
    return {"name": name, "fallback_nodes": key[0], "cut_bytes": key[1], "partitions": key[2],
            "cut_bytes_estimated": key[3], "cut_tensors_unknown_size": key[4],
            "seconds": round(time.perf_counter() - start, 6)}


def _figures(part: Partition) -> Figures:
    """(fallback nodes, cut_bytes, partitions, the cut with every symbolic dimension at 1,
    cut tensors of unknown size): the figures ``auto`` ranks its members by (:func:`_rank`)."""
    m = part.metrics()
    return (*part.figures(), int(m["cut_bytes_estimated"]), int(m["cut_tensors_unknown_size"]))


def _at_bound(key: Figures, bound: tuple[int, int, int] | None) -> bool:
    """Whether ``key`` reaches the figures' lower bound and its estimated cut adds nothing to
    its known one (a cut tensor sized only through symbolic dimensions would let a later
    member at the bound have the lower estimate; tensors with no size at all estimate to
    nothing for every member, so they do not keep the portfolio going)."""
    return key[:3] == bound and key[3] == key[1]


def _polish_steps(problem: Problem, state: tuple[Partition, Figures, str],
                  goal: tuple[tuple[int, int, int] | None, str], polish: tuple[float, int],
                  verdicts: dict, figures: list[dict[str, Any]]
                  ) -> tuple[Partition, Figures, str]:
    """The refinement, then the CP-SAT polish (``polish``: its deterministic seconds and the
    node limit), each when the best so far may still improve (``goal``: the bound and the
    ranking); each is recorded in ``figures`` and kept when better. Returns the best
    partition, its figures and its member name."""
    best, best_key, winner = state
    bound, ranking = goal
    seconds, limit = polish
    if not _at_bound(best_key, bound):
        start = time.perf_counter()
        part = run_passes(best, [("refine", {}), ("reject_subgraphs", {"cache": verdicts})])
        key = _figures(part)
        figures.append(_entry("refine", key, start))
        if _rank(key, ranking) < _rank(best_key, ranking):
            best, best_key, winner = part, key, "refine"
    if problem.n <= limit and not _within(best_key, bound, POLISH_GAIN):
        start = time.perf_counter()
        polished = _polish(problem, best, seconds, verdicts)
        if polished is not None:
            key = _figures(polished)
            figures.append(_entry("cpsat-polish", key, start))
            if _rank(key, ranking) < _rank(best_key, ranking):
                best, best_key, winner = polished, key, "cpsat-polish"
    return best, best_key, winner


def _polish(problem: Problem, best: Partition, seconds: float,
            verdicts: dict) -> Partition | None:
    """CP-SAT on the cut objective from ``best`` for ``seconds`` deterministic seconds (its
    ``work_limit``: the same answer on any machine; the wall clock only guards against a runaway,
    as for the placement engine's solves), with the front door's rejections applied
    (``verdicts``: the run's cache of them); None when it finds
    nothing."""
    options = {"objective": "cut", "work_limit": seconds, "warm_start": best, "method": "full",
               "time_limit": POLISH_GUARD[0] * seconds + POLISH_GUARD[1]}
    try:
        return run_pipeline(problem, get_strategy("cpsat"), options,
                            post=[("reject_subgraphs", {"cache": verdicts})])
    except StrategyError:
        return None


def _within(key: Figures, bound: tuple[int, int, int] | None, share: float) -> bool:
    """Whether ``key`` is proven within ``share`` of the optimum cut (at the fewest fallback
    nodes), so that no search could gain more."""
    return bound is not None and key[0] == bound[0] and key[1] <= bound[1] * (1 + share)


def _ranking(problem: Problem, prefer: Prefer) -> Prefer:
    """``prefer``, except that a restrictive device (a stateful selector or limits of its own,
    :meth:`~clusterkit.constraints.acceptance.Acceptance.restrictive`) ranks partitions before
    cut: its clusters are cut by its own rule, and the growth it is written for (``mxnet``)
    keeps them whole where a lower-cut member splits them into more partitions."""
    return "partitions" if prefer == "partitions" or acceptance(problem).any_restrictive \
        else "cut"


def _rank(key: Figures, ranking: str) -> tuple[int, ...]:
    """A member's figures in the order ``ranking`` compares them (fallback nodes first): the
    known cut bytes, then the estimate with every symbolic dimension at 1 (which only breaks
    their ties), before partitions with ``"cut"``, after them with ``"partitions"``; the count
    of cut tensors of unknown size breaks the remaining ties."""
    if ranking == "cut":
        return key[0], key[1], key[3], key[2], key[4]
    return key[0], key[2], key[1], key[3], key[4]


def _raw(name: str, prob: Problem, names: set[str], shared: dict[str, Any]) -> Partition:
    """The member's own partition. ``cycles`` and ``cycles+merge_non_adjacent`` share one
    contraction when both are members (the non-adjacent merges follow it), and
    ``cycles+levels`` then starts from a copy of its graph (run when its turn comes), also
    when ``cycles`` runs without its pair (then at once above :data:`SCALE_LIMIT` nodes, for
    the peak memory: its seconds are counted in ``cycles``'s)."""
    if name in shared:
        got = shared.pop(name)
        return got() if callable(got) else got
    base = name.removesuffix("@cost")
    strategy, options = portfolio_members()[base]
    pair = PAIRED.get(base)
    levels = name.replace(base, LEVELS)
    if pair is not None and name.replace(base, pair) in names:
        plain, merged, *later = run_both(prob, then_levels=levels in names)
        mine, other = (plain, merged) if base == "cycles" else (merged, plain)
        shared[name.replace(base, pair)] = other
        if later:
            shared[levels] = later[0]
        return mine
    if base == "cycles" and levels in names:  # the pair's partner left out: still one graph
        mine, levels_run = run_then_levels(prob)
        # above SCALE_LIMIT nodes its contraction runs now, before the coalescing holds its
        # node levels (at 1e6 nodes 500 MB of GraphCycles on top of 700 MB of levels)
        now = SCALE_LIMIT is not None and prob.n > SCALE_LIMIT
        shared[levels] = levels_run() if now else levels_run
        return mine
    return get_strategy(strategy)(prob, **options)


def _fingerprint(part: Partition) -> bytes:
    """The partition's clusters as bytes: equal for two members that found the same clusters
    (which are then coalesced once)."""
    return part.assignment().tobytes() + part.device_indices().tobytes()


def _member_names(problem: Problem, chosen: Sequence[str] | None,
                  limits: tuple[int | None, int | None]) -> list[str]:
    """The members to run: ``chosen`` (names or one comma-separated string; an unknown one is a
    :class:`StrategyError`), or by default all, the growth ones up to the first of ``limits``
    nodes and the :data:`SCALE_SKIPPED` ones up to the second."""
    known = portfolio_members()
    if chosen is None:
        growth = growth_members()
        growth_limit, scale_limit = limits
        return [m for m in known
                if (m not in growth or growth_limit is None or problem.n <= growth_limit)
                and (m not in SCALE_SKIPPED or scale_limit is None
                     or problem.n <= scale_limit)]
    if isinstance(chosen, str):
        chosen = [m.strip() for m in chosen.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in known]
    if unknown or not chosen:
        raise StrategyError(f"auto: unknown member {unknown[0]!r} (known: "
                            f"{', '.join(known)})" if unknown else "auto: no members given")
    return list(chosen)
