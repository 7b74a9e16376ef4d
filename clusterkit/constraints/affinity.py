"""Affinity: which device each node asks for (OpenVINO HETERO's "affinity" runtime info).

Sources, later ones winning:

1. the fallback policy — every node goes to the first device (priority order) whose query
   takes it;
2. the node's own ``affinity`` (node-link JSON attribute, ONNX metadata or attribute: the readers
   fill :attr:`Node.affinity`);
3. rules passed in, in order: ``NAME=DEVICE`` (exact node name), ``re:REGEX=DEVICE`` (regular
   expression searched in node names), ``I-J=DEVICE`` (source positions I to J inclusive: ONNX
   ``graph.node`` / node-link ``nodes`` positions). A node named like a range needs
   ``re:^I-J$``. The device may also be the fallback.

As in OpenVINO, the fallback policy is skipped as soon as one node has a manual affinity (2 or 3);
nodes without one then go to the fallback, unless ``fill`` asks the policy to place them.

A manual affinity to a device that does not support the node sends the node to the fallback with
the reason recorded (a ``"manual affinity"`` :class:`~clusterkit.result.reasons.Reason`)
instead of failing: the placement report then lists every such node at once, where an error
would stop at the first. An affinity naming a device that does not exist, a malformed rule or a
rule matching no node is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.errors import ConstraintError
from clusterkit.result.reasons import Category, Reason

_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


@dataclass(frozen=True)
class AffinityRule:
    """One manual affinity rule: ``kind`` is ``"name"``, ``"regex"`` or ``"range"``."""

    kind: str
    pattern: str
    device: str
    text: str
    lo: int = -1
    hi: int = -1

    def matches(self, problem: Problem) -> list[int]:
        """Topological indices of the nodes the rule names (ascending); raises when none."""
        g = problem.graph
        if self.kind == "name":
            idx = g.name_to_index.get(self.pattern)
            if idx is None:
                raise ConstraintError(f"affinity rule {self.text!r}: no node named "
                                      f"{self.pattern!r}")
            return [idx]
        if self.kind == "range":
            if self.hi >= g.n:
                raise ConstraintError(f"affinity rule {self.text!r}: node positions go from 0 to "
                                      f"{g.n - 1}")
            return sorted(g.source_to_index[self.lo:self.hi + 1].tolist())
        rx = re.compile(self.pattern)
        found = [nd.index for nd in g.nodes if rx.search(nd.name)]
        if not found:
            raise ConstraintError(f"affinity rule {self.text!r}: the regular expression matches "
                                  "no node name")
        return found


def parse_rule(text: str) -> AffinityRule:
    """``NAME=DEVICE``, ``re:REGEX=DEVICE`` or ``I-J=DEVICE`` (split at the last ``=``)."""
    body, sep, device = str(text).rpartition("=")
    device = device.strip()
    if not sep or not body or not device:
        raise ConstraintError(f"affinity rule {text!r} is not NAME=DEVICE, re:REGEX=DEVICE or "
                              "I-J=DEVICE")
    if body.startswith("re:"):
        pattern = body[3:]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConstraintError(f"affinity rule {text!r}: bad regular expression ({exc})") \
                from None
        return AffinityRule("regex", pattern, device, text)
    m = _RANGE.match(body)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        if lo > hi:
            raise ConstraintError(f"affinity rule {text!r}: the range {lo}-{hi} is empty")
        return AffinityRule("range", body, device, text, lo, hi)
    return AffinityRule("name", body, device, text)


def resolve_device(problem: Problem, name: str, where: str) -> int:
    """Device index of ``name`` (-1 for the fallback); exact match first, then ignoring case."""
    names = list(problem.devices) + [problem.fallback]
    if name in names:
        return problem.device_index(name)
    folded = [d for d in names if d.lower() == name.lower()]
    if len(folded) == 1:
        return problem.device_index(folded[0])
    raise ConstraintError(f"{where}: unknown device {name!r} (devices: "
                          f"{', '.join(problem.devices) or 'none'}; fallback {problem.fallback})")


@dataclass
class Affinity:
    """The affinity of every node.

    ``device[v]``: device index (-1: fallback) node ``v`` goes to; ``requested[v]``: the device
    name a manual affinity asked for (``None`` when none); ``origin[v]``: ``"auto"``,
    ``"attribute"``, ``"rule <text>"`` or ``"none"``; ``mode``: ``"auto"``, ``"manual"`` or
    ``"manual+fill"``; ``fallback_reasons``: nodes the affinity step itself sent to the
    fallback, with why."""

    device: np.ndarray
    requested: list[str | None]
    origin: list[str]
    mode: str
    fallback_reasons: dict[int, Reason] = field(default_factory=dict)

    @property
    def manual_count(self) -> int:
        return sum(r is not None for r in self.requested)


def compute_affinity(problem: Problem, rules: Iterable[str | AffinityRule] = (),
                     fill: bool = False, use_attributes: bool = True) -> Affinity:
    """Affinity per node from node attributes, ``rules`` and the fallback policy."""
    g = problem.graph
    n = g.n
    requested: list[str | None] = [None] * n
    origin = ["auto"] * n
    if use_attributes:
        for nd in g.nodes:
            if nd.affinity:
                requested[nd.index] = str(nd.affinity).strip()
                origin[nd.index] = "attribute"
    for rule in rules:
        rule = rule if isinstance(rule, AffinityRule) else parse_rule(rule)
        resolve_device(problem, rule.device, f"affinity rule {rule.text!r}")
        for v in rule.matches(problem):
            requested[v] = rule.device
            origin[v] = f"rule {rule.text}"
    manual = any(r is not None for r in requested)
    mode = "auto" if not manual else ("manual+fill" if fill else "manual")
    first = problem.first_device
    device = first.copy()
    reasons: dict[int, Reason] = {}
    if manual:
        for v in range(n):
            want = requested[v]
            if want is None:
                if not fill:
                    device[v] = -1
                    origin[v] = "none"
                    reasons[v] = _manual("no affinity set (manual affinities are in use and "
                                         "fill_affinity is off)")
                continue
            d = resolve_device(problem, want, f"affinity of node {g.nodes[v].name!r}")
            if d < 0:
                device[v] = -1
                reasons[v] = _manual(f"affinity {want!r} ({origin[v]}) is the fallback")
            elif problem.supported[d, v]:
                device[v] = d
            else:
                device[v] = -1
                reasons[v] = _manual(f"affinity {want!r} ({origin[v]}), but "
                                     f"{problem.devices[d]} does not support "
                                     f"{g.nodes[v].op_type} here")
    return Affinity(device=np.asarray(device, dtype=np.int64), requested=requested,
                    origin=origin, mode=mode, fallback_reasons=reasons)


def _manual(detail: str) -> Reason:
    return Reason(Category.MANUAL_AFFINITY, detail)
