"""Shared machinery of the shipped selectors: op tables, graph facts, condition checks, and the
table-driven :class:`TableProperty` / :class:`TableSelector`.

A shipped selector is a table (``data/<backend>.json``, see ``opsupport/README.md``) plus a list of
:class:`Rule` objects written in that backend's module. Every rule names the table condition(s)
it decides by a text fragment (checked against the table when the property is built, so the rules
cannot silently drift from the data); every condition no rule decides is listed in
:attr:`TableProperty.undecidable` with the reason. The rules' checks read only what the graph
knows: whether an input is constant (:attr:`Tensor.is_constant`: initializers and tensors
computed from constants), ranks and static dims, dtypes, attributes, the model's opset, the
neighbouring nodes, and the contents of small constants (initializers and ``Constant`` outputs).

Policy for facts the graph does not know: an unknown rank/dim/dtype passes a check, except where
the table demands a known or static shape; a value rule whose constant cannot be read (e.g. a
tensor computed by ``ConstantOfShape``) passes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

import numpy as np

from clusterkit.errors import SelectorError
from clusterkit.selection.protocol import SubgraphProperty, SubgraphSelector

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph, Node, Tensor

DEFAULT_DOMAINS = ("", "ai.onnx")
#: ONNX TensorProto data types used by ``Cast``'s ``to`` attribute.
ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
              7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
              16: "bfloat16"}
FLOATS = frozenset({"float32", "float16", "float64", "bfloat16"})


# ====================================================================== table data
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
    path = resources.files("clusterkit.selectors").joinpath("data", file)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SelectorError(f"op table {file!r} is not shipped with clusterkit.selectors") from None
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


# ====================================================================== graph facts
class GraphContext:
    """What the checks may read about one graph, with per-property memos."""

    def __init__(self, graph: "Graph", prop: "TableProperty"):
        self.graph = graph
        self.prop = prop
        self.opset = _default_opset(graph)
        self._values: dict[str, Any] = {}
        self._inits: dict[str, Any] | None = None
        self.reasons: list[Optional[list[str]]] = [None] * graph.n
        self.base_reasons: list[Optional[list[str]]] = [None] * graph.n
        self._matches: dict[int, list[tuple[int, ...]]] | None = None
        self._by_node: dict[int, list[tuple[int, tuple[int, ...]]]] | None = None

    # --- tensors
    def tensor(self, name: str) -> "Tensor | None":
        return self.graph.tensors.get(name) if name else None

    def input(self, node: "Node", pos: int) -> "Tensor | None":
        return self.tensor(node.inputs[pos]) if pos < len(node.inputs) else None

    def output(self, node: "Node", pos: int) -> "Tensor | None":
        return self.tensor(node.outputs[pos]) if pos < len(node.outputs) else None

    def has_input(self, node: "Node", pos: int) -> bool:
        return pos < len(node.inputs) and bool(node.inputs[pos])

    def shape(self, node: "Node", pos: int, out: bool = False) -> tuple | None:
        t = self.output(node, pos) if out else self.input(node, pos)
        return None if t is None else t.shape

    def rank(self, node: "Node", pos: int, out: bool = False) -> int | None:
        s = self.shape(node, pos, out)
        return None if s is None else len(s)

    def dtype(self, node: "Node", pos: int, out: bool = False) -> str | None:
        t = self.output(node, pos) if out else self.input(node, pos)
        return None if t is None else t.dtype

    def producer(self, node: "Node", pos: int) -> "Node | None":
        t = self.input(node, pos)
        if t is None or t.producer is None:
            return None
        return self.graph.nodes[t.producer]

    def consumers(self, name: str) -> list["Node"]:
        t = self.tensor(name)
        return [] if t is None else [self.graph.nodes[c] for c in t.consumers]

    def used(self, node: "Node", pos: int) -> bool:
        """Is output ``pos`` present and read (by a node or as a graph output)?"""
        t = self.output(node, pos)
        return t is not None and (bool(t.consumers) or t.is_output)

    def in_qdq(self, node: "Node") -> bool:
        """Input 0 comes from a DequantizeLinear (the node sits in a QDQ node unit)."""
        p = self.producer(node, 0)
        return p is not None and p.op_type == "DequantizeLinear"

    # --- constant contents
    def value(self, name: str) -> np.ndarray | None:
        """Contents of a constant tensor when it is an initializer or a ``Constant`` output."""
        if not name:
            return None
        if name in self._values:
            return self._values[name]
        out = None
        t = self.tensor(name)
        try:
            if t is not None and t.is_initializer:
                init = self._initializers().get(name)
                if init is not None and init.data_location != 1:  # 1 = EXTERNAL
                    from onnx import numpy_helper

                    out = numpy_helper.to_array(init)
            elif t is not None and t.producer is not None:
                p = self.graph.nodes[t.producer]
                if p.op_type == "Constant" and p.domain in DEFAULT_DOMAINS:
                    out = _constant_value(p.attrs)
        except Exception:  # unreadable: the value rules pass
            out = None
        self._values[name] = out
        return out

    def input_value(self, node: "Node", pos: int) -> np.ndarray | None:
        return self.value(node.inputs[pos]) if self.has_input(node, pos) else None

    def external(self, name: str) -> bool:
        """Is this initializer stored as external data?"""
        init = self._initializers().get(name)
        return init is not None and init.data_location == 1

    def _initializers(self) -> dict:
        if self._inits is None:
            model = self.graph.model
            inits = getattr(getattr(model, "graph", None), "initializer", [])
            self._inits = {i.name: i for i in inits}
        return self._inits

    # --- neighbours' acceptance and patterns
    def accepts_base(self, node: "Node") -> bool:
        """Does this property take ``node`` when fusion-context rules are ignored?"""
        return not self.prop._reasons(self, node, base=True)

    def matches(self, pattern_index: int) -> list[tuple[int, ...]]:
        """Chain matches (node indices) of one pattern of this property's table."""
        if self._matches is None:
            self._matches = {}
        got = self._matches.get(pattern_index)
        if got is None:
            got = match_chains(self.graph, self.prop.table.patterns[pattern_index])
            self._matches[pattern_index] = got
        return got


