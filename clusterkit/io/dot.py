"""Deprecated: ``clusterkit.io.dot`` moved to ``clusterkit.result.dot``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.result.dot")
