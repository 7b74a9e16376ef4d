"""Deprecated alias (kept for one release): ``clusterkit.io.partition_json`` moved to
``clusterkit.result.json_format``."""

import warnings

from clusterkit.result.json_format import (
    check_partition_json,
    cluster_nodes,
    make_partition_json,
    model_fingerprint,
    optimized_model_path,
    parse_partition_json,
    partition_json,
    partition_json_chunks,
    partition_json_text,
    read_partition_json,
    source_nodes,
)

__all__ = ["check_partition_json", "cluster_nodes", "make_partition_json", "model_fingerprint",
           "optimized_model_path", "parse_partition_json", "partition_json",
           "partition_json_chunks", "partition_json_text", "read_partition_json", "source_nodes"]

warnings.warn("clusterkit.io.partition_json is deprecated; import from"
              " clusterkit.result.json_format",
              DeprecationWarning, stacklevel=2)