def _default_opset(graph: "Graph") -> int | None:
    model = graph.model
    for imp in getattr(model, "opset_import", []) or []:
        if imp.domain in DEFAULT_DOMAINS:
            return int(imp.version)
    return None


def _constant_value(attrs: dict) -> np.ndarray | None:
    if "value" in attrs:
        from onnx import numpy_helper

        return numpy_helper.to_array(attrs["value"])
    for key in ("value_float", "value_int"):
        if key in attrs:
            return np.asarray(attrs[key])
    for key in ("value_floats", "value_ints"):
        if key in attrs:
            return np.asarray(list(attrs[key]))
    return None


def match_chains(graph: "Graph", pattern: Pattern) -> list[tuple[int, ...]]:
    """Every chain of nodes matching ``pattern`` (sorted, without duplicates)."""
    steps = pattern.steps
    ops = graph.op_types
    succ = graph.succ_lists
    found: set[tuple[int, ...]] = set()

    def fits(step: Step, v: int) -> bool:
        return step.ops is None or ops[v] in step.ops

    def extend(i: int, v: int, path: list[int]) -> None:
        if i == len(steps):
            found.add(tuple(path))
            return
        step = steps[i]
        if step.optional:
            extend(i + 1, v, path)
        for w in succ[v]:
            if fits(step, w) and w not in path:
                path.append(w)
                if step.repeat:
                    extend(i, w, path)
                extend(i + 1, w, path)
                path.pop()

    for k, step in enumerate(steps):  # a chain may start at any of the leading optional steps
        for v in range(graph.n):
            if fits(step, v):
                if step.repeat:
                    extend(k, v, [v])
                extend(k + 1, v, [v])
        if not step.optional:
            break
    return sorted(found)


# ====================================================================== checks
#: A check returns ``None`` when the node passes, else a short reason.
Check = Callable[[GraphContext, "Node"], Optional[str]]


def _attr(node: "Node", name: str, default: Any = None) -> Any:
    return node.attrs.get(name, default)


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def dim_at(shape: tuple | None, axis: int) -> Any:
    """``shape[axis]`` (negative counts from the end), ``None`` when unknown or out of range."""
    if shape is None or not isinstance(axis, (int, np.integer)) or not -len(shape) <= axis < len(
            shape):
        return None
    return shape[axis]


def _numel(shape: tuple | None) -> int | None:
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def passes() -> Check:
    """A check that always passes."""
    return lambda ctx, node: None


def decided_by(mechanism: str) -> Check:
    """For a condition enforced by another mechanism, named for the reader (op availability
    under the settings, a global rule that reads the per-op data, ...): passes here."""
    return passes()


def not_a_restriction(what: str) -> Check:
    """For a condition that describes extra support or behaviour (a QDQ form the EP also
    takes, a version note, a lowering detail), not a limit: passes."""
    return passes()


def fail(message: str) -> Check:
    """A check that always refuses (e.g. an op not available under the chosen settings)."""
    return lambda ctx, node: message


def setting(ok: bool, message: str) -> Check:
    """A platform condition decided by a constructor parameter."""
    return (lambda ctx, node: None) if ok else (lambda ctx, node: message)


