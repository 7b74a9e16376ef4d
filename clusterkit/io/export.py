"""Deprecated: ``clusterkit.io.export`` moved to ``clusterkit.export.onnx_model``."""

from clusterkit._deprecated import moved_module

__getattr__ = moved_module(__name__, "clusterkit.export.onnx_model")
