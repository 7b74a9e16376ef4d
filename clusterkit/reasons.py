"""Deprecated alias (kept for one release): ``clusterkit.reasons`` moved to
``clusterkit.result.reasons`` (the vocabulary) and ``clusterkit.result.report``."""

import warnings

from clusterkit.result.reasons import (
    BELOW_MIN_SIZE,
    FILTER_DROPPED,
    GROUP_FITS_NO_DEVICE,
    SELECT_REFUSED,
    Category,
    Reason,
    devices_taking_op,
    infer_reason,
    op_in_table,
    refusal_reason,
    selector_explanation,
)
from clusterkit.result.report import fallback_reasons_of, placement_report

__all__ = ["BELOW_MIN_SIZE", "Category", "FILTER_DROPPED", "GROUP_FITS_NO_DEVICE", "Reason",
           "SELECT_REFUSED", "devices_taking_op", "fallback_reasons_of",
           "infer_reason", "op_in_table", "placement_report", "refusal_reason",
           "selector_explanation"]

warnings.warn("clusterkit.reasons is deprecated; import from clusterkit.result.reasons and"
              " clusterkit.result.report",
              DeprecationWarning, stacklevel=2)