def check(pred: Callable[[GraphContext, "Node"], bool], message: str | Callable) -> Check:
    """Refuse with ``message`` (or ``message(ctx, node)``) when ``pred`` is false."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        if pred(ctx, node):
            return None
        return message(ctx, node) if callable(message) else message
    return run


def when(cond: Callable[[GraphContext, "Node"], bool], *checks: Check) -> Check:
    """Apply ``checks`` only where ``cond`` holds."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        if not cond(ctx, node):
            return None
        return first(*checks)(ctx, node)
    return run


def first(*checks: Check) -> Check:
    """The first refusal among ``checks``."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for c in checks:
            r = c(ctx, node)
            if r:
                return r
        return None
    return run


def opset_at_least(version: int) -> Check:
    """The model's default-domain opset is at least ``version`` (unknown passes)."""
    return check(lambda ctx, node: ctx.opset is None or ctx.opset >= version,
                 lambda ctx, node: f"model opset {ctx.opset} < {version}")


def opset_at_most(version: int) -> Check:
    return check(lambda ctx, node: ctx.opset is None or ctx.opset <= version,
                 lambda ctx, node: f"model opset {ctx.opset} > {version}")


def opset_below(version: int) -> Callable[[GraphContext, "Node"], bool]:
    """A condition for :func:`when`: the model's opset is known and below ``version``."""
    return lambda ctx, node: ctx.opset is not None and ctx.opset < version


def const(*positions: int, required: bool = False) -> Check:
    """Inputs at ``positions`` must be constant when present (``required``: and present)."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p in positions:
            if not ctx.has_input(node, p):
                if required:
                    return f"input {p} must be given (as a constant)"
                continue
            t = ctx.input(node, p)
            if t is None or not t.is_constant:
                return f"input {p} ({node.inputs[p]!r}) must be constant"
        return None
    return run


def not_const(pos: int = 0) -> Check:
    """Input ``pos`` must not be a constant."""
    return check(lambda ctx, node: not (ctx.input(node, pos) is not None
                                        and ctx.input(node, pos).is_constant),
                 f"input {pos} must not be a constant/initializer")


def absent_input(pos: int) -> Check:
    return check(lambda ctx, node: not ctx.has_input(node, pos),
                 f"input {pos} is not supported")


def rank(pos: int = 0, lo: int | None = None, hi: int | None = None,
         allowed: Iterable[int] | None = None, out: bool = False,
         required: bool = False) -> Check:
    """Rank of input (or output) ``pos`` in ``[lo, hi]`` / in ``allowed``; unknown passes
    unless ``required``; an absent tensor passes."""
    allowed = None if allowed is None else frozenset(allowed)
    what = "output" if out else "input"

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        present = (pos < len(node.outputs) and node.outputs[pos]) if out else \
            ctx.has_input(node, pos)
        if not present:
            return None
        r = ctx.rank(node, pos, out)
        if r is None:
            return f"{what} {pos} has unknown rank" if required else None
        if allowed is not None and r not in allowed:
            return f"{what} {pos} has rank {r}, needs {' or '.join(map(str, sorted(allowed)))}"
        if lo is not None and r < lo:
            return f"{what} {pos} has rank {r} < {lo}"
        if hi is not None and r > hi:
            return f"{what} {pos} has rank {r} > {hi}"
        return None
    return run


def all_inputs(check_one: Callable[[int], Check]) -> Check:
    """Apply a per-position check to every present input."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p, name in enumerate(node.inputs):
            if name:
                r = check_one(p)(ctx, node)
                if r:
                    return r
        return None
    return run


def static(pos: int = 0, dims: Sequence[int] | None = None, out: bool = False) -> Check:
    """Input/output ``pos`` has a known shape whose ``dims`` (all when None; negative indices
    count from the end) are known integers."""
    what = "output" if out else "input"

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        present = (pos < len(node.outputs) and node.outputs[pos]) if out else \
            ctx.has_input(node, pos)
        if not present:
            return None
        s = ctx.shape(node, pos, out)
        if s is None:
            return f"{what} {pos} has unknown shape"
        idx = range(len(s)) if dims is None else dims
        for d in idx:
            if -len(s) <= d < len(s) and not isinstance(s[d], int):
                return f"{what} {pos} dim {d} is not static ({s[d]!r})"
        return None
    return run


