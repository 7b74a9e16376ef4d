"""Writing the fused model: ONNX export with every fused cluster a model-local function
(:mod:`clusterkit.export.onnx_model`), the partition JSON kept in its metadata."""

from clusterkit.export.onnx_model import (
    PARTITION_KEY,
    export_fused,
    export_partition,
    model_bytes,
    partition_json_of,
    save_model,
    wants_external_data,
)

__all__ = ["PARTITION_KEY", "export_fused", "export_partition", "model_bytes",
           "partition_json_of", "save_model", "wants_external_data"]
