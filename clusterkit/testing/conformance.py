"""A conformance kit for selectors, in the spirit of scikit-learn's ``check_estimator``.

:func:`check_selector` runs a selector (or a property, a selector class, or a zero-argument
factory) through the protocol's rules on real graphs and raises :class:`ConformanceError`
listing every failed rule with the graph and node at fault:

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
  ``value_inputs`` maps op types to tuples of non-negative input positions.

A property is queried (``query(graph)``) before its selectors are used on a graph, as
:meth:`Constraints.compile` does; a selector with a ``bind(graph)`` method is bound first.
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from clusterkit.errors import SelectorError
from clusterkit.graph.core import Graph, Node
from clusterkit.io.loader import load_graph
from clusterkit.selection.protocol import SubgraphProperty, SubgraphSelector, describe

#: Light-set models (``onnx/backend/test/data/light``) used when no graphs are given.
DEFAULT_MODELS = ("bvlc_alexnet", "squeezenet", "inception_v1", "shufflenet")
RULES = ("bool", "raises", "no-mutation", "filter-subset", "deterministic", "reset", "mask",
         "explain", "property")


class ConformanceError(SelectorError, AssertionError):
    """A selector broke protocol rules; ``failures`` lists ``(rule, graph, message)``."""

    def __init__(self, subject: str, failures: list[tuple[str, str, str]], per_rule: int = 5):
        self.subject = subject
        self.failures = failures
        rules = sorted({r for r, _, _ in failures}, key=RULES.index)
        lines = [f"check_selector({subject}): {len(rules)} rule(s) failed: {', '.join(rules)}"]
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
    """What a passing :func:`check_selector` run covered."""

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
    """Run ``subject`` through the protocol's rules (see the module docstring) on ``graphs``
    (anything :func:`~clusterkit.load_graph` reads; default :func:`default_graphs`).
    ``max_seeds`` nodes per graph start an MXNet-style growth of up to ``growth`` nodes.
    Returns a :class:`ConformanceReport`; raises :class:`ConformanceError` on any failure."""
    run = _Run(subject)
    graph_list = default_graphs() if graphs is None else [load_graph(g) for g in graphs]
    if not graph_list:
        raise SelectorError("check_selector needs at least one graph")
    run.check_property()
    for graph in graph_list:
        run.check_graph(graph, max_seeds, growth)
    if run.failures:
        raise ConformanceError(run.name, run.failures)
    rules = tuple(r for r in RULES if (r != "explain" or callable(run.explainer))
                  and (r != "property" or run.prop is not None))
    return ConformanceReport(run.name, [g.name for g in graph_list],
                             sum(g.n for g in graph_list), run.calls, run.seeds, rules)


# ====================================================================== implementation
class _Abort(Exception):
    """A protocol call raised; the current sequence stops."""


class _Run:
    def __init__(self, subject: Any):
        self.subject = subject
        self.failures: list[tuple[str, str, str]] = []
        self.calls = 0
        self.seeds = 0
        self.graph_name = "(any graph)"
        self.prop: SubgraphProperty | None = None
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

    # ------------------------------------------------------------------ bookkeeping
    def fail(self, rule: str, message: str) -> None:
        entry = (rule, self.graph_name, message)
        if entry not in self.failures:
            self.failures.append(entry)

    def fresh(self, graph: Graph) -> Any:
        try:
            sel = self.factory()
        except Exception as exc:
            self.fail("raises", f"creating a selector raised {exc!r}")
            raise _Abort from exc
        if not isinstance(sel, SubgraphSelector):
            self.fail("property", f"the factory returned {type(sel).__name__}, not a "
                                  "SubgraphSelector")
            raise _Abort
        bind = getattr(sel, "bind", None)
        if callable(bind):
            bind(graph)
        return sel

    def call(self, sel: Any, method: str, node: Node, new: Node | None = None) -> bool:
        self.calls += 1
        args = (node,) if new is None else (node, new)
        label = node.name if new is None else f"{node.name!r} -> {new.name!r}"
        try:
            value = getattr(sel, method)(*args)
        except Exception as exc:
            self.fail("raises", f"{method} raised {exc!r} on node {label}")
            raise _Abort from exc
        if not isinstance(value, (bool, np.bool_)):
            self.fail("bool", f"{method} returned {type(value).__name__} {value!r} on node "
                              f"{label} ({(new or node).op_type}); expected a bool")
            return bool(value) if _truthable(value) else False
        return bool(value)

    # ------------------------------------------------------------------ property rules
    def check_property(self) -> None:
        prop = self.prop
        if prop is None:
            return
        try:
            one, two = prop.create_subgraph_selector(), prop.create_subgraph_selector()
        except Exception as exc:
            self.fail("raises", f"create_subgraph_selector raised {exc!r}")
            return
        if one is two:
            self.fail("property", "create_subgraph_selector returned the same object twice; "
                                  "engines need a fresh selector per growing cluster")
        vi = getattr(prop, "value_inputs", {})
        if not isinstance(vi, dict):
            self.fail("property", f"value_inputs is a {type(vi).__name__}, not a dict")
        else:
            for op, pos in vi.items():
                if not isinstance(op, str) or not isinstance(pos, (tuple, list)) or not all(
                        isinstance(p, (int, np.integer)) and p >= 0 for p in pos):
                    self.fail("property", f"value_inputs[{op!r}] = {pos!r}: expected a tuple of"
                                          " non-negative input positions")

    # ------------------------------------------------------------------ per graph
    def check_graph(self, graph: Graph, max_seeds: int, growth: int) -> None:
        self.graph_name = graph.name
        before = _snapshot(graph)
        start = len(self.failures)
        try:
            self._check_graph(graph, max_seeds, growth)
        except _Abort:
            pass
        mine = self.failures[start:]
        if any(r == "deterministic" for r, _, _ in mine):  # reset cannot be judged then
            self.failures[start:] = [f for f in mine if f[0] != "reset"]
        after = _snapshot(graph)
        for msg in _diff(before, after):
            self.fail("no-mutation", msg)

    def _check_graph(self, graph: Graph, max_seeds: int, growth: int) -> None:
        nodes = graph.nodes
        if self.prop is not None:
            try:
                queried = np.asarray(self.prop.query(graph))
            except Exception as exc:
                self.fail("raises", f"query raised {exc!r}")
                raise _Abort from exc
        else:
            queried = None
        first = [self.call(self.fresh(graph), "select", nd) for nd in nodes]
        second = [self.call(self.fresh(graph), "select", nd) for nd in nodes]
        for nd, a, b in zip(nodes, first, second):
            if a != b:
                self.fail("deterministic", f"select on node {nd.name!r} ({nd.op_type}) answered"
                                           f" {a} then {b} on fresh selectors")
        if queried is not None:
            self._check_mask("query", queried, first, graph)
        try:
            mask = self.fresh(graph).supported_mask(graph)
        except _Abort:
            raise
        except Exception as exc:
            self.fail("raises", f"supported_mask raised {exc!r}")
            mask = None
        if mask is not None:
            self._check_mask("supported_mask", np.asarray(mask), first, graph)
        if callable(self.explainer):
            self._check_explain(graph, first)
        taken = [v for v, ok in enumerate(first) if ok]
        seeds = _spread(taken, max_seeds) + _spread(list(range(graph.n)), max(1, max_seeds // 4))
        for v in sorted(set(seeds)):
            self.seeds += 1
            self._check_seed(graph, v, growth)

    def _check_mask(self, what: str, mask: np.ndarray, expected: list[bool], graph: Graph) -> None:
        if mask.shape != (graph.n,):
            self.fail("mask", f"{what} returned shape {mask.shape}, expected ({graph.n},)")
            return
        if mask.dtype != bool:
            self.fail("mask", f"{what} returned dtype {mask.dtype}, expected bool")
        for v in np.flatnonzero(mask.astype(bool) != np.asarray(expected, dtype=bool))[:5]:
            nd = graph.nodes[int(v)]
            self.fail("mask", f"{what} says {bool(mask[v])} for node {nd.name!r} ({nd.op_type})"
                              f" but select says {expected[v]}")

    def _check_explain(self, graph: Graph, taken: list[bool]) -> None:
        for nd, ok in zip(graph.nodes, taken):
            try:
                why = self.explainer(nd)
            except Exception as exc:
                self.fail("raises", f"explain raised {exc!r} on node {nd.name!r}")
                return
            if why is not None and not isinstance(why, str):
                self.fail("explain", f"explain returned {type(why).__name__} for node "
                                     f"{nd.name!r}; expected str or None")
            elif (why is None) != ok:
                self.fail("explain", f"explain({nd.name!r}) = {why!r} but select says {ok}")

    def _check_seed(self, graph: Graph, v: int, growth: int) -> None:
        node = graph.nodes[v]
        try:
            a = self.fresh(graph)
            run1 = self._grow(a, graph, v, growth)
            b = self.fresh(graph)
            run3 = self._grow(b, graph, v, growth)
        except _Abort:
            return
        if run1 != run3:
            self.fail("deterministic", f"growth from node {node.name!r} differs between two "
                                       f"fresh selectors at {_first_diff(run1, run3)}")
            return
        try:
            a.reset()
        except Exception as exc:
            self.fail("raises", f"reset raised {exc!r}")
            return
        try:
            run2 = self._grow(a, graph, v, growth)
        except _Abort:
            return
        if run2 != run3:
            self.fail("reset", f"after reset, growth from node {node.name!r} differs from a "
                               f"fresh selector's at {_first_diff(run2, run3)}")

    def _grow(self, sel: Any, graph: Graph, seed: int, growth: int) -> list[tuple]:
        """MXNet-style growth from ``seed``; returns every answer in call order."""
        nodes, pred, succ = graph.nodes, graph.pred_lists, graph.succ_lists
        log: list[tuple] = []
        ok = self.call(sel, "select", nodes[seed])
        log.append(("select", seed, ok))
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
                    ok = self.call(sel, method, nodes[x], nodes[u])
                    log.append((method, x, u, ok))
                    if ok:
                        members.append(u)
                        queue.append(u)
        cands = [nodes[u] for u in members]
        self.calls += 1
        try:
            kept = sel.filter(list(cands))
        except Exception as exc:
            self.fail("raises", f"filter raised {exc!r} on a subgraph from {nodes[seed].name!r}")
            raise _Abort from exc
        log.append(("filter", tuple(self._check_filter(kept, cands, nodes[seed]))))
        return log

    def _check_filter(self, kept: Any, cands: list[Node], seed: Node) -> list[int]:
        if kept is None or not hasattr(kept, "__iter__"):
            self.fail("filter-subset", f"filter returned {kept!r} for the subgraph from "
                                       f"{seed.name!r}; expected a list of nodes")
            return []
        ids = {id(c) for c in cands}
        seen: set[int] = set()
        out = []
        for nd in kept:
            name = getattr(nd, "name", repr(nd))
            if id(nd) not in ids:
                self.fail("filter-subset", f"filter returned node {name!r}, which was not a "
                                           f"candidate (subgraph from {seed.name!r})")
            elif id(nd) in seen:
                self.fail("filter-subset", f"filter returned node {name!r} twice")
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


# ---------------------------------------------------------------------- snapshots
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
