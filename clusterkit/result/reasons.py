"""Why a node ends on the fallback device: one vocabulary shared by every engine and report.

A :class:`Reason` is a :class:`Category` — one of six, the strings the placement report and the
partition JSON carry — and a sentence of detail. Engines record the reasons they know on
``Partition.fallback_reasons`` (topological node index → :class:`Reason`); any other fallback
node is explained from the compiled problem alone by :func:`infer_reason`, so the placement
report (:mod:`clusterkit.result.report`) works for every strategy's partition. The
vocabulary reads only the compiled problem, so it sits beside the constraints, below the
partition that carries it (the affinity step records its reasons in the same form).

Folded nodes (:attr:`clusterkit.graph.core.Graph.folded`: constants and static shape values,
which onnxruntime computes before any execution provider sees the graph) are never fallbacks:
the report counts them apart. Every other fallback node gets the most specific reason known:
the engine's, else the selectors' own ``explain(node)`` text inside the category below.

Categories:

- ``"op not supported"`` — the op is in no device's op table (a table-driven property's
  ``ops`` / ``key_of``, an ``ops:`` selector's ``op_types``), or no device takes any node of it
  and no device says it lists the op;
- ``"selector condition"`` — a device lists the op but refused the node: it takes other nodes of
  the op, or every node of the op failed a condition (which one: the selector's explanation);
  also attributes, shapes, a ``filter``, a refusal while a cluster was grown;
- ``"constraint"`` — a device supports the node but a constraint kept it off (``min_size``,
  ``max_const_bytes``, a together group no device can take...);
- ``"cycle"`` — the strategy took it out of a cluster to avoid a path leaving the cluster and
  coming back, and it ended on the fallback;
- ``"manual affinity"`` — a manual affinity put it there (to the fallback, to a device that does
  not support it, or none given while manual affinities are in use without fill-in);
- ``"subgraph rejected"`` — the device's ``create_subgraph_node`` refused its subgraph.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

if TYPE_CHECKING:
    from clusterkit.constraints.core import Problem
    from clusterkit.constraints.limits import Limits

__all__ = ["BELOW_MIN_SIZE", "Category", "FILTER_DROPPED", "GROUP_FITS_NO_DEVICE", "Reason",
           "SELECT_REFUSED", "devices_taking_op", "infer_reason", "op_in_table",
           "refusal_reason", "selector_explanation"]


class Category(str, Enum):
    """The kind of a fallback reason; ``value`` is the string the reports and the JSON carry."""

    OP_NOT_SUPPORTED = "op not supported"
    SELECTOR_CONDITION = "selector condition"
    CONSTRAINT = "constraint"
    CYCLE = "cycle"
    MANUAL_AFFINITY = "manual affinity"
    SUBGRAPH_REJECTED = "subgraph rejected"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Reason:
    """Why one node is on the fallback: its ``category`` and a sentence of ``detail``."""

    category: Category
    detail: str


# the reasons the level-based engines (longest-path, cycles) record, one per cause
GROUP_FITS_NO_DEVICE = Reason(Category.CONSTRAINT,
                              "its together group fits on no device as one cluster")
FILTER_DROPPED = Reason(Category.SELECTOR_CONDITION,
                        "the selector's filter dropped it from its cluster")
SELECT_REFUSED = Reason(Category.SELECTOR_CONDITION,
                        "the selector refused it when its cluster was grown")
BELOW_MIN_SIZE = Reason(Category.CONSTRAINT, "its cluster was below min_size")


def infer_reason(problem: Problem, v: int,
                 ops_taken: Mapping[str, list[str]] | None = None) -> Reason:
    """Why node ``v`` (topological index) is on the fallback, from the problem alone.
    ``ops_taken`` (op type → devices taking some node of it) is computed when not given."""
    p = problem
    held, lim = int(p.graph.const_bytes[v]), p.limits
    if lim.global_bytes is not None and held > lim.global_bytes:
        return Reason(Category.CONSTRAINT, f"it reads {held:,} bytes of constants, "
                      f"above max_const_bytes {lim.global_bytes:,}")
    sup: np.ndarray | list = p.supported[:, v] if p.devices else []
    takers = [d for d in range(len(p.devices)) if sup[d]]
    if not takers:
        over = _budgets_below(p, v, held)
        if over:
            return Reason(Category.CONSTRAINT, f"it reads {held:,} bytes of constants, above "
                          + ", ".join(over))
        return refusal_reason(p, v, ops_taken)
    limits = _size_limits(lim, takers)
    if int(p.group_of[v]) >= 0:
        limits.append(f"together group {int(p.group_of[v])}")
    why = ", ".join(limits) if limits else "the strategy's constraints"
    return Reason(Category.CONSTRAINT, f"supported by {', '.join(p.devices[d] for d in takers)}"
                  f" but kept on the fallback ({why})")


def _budgets_below(p: Problem, v: int, held: int) -> list[str]:
    """The devices' own ``max_const_bytes`` below the ``held`` bytes node ``v`` reads alone
    (which took it off those devices), on devices whose op table does not rule it out."""
    lim, node = p.limits, p.graph.nodes[v]
    return [f"{lim.setting(d, 'bytes')} {lim.max_const[d]:,}" for d in range(len(p.devices))
            if (cap := lim.max_const[d]) is not None and held > cap
            and op_in_table(p.properties[d], node) is not False]


def _size_limits(lim: Limits, takers: list[int]) -> list[str]:
    """The node limits of the devices in ``takers``, each once: ``min_size 2``, ``max_size
    64`` (global) or ``npu's max_nodes 24`` (a device's own), minimums first."""
    out = [f"{lim.setting(d, 'min')} {lim.min_nodes[d]}" for d in takers if lim.min_nodes[d] > 1]
    out += [f"{lim.setting(d, 'max')} {lim.max_nodes[d]}" for d in takers
            if lim.max_nodes[d] is not None]
    return list(dict.fromkeys(out))


def refusal_reason(problem: Problem, v: int,
                   ops_taken: Mapping[str, list[str]] | None = None) -> Reason:
    """Why no device takes node ``v``: ``"op not supported"`` when its op is in no device's op
    table, else ``"selector condition"`` (other nodes of the op taken, or every node of it
    refused), each with the selectors' own explanations when they have an ``explain``."""
    p = problem
    node = p.graph.nodes[v]
    if not p.devices:
        return Reason(Category.OP_NOT_SUPPORTED, "no accelerator device is configured")
    if ops_taken is None:
        ops_taken = devices_taking_op(p)
    texts = [t for t in (selector_explanation(prop, node, p.graph) for prop in p.properties)
             if t]
    why = f": {'; '.join(texts)}" if texts else ""
    same_op = ops_taken.get(node.op_type, [])
    if same_op:
        verb = "takes" if len(same_op) == 1 else "take"
        return Reason(Category.SELECTOR_CONDITION, f"{', '.join(same_op)} {verb} other "
                      f"{node.op_type} nodes but refused this one{_unnamed(why, same_op)}")
    listed = [op_in_table(prop, node) for prop in p.properties]
    if any(listed):
        devs = [prop.device for prop, ok in zip(p.properties, listed) if ok]
        return Reason(Category.SELECTOR_CONDITION, f"every {node.op_type} node failed a "
                      f"condition of {', '.join(devs)}{_unnamed(why, devs)}")
    if texts:
        why = f" ({'; '.join(texts)})"
    return Reason(Category.OP_NOT_SUPPORTED, f"no device supports {node.op_type}{why}")


