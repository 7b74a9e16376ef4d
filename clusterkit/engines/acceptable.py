"""Deprecated: ``clusterkit.engines.acceptable`` moved to ``clusterkit.passes.acceptable``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.passes.acceptable")
