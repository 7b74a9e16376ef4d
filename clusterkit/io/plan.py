"""Deprecated alias (kept for one release): ``clusterkit.io.plan`` moved to
``clusterkit.partition.plan``."""

import warnings

from clusterkit.partition.plan import (
    apply_plan,
    by_name_summary,
    first_mismatch,
    load_plan,
    plan_by_name,
    plan_label,
    plan_nodes,
    plan_selectors,
)

__all__ = ["apply_plan", "by_name_summary", "first_mismatch", "load_plan", "plan_by_name",
           "plan_label", "plan_nodes", "plan_selectors"]

warnings.warn("clusterkit.io.plan is deprecated; import from clusterkit.partition.plan",
              DeprecationWarning, stacklevel=2)
