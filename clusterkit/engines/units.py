"""Deprecated: ``clusterkit.engines.units`` moved to ``clusterkit.engines.super_nodes``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.engines.super_nodes",
                           renames={"UnitGraph": "SuperNodeGraph"})