def _unnamed(why: str, devices: list[str]) -> str:
    """``why`` (``": nnapi: input 0 ..."``) without the selector's name when it is the one
    device the sentence just named (no ``nnapi: nnapi:``)."""
    if len(devices) == 1 and why.startswith(f": {devices[0]}: "):
        return why[len(devices[0]) + 2:]
    return why


def selector_explanation(prop: Any, node: Any, graph: Any) -> str | None:
    """The property's own ``explain(node[, graph])`` text for a refused node, or ``None`` when
    it has no ``explain`` or says nothing."""
    explain = getattr(prop, "explain", None)
    if not callable(explain):
        return None
    try:
        takes_graph = "graph" in inspect.signature(explain).parameters
    except (TypeError, ValueError):
        takes_graph = False
    text = explain(node, graph) if takes_graph else explain(node)
    return str(text) if text else None


def op_in_table(prop: Any, node: Any) -> bool | None:
    """Whether ``node``'s op is in the op table of the property (``ops`` with ``key_of``, or a
    stock selector's ``op_types``); ``None`` when the property does not say."""
    ops = getattr(prop, "ops", None)
    key_of = getattr(prop, "key_of", None)
    if isinstance(ops, (set, frozenset)) and callable(key_of):
        key = key_of(node)
        return key is not None and key in ops
    op_types = getattr(prop, "op_types", None)
    if isinstance(op_types, (set, frozenset)):
        return node.op_type in op_types
    return None


def devices_taking_op(problem: Problem) -> dict[str, list[str]]:
    """op type → devices that take at least one node of that op type."""
    ops = problem.graph.op_types
    out: dict[str, list[str]] = {}
    for d, dev in enumerate(problem.devices):
        taken = {ops[v] for v in problem.supported[d].nonzero()[0].tolist()}
        for op in sorted(taken):
            out.setdefault(op, []).append(dev)
    return out
