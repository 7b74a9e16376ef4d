"""Deprecated alias (kept for one release): ``clusterkit.io.plan`` moved to
``clusterkit.result.plan``."""

import warnings

from clusterkit.result.plan import (
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

warnings.warn("clusterkit.io.plan is deprecated; import from clusterkit.result.plan",
              DeprecationWarning, stacklevel=2)
