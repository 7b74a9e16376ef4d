"""The active size and constant limits of a compiled problem, global and per device, in one object.

A limit is global (``Constraints.min_size`` / ``max_size`` / ``max_const_bytes``, the CLI's
``--min-size`` / ``--max-size`` / ``--max-const-bytes``: every device) or the device's own (a
property's ``min_nodes`` / ``max_nodes`` / ``max_const_bytes``, see
:data:`~clusterkit.selection.protocol.LIMIT_SETTINGS`). A cluster on device ``d`` must meet both,
so :class:`Limits` keeps, per device, the tighter of the two: that is all an engine, a pass or a
report needs to ask (:meth:`Limits.fits`, :meth:`Limits.violation`, :meth:`Limits.describe`).

A node limit has three meanings, each with its own name: the user's setting
(``Constraints.max_size``), the global limit compiled from it (:attr:`Limits.global_max`, which
:meth:`~clusterkit.constraints.core.Problem.with_limits` may set anew) and the loosest over the
devices (:attr:`Limits.loosest_max`: what every cluster must meet whatever its device). The same
holds for the minimum (``global_min`` / ``loosest_min``) and the constant budget
(``global_bytes`` / ``loosest_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from clusterkit._deprecated import renamed_attribute, warn_renamed
from clusterkit.errors import ConstraintError
from clusterkit.selection.protocol import check_device_limits, device_limits

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph
    from clusterkit.selection.protocol import SubgraphProperty


def cluster_const_bytes(graph: "Graph", nodes: Iterable[int]) -> int:
    """Bytes of the distinct constant tensors the nodes read."""
    seen: set[str] = set()
    total = 0
    for v in nodes:
        for t in graph.nodes[v].all_inputs():
            ten = graph.tensors[t]
            if ten.is_constant and t not in seen:
                seen.add(t)
                total += ten.nbytes or 0
    return total


def _tighter_max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _loosest_max(limits: tuple[int | None, ...]) -> int | None:
    return None if None in limits else max(limits)  # type: ignore[type-var]


@dataclass(frozen=True)
class Limits:
    """Global limits and, per device index, the effective ones (global and the device's own,
    the tighter of each). ``None`` means no upper limit; a minimum is at least 1."""

    graph: "Graph"
    global_min: int
    global_max: int | None
    global_bytes: int | None
    devices: tuple[str, ...]
    max_nodes: tuple[int | None, ...]
    min_nodes: tuple[int, ...]
    max_const: tuple[int | None, ...]
    min_size = renamed_attribute("global_min")
    max_size = renamed_attribute("global_max")
    max_const_bytes = renamed_attribute("global_bytes")

    @classmethod
    def build(cls, graph: "Graph", min_size: int, max_size: int | None,
              max_const_bytes: int | None,
              properties: Sequence["SubgraphProperty"]) -> "Limits":
        """The limits of a problem: the global ones (the settings ``min_size`` / ``max_size``
        / ``max_const_bytes``) and each property's own (checked)."""
        own = []
        for prop in properties:
            check_device_limits(prop)
            lim = device_limits(prop)
            if lim["min_nodes"] is not None and max_size is not None \
                    and lim["min_nodes"] > max_size:
                raise ConstraintError(f"device {prop.device!r}: setting min_nodes="
                                      f"{lim['min_nodes']} is above max_size {max_size}")
            own.append(lim)
        return cls(graph, min_size, max_size, max_const_bytes,
                   tuple(p.device for p in properties),
                   tuple(_tighter_max(max_size, o["max_nodes"]) for o in own),
                   tuple(max(min_size, o["min_nodes"] or 1) for o in own),
                   tuple(_tighter_max(max_const_bytes, o["max_const_bytes"]) for o in own))

    def tighter(self, d: int) -> bool:
        """Whether device ``d``'s effective limits differ from the loosest: a limit of its own
        that a cluster on another device need not meet."""
        return (self.max_nodes[d] != self.loosest_max or self.min_nodes[d] != self.loosest_min
                or self.max_const[d] != self.loosest_bytes)

    @property
    def any_minimum(self) -> bool:
        """Whether some cluster must have 2 nodes or more (global or a device's own)."""
        return self.global_min > 1 or any(lo > 1 for lo in self.min_nodes)

    @property
    def any_maximum(self) -> bool:
        """Whether some cluster has a node limit (global or a device's own)."""
        return self.global_max is not None or any(hi is not None for hi in self.max_nodes)

    @property
    def any_bytes(self) -> bool:
        """Whether some cluster has a constant-byte budget (global or a device's own)."""
        return self.global_bytes is not None or any(c is not None for c in self.max_const)

    @property
    def bounded(self) -> bool:
        """Whether some cluster has an upper limit (nodes or constant bytes)."""
        return self.any_maximum or self.any_bytes

    @property
    def loosest_min(self) -> int:
        """The smallest cluster every device allows: the loosest minimum (the global one
        without devices)."""
        return min(self.min_nodes) if self.devices else self.global_min

    @property
    def loosest_max(self) -> int | None:
        """The largest cluster some device allows, ``None`` for no limit: every cluster meets
        it whatever its device (the global one without devices)."""
        return _loosest_max(self.max_nodes) if self.devices else self.global_max

    @property
    def loosest_bytes(self) -> int | None:
        """The largest constant budget some device allows, ``None`` for no limit (the global
        one without devices)."""
        return _loosest_max(self.max_const) if self.devices else self.global_bytes

    def loosest(self) -> tuple[int, int | None, int | None]:
        """Deprecated: ``(loosest_min, loosest_max, loosest_bytes)``."""
        warn_renamed("Limits.loosest()", "Limits.loosest_min, loosest_max, loosest_bytes")
        return self.loosest_min, self.loosest_max, self.loosest_bytes

    def fits(self, nodes: Sequence[int], device: int | str, minimum: bool = True) -> bool:
        """Whether a cluster of ``nodes`` on ``device`` (index or name) meets every limit
        (``minimum=False``: every upper limit, for a cluster that may still grow)."""
        return self.violation(nodes, device, minimum) is None

    def violation(self, nodes: Sequence[int], device: int | str,
                  minimum: bool = True) -> str | None:
        """The limit a cluster of ``nodes`` on ``device`` breaks, as a phrase ("its 30-node
        cluster is above max_nodes 24"), or ``None`` when it fits (``minimum``: as for
        :meth:`fits`)."""
        d = self.devices.index(device) if isinstance(device, str) else device
        size = len(nodes)
        hi, lo, cb = self.max_nodes[d], self.min_nodes[d], self.max_const[d]
        if hi is not None and size > hi:
            return f"its {size}-node cluster is above {self.setting(d, 'max')} {hi}"
        if minimum and size < lo:
            return f"its {size}-node cluster is below {self.setting(d, 'min')} {lo}"
        if cb is not None:
            held = cluster_const_bytes(self.graph, nodes)
            if held > cb:
                return (f"its cluster holds {held:,} bytes of constants, above "
                        f"{self.setting(d, 'bytes')} {cb:,}")
        return None

    def setting(self, d: int, which: str) -> str:
        """The setting device ``d``'s effective limit ``which`` (``"max"``, ``"min"`` or
        ``"bytes"``) comes from: the global one (``max_size``) or the device's own
        (``npu's max_nodes``)."""
        dev = self.devices[d]
        if which == "max":
            glob = self.global_max is not None and self.max_nodes[d] == self.global_max
            return "max_size" if glob else f"{dev}'s max_nodes"
        if which == "min":
            return "min_size" if self.min_nodes[d] == self.global_min else f"{dev}'s min_nodes"
        glob = self.global_bytes is not None and self.max_const[d] == self.global_bytes
        return "max_const_bytes" if glob else f"{dev}'s max_const_bytes"

    def describe(self) -> str:
        """One line: the global limits, then each device's own ("" when there are none)."""
        return "; ".join(self.phrases())

    def phrases(self) -> list[str]:
        """The active limits, one phrase each: ``min_size 2``, ``max_size 64``,
        ``max_const_bytes N``, then ``DEVICE: max_nodes 24, ...`` per device with its own."""
        parts = []
        if self.global_min > 1:
            parts.append(f"min_size {self.global_min}")
        if self.global_max is not None:
            parts.append(f"max_size {self.global_max}")
        if self.global_bytes is not None:
            parts.append(f"max_const_bytes {self.global_bytes:,}")
        for d, dev in enumerate(self.devices):
            own = [f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                   for k, v, g in (("max_nodes", self.max_nodes[d], self.global_max),
                                   ("min_nodes", self.min_nodes[d], self.global_min),
                                   ("max_const_bytes", self.max_const[d],
                                    self.global_bytes)) if v != g]
            if own:
                parts.append(f"{dev}: " + ", ".join(own))
        return parts
