"""Deprecated: ``clusterkit.io.partition_json`` moved to ``clusterkit.result.json_format``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.result.json_format")
