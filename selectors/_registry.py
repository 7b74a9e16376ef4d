"""Registers every shipped selector module under its ``--selector`` name."""

from __future__ import annotations

import importlib

from clusterkit.selection.protocol import register_property

#: ``--selector`` name → module in this package defining ``make_property(device=...)``.
SHIPPED = {
    "coreml": "coreml", "nnapi": "nnapi", "xnnpack": "xnnpack", "qnn": "qnn", "dnnl": "dnnl",
    "tensorrt": "tensorrt", "openvino_npu": "openvino_npu",
}


def register_shipped() -> None:
    """Register the shipped selectors whose modules are present."""
    for name, module in SHIPPED.items():
        try:
            mod = importlib.import_module(f"clusterkit.selectors.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"clusterkit.selectors.{module}":
                continue
            raise
        register_property(name, mod.make_property, (mod.__doc__ or "").strip().splitlines()[0])
