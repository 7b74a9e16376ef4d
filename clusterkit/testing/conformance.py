"""A conformance kit for selectors, in the spirit of scikit-learn's ``check_estimator``.

Each protocol rule is a named check that runs a selector (or a property, a selector class, or a
zero-argument factory) on real graphs and raises :class:`ConformanceError` naming the graph and
node at fault. :data:`CHECKS` lists them as ``(name, function)`` pairs, so a test suite can give
every rule its own case (``pytest.mark.parametrize("name, check", CHECKS)``), and
:func:`check_selector` runs them all in one pass over the graphs:

- ``bool``: ``select``/``select_input``/``select_output`` return a ``bool``;
- ``raises``: no protocol method raises;
- ``no-mutation``: nodes (name, op, attrs, inputs, outputs, ...), tensors and the graph's inputs
  and outputs are unchanged after all calls (a deep snapshot is compared);
- ``filter-subset``: ``filter`` returns a subset of its candidates, without duplicates;
- ``deterministic``: two fresh selectors give the same answers (per node, and along an
  MXNet-style growth from each seed);
- ``reset``: after ``reset`` a used selector answers like a fresh one (judged only on graphs
  where the selector was deterministic);
- ``mask``: ``supported_mask`` (when not ``None``) is a bool array equal to ``select`` of fresh
  selectors; for a property ``query(graph)`` too;
- ``explain``: when the subject has ``explain(node)``, it returns a ``str`` exactly for refused
  nodes and ``None`` for taken ones;
- ``property``: ``create_subgraph_selector`` returns a new :class:`SubgraphSelector` per call and
  ``value_inputs`` maps op types to tuples of non-negative input positions;
- ``subgraph-node``: a property's ``create_subgraph_node`` on the real subgraphs the growths make
  (within its declared limits) returns a node or ``None`` (a rejection), never raises, and does
  not reject every one of them;
- ``limits``: a property's declared limits (``max_nodes``, ``min_nodes``, ``max_const_bytes``)
  are well formed and not contradictory, and every cluster the strategies
  (:data:`LIMIT_STRATEGIES`) give the device keeps them.

A rule with nothing to judge is ``n/a``, never a pass: a subject that is not a property for the
property rules, one without ``explain`` for that rule, and a rule whose calls were never made (a
``query`` that raised before any ``select``, a selector that takes no node, so that no growth
ever reached ``filter`` or ``reset``) with the reason (:attr:`RuleResult.reason`).

A check run alone makes only the calls its rule needs; when one of those calls raises (or a
factory returns no selector) the rule cannot be judged, and that failure is reported with it.
A property is queried (``query(graph)``) before its selectors are used on a graph, as
:meth:`Constraints.compile` does; a selector with a ``bind(graph)`` method is bound first.
"""

from __future__ import annotations

import copy
import inspect
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from clusterkit.errors import SelectorError
from clusterkit.graph.core import Graph, Node
from clusterkit.io.loader import load_graph
from clusterkit.selection.protocol import SubgraphProperty, SubgraphSelector, describe

#: Light-set models of the onnx package, used when no graphs are given.
DEFAULT_MODELS = ("bvlc_alexnet", "squeezenet", "inception_v1", "shufflenet")
RULES = ("bool", "raises", "no-mutation", "filter-subset", "deterministic", "reset", "mask",
         "explain", "property", "subgraph-node", "limits")
