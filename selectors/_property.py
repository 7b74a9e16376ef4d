"""A device whose support is a documented op table plus the rules that decide its conditions.

A shipped selector is an op table (a JSON file in this package's ``data`` folder, loaded by
:func:`~clusterkit.selectors._optable.load_table`) plus a list of :class:`Rule` objects written in
that backend's module. Every rule names the table condition(s) it decides by a text fragment
(checked against the table when the property is built, so the rules cannot silently drift from
the data); every condition no rule decides is listed in :attr:`TableProperty.undecidable` with
the reason. The rules' checks read only what the graph knows (see
:class:`~clusterkit.selectors._context.GraphContext`).

Policy for facts the graph does not know: an unknown rank/dim/dtype passes a check, except where
the table demands a known or static shape; a value rule whose constant cannot be read (e.g. a
tensor computed by ``ConstantOfShape``) passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np

from clusterkit.errors import SelectorError
from clusterkit.selection.protocol import SubgraphProperty
from clusterkit.selectors._binding import allowed_dtypes, bind_rules
from clusterkit.selectors._context import GraphContext
from clusterkit.selectors._facts import default_key, op_label
from clusterkit.selectors._optable import Condition, OpEntry, Pattern, Table
from clusterkit.selectors._patterns import convex_groups
from clusterkit.selectors._rules import Fusion, Note, Rule
from clusterkit.selectors._selector import TableSelector
from clusterkit.selectors._tensor_checks import table_dtypes

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph, Node


class TableProperty(SubgraphProperty):
    """A device whose support is a documented op table plus rules (see module docstring).

    A node is taken when its table row exists, is supported, is ``available`` under the
    settings (e.g. CoreML's model format), and no rule refuses it. ``value_inputs`` (the
    constraint compiler's cuts) is the union of the available rows' ``value_inputs`` (keyed by
    op type) plus ``extra_value_inputs``; ``computes_value_inputs`` is the device's value-input
    policy (:class:`~clusterkit.selection.protocol.SubgraphProperty`; ``None``: the data's
    ``value_input_policy.computes_value_inputs``, else False). ``dtype_qualifiers``
    map the text in parentheses of a table dtype (``"float16 (MLProgram only)"``) to whether
    the settings allow it; ``dtype_field`` also checks input 0 against the row's ``dtypes``
    for every op.

    Fusion patterns are data (:attr:`patterns`, :meth:`pattern_matches`). The selector's
    ``select_input``/``select_output`` are the defaults (follow an edge when the new node is
    taken): pattern edges are always followed, and answers stay node-local, so engines may use
    the fast :meth:`supported_mask`. Fusion-only ops (``fusions``) are taken only when a match
    carrying them exists; ``filter`` drops them when the match is not among the candidates,
    :meth:`create_subgraph_node` rejects such a subgraph (and any subgraph one of the
    ``subgraph_rules`` refuses: each takes the finished subgraph and returns a reason or
    ``None``; :meth:`explain_subgraph` gives the reason), and
    ``pattern_groups(graph, fusion_only=True)`` gives the matches as ``Constraints.together``
    groups for engines that call neither.

    Public extras beyond :class:`SubgraphProperty`: :meth:`explain` / :meth:`explain_all`
    (why a node is refused), :meth:`explain_subgraph`, :meth:`supported_mask`, :attr:`checked`
    and :attr:`undecidable` (every table condition is in exactly one; the latter with the
    reason), :attr:`patterns`, :meth:`pattern_matches`, :meth:`pattern_groups`,
    :attr:`settings`, :attr:`ops`, :attr:`subgraph_rules`.
    """

    _MAX_GRAPHS = 4

    def __init__(self, device: str, *, name: str, table: Table, rules: Sequence[Rule],
                 notes: Sequence[Note] = (), settings: dict | None = None,
                 dtype_qualifiers: dict[str, bool] | None = None,
                 fusions: Sequence[Fusion] = (),
                 available: Callable[[OpEntry], bool] | None = None,
                 extra_value_inputs: dict[str, Sequence[int]] | None = None,
                 key: Callable[["Node"], str | None] | None = None, dtype_field: bool = False,
                 dtype_aliases: dict[str, str] | None = None,
                 unavailable_reason: str = "op is not available with these settings",
                 subgraph_rules: Sequence[Callable[[Any], str | None]] = (),
                 computes_value_inputs: bool | None = None):
        super().__init__(device)
        policy = table.raw.get("value_input_policy") or {}
        self.computes_value_inputs = bool(policy.get("computes_value_inputs", False)
                                          if computes_value_inputs is None
                                          else computes_value_inputs)
        self.name = name
        self.table = table
        self.settings = dict(settings or {})
        self.fusions = {f.op: f for f in fusions}
        self._key = key or default_key
        self._available = available or (lambda entry: True)
        self._unavailable_reason = unavailable_reason
        self._qualifiers = dict(dtype_qualifiers or {})
        self.subgraph_rules = tuple(subgraph_rules)
        self._dtype_field = table_dtypes(0, dtype_aliases) if dtype_field else None
        self._contexts: list[GraphContext] = []
        res = bind_rules(table, name, rules, notes)
        self._global, self._per_op = res.global_rules, res.per_op
        self.checked: list[Condition] = res.checked
        self.undecidable: list[tuple[Condition, str]] = res.undecidable
        self._dtype_sets = {k: allowed_dtypes(table, name, e, self._qualifiers)
                            for k, e in table.ops.items()}
        self.ops = frozenset(k for k, e in table.ops.items() if e.supported and self._available(e))
        self.value_inputs = _value_inputs(table, self.ops, extra_value_inputs or {})

    # ------------------------------------------------------------------ table
    def allowed_dtypes(self, key: str) -> frozenset | None:
        """Input-0 dtypes the table allows for op ``key`` under these settings (None: any)."""
        return self._dtype_sets.get(key)

    # ------------------------------------------------------------------ graphs
    def key_of(self, node: "Node") -> str | None:
        """The table key of ``node`` (None: no key in this table's scheme)."""
        return self._key(node)

    def bind(self, graph: "Graph") -> GraphContext:
        """The (cached) context of ``graph``; selectors resolve nodes against bound graphs."""
        for ctx in self._contexts:
            if ctx.graph is graph:
                return ctx
        ctx = GraphContext(graph, self)
        self._contexts.insert(0, ctx)
        del self._contexts[self._MAX_GRAPHS:]
        return ctx

    def _context_of(self, node: "Node", graph: "Graph | None" = None) -> GraphContext:
        if graph is not None:
            return self.bind(graph)
        for ctx in self._contexts:
            nodes = ctx.graph.nodes
            if 0 <= node.index < len(nodes) and nodes[node.index] is node:
                return ctx
        raise SelectorError(f"selector {self.name}: node {node.name!r} ({node.op_type}) is from a "
                            "graph this property was not bound to; call query(graph) or "
                            "bind(graph) first")

    # ------------------------------------------------------------------ decisions
    def _reasons(self, ctx: GraphContext, node: "Node", base: bool = False) -> list[str]:
        """Every refusal of ``node`` (memoized per graph); ``base`` skips fusion-context rules."""
        memo = ctx.base_reasons if base else ctx.reasons
        got = memo[node.index]
        if got is None:
            got = memo[node.index] = self._decide(ctx, node, base)
        return got

    def _decide(self, ctx: GraphContext, node: "Node", base: bool) -> list[str]:
        key = self._key(node)
        entry = self.table.ops.get(key) if key else None
        if entry is None:
            return [f"op {op_label(node)} is not in the {self.table.backend} table"]
        assert key is not None  # (entry is None without a key)
        if not entry.supported:
            return [f"op {key} is listed as not supported in the {self.table.backend} table"]
        if not self._available(entry):
            return [f"op {key}: {self._unavailable_reason} ({self.table.backend} table)"]
        out = []
        if self._dtype_field is not None:
            r = self._dtype_field(ctx, node)
            if r:
                out.append(f"{r} (table, {key}: dtypes {list(entry.dtypes)})")
        rules = [(rule, cond, "all ops") for rule, cond in self._global if key not in rule.skip]
        rules += [(rule, cond, key) for rule, cond in self._per_op.get(key, ())]
        for rule, cond, where in rules:
            if base and rule.fused:
                continue
            r = self._run(rule, cond, ctx, node)
            if r and not any(o.startswith(r + " (table") for o in out):
                out.append(f"{r} (table, {where}: {cond.text})")
        return out

    def _run(self, rule: Rule, cond: Condition, ctx: GraphContext, node: "Node") -> str | None:
        try:
            return rule.check(ctx, node)
        except SelectorError:
            raise
        except Exception as exc:
            raise SelectorError(f"{self.name}: the rule for {cond} failed on node {node.name!r}"
                                f" ({op_label(node)}): {exc!r}") from exc

    def accepts(self, node: "Node", graph: "Graph | None" = None) -> bool:
        """Does this device take ``node``?"""
        return not self._reasons(self._context_of(node, graph), node)

    def explain_all(self, node: "Node", graph: "Graph | None" = None) -> list[str]:
        """Every reason ``node`` is refused (empty when it is taken)."""
        return list(self._reasons(self._context_of(node, graph), node))

    def explain(self, node: "Node", graph: "Graph | None" = None) -> str | None:
        """Why ``node`` is refused (the first reason), or ``None`` when it is taken."""
        reasons = self._reasons(self._context_of(node, graph), node)
        return f"{self.name}: {reasons[0]}" if reasons else None

    def rules_passed(self, node: "Node", graph: "Graph | None" = None) -> list[str]:
        """The table conditions of ``node``'s own op (not the global ones) whose rules it
        passes: what the selector checked before taking it (empty: no modelled rule covers
        the op)."""
        ctx = self._context_of(node, graph)
        key = self._key(node)
        return [cond.text for rule, cond in self._per_op.get(key or "", ())
                if not self._run(rule, cond, ctx, node)]

    def supported_mask(self, graph: "Graph") -> np.ndarray:
        """``select`` for every node of ``graph`` (bool array)."""
        ctx = self.bind(graph)
        return np.fromiter((not self._reasons(ctx, nd) for nd in graph.nodes), dtype=bool,
                           count=graph.n)

    def query(self, graph: "Graph") -> np.ndarray:
        """The nodes this device takes (as :meth:`supported_mask`)."""
        return self.supported_mask(graph)

    def create_subgraph_selector(self) -> "TableSelector":
        """A new :class:`TableSelector` of this property."""
        return TableSelector(self)

    # ------------------------------------------------------------------ fusion context
    def partner_sets(self, ctx: GraphContext, node: "Node",
                     fusion: Fusion | None = None) -> list[tuple[int, ...]]:
        """For a fusion-only node: the pattern matches that can carry it (every other member
        taken by this device, ``where`` holds). Empty for a node that cannot be fused."""
        fusion = fusion or self.fusions.get(self._key(node) or "")
        if fusion is None:
            return []
        v = node.index
        nodes = ctx.graph.nodes
        out = []
        for p in fusion.patterns:
            for m in ctx.matches(p):
                if v not in m:
                    continue
                if all(u == v or ctx.accepts_base(nodes[u]) for u in m) and (
                        fusion.where is None or fusion.where(ctx, m)):
                    out.append(m)
        return out

    def orphans(self, graph: "Graph", members: Iterable[int]) -> list[int]:
        """Fusion-only nodes in ``members`` none of whose matches lies inside ``members``."""
        ctx = self.bind(graph)
        inside = set(int(v) for v in members)
        changed = True
        dropped: list[int] = []
        while changed:
            changed = False
            for v in sorted(inside):
                node = graph.nodes[v]
                if (self._key(node) or "") not in self.fusions:
                    continue
                if not any(set(m) <= inside for m in self.partner_sets(ctx, node)):
                    inside.discard(v)
                    dropped.append(v)
                    changed = True
        return sorted(dropped)

    def explain_subgraph(self, subgraph: Any) -> str | None:
        """Why this device refuses the finished ``subgraph`` (a fusion-only node without its
        pattern, or a whole-subgraph rule of the backend), or ``None`` when it takes it."""
        if self.fusions:
            orphans = self.orphans(subgraph.graph, subgraph.nodes)
            if orphans:
                node = subgraph.graph.nodes[orphans[0]]
                return (f"{self.name}: fusion-only node {node.name!r} ({node.op_type}) is in the"
                        " subgraph without its pattern")
        for rule in self.subgraph_rules:
            why = rule(subgraph)
            if why:
                return f"{self.name}: {why}"
        return None

    def create_subgraph_node(self, subgraph: Any) -> Any:
        """Rejects (``None``) a subgraph :meth:`explain_subgraph` refuses."""
        if self.explain_subgraph(subgraph) is not None:
            return None
        return super().create_subgraph_node(subgraph)

    # ------------------------------------------------------------------ patterns for engines
    @property
    def patterns(self) -> tuple[Pattern, ...]:
        """The table's documented fusion patterns."""
        return self.table.patterns

    def pattern_matches(self, graph: "Graph") -> list[tuple[int, tuple[int, ...]]]:
        """``(pattern index, node indices)`` of every structural chain match in ``graph``
        (parenthesised value notes such as ``Mul(0.5)`` are not checked)."""
        ctx = self.bind(graph)
        return [(p.index, m) for p in self.patterns for m in ctx.matches(p.index)]

    def pattern_groups(self, graph: "Graph", fusion_only: bool = False) -> list[list[int]]:
        """Must-stay-together groups for ``Constraints.together``: matches whose nodes this
        device all takes, overlapping ones merged, non-convex results dropped.
        ``fusion_only``: only the matches carrying fusion-only nodes."""
        ctx = self.bind(graph)
        mask = self.supported_mask(graph)
        if fusion_only:
            matches = {m for nd in graph.nodes if (self._key(nd) or "") in self.fusions
                       and mask[nd.index] for m in self.partner_sets(ctx, nd)}
        else:
            matches = {m for p in self.patterns for m in ctx.matches(p.index)
                       if all(mask[u] for u in m)}
        return convex_groups(graph, matches)

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.settings.items())
        return f"{type(self).__name__}({self.name}, device={self.device!r}{extra})"


def _value_inputs(table: Table, ops: Iterable[str],
                  extra: dict[str, Sequence[int]]) -> dict[str, tuple[int, ...]]:
    """Union of the rows' ``value_inputs`` keyed by op type (domain dropped), plus ``extra``."""
    vi: dict[str, set[int]] = {}
    for k in sorted(ops):
        entry = table.ops[k]
        if entry.value_inputs:
            vi.setdefault(k.split(":")[-1], set()).update(entry.value_inputs)
    for op, pos in extra.items():
        vi.setdefault(op, set()).update(pos)
    return {op: tuple(sorted(p)) for op, p in sorted(vi.items())}
