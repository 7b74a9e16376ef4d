"""Deprecated: ``clusterkit.engines.refine`` moved to ``clusterkit.passes.refine``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.passes.refine")
