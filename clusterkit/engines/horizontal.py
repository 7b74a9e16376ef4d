"""Deprecated: ``clusterkit.engines.horizontal`` moved to ``clusterkit.passes.horizontal``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.passes.horizontal")