def all_static(outputs: bool = False) -> Check:
    """Every present input (and output when asked) has a fully static shape."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p, name in enumerate(node.inputs):
            if name:
                r = static(p)(ctx, node)
                if r:
                    return r
        if outputs:
            for p, name in enumerate(node.outputs):
                if name:
                    r = static(p, out=True)(ctx, node)
                    if r:
                        return r
        return None
    return run


def no_zero_dims(positions: Sequence[int] | None = None) -> Check:
    """No zero-sized dim in the given inputs (all present inputs when None)."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p in (range(len(node.inputs)) if positions is None else positions):
            s = ctx.shape(node, p) if ctx.has_input(node, p) else None
            if s is not None and any(d == 0 for d in s):
                return f"input {p} has a zero-sized dim {tuple(s)}"
        return None
    return run


def dtype_in(pos: int, allowed: Iterable[str], out: bool = False) -> Check:
    """Dtype of input/output ``pos`` in ``allowed`` (unknown or absent passes)."""
    allowed = frozenset(allowed)
    what = "output" if out else "input"

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        d = ctx.dtype(node, pos, out)
        if d is None or d in allowed:
            return None
        return f"{what} {pos} dtype {d} not in {sorted(allowed)}"
    return run


def same_dtype(positions: Sequence[int]) -> Check:
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        ds = {ctx.dtype(node, p) for p in positions if ctx.has_input(node, p)} - {None}
        if len(ds) > 1:
            return f"inputs {list(positions)} have different dtypes {sorted(ds)}"
        return None
    return run


def attr_in(name: str, allowed: Iterable[Any], default: Any = None) -> Check:
    """Attribute ``name`` (``default`` when absent) is one of ``allowed``."""
    allowed = tuple(allowed)

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        v = _attr(node, name, default)
        if v in allowed:
            return None
        return f"attribute {name}={v!r} not in {list(allowed)}"
    return run


def attr_is(name: str, value: Any, default: Any = None) -> Check:
    return attr_in(name, [value], default)


def attr_absent(name: str) -> Check:
    return check(lambda ctx, node: name not in node.attrs,
                 lambda ctx, node: f"attribute {name}={node.attrs[name]!r} is not supported")


def attr_all(name: str, pred: Callable[[Any], bool], message: str) -> Check:
    """Every entry of list attribute ``name`` (absent passes) satisfies ``pred``."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        v = node.attrs.get(name)
        if v is None or all(pred(x) for x in v):
            return None
        return f"attribute {name}={list(v)!r}: {message}"
    return run


def default_dilations() -> Check:
    return attr_all("dilations", lambda x: x == 1, "dilations must be 1")


def kernel_2d(not_1x1: bool = False) -> Check:
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        k = node.attrs.get("kernel_shape")
        if k is None or len(k) != 2:
            return f"kernel_shape {k!r} is not 2-D"
        if not_1x1 and list(k) == [1, 1]:
            return "kernel_shape 1x1 is not supported"
        return None
    return run


def outputs_used_at_most(count: int) -> Check:
    """Only the first ``count`` outputs may be present and read."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p in range(count, len(node.outputs)):
            if node.outputs[p] and ctx.used(node, p):
                return f"output {p} ({node.outputs[p]!r}) is used; only {count} supported"
        return None
    return run


def outputs_at_most(count: int) -> Check:
    """At most ``count`` outputs are given."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        n = sum(1 for o in node.outputs if o)
        return None if n <= count else f"node has {n} outputs, only {count} supported"
    return run


def inputs_between(lo: int, hi: int | None = None) -> Check:
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        n = sum(1 for i in node.inputs if i)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if hi == lo else f"{lo}..{hi if hi is not None else ''}"
            return f"node has {n} inputs, needs {want}"
        return None
    return run


def numel_at_most(pos: int, count: int, what: str = "") -> Check:
    """Input ``pos`` (when present with a known shape) has at most ``count`` elements."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        if not ctx.has_input(node, pos):
            return None
        n = _numel(ctx.shape(node, pos))
        if n is None or n <= count:
            return None
        return f"input {pos}{' (' + what + ')' if what else ''} has {n} elements, not a scalar"
    return run