#: the strategies whose partitions the ``limits`` rule checks
LIMIT_STRATEGIES = ("cycles", "longest-path", "mxnet", "hetero", "auto")
#: What each rule needs exercised: the property, ``select`` on every node, the masks,
#: ``explain``, and MXNet-style growths (which call ``filter`` and ``reset``).
_PHASES = {
    "bool": {"select", "growth"},
    "raises": {"property", "select", "mask", "explain", "growth", "subgraph"},
    "no-mutation": {"property", "select", "mask", "explain", "growth", "subgraph"},
    "filter-subset": {"select", "growth"}, "deterministic": {"select", "growth"},
    "reset": {"select", "growth"}, "mask": {"select", "mask"}, "explain": {"select", "explain"},
    "property": {"property", "select"},
    "subgraph-node": {"select", "growth", "subgraph"}, "limits": {"limits"},
}
#: why a rule was not exercised, when nothing it judges was ever called
NEVER_CALLED = {
    "bool": "select, select_input and select_output never answered",
    "raises": "no protocol method was called",
    "no-mutation": "no protocol method was called",
    "filter-subset": "no growth took a node, so filter never ran",
    "deterministic": "no answers of two fresh selectors to compare",
    "reset": "no growth to repeat after reset (none took a node, or it was not deterministic)",
    "mask": "supported_mask returned None, and no query answered",
    "explain": "explain never answered",
    "property": "create_subgraph_selector never answered",
    "subgraph-node": "no growth made a subgraph within the declared limits",
}


class ConformanceError(SelectorError, AssertionError):
    """A selector broke protocol rules; ``failures`` lists ``(rule, graph, message)``."""

    def __init__(self, subject: str, failures: list[tuple[str, str, str]], per_rule: int = 5,
                 check: str = "check_selector"):
        self.subject = subject
        self.failures = failures
        rules = sorted({r for r, _, _ in failures}, key=RULES.index)
        lines = [f"{check}({subject}): {len(rules)} rule(s) failed: {', '.join(rules)}"]
        for rule in rules:
            mine = [(g, m) for r, g, m in failures if r == rule]
            for g, m in mine[:per_rule]:
                lines.append(f"  [{rule}] {g}: {m}")
            if len(mine) > per_rule:
                lines.append(f"  [{rule}] ... and {len(mine) - per_rule} more")
        super().__init__("\n".join(lines))

    @property
    def rules(self) -> list[str]:
        """The failed rules, in :data:`RULES` order."""
        return sorted({r for r, _, _ in self.failures}, key=RULES.index)


@dataclass
class ConformanceReport:
    """What a passing check covered: the graphs, nodes, protocol calls, growth seeds and the
    rules that applied to the subject."""

    subject: str
    graphs: list[str] = field(default_factory=list)
    nodes: int = 0
    calls: int = 0
    seeds: int = 0
    rules: tuple[str, ...] = RULES


def default_graphs() -> list[Graph]:
    """A few real models of the onnx package's light set, freshly loaded."""
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return [load_graph(str(light / f"light_{name}.onnx")) for name in DEFAULT_MODELS]


def check_selector(subject: Any, graphs: Iterable[Any] | None = None, *, max_seeds: int = 32,
                   growth: int = 8) -> ConformanceReport:
    """Run ``subject`` through every rule of :data:`CHECKS` on ``graphs`` (anything
    :func:`~clusterkit.load_graph` reads; default :func:`default_graphs`) in one pass.
    ``max_seeds`` nodes per graph start an MXNet-style growth of up to ``growth`` nodes.
    Returns a :class:`ConformanceReport`; raises :class:`ConformanceError` on any failure."""
    return _check(subject, graphs, RULES, max_seeds, growth, "check_selector")


# ====================================================================== the named checks
def _named_check(rule: str, doc: str) -> Callable[..., ConformanceReport]:
    """The check of one rule: ``check_<rule>(subject, graphs=None, *, max_seeds, growth)``."""
    name = "check_" + rule.replace("-", "_")

    def run_check(subject: Any, graphs: Iterable[Any] | None = None, *, max_seeds: int = 32,
                  growth: int = 8) -> ConformanceReport:
        return _check(subject, graphs, (rule,), max_seeds, growth, name)

    run_check.__name__ = run_check.__qualname__ = name
    run_check.__doc__ = f"{doc} Returns a :class:`ConformanceReport`; raises " \
                        ":class:`ConformanceError` when the rule is broken."
    return run_check


