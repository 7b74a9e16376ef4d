"""Deprecated: ``clusterkit.reasons`` moved to
``clusterkit.result.reasons`` and ``clusterkit.result.report``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.result.reasons", "clusterkit.result.report")
