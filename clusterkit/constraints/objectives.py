"""Clustering objectives: what "better" means when partitions are compared.

Every objective is lexicographic: first the fewest fallback nodes (offload as much as possible,
otherwise leaving everything on the host would trivially win with cut 0), then the least
``w_cut * cut_bytes + w_partitions * partitions``. Parsing, the weights and the comparison key
live here, once, for the exact engines, the exhaustive oracle and the gap analysis alike; the key
takes a partition's metrics (a mapping), so this module needs nothing above the constraints.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping, NamedTuple

from clusterkit.errors import StrategyError
from clusterkit.modes import ObjectiveName

TERMS = ("cut", "partitions")

#: an objective: a name, weights as text (``"cut=1,partitions=1000"``) or a mapping, or None
#: (``cut``)
ObjectiveSpec = ObjectiveName | str | Mapping[str, float] | None


class Objective(NamedTuple):
    """Parsed objective weights and a label (``cut``, ``partitions`` or
    ``cut=W1,partitions=W2``)."""

    w_cut: float
    w_parts: float
    label: str

    def key(self, metrics: Mapping[str, float]) -> tuple[int, float]:
        """The lexicographic key of a partition's metrics (smaller is better)."""
        return partition_key(metrics, self.w_cut, self.w_parts)


def objective_weights(objective: str | Mapping[str, float]) -> tuple[float, float]:
    """``cut``, ``partitions`` or ``{"cut": w1, "partitions": w2}`` → (w_cut, w_partitions)."""
    if isinstance(objective, str):
        if objective == "cut":
            return 1.0, 0.0
        if objective == "partitions":
            return 0.0, 1.0
        raise StrategyError(f"unknown objective {objective!r} (cut, partitions, or weights)")
    unknown = set(objective) - set(TERMS)
    if unknown:
        raise StrategyError(f"unknown objective term {sorted(unknown)[0]!r}")
    return float(objective.get("cut", 0.0)), float(objective.get("partitions", 0.0))


def parse_objective(objective: ObjectiveSpec) -> Objective:
    """``"cut"`` (also None), ``"partitions"``, ``"cut=1,partitions=1000"`` (also
    ``"1*cut+1000*partitions"``) or a mapping → :class:`Objective`."""
    if objective is None:
        objective = "cut"
    if isinstance(objective, str):
        text = objective.strip()
        if text in TERMS:
            w_cut, w_parts = objective_weights(text)
            return Objective(w_cut, w_parts, text)
        objective = _parse_terms(objective)
    w_cut, w_parts = objective_weights(dict(objective))
    if w_cut < 0 or w_parts < 0 or not (math.isfinite(w_cut) and math.isfinite(w_parts)):
        raise StrategyError(f"objective weights must be finite and >= 0, got {dict(objective)}")
    return Objective(w_cut, w_parts, f"cut={w_cut:g},partitions={w_parts:g}")


def _parse_terms(objective: str) -> dict[str, float]:
    """``"cut=1,partitions=1000"`` or ``"1*cut+1000*partitions"`` → weights per term."""
    weights: dict[str, float] = {}
    items = [x for x in objective.strip().replace("+", ",").split(",") if x.strip()]
    if not items:
        raise StrategyError(f"objective {objective!r} is empty (cut, partitions, or "
                            "cut=W1,partitions=W2)")
    for item in items:
        if "=" in item:
            key, _, raw = item.partition("=")
        elif "*" in item:
            raw, _, key = item.partition("*")
        else:
            key, raw = item, "1"
        key = key.strip()
        try:
            value = float(raw)
        except ValueError:
            raise StrategyError(f"objective term {item.strip()!r}: weight {raw.strip()!r} "
                                "is not a number") from None
        if key not in TERMS:
            raise StrategyError(f"objective term {item.strip()!r}: unknown term {key!r} "
                                "(cut, partitions)")
        if not math.isfinite(value) or value < 0:
            raise StrategyError(f"objective weight of {key!r} must be finite and >= 0, got "
                                f"{raw.strip()!r}")
        weights[key] = weights.get(key, 0.0) + value
    return weights


def partition_key(metrics: Mapping[str, float], w_cut: float, w_parts: float
                  ) -> tuple[int, float]:
    """The lexicographic objective of a partition from its metrics
    (``fallback_nodes``, ``cut_bytes``, ``partitions``): ``(fallback nodes, objective)``."""
    return (int(metrics["fallback_nodes"]),
            w_cut * metrics["cut_bytes"] + w_parts * metrics["partitions"])


def integer_weights(w_cut: float, w_parts: float) -> tuple[int, int, int]:
    """Integer weights ``(c, p, scale)`` with ``c / scale == w_cut`` and ``p / scale == w_parts``
    (exact for weights with at most 6 decimals)."""
    fc = Fraction(w_cut).limit_denominator(10 ** 6)
    fp = Fraction(w_parts).limit_denominator(10 ** 6)
    scale = math.lcm(fc.denominator, fp.denominator)
    return int(fc * scale), int(fp * scale), scale