#: What each rule asks, in :data:`RULES` order (the docstring of its check).
RULE_DOCS = {
    "bool": "``select``/``select_input``/``select_output`` return a bool.",
    "raises": "No protocol method raises.",
    "no-mutation": "The graph (nodes, tensors, inputs, outputs) is unchanged by every call.",
    "filter-subset": "``filter`` returns a subset of its candidates, without duplicates.",
    "deterministic": "Two fresh selectors answer alike, per node and along each growth.",
    "reset": "After ``reset`` a used selector answers like a fresh one (where deterministic).",
    "mask": "``supported_mask`` (and a property's ``query``) equals ``select``.",
    "explain": "``explain`` returns a str exactly for the nodes ``select`` refuses.",
    "property": "A fresh selector per ``create_subgraph_selector``; well-formed value_inputs.",
    "subgraph-node": "``create_subgraph_node`` on real subgraphs returns a node or None, never "
                     "raises, and accepts some.",
    "limits": "Declared limits are well formed and kept by every strategy's clusters.",
}

#: Every rule as ``(name, check)``, in :data:`RULES` order; each check takes the subject and
#: optionally ``graphs``, ``max_seeds`` and ``growth``, like :func:`check_selector`.
CHECKS: list[tuple[str, Callable[..., ConformanceReport]]] = [
    (rule, _named_check(rule, RULE_DOCS[rule])) for rule in RULES]
(check_bool, check_raises, check_no_mutation, check_filter_subset, check_deterministic,
 check_reset, check_mask, check_explain, check_property, check_subgraph_node,
 check_limits) = (check for _, check in CHECKS)


def _check(subject: Any, graphs: Iterable[Any] | None, rules: Sequence[str], max_seeds: int,
           growth: int, check: str) -> ConformanceReport:
    """Exercise ``subject`` as ``rules`` need on every graph and report those rules."""
    run, report = _run_rules(subject, graphs, rules, max_seeds, growth, check)
    failures = [f for f in run.failures if f[0] in rules or f in run.blocking]
    if failures:
        raise ConformanceError(run.name, failures, check=check)
    return report


def _run_rules(subject: Any, graphs: Iterable[Any] | None, rules: Sequence[str],
               max_seeds: int, growth: int, check: str) -> tuple["_Run", ConformanceReport]:
    """Exercise ``subject`` as ``rules`` need on every graph; the run (with its failures) and
    what it covered (``rules``: those that apply to the subject)."""
    run = _Run(subject)
    run.phases = set().union(*(_PHASES[r] for r in rules))
    graph_list = default_graphs() if graphs is None else [load_graph(g) for g in graphs]
    if not graph_list:
        raise SelectorError(f"{check} needs at least one graph")
    phases = set().union(*(_PHASES[r] for r in rules))
    if "property" in phases:
        _check_property(run)
    if "limits" in phases:
        _check_declared_limits(run)
    for graph in graph_list:
        _check_graph(run, graph, phases, max_seeds, growth)
        if "limits" in phases and run.limits_ok:
            _check_strategy_limits(run, graph)
    if "subgraph" in phases and run.prop is not None:
        _check_some_accepted(run)
    applies = tuple(r for r in rules if (r != "explain" or callable(run.explainer))
                    and (r not in PROPERTY_RULES or run.prop is not None)
                    and (run.judged[r] or any(f[0] == r for f in run.failures)))
    return run, ConformanceReport(run.name, [g.name for g in graph_list],
                                  sum(g.n for g in graph_list), run.calls, run.seeds, applies)


#: the rules only a :class:`SubgraphProperty` has anything for
PROPERTY_RULES = ("property", "subgraph-node", "limits")


@dataclass
class RuleResult:
    """One rule's verdict: ``status`` is ``"pass"``, ``"fail"`` or ``"n/a"`` (nothing to judge:
    ``reason`` says why, such as no ``explain``, not a property, or its calls never made);
    ``failures`` as ``graph: text``."""

    rule: str
    status: str
    failures: list[str] = field(default_factory=list)
    reason: str = ""

    @property
    def doc(self) -> str:
        """What the rule asks, as plain text."""
        return RULE_DOCS[self.rule].replace("``", "")


