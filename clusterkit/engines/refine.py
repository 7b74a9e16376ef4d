"""The old home of the refinement: :mod:`clusterkit.passes.refine` (re-exported here)."""

from clusterkit.passes.refine import (
    refine,
)

__all__ = ["refine"]
