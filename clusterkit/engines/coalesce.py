"""Deprecated: ``clusterkit.engines.coalesce`` moved to ``clusterkit.passes.coalesce``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.passes.coalesce")
