"""The op tables shipped in ``data/``: their rows, documented conditions and fusion patterns.

An op table is one accelerator's documented op support (the execution provider's op list,
transcribed to JSON): per op, whether it is supported, the conditions the documentation states
(each with a kind: shape, value, platform, graph, ...), which inputs must be constant, and the
allowed dtypes; plus global conditions and fusion patterns. :func:`load_table` parses one file
once; the rest of the package reads only these frozen records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Optional

from clusterkit.errors import SelectorError


@dataclass(frozen=True)
class Condition:
    """One documented condition: ``op`` is the table key ("*" for a global condition)."""

    op: str
    index: int
    kind: str
    text: str

    def __str__(self) -> str:
        where = "all ops" if self.op == "*" else self.op
        return f"{where}: {self.text} [{self.kind}]"


@dataclass(frozen=True)
class OpEntry:
    """A row of a table."""

    key: str
    supported: bool
    conditions: tuple[Condition, ...]
    value_inputs: tuple[int, ...]
    dtypes: tuple[str, ...]
    extra: dict = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Step:
    """One step of a fusion pattern: op types (``None`` = any op), optional (``?``), repeated
    (``+``), and the parenthesised note (a constant value or a role; recorded, not checked)."""

    ops: Optional[frozenset]
    optional: bool = False
    repeat: bool = False
    note: str = ""


@dataclass(frozen=True)
class Pattern:
    """A documented fusion pattern, matched as a chain: each step's node consumes an output of
    the previous step's node."""

    index: int
    text: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Table:
    """A parsed op table."""

    file: str
    backend: str
    version: str
    global_conditions: tuple[Condition, ...]
    ops: dict
    patterns: tuple[Pattern, ...]
    patterns_note: str
    raw: dict = field(hash=False, compare=False)

    def entry(self, key: str) -> OpEntry:
        """The row of op ``key``; an unknown key fails naming the table."""
        try:
            return self.ops[key]
        except KeyError:
            raise SelectorError(f"table {self.file}: no op {key!r}") from None


def parse_step(text: str) -> Step:
    """``"Relu|Clip"``, ``"Add?"``, ``"Mul(0.5)?"``, ``"(Add|Sub)+"``, ``"op"`` (any op)."""
    body = text.strip()
    optional = repeat = False
    while body and body[-1] in "?+":
        optional |= body[-1] == "?"
        repeat |= body[-1] == "+"
        body = body[:-1]
    note = ""
    if body.startswith("(") and body.endswith(")") and "(" not in body[1:-1]:
        body = body[1:-1]
    elif body.endswith(")") and "(" in body:
        cut = body.index("(")
        body, note = body[:cut], body[cut + 1:-1]
    ops = None if body == "op" else frozenset(p.strip() for p in body.split("|") if p.strip())
    return Step(ops, optional, repeat, note)


@lru_cache(maxsize=None)
def load_table(file: str) -> Table:
    """Load ``data/<file>`` shipped with this package."""
    path = resources.files("clusterkit.selectors").joinpath("data").joinpath(file)  # 3.10's: one
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SelectorError(f"op table {file!r} is not shipped with clusterkit.selectors"
                            ) from None
    glob = tuple(Condition("*", i, c["kind"], c["text"])
                 for i, c in enumerate(raw.get("global_conditions", [])))
    ops = {}
    for key, e in raw["ops"].items():
        kinds = e.get("condition_kinds", [])
        conds = tuple(Condition(key, i, kinds[i] if i < len(kinds) else "?", text)
                      for i, text in enumerate(e.get("conditions", [])))
        extra = {k: v for k, v in e.items() if k not in
                 ("supported", "conditions", "condition_kinds", "value_inputs", "dtypes")}
        ops[key] = OpEntry(key, bool(e.get("supported", True)), conds,
                           tuple(e.get("value_inputs", [])), tuple(e.get("dtypes", [])), extra)
    pats = tuple(Pattern(i, " -> ".join(p), tuple(parse_step(s) for s in p))
                 for i, p in enumerate(raw.get("patterns", [])))
    return Table(file, raw.get("backend", file), raw.get("version_or_date", ""), glob, ops, pats,
                 raw.get("patterns_note", ""), raw)