def value(pos: int, pred: Callable[[np.ndarray, GraphContext, "Node"], bool],
          message: str) -> Check:
    """A rule on the contents of constant input ``pos``; absent or unreadable passes."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        v = ctx.input_value(node, pos)
        if v is None:
            return None
        try:
            ok = pred(v, ctx, node)
        except Exception:
            ok = True  # a value the rule cannot interpret is not refused
        if ok:
            return None
        shown = v.tolist() if v.size <= 8 else f"{v.size} values"
        return f"input {pos} value {shown}: {message}"
    return run


def no_external_initializers() -> Check:
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for name in node.inputs:
            t = ctx.tensor(name)
            if t is not None and t.is_initializer and ctx.external(name):
                return f"initializer {name!r} is stored as external data"
        return None
    return run


def table_dtypes(pos: int = 0, aliases: dict[str, str] | None = None) -> Check:
    """Input ``pos`` dtype in the op's table ``dtypes`` (qualifiers resolved by the property's
    settings); ``aliases`` maps a dtype to one it is accepted as (e.g. float64 -> float32)."""
    aliases = aliases or {}

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        allowed = ctx.prop.allowed_dtypes(ctx.prop.key_of(node) or "")
        d = ctx.dtype(node, pos)
        if allowed is None or d is None or d in allowed or aliases.get(d) in allowed:
            return None
        return f"input {pos} dtype {d} not in {sorted(allowed)}"
    return run


def per_tensor_dq(positions: Sequence[int], only_nonconst: bool = False) -> Check:
    """Inputs produced by a DequantizeLinear must be per-tensor quantized (scalar scale)."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p in positions:
            dq = ctx.producer(node, p) if ctx.has_input(node, p) else None
            if dq is None or dq.op_type != "DequantizeLinear":
                continue
            if only_nonconst:
                src = ctx.input(dq, 0)
                if src is not None and src.is_constant:
                    continue
            n = _numel(ctx.shape(dq, 1))
            if n is not None and n > 1:
                return f"input {p} is per-channel quantized ({n} scales); per-tensor only"
        return None
    return run


# ====================================================================== rules
EACH = "<each op having the condition>"
"""Pass as ``ops`` to a :class:`Rule` to cover every op that has a matching condition."""


@dataclass(frozen=True)
class Rule:
    """``check`` decides the table condition(s) of ``ops`` whose text contains ``covers``.

    ``ops`` is a table key, a list of keys, ``"*"`` (a global condition: the check runs for
    every op except ``skip``) or :data:`EACH`. ``count`` is how many conditions of each op the
    fragment must match (default exactly one). ``fused`` marks a fusion-context rule: it may
    consult whether neighbours are taken (see :func:`in_pattern`), so it is skipped when a
    neighbour's own acceptance is asked.
    """

    ops: Any
    covers: str
    check: Check
    count: int = 1
    skip: tuple = ()
    fused: bool = False


@dataclass(frozen=True)
class Note:
    """Why the condition(s) of ``ops`` containing ``covers`` are not decided (they stay in
    :attr:`TableProperty.undecidable`)."""

    ops: Any
    covers: str
    why: str
    count: int = 1


R = Rule
N = Note


@dataclass(frozen=True)
class Fusion:
    """A fusion-only op: ``op`` is taken only inside a chain match of one of ``patterns``
    (indices into the table's patterns) whose other nodes this property also takes, and for
    which ``where(ctx, match)`` holds. The match's nodes must share the op's cluster."""

    op: str
    patterns: tuple[int, ...]
    where: Optional[Callable[[GraphContext, tuple[int, ...]], bool]] = None


