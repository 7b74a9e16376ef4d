"""Deprecated alias (kept for one release): ``clusterkit.result`` moved to
``clusterkit.partition``."""

import warnings

from clusterkit.constraints.limits import cluster_const_bytes
from clusterkit.partition.cluster import Cluster
from clusterkit.partition.metrics import cut_bytes
from clusterkit.partition.model import Partition
from clusterkit.partition.report import cut_note, folded_note, plural

__all__ = ["Cluster", "Partition", "cluster_const_bytes", "cut_bytes", "cut_note", "folded_note",
           "plural"]

warnings.warn("clusterkit.result is deprecated; import from clusterkit.partition",
              DeprecationWarning, stacklevel=2)
