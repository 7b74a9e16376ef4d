"""Deprecated: ``clusterkit.io.plan`` moved to ``clusterkit.result.plan``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.result.plan")