def in_pattern(fusion: Fusion, message: str) -> Check:
    """The check of a :class:`Fusion` (used in a ``fused=True`` rule)."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        return None if ctx.prop.partner_sets(ctx, node, fusion) else message
    return run


# ====================================================================== property / selector
class TableProperty(SubgraphProperty):
    """A device whose support is a documented op table plus rules (see module docstring).

    A node is taken when its table row exists, is supported, is ``available`` under the
    settings (e.g. CoreML's model format), and no rule refuses it. ``value_inputs`` (the
    constraint compiler's cuts) is the union of the available rows' ``value_inputs`` (keyed by
    op type) plus ``extra_value_inputs``. ``dtype_qualifiers`` map the text in parentheses of a
    table dtype (``"float16 (MLProgram only)"``) to whether the settings allow it;
    ``dtype_field`` also checks input 0 against the row's ``dtypes`` for every op.

    Fusion patterns are data (:attr:`patterns`, :meth:`pattern_matches`). The selector's
    ``select_input``/``select_output`` are the defaults (follow an edge when the new node is
    taken): pattern edges are always followed, and answers stay node-local, so engines may use
    the fast :meth:`supported_mask`. Fusion-only ops (``fusions``) are taken only when a match
    carrying them exists; ``filter`` drops them when the match is not among the candidates,
    :meth:`create_subgraph_node` rejects such a subgraph, and
    ``pattern_groups(graph, fusion_only=True)`` gives the matches as ``Constraints.together``
    groups for engines that call neither.

    Public extras beyond :class:`SubgraphProperty`: :meth:`explain` / :meth:`explain_all`
    (why a node is refused), :meth:`supported_mask`, :attr:`checked` and :attr:`undecidable`
    (every table condition is in exactly one; the latter with the reason), :attr:`patterns`,
    :meth:`pattern_matches`, :meth:`pattern_groups`, :attr:`settings`, :attr:`ops`.
    """

    _MAX_GRAPHS = 4

    def __init__(self, device: str, *, name: str, table: Table, rules: Sequence[Rule],
                 notes: Sequence[Note] = (), settings: dict | None = None,
                 dtype_qualifiers: dict[str, bool] | None = None,
                 fusions: Sequence[Fusion] = (), available: Callable[[OpEntry], bool] | None = None,
                 extra_value_inputs: dict[str, Sequence[int]] | None = None,
                 key: Callable[["Node"], str | None] | None = None, dtype_field: bool = False,
                 dtype_aliases: dict[str, str] | None = None,
                 unavailable_reason: str = "op is not available with these settings"):
        super().__init__(device)
        self.name = name
        self.table = table
        self.settings = dict(settings or {})
        self.fusions = {f.op: f for f in fusions}
        self._key = key or default_key
        self._available = available or (lambda entry: True)
        self._unavailable_reason = unavailable_reason
        self._qualifiers = dict(dtype_qualifiers or {})
        self._dtype_field = table_dtypes(0, dtype_aliases) if dtype_field else None
        self._contexts: list[GraphContext] = []
        self._global: list[tuple[Rule, Condition]] = []
        self._per_op: dict[str, list[tuple[Rule, Condition]]] = {}
        self._resolve(list(rules), list(notes))
        self._dtype_sets = {k: self._allowed_dtypes(e) for k, e in table.ops.items()}
        self.ops = frozenset(k for k, e in table.ops.items() if e.supported and self._available(e))
        vi: dict[str, set[int]] = {}
        for k in sorted(self.ops):
            entry = table.ops[k]
            if entry.value_inputs:
                vi.setdefault(k.split(":")[-1], set()).update(entry.value_inputs)
        for op, pos in (extra_value_inputs or {}).items():
            vi.setdefault(op, set()).update(pos)
        self.value_inputs = {op: tuple(sorted(p)) for op, p in sorted(vi.items())}

    # ------------------------------------------------------------------ rule bookkeeping
    def _conditions_of(self, ops: Any, fragment: str, count: int) -> list[Condition]:
        table = self.table
        if ops == "*":
            pools = [("*", table.global_conditions)]
        elif ops == EACH:
            pools = [(k, e.conditions) for k, e in table.ops.items()
                     if any(fragment in c.text for c in e.conditions)]
            if not pools:
                raise SelectorError(f"{self.name}: no condition of {table.file} contains "
                                    f"{fragment!r}")
        else:
            keys = [ops] if isinstance(ops, str) else list(ops)
            pools = [(k, table.entry(k).conditions) for k in keys]
        out = []
        for key, conds in pools:
            hit = [c for c in conds if fragment in c.text]
            if len(hit) != count:
                raise SelectorError(f"{self.name}: {fragment!r} matches {len(hit)} conditions of "
                                    f"{key} in {table.file} (expected {count}): "
                                    f"{[c.text for c in hit]}")
            out.extend(hit)
        return out

    def _resolve(self, rules: list[Rule], notes: list[Note]) -> None:
        covered: dict[Condition, str] = {}
        for rule in rules:
            for cond in self._conditions_of(rule.ops, rule.covers, rule.count):
                covered[cond] = rule.covers
                if cond.op == "*":
                    self._global.append((rule, cond))
                else:
                    self._per_op.setdefault(cond.op, []).append((rule, cond))
        why: dict[Condition, str] = {}
        for note in notes:
            for cond in self._conditions_of(note.ops, note.covers, note.count):
                if cond in covered:
                    raise SelectorError(f"{self.name}: note on a condition a rule decides: {cond}")
                why[cond] = note.why
        every = list(self.table.global_conditions) + [
            c for e in self.table.ops.values() for c in e.conditions]
        self.checked: list[Condition] = [c for c in every if c in covered]
        self.undecidable: list[tuple[Condition, str]] = [
            (c, why.get(c, _DEFAULT_WHY.get(c.kind, "not decided from the graph")))
            for c in every if c not in covered]

    def _allowed_dtypes(self, entry: OpEntry) -> frozenset | None:
        if not entry.dtypes:
            return None
        out = set()
        for d in entry.dtypes:
            name, _, qual = d.partition(" (")
            qual = qual.rstrip(")")
            if qual:
                hits = [v for k, v in self._qualifiers.items() if k in qual]
                if not hits:
                    raise SelectorError(f"{self.name}: no setting decides dtype qualifier "
                                        f"{qual!r} of {entry.key} in {self.table.file}")
                if not hits[0]:
                    continue
            out.add(name.strip())
        return frozenset(out)

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
        memo = ctx.base_reasons if base else ctx.reasons
        got = memo[node.index]
        if got is not None:
            return got
        key = self._key(node)
        entry = self.table.ops.get(key) if key else None
        if entry is None:
            out = [f"op {op_label(node)} is not in the {self.table.backend} table"]
        elif not entry.supported:
            out = [f"op {key} is listed as not supported by {self.table.backend}"]
        elif not self._available(entry):
            out = [f"op {key}: {self._unavailable_reason}"]
        else:
            out = []
            if self._dtype_field is not None:
                r = self._dtype_field(ctx, node)
                if r:
                    out.append(f"{r} (table, {key}: dtypes {list(entry.dtypes)})")
            for rule, cond in self._global:
                if key in rule.skip or (base and rule.fused):
                    continue
                r = self._run(rule, cond, ctx, node)
                if r and not any(o.startswith(r + " (table") for o in out):
                    out.append(f"{r} (table, all ops: {cond.text})")
            for rule, cond in self._per_op.get(key, ()):
                if base and rule.fused:
                    continue
                r = self._run(rule, cond, ctx, node)
                if r and not any(o.startswith(r + " (table") for o in out):
                    out.append(f"{r} (table, {key}: {cond.text})")
        memo[node.index] = out
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

    def supported_mask(self, graph: "Graph") -> np.ndarray:
        """``select`` for every node of ``graph`` (bool array)."""
        ctx = self.bind(graph)
        return np.fromiter((not self._reasons(ctx, nd) for nd in graph.nodes), dtype=bool,
                           count=graph.n)

    def query(self, graph: "Graph") -> np.ndarray:
        return self.supported_mask(graph)

    def create_subgraph_selector(self) -> "TableSelector":
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

    def create_subgraph_node(self, subgraph: Any) -> Any:
        """Rejects (``None``) a subgraph holding a fusion-only node without its pattern."""
        if self.fusions and self.orphans(subgraph.graph, subgraph.nodes):
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
        parent: dict[int, int] = {}

        def find(x: int) -> int:
            while parent.setdefault(x, x) != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for m in sorted(matches):
            for u in m[1:]:
                a, b = find(m[0]), find(u)
                if a != b:
                    parent[max(a, b)] = min(a, b)
        groups: dict[int, list[int]] = {}
        for v in sorted(parent):
            groups.setdefault(find(v), []).append(v)
        return [g for _, g in sorted(groups.items()) if _convex(graph, g)]

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.settings.items())
        return f"{type(self).__name__}({self.name}, device={self.device!r}{extra})"


class TableSelector(SubgraphSelector):
    """The selector of a :class:`TableProperty`: stateless, node-local answers
    (``select_input``/``select_output`` follow an edge when the new node is taken, so pattern
    edges are always followed); ``filter`` drops fusion-only nodes whose pattern is not inside
    the candidates."""

    def __init__(self, prop: TableProperty):
        self.property = prop

    def select(self, node: "Node") -> bool:
        return self.property.accepts(node)

    def filter(self, candidates: list["Node"]) -> list["Node"]:
        prop = self.property
        if not prop.fusions or not candidates:
            return list(candidates)
        ctx = prop._context_of(candidates[0])
        dropped = set(prop.orphans(ctx.graph, [c.index for c in candidates]))
        return [c for c in candidates if c.index not in dropped]

    def reset(self) -> None:
        """Nothing to forget: the answers do not depend on history."""

    def supported_mask(self, graph: "Graph") -> np.ndarray:
        return self.property.supported_mask(graph)

    def bind(self, graph: "Graph") -> None:
        """Resolve this graph's nodes (done by ``query`` for engines)."""
        self.property.bind(graph)

    def explain(self, node: "Node") -> str | None:
        return self.property.explain(node)

    def __deepcopy__(self, memo: dict) -> "TableSelector":
        return TableSelector(self.property)

    def __repr__(self) -> str:
        return f"TableSelector({self.property.name})"


def default_key(node: "Node") -> str | None:
    """Table key of a node: the op type, or ``domain:op`` outside the default domain."""
    if node.domain in DEFAULT_DOMAINS:
        return node.op_type
    return f"{node.domain}:{node.op_type}"


def op_label(node: "Node") -> str:
    return node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}:{node.op_type}"


