"""The partition: a cluster and a device for every node, what it is checked against, what it
measures and says, and its file formats. (The package is ``result``, not ``partition``: that
name is the function :func:`clusterkit.partition`.)

One job per module: :mod:`~clusterkit.result.cluster` (a cluster, what the helpers read of a
partition), :mod:`~clusterkit.result.model` (:class:`Partition`, its constructors and cached
views), :mod:`~clusterkit.result.validate`, :mod:`~clusterkit.result.metrics`,
:mod:`~clusterkit.result.reasons` (why a node is on the fallback: the vocabulary, which reads
only the compiled problem), :mod:`~clusterkit.result.report` (the placement report and the
summary line), :mod:`~clusterkit.result.json_format` (the partition JSON, its one writer and
reader), :mod:`~clusterkit.result.plan` (re-applying a saved partition) and
:mod:`~clusterkit.result.dot` (Graphviz DOT).
"""

from clusterkit.constraints.limits import cluster_const_bytes
from clusterkit.result.cluster import Cluster, PartitionLike
from clusterkit.result.dot import partition_dot
from clusterkit.result.json_format import (
    partition_json,
    partition_json_text,
    read_partition_json,
)
from clusterkit.result.metrics import cut_bytes
from clusterkit.result.model import Partition
from clusterkit.result.plan import apply_plan
from clusterkit.result.reasons import Category, Reason
from clusterkit.result.report import (
    cut_note,
    folded_note,
    placement_report,
    plural,
    summary_line,
)

__all__ = ["Category", "Cluster", "Partition", "PartitionLike", "Reason", "apply_plan",
           "cluster_const_bytes", "cut_bytes", "cut_note", "folded_note", "partition_dot",
           "partition_json", "partition_json_text", "placement_report", "plural",
           "read_partition_json", "summary_line"]
