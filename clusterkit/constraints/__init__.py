"""Constraints and their compiled form, the :class:`Problem` every engine consumes; device
affinity and cost models."""

from clusterkit.constraints.core import DEFAULT_VALUE_INPUTS, Constraints, Problem

__all__ = ["DEFAULT_VALUE_INPUTS", "Constraints", "Problem"]
