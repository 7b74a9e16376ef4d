"""The old home of coalescing: :mod:`clusterkit.passes.coalesce` (re-exported here)."""

from clusterkit.passes.coalesce import (
    PAIR_LIMIT,
    coalesce,
)

__all__ = ["PAIR_LIMIT", "coalesce"]
