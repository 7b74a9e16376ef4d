"""Deprecated alias (kept for one release): ``clusterkit.io.export`` moved to
``clusterkit.export``."""

import warnings

from clusterkit.export.onnx_model import (
    FUNCTION_IR_VERSION,
    MAX_LOCAL_FUNCTIONS,
    MAX_MODEL_BYTES,
    PARTITION_KEY,
    device_domain,
    export_fused,
    export_partition,
    flat_plan,
    model_bytes,
    partition_json_of,
    save_model,
    share_functions,
    wants_external_data,
)

__all__ = ["FUNCTION_IR_VERSION", "MAX_LOCAL_FUNCTIONS", "MAX_MODEL_BYTES", "PARTITION_KEY",
           "device_domain", "export_fused", "export_partition", "flat_plan", "model_bytes",
           "partition_json_of", "save_model", "share_functions", "wants_external_data"]

warnings.warn("clusterkit.io.export is deprecated; import from clusterkit.export",
              DeprecationWarning, stacklevel=2)
