"""Deprecated alias (kept for one release): ``clusterkit.io.dot`` moved to
``clusterkit.partition.dot``."""

import warnings

from clusterkit.partition.dot import (
    FALLBACK_COLOR,
    PALETTE,
    UNKNOWN_COLOR,
    affinities,
    affinity_dot,
    device_colors,
    dot_quote,
    dot_to_svg,
    dump_dot,
    dump_files,
    graph_dot,
    partition_dot,
    partition_svg,
    subgraphs_dot,
)

__all__ = ["FALLBACK_COLOR", "PALETTE", "UNKNOWN_COLOR", "affinities", "affinity_dot",
           "device_colors", "dot_quote", "dot_to_svg", "dump_dot", "dump_files", "graph_dot",
           "partition_dot", "partition_svg", "subgraphs_dot"]

warnings.warn("clusterkit.io.dot is deprecated; import from clusterkit.partition.dot",
              DeprecationWarning, stacklevel=2)
