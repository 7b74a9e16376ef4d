"""Binding a selector's rules and notes to its table's conditions, when the property is built.

Each :class:`Rule` or :class:`Note` names conditions by a text fragment; the fragment must match
exactly ``count`` conditions of each op it names, else the build fails naming the fragment, the
op and the table. Every condition no rule decides is undecidable, with the note's reason or a
default reason for its kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from clusterkit.errors import SelectorError
from clusterkit.selectors._optable import Condition, OpEntry, Table
from clusterkit.selectors._rules import EACH, Note, Rule

#: Why a condition of each kind stays undecided when no note says otherwise.
DEFAULT_WHY = {
    "value": "needs the contents of a constant tensor; not read by this selector",
    "platform": "depends on deployment/build settings this selector does not model",
    "graph": "depends on how ONNX Runtime groups nodes; not modelled",
    "shape": "not decided from the graph by this selector",
}


@dataclass
class Binding:
    """Rules bound to conditions: global ones, per table key, and the partition of every
    condition into checked and undecidable (with the reason)."""

    global_rules: list[tuple[Rule, Condition]] = field(default_factory=list)
    per_op: dict[str, list[tuple[Rule, Condition]]] = field(default_factory=dict)
    checked: list[Condition] = field(default_factory=list)
    undecidable: list[tuple[Condition, str]] = field(default_factory=list)


def conditions_of(table: Table, owner: str, ops: Any, fragment: str,
                  count: int) -> list[Condition]:
    """The conditions of ``ops`` (a key, keys, ``"*"`` or :data:`EACH`) containing
    ``fragment``, exactly ``count`` per op."""
    if ops == "*":
        pools = [("*", table.global_conditions)]
    elif ops == EACH:
        pools = [(k, e.conditions) for k, e in table.ops.items()
                 if any(fragment in c.text for c in e.conditions)]
        if not pools:
            raise SelectorError(f"{owner}: no condition of {table.file} contains {fragment!r}")
    else:
        keys = [ops] if isinstance(ops, str) else list(ops)
        pools = [(k, table.entry(k).conditions) for k in keys]
    out = []
    for key, conds in pools:
        hit = [c for c in conds if fragment in c.text]
        if len(hit) != count:
            raise SelectorError(f"{owner}: {fragment!r} matches {len(hit)} conditions of {key} in "
                                f"{table.file} (expected {count}): {[c.text for c in hit]}")
        out.extend(hit)
    return out


def bind_rules(table: Table, owner: str, rules: Sequence[Rule],
               notes: Sequence[Note]) -> Binding:
    """Bind ``rules`` and ``notes`` to ``table``; a note on a condition a rule decides fails."""
    res = Binding()
    covered: set[Condition] = set()
    for rule in rules:
        for cond in conditions_of(table, owner, rule.ops, rule.covers, rule.count):
            covered.add(cond)
            if cond.op == "*":
                res.global_rules.append((rule, cond))
            else:
                res.per_op.setdefault(cond.op, []).append((rule, cond))
    why: dict[Condition, str] = {}
    for note in notes:
        for cond in conditions_of(table, owner, note.ops, note.covers, note.count):
            if cond in covered:
                raise SelectorError(f"{owner}: note on a condition a rule decides: {cond}")
            why[cond] = note.why
    every = list(table.global_conditions) + [c for e in table.ops.values() for c in e.conditions]
    res.checked = [c for c in every if c in covered]
    res.undecidable = [(c, why.get(c, DEFAULT_WHY.get(c.kind, "not decided from the graph")))
                       for c in every if c not in covered]
    return res


def allowed_dtypes(table: Table, owner: str, entry: OpEntry,
                   qualifiers: dict[str, bool]) -> frozenset | None:
    """The row's dtypes allowed under the settings: a qualified dtype (``"float16 (MLProgram
    only)"``) is kept when the first qualifier key found in its text is true."""
    if not entry.dtypes:
        return None
    out = set()
    for d in entry.dtypes:
        name, _, qual = d.partition(" (")
        qual = qual.rstrip(")")
        if qual:
            hits = [v for k, v in qualifiers.items() if k in qual]
            if not hits:
                raise SelectorError(f"{owner}: no setting decides dtype qualifier {qual!r} of "
                                    f"{entry.key} in {table.file}")
            if not hits[0]:
                continue
        out.add(name.strip())
    return frozenset(out)