def _convex(graph: "Graph", group: list[int]) -> bool:
    """No node outside ``group`` lies on a path between two members."""
    if len(group) < 2:
        return True
    inside = set(group)
    lo, hi = min(group), max(group)

    def reach(adj: list[list[int]], keep: Callable[[int], bool]) -> set[int]:
        seen: set[int] = set()
        stack = [w for s in group for w in adj[s] if keep(w)]
        while stack:
            v = stack.pop()
            if v not in seen:
                seen.add(v)
                stack.extend(w for w in adj[v] if keep(w) and w not in seen)
        return seen

    down = reach(graph.succ_lists, lambda v: v <= hi)
    up = reach(graph.pred_lists, lambda v: v >= lo)
    return not ((down & up) - inside)


_DEFAULT_WHY = {
    "value": "needs the contents of a constant tensor; not read by this selector",
    "platform": "depends on deployment/build settings this selector does not model",
    "graph": "depends on how ONNX Runtime groups nodes; not modelled",
    "shape": "not decided from the graph by this selector",
}


def float_close(a: float, b: float, tol: float = 1e-6) -> bool:
    return math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol)


def downscale_divides(scales: Iterable[float], dims: Iterable[Any]) -> bool:
    """Resize rule shared by CoreML, NNAPI and XNNPACK: every scale is positive, and a
    downscale (scale < 1) must be 1/k for an integer k that divides the dim (when known)."""
    for scale, dim in zip(scales, dims):
        if scale <= 0:
            return False
        if scale < 1:
            inv = 1 / scale
            if not math.isclose(inv, round(inv), rel_tol=1e-6):
                return False
            if isinstance(dim, int) and dim % round(inv):
                return False
    return True


