"""Aids for testing engines and selectors: the selector conformance kit, the exhaustive oracle
and synthetic DAGs. ``from clusterkit.testing import check_selector`` runs every conformance
rule on a selector or property (see :mod:`clusterkit.testing.conformance`)."""

from clusterkit.testing.conformance import (
    CHECKS,
    RULES,
    ConformanceError,
    ConformanceReport,
    RuleResult,
    check_selector,
    rule_results,
)

__all__ = ["CHECKS", "RULES", "ConformanceError", "ConformanceReport", "RuleResult",
           "check_selector", "rule_results"]