def rule_results(subject: Any, graphs: Iterable[Any] | None = None, *, max_seeds: int = 32,
                 growth: int = 8) -> tuple[ConformanceReport, list[RuleResult]]:
    """Every rule of :data:`RULES` judged in one pass, as :func:`check_selector` does, without
    raising: what the pass covered and one :class:`RuleResult` per rule."""
    run, report = _run_rules(subject, graphs, RULES, max_seeds, growth, "check_selector")
    out = []
    for rule in RULES:
        mine = [f"{g}: {m}" for r, g, m in run.failures if r == rule]
        status = "fail" if mine else ("pass" if rule in report.rules else "n/a")
        out.append(RuleResult(rule, status, mine, "" if status != "n/a" else _why_not(run, rule)))
    return report, out


def _why_not(run: "_Run", rule: str) -> str:
    """Why ``rule`` was not judged on the subject of ``run``."""
    if rule in PROPERTY_RULES and run.prop is None:
        return "a selector, not a SubgraphProperty"
    if rule == "explain" and not callable(run.explainer):
        return "the selector has no explain(node)"
    if rule == "limits" and not run.judged["limits"]:
        return "the property declares no limits"
    return f"never called ({NEVER_CALLED[rule]})"


# ====================================================================== calling the subject
class _Abort(Exception):
    """A protocol call raised; the current sequence stops."""


class _Run:
    """The subject under test, a factory of fresh selectors, and the failures recorded."""

    def __init__(self, subject: Any):
        self.subject = subject
        self.failures: list[tuple[str, str, str]] = []
        self.blocking: list[tuple[str, str, str]] = []  # failures that stopped a sequence
        self.calls = 0
        self.seeds = 0
        self.graph_name = "(any graph)"
        self.prop: SubgraphProperty | None = None
        self.judged: Counter[str] = Counter()  # per rule, how many answers it judged
        self.limits_ok = False  # declared limits well formed, to be checked on partitions
        self.subgraphs = {"accepted": 0, "rejected": 0}
        self.phases: set[str] = set()
        if isinstance(subject, SubgraphProperty):
            self.prop = subject
            self.name = repr(subject)
            self.factory: Callable[[], Any] = subject.create_subgraph_selector
        elif isinstance(subject, SubgraphSelector):
            self.name = describe(subject)
            pristine = copy.deepcopy(subject)
            self.factory = lambda: copy.deepcopy(pristine)
        elif inspect.isclass(subject) or callable(subject):
            self.name = getattr(subject, "__name__", repr(subject))
            self.factory = subject
        else:
            raise SelectorError(f"check_selector: {subject!r} is not a selector, property, "
                                "selector class or factory")
        self.explainer = getattr(subject, "explain", None)

    def fail(self, rule: str, message: str, blocking: bool = False) -> None:
        entry = (rule, self.graph_name, message)
        if entry not in self.failures:
            self.failures.append(entry)
        if blocking and entry not in self.blocking:
            self.blocking.append(entry)

    def fresh(self, graph: Graph) -> Any:
        """A new selector from the subject, bound to ``graph`` when it can be."""
        try:
            sel = self.factory()
        except Exception as exc:
            self.fail("raises", f"creating a selector raised {exc!r}", blocking=True)
            raise _Abort from exc
        if not isinstance(sel, SubgraphSelector):
            self.fail("property", f"the factory returned {type(sel).__name__}, not a "
                                  "SubgraphSelector", blocking=True)
            raise _Abort
        bind = getattr(sel, "bind", None)
        if callable(bind):
            bind(graph)
        return sel

    def call(self, sel: Any, method: str, node: Node, new: Node | None = None) -> bool:
        """``sel.method(node[, new])`` as a bool; a raise or a non-bool answer is recorded."""
        self.calls += 1
        self.judged.update(("raises", "no-mutation"))
        args = (node,) if new is None else (node, new)
        label = node.name if new is None else f"{node.name!r} -> {new.name!r}"
        try:
            value = getattr(sel, method)(*args)
        except Exception as exc:
            self.fail("raises", f"{method} raised {exc!r} on node {label}", blocking=True)
            raise _Abort from exc
        self.judged["bool"] += 1
        if not isinstance(value, (bool, np.bool_)):
            self.fail("bool", f"{method} returned {type(value).__name__} {value!r} on node "
                              f"{label} ({(new or node).op_type}); expected a bool")
            return bool(value) if _truthable(value) else False
        return bool(value)


