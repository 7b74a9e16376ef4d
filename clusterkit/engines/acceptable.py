"""The old home of the acceptable split: :mod:`clusterkit.passes.acceptable` (re-exported here)."""

from clusterkit.passes.acceptable import (
    convex_prefix,
    make_acceptable,
    split_cluster,
)

__all__ = ["convex_prefix", "make_acceptable", "split_cluster"]
