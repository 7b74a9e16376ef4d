"""Deprecated: ``clusterkit.engines.devices`` moved to ``clusterkit.passes.devices``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.passes.devices")