# ====================================================================== the rules
def _check_property(run: _Run) -> None:
    """``property``: fresh selectors per call; ``value_inputs`` well formed."""
    prop = run.prop
    if prop is None:
        return
    run.judged.update(("raises", "no-mutation"))
    try:
        one, two = prop.create_subgraph_selector(), prop.create_subgraph_selector()
    except Exception as exc:
        run.fail("raises", f"create_subgraph_selector raised {exc!r}", blocking=True)
        return
    run.judged["property"] += 1
    if one is two:
        run.fail("property", "create_subgraph_selector returned the same object twice; "
                             "engines need a fresh selector per growing cluster")
    vi = getattr(prop, "value_inputs", {})
    if not isinstance(vi, dict):
        run.fail("property", f"value_inputs is a {type(vi).__name__}, not a dict")
        return
    for op, pos in vi.items():
        if not isinstance(op, str) or not isinstance(pos, (tuple, list)) or not all(
                isinstance(p, (int, np.integer)) and p >= 0 for p in pos):
            run.fail("property", f"value_inputs[{op!r}] = {pos!r}: expected a tuple of"
                                 " non-negative input positions")


def _check_subgraph_node(run: _Run, graph: Graph, members: list[int], seed: Node) -> None:
    """``subgraph-node``: ``create_subgraph_node`` on the subgraph a growth from ``seed`` kept
    (skipped outside the property's declared size limits: engines never offer those)."""
    prop = run.prop
    if prop is None or not members:
        return
    lo, hi = getattr(prop, "min_nodes", None), getattr(prop, "max_nodes", None)
    if (isinstance(lo, int) and len(members) < lo) or (isinstance(hi, int) and len(members) > hi):
        return
    from clusterkit.graph.subgraph import Subgraph, SubgraphNode

    run.judged.update(("raises", "no-mutation"))
    where = f"the {len(members)}-node subgraph grown from {seed.name!r}"
    try:
        made = prop.create_subgraph_node(Subgraph.from_nodes(graph, members, prop.device, 0))
    except Exception as exc:
        run.fail("raises", f"create_subgraph_node raised {exc!r} on {where}")
        run.fail("subgraph-node", f"create_subgraph_node raised {exc!r} on {where}; a "
                                  "partition with this device fails")
        return
    run.judged["subgraph-node"] += 1
    if made is None:
        run.subgraphs["rejected"] += 1
    elif not isinstance(made, SubgraphNode):
        run.fail("subgraph-node", f"create_subgraph_node returned {type(made).__name__} for "
                                  f"{where}; expected a SubgraphNode or None (a rejection)")
    else:
        run.subgraphs["accepted"] += 1


def _check_some_accepted(run: _Run) -> None:
    """``subgraph-node``: a property that rejects every subgraph it is offered gets no cluster."""
    rejected = run.subgraphs["rejected"]
    if rejected and not run.subgraphs["accepted"]:
        run.graph_name = "(every graph)"
        run.fail("subgraph-node", f"create_subgraph_node rejected all {rejected} subgraphs it "
                                  "was offered: the device would never get a cluster (declare "
                                  "min_nodes or max_nodes for a size rule)")


def _check_declared_limits(run: _Run) -> None:
    """``limits``: each declared limit None or a non-negative int (min_nodes at least 1), and
    min_nodes not above max_nodes."""
    prop = run.prop
    if prop is None:
        return
    values = {k: getattr(prop, k, None) for k in ("max_nodes", "min_nodes", "max_const_bytes")}
    if all(v is None for v in values.values()):
        return
    run.judged["limits"] += 1
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (
                1 if key != "max_const_bytes" else 0):
            run.fail("limits", f"{key} = {value!r}: expected None or an integer >= "
                               f"{1 if key != 'max_const_bytes' else 0}")
            return
    lo, hi = values["min_nodes"], values["max_nodes"]
    if lo is not None and hi is not None and lo > hi:
        run.fail("limits", f"min_nodes {lo} is above max_nodes {hi}: no cluster can keep both")
        return
    run.limits_ok = True


