"""Aids for testing engines and selectors: the selector conformance kit, the exhaustive oracle
and synthetic DAGs."""