# ====================================================================== shared value helpers
def scales_pos(ctx: GraphContext, node: "Node") -> int:
    """Position of Resize's ``scales`` input (1 for opset 10 / Upsample, else 2)."""
    if node.op_type == "Upsample" or (ctx.opset is not None and ctx.opset < 11):
        return 1
    return 2


def resize_scales(ctx: GraphContext, node: "Node") -> list[float] | None:
    """Resize scales from the ``scales`` constant or from ``sizes`` and a static input shape."""
    s = ctx.input_value(node, scales_pos(ctx, node))
    if s is not None and s.size:
        return [float(x) for x in s.ravel()]
    sizes = ctx.input_value(node, 3) if scales_pos(ctx, node) == 2 else None
    shape = ctx.shape(node, 0)
    if sizes is None or not sizes.size or shape is None or len(shape) != sizes.size:
        return None
    if not all(isinstance(d, int) and d > 0 for d in shape):
        return None
    return [float(z) / d for z, d in zip(sizes.ravel().tolist(), shape)]


def resize_const() -> Check:
    """Resize: ``scales`` or ``sizes`` is given, and the given one is constant."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        sp = scales_pos(ctx, node)
        given = [p for p in ((sp, 3) if sp == 2 else (sp,)) if ctx.has_input(node, p)
                 and (ctx.shape(node, p) is None or _numel(ctx.shape(node, p)) != 0)]
        if not given:
            return "neither scales nor sizes is given"
        return const(*given)(ctx, node)
    return run


def clip_bounds(ctx: GraphContext, node: "Node") -> tuple[float, float] | None:
    """Clip's (min, max) when readable (absent bounds are -inf/+inf)."""
    if ctx.opset is not None and ctx.opset < 11:
        return (float(node.attrs.get("min", -math.inf)), float(node.attrs.get("max", math.inf)))
    out = []
    for pos, default in ((1, -math.inf), (2, math.inf)):
        if not ctx.has_input(node, pos):
            out.append(default)
            continue
        v = ctx.input_value(node, pos)
        if v is None or v.size != 1:
            return None
        out.append(float(v.ravel()[0]))
    return out[0], out[1]


def slice_is_empty(ctx: GraphContext, node: "Node") -> bool | None:
    """Does a Slice select zero elements on some axis? ``None`` when not decidable."""
    shape = ctx.shape(node, 0)
    starts, ends = ctx.input_value(node, 1), ctx.input_value(node, 2)
    if shape is None or starts is None or ends is None:
        return None
    axes = ctx.input_value(node, 3) if ctx.has_input(node, 3) else np.arange(len(starts))
    steps = ctx.input_value(node, 4) if ctx.has_input(node, 4) else np.ones(len(starts), int)
    if axes is None or steps is None:
        return None
    for s, e, a, st in zip(starts.ravel().tolist(), ends.ravel().tolist(),
                           axes.ravel().tolist(), steps.ravel().tolist()):
        dim = dim_at(shape, int(a))
        if not isinstance(dim, int) or st == 0:
            continue
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
            if s >= e:
                return True
        else:
            s, e = min(max(s, -1), dim - 1), min(max(e, -1), dim - 1)
            if s <= e:
                return True
    return False