def _check_strategy_limits(run: _Run, graph: Graph) -> None:
    """``limits``: every cluster each strategy of :data:`LIMIT_STRATEGIES` gives the device on
    ``graph`` keeps its declared limits (a raising ``create_subgraph_node`` is that rule's)."""
    from clusterkit.api import partition
    from clusterkit.constraints.limits import cluster_const_bytes

    prop = run.prop
    assert prop is not None  # limits_ok is set for properties only
    hi, lo, cap = prop.max_nodes, prop.min_nodes, prop.max_const_bytes
    for strategy in LIMIT_STRATEGIES:
        try:
            part = partition(graph, [prop], strategy=strategy)
        except Exception as exc:
            rule = "subgraph-node" if "create_subgraph_node" in str(exc) else "limits"
            run.fail(rule, f"strategy {strategy} raised {exc}")
            continue
        run.judged["limits"] += 1
        for c in part.clusters:
            if c.device != prop.device:
                continue
            size, held = len(c.nodes), cluster_const_bytes(graph, c.nodes)
            broken = ([f"{size} nodes, above max_nodes {hi}"] if hi is not None and size > hi
                      else []) + ([f"{size} nodes, below min_nodes {lo}"]
                                  if lo is not None and size < lo else [])
            if cap is not None and held > cap:
                broken.append(f"{held:,} bytes of constants, above max_const_bytes {cap:,}")
            for text in broken:
                run.fail("limits", f"strategy {strategy}: cluster {c.id} has {text}")


def _check_graph(run: _Run, graph: Graph, phases: set[str], max_seeds: int,
                 growth: int) -> None:
    """Every phase asked for on one graph, then ``no-mutation``; ``reset`` failures are
    dropped where the selector was not deterministic (reset cannot be judged then)."""
    run.graph_name = graph.name
    before = _snapshot(graph)
    start = len(run.failures)
    try:
        _exercise(run, graph, phases, max_seeds, growth)
    except _Abort:
        pass
    mine = run.failures[start:]
    if any(r == "deterministic" for r, _, _ in mine):
        run.failures[start:] = [f for f in mine if f[0] != "reset"]
    for msg in _diff(before, _snapshot(graph)):
        run.fail("no-mutation", msg)


