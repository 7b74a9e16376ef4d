"""The old home of level merging: :mod:`clusterkit.passes.horizontal` (re-exported here)."""

from clusterkit.passes.horizontal import (
    fit_levels,
    merge_levels,
    refits,
)

__all__ = ["fit_levels", "merge_levels", "refits"]
