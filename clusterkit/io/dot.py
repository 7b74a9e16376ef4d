"""Deprecated alias (kept for one release): ``clusterkit.io.dot`` moved to
``clusterkit.result.dot``."""

import warnings

from clusterkit.result.dot import (
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

warnings.warn("clusterkit.io.dot is deprecated; import from clusterkit.result.dot",
              DeprecationWarning, stacklevel=2)