def _exercise(run: _Run, graph: Graph, phases: set[str], max_seeds: int, growth: int) -> None:
    queried = _query(run, graph)
    first = [run.call(run.fresh(graph), "select", nd) for nd in graph.nodes]
    second = [run.call(run.fresh(graph), "select", nd) for nd in graph.nodes]
    run.judged["deterministic"] += len(first)
    for nd, a, b in zip(graph.nodes, first, second):
        if a != b:
            run.fail("deterministic", f"select on node {nd.name!r} ({nd.op_type}) answered"
                                      f" {a} then {b} on fresh selectors")
    if "mask" in phases:
        _check_masks(run, graph, queried, first)
    if "explain" in phases and callable(run.explainer):
        _check_explain(run, graph, first)
    if "growth" in phases:
        taken = [v for v, ok in enumerate(first) if ok]
        seeds = _spread(taken, max_seeds) + _spread(list(range(graph.n)),
                                                    max(1, max_seeds // 4))
        for v in sorted(set(seeds)):
            run.seeds += 1
            _check_seed(run, graph, v, growth)


def _query(run: _Run, graph: Graph) -> np.ndarray | None:
    """A property's ``query(graph)``, made before its selectors see the graph."""
    if run.prop is None:
        return None
    run.judged.update(("raises", "no-mutation"))
    try:
        return np.asarray(run.prop.query(graph))
    except Exception as exc:  # the selectors are still asked directly, node by node
        run.fail("raises", f"query raised {exc!r}", blocking=True)
        return None


def _check_masks(run: _Run, graph: Graph, queried: np.ndarray | None,
                 first: list[bool]) -> None:
    """``mask``: a property's ``query`` and a selector's ``supported_mask`` equal ``select``."""
    if queried is not None:
        _compare_mask(run, "query", queried, first, graph)
    try:
        mask = run.fresh(graph).supported_mask(graph)
    except _Abort:
        raise
    except Exception as exc:
        run.fail("raises", f"supported_mask raised {exc!r}", blocking=True)
        return
    if mask is not None:
        _compare_mask(run, "supported_mask", np.asarray(mask), first, graph)


def _compare_mask(run: _Run, what: str, mask: np.ndarray, expected: list[bool],
                  graph: Graph) -> None:
    run.judged["mask"] += 1
    if mask.shape != (graph.n,):
        run.fail("mask", f"{what} returned shape {mask.shape}, expected ({graph.n},)")
        return
    if mask.dtype != bool:
        run.fail("mask", f"{what} returned dtype {mask.dtype}, expected bool")
    for v in np.flatnonzero(mask.astype(bool) != np.asarray(expected, dtype=bool))[:5]:
        nd = graph.nodes[int(v)]
        run.fail("mask", f"{what} says {bool(mask[v])} for node {nd.name!r} ({nd.op_type})"
                         f" but select says {expected[v]}")


def _check_explain(run: _Run, graph: Graph, taken: list[bool]) -> None:
    """``explain``: a ``str`` exactly for refused nodes, ``None`` for taken ones."""
    for nd, ok in zip(graph.nodes, taken):
        try:
            why = run.explainer(nd)  # type: ignore[misc]  # callable: the rule runs only then
        except Exception as exc:
            run.fail("raises", f"explain raised {exc!r} on node {nd.name!r}", blocking=True)
            return
        run.judged["explain"] += 1
        if why is not None and not isinstance(why, str):
            run.fail("explain", f"explain returned {type(why).__name__} for node "
                                f"{nd.name!r}; expected str or None")
        elif (why is None) != ok:
            run.fail("explain", f"explain({nd.name!r}) = {why!r} but select says {ok}")


def _check_seed(run: _Run, graph: Graph, v: int, growth: int) -> None:
    """``deterministic`` and ``reset`` along the growth from seed ``v``."""
    node = graph.nodes[v]
    try:
        a = run.fresh(graph)
        run1 = _grow(run, a, graph, v, growth)
        if "subgraph" in run.phases and run1[-1][0] == "filter":
            _check_subgraph_node(run, graph, [u for u in run1[-1][1] if u >= 0], node)
        run3 = _grow(run, run.fresh(graph), graph, v, growth)
    except _Abort:
        return
    grew = len(run1) > 1  # the seed was taken: there is a growth to compare
    run.judged["deterministic"] += grew
    if run1 != run3:
        run.fail("deterministic", f"growth from node {node.name!r} differs between two "
                                  f"fresh selectors at {_first_diff(run1, run3)}")
        return
    try:
        a.reset()
    except Exception as exc:
        run.fail("raises", f"reset raised {exc!r}", blocking=True)
        return
    try:
        run2 = _grow(run, a, graph, v, growth)
    except _Abort:
        return
    run.judged["reset"] += grew
    if run2 != run3:
        run.fail("reset", f"after reset, growth from node {node.name!r} differs from a "
                          f"fresh selector's at {_first_diff(run2, run3)}")


def _grow(run: _Run, sel: Any, graph: Graph, seed: int, growth: int) -> list[tuple]:
    """MXNet-style growth from ``seed``, then ``filter``; returns every answer in call order."""
    nodes, pred, succ = graph.nodes, graph.pred_lists, graph.succ_lists
    ok = run.call(sel, "select", nodes[seed])
    log: list[tuple] = [("select", seed, ok)]
    if not ok:
        return log
    members = [seed]
    queue = [seed]
    while queue and len(members) < growth:
        x = queue.pop(0)
        for method, nbrs in (("select_input", pred[x]), ("select_output", succ[x])):
            for u in nbrs:
                if u in members or len(members) >= growth:
                    continue
                ok = run.call(sel, method, nodes[x], nodes[u])
                log.append((method, x, u, ok))
                if ok:
                    members.append(u)
                    queue.append(u)
    cands = [nodes[u] for u in members]
    run.calls += 1
    try:
        kept = sel.filter(list(cands))
    except Exception as exc:
        run.fail("raises", f"filter raised {exc!r} on a subgraph from {nodes[seed].name!r}",
                 blocking=True)
        raise _Abort from exc
    run.judged["filter-subset"] += 1
    log.append(("filter", tuple(_check_filter(run, kept, cands, nodes[seed]))))
    return log


def _check_filter(run: _Run, kept: Any, cands: list[Node], seed: Node) -> list[int]:
    """``filter-subset``: what ``filter`` kept is a duplicate-free subset of ``cands``."""
    if kept is None or not hasattr(kept, "__iter__"):
        run.fail("filter-subset", f"filter returned {kept!r} for the subgraph from "
                                  f"{seed.name!r}; expected a list of nodes")
        return []
    ids = {id(c) for c in cands}
    seen: set[int] = set()
    out = []
    for nd in kept:
        name = getattr(nd, "name", repr(nd))
        if id(nd) not in ids:
            run.fail("filter-subset", f"filter returned node {name!r}, which was not a "
                                      f"candidate (subgraph from {seed.name!r})")
        elif id(nd) in seen:
            run.fail("filter-subset", f"filter returned node {name!r} twice")
        seen.add(id(nd))
        out.append(getattr(nd, "index", -1))
    return out


def _truthable(value: Any) -> bool:
    try:
        bool(value)
        return True
    except Exception:
        return False


def _spread(items: Sequence[int], k: int) -> list[int]:
    """Up to ``k`` items evenly spread over ``items`` (deterministic)."""
    if len(items) <= k:
        return list(items)
    pos = np.linspace(0, len(items) - 1, k).round().astype(int)
    return [items[i] for i in sorted(set(pos.tolist()))]


def _first_diff(a: list[tuple], b: list[tuple]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"call {i}: {x} vs {y}"
    return f"call {min(len(a), len(b))}: one run made more calls ({len(a)} vs {len(b)})"


# ====================================================================== snapshots
def _freeze(value: Any) -> Any:
    """A comparable deep copy of an attribute value."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), _freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(_freeze(v)) for v in value)))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if hasattr(value, "SerializeToString"):
        return ("proto", type(value).__name__, value.SerializeToString(deterministic=True))
    return ("value", type(value).__name__, repr(value))


def _snapshot(graph: Graph) -> dict:
    nodes = [(nd.index, nd.name, nd.op_type, nd.domain, _freeze(nd.attrs), tuple(nd.inputs),
              tuple(nd.outputs), tuple(nd.implicit_inputs), nd.source_index, nd.affinity,
              nd.is_constant) for nd in graph.nodes]
    tensors = {name: (t.name, _freeze(t.shape), t.dtype, t.nbytes, t.producer,
                      tuple(t.consumers), t.is_constant, t.is_initializer, t.is_input,
                      t.is_output) for name, t in graph.tensors.items()}
    io = (tuple(graph.inputs), tuple(graph.outputs))
    return {"nodes": nodes, "tensors": tensors, "io": io, "count": len(graph.nodes)}


_NODE_FIELDS = ("index", "name", "op_type", "domain", "attrs", "inputs", "outputs",
                "implicit_inputs", "source_index", "affinity", "is_constant")


def _diff(before: dict, after: dict) -> list[str]:
    out = []
    if before["count"] != after["count"]:
        out.append(f"the graph had {before['count']} nodes and now has {after['count']}")
    for a, b in zip(before["nodes"], after["nodes"]):
        if a != b:
            changed = [f for f, x, y in zip(_NODE_FIELDS, a, b) if x != y]
            out.append(f"node {a[1]!r} ({a[2]}) was mutated: {', '.join(changed)} changed")
    for name in sorted(set(before["tensors"]) | set(after["tensors"])):
        if before["tensors"].get(name) != after["tensors"].get(name):
            out.append(f"tensor {name!r} was mutated (or added/removed)")
            break
    if before["io"] != after["io"]:
        out.append("the graph's inputs/outputs were mutated")
    return out
