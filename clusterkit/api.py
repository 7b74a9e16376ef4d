"""The library's front door: load, compile constraints, run a strategy, validate.

Strategy options are passed as keywords straight to the strategy. The front door's own
parameters are keyword-only and their names (:data:`FRONT_DOOR_PARAMETERS`) are reserved: a
strategy that declares an option with one of them is refused, so an option can never be taken
by the front door instead of reaching the strategy.

``devices`` chooses the device of a node that several devices take: ``"priority"`` (the
default, HETERO's contract: the first device in priority order) or ``"cost"`` (see
:func:`run_strategy`). A strategy that declares a ``devices`` option itself (``auto``) gets the
mode and chooses in its own way.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable, Iterable, Mapping

from clusterkit._deprecated import keyword_only_after, module_getattr
from clusterkit.constraints.core import Constraints, Problem
from clusterkit.engines import get_strategy, registered_specs, strategy_spec
from clusterkit.errors import StrategyError
from clusterkit.graph.core import Graph
from clusterkit.io.loader import load_graph
from clusterkit.modes import DeviceMode
from clusterkit.passes.devices import check_mode, widen
from clusterkit.passes.manager import Pass, run_pipeline
from clusterkit.result.model import Partition
from clusterkit.selection.protocol import SubgraphProperty
from clusterkit.selection.specs import parse_selectors

#: names of :func:`partition`'s and :func:`run_strategy`'s own parameters; no strategy option
#: may use one
FRONT_DOOR_PARAMETERS = ("strategy", "constraints", "fallback", "selector", "validate",
                         "coalesce_after")


def _self_placing() -> tuple[str, ...]:
    """The strategies that choose each node's device by their own objective (their spec's
    ``places_devices``): ``devices`` leaves them be."""
    return tuple(spec.name for spec in registered_specs() if spec.places_devices)


def _self_placing_now(name: str) -> tuple[str, ...]:
    """``SELF_PLACING``: :func:`_self_placing` when read (the registry may have grown)."""
    if name == "SELF_PLACING":
        return _self_placing()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: the helpers' old public names (deprecated, with a warning): old -> new
_RENAMED = {name: f"_{name}" for name in ("resolve_selectors", "selector_label",
                                          "check_options", "self_placing")}
__getattr__ = module_getattr(__name__, _RENAMED, globals(), fallback=_self_placing_now)


@keyword_only_after(2)
def make_problem(model: Any, selectors: str | SubgraphProperty | Iterable[str | SubgraphProperty],
                 constraints: Constraints | None = None, fallback: str = "cpu") -> Problem:
    """Load ``model`` and compile ``constraints`` (default: :meth:`Constraints.default`) with
    the devices of ``selectors`` (specs or properties, priority order)."""
    graph: Graph = load_graph(model)
    cons = Constraints.default() if constraints is None else constraints
    return cons.compile(graph, _resolve_selectors(selectors), fallback=fallback)


def _resolve_selectors(selectors: str | SubgraphProperty | Iterable[str | SubgraphProperty]
                       ) -> list[SubgraphProperty]:
    """Selector specs and properties (one, or a list of either, priority order) → properties."""
    if isinstance(selectors, (str, SubgraphProperty)):
        selectors = [selectors]
    selectors = list(selectors)
    specs = [s for s in selectors if isinstance(s, str)]
    parsed = iter(parse_selectors(specs))
    return [next(parsed) if isinstance(s, str) else s for s in selectors]


def _selector_label(selectors: str | SubgraphProperty | Iterable[str | SubgraphProperty]) -> str:
    """The ``selector`` field of a partition made with ``selectors`` (specs as written)."""
    if isinstance(selectors, (str, SubgraphProperty)):
        selectors = [selectors]
    return " ".join(s if isinstance(s, str) else repr(s) for s in selectors)


def _check_options(strategy: str, func: Callable, options: Mapping[str, Any]) -> None:
    """Refuse an option ``strategy`` does not take, and a strategy whose own option has the
    name of a front-door parameter; each error names the option."""
    params = inspect.signature(func).parameters
    clash = [k for k in params if k in FRONT_DOOR_PARAMETERS]
    if clash:
        raise StrategyError(f"strategy {strategy!r} has an option {clash[0]!r}, which is the name"
                            " of a front-door parameter; rename the option")
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(options) - set(params))
    if unknown:
        allowed = ", ".join(k for k in params if k != "problem") or "none"
        hint = ("; the objectives are auto's and cpsat's (--strategy auto or cpsat)"
                if unknown[0] == "objective" else "")
        raise StrategyError(f"strategy {strategy!r} has no option {unknown[0]!r} "
                            f"(options: {allowed}){hint}")


def run_strategy(problem: Problem, strategy: str, /, *, selector: str = "",
                 validate: bool = True, coalesce_after: bool = False,
                 devices: DeviceMode | None = None, **options: Any) -> Partition:
    """Run ``strategy`` on a compiled problem with its ``options``; the result is timed (its
    ``seconds`` include the time the selectors took answering while the problem was compiled)
    and (by default) validated. With ``coalesce_after``, clusters of one device are then merged
    while the partition stays valid (:mod:`clusterkit.passes.coalesce`: never raises cut_bytes or
    partitions). ``selector`` labels the result. Unknown options are an error naming the
    strategy.

    ``devices="cost"`` (with two or more devices): the strategy also runs on the problem
    narrowed by :func:`clusterkit.passes.devices.choose_devices` (each node on the device that
    lowers the cut) and the result is the better by (fallback nodes, cut_bytes, partitions), as
    ``auto`` and cpsat's ``cut`` objective rank them: never more fallback nodes than
    ``"priority"``, and with as many never a larger cut; ``info["devices"]`` says which won.
    Strategies whose spec ``places_devices`` (:func:`_self_placing`) choose devices themselves
    and are run as they are. A strategy that declares a ``devices`` option gets the mode
    instead; ``None`` (the default) leaves it its own default, and means ``"priority"`` for
    every other strategy."""
    func = get_strategy(strategy)
    _check_options(strategy, func, options)
    if devices is not None:
        check_mode(devices)
    start = time.perf_counter()
    takes_devices = "devices" in inspect.signature(func).parameters
    if takes_devices and devices is not None:
        options = {**options, "devices": devices}
    post = _post_passes(coalesce_after)
    result = run_pipeline(problem, func, options, post=post)
    if (devices == "cost" and len(problem.devices) > 1
            and not strategy_spec(strategy).places_devices and not takes_devices):
        result = _cost_choice(problem, func, options, post, result)
    # the selectors' answers on the graph (asked while compiling) are part of partitioning
    seconds = time.perf_counter() - start + getattr(problem, "selector_seconds", 0.0)
    label = selector or result.selector or ";".join(repr(p) for p in problem.properties)
    result = result.derive(strategy=strategy, selector=label, seconds=seconds)
    if validate:
        result.validate()
    return result


def _post_passes(coalesce_after: bool) -> list[Pass]:
    """The closing passes of every run: the optional coalescing, the devices' rejections
    (clusters a device refuses whole go to the fallback)."""
    steps: list[Pass] = [("coalesce", {})] if coalesce_after else []
    return [*steps, ("reject_subgraphs", {})]


def _cost_choice(problem: Problem, func: Callable, options: Mapping[str, Any],
                 post: list[Pass], priority: Partition) -> Partition:
    """The better of ``priority`` and the strategy's partition of the cost-narrowed problem
    (rewrapped onto ``problem``)."""
    cost = widen(run_pipeline(problem, func, dict(options), post=post,
                              pre=[("choose_devices", {"mode": "cost"})]),
                 problem)
    kp, kc = priority.figures(), cost.figures()
    best = cost if kc < kp else priority
    return best.derive(info={"devices": {
        "mode": "cost", "chosen": "cost" if kc < kp else "priority",
        "priority_cut_bytes": kp[1], "cost_cut_bytes": kc[1]}})


@keyword_only_after(2)
def partition(model: Any, selectors: str | SubgraphProperty | Iterable[str | SubgraphProperty],
              /, strategy: str = "auto", *, constraints: Constraints | None = None,
              fallback: str = "cpu", coalesce_after: bool = False,
              devices: DeviceMode | None = None,
              **options: Any) -> Partition:
    """Partition ``model`` (path, ModelProto, networkx DiGraph or Graph) for the devices of
    ``selectors`` (specs or properties, one or a list) with ``strategy`` and its ``options``;
    returns a validated :class:`Partition` (``coalesce_after`` and ``devices`` as for
    :func:`run_strategy`)."""
    problem = make_problem(model, selectors, constraints=constraints, fallback=fallback)
    return run_strategy(problem, strategy, selector=_selector_label(selectors),
                        coalesce_after=coalesce_after, devices=devices, **options)
