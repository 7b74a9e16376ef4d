"""The partition: a cluster and a device for every node, what it is checked against, what it
measures and says, and its file formats.

One job per module: :mod:`~clusterkit.partition.cluster` (a cluster, what the helpers read of a
partition), :mod:`~clusterkit.partition.model` (:class:`Partition`, its constructors and cached
views), :mod:`~clusterkit.partition.validate`, :mod:`~clusterkit.partition.metrics`,
:mod:`~clusterkit.partition.reasons` (why a node is on the fallback: the vocabulary, which reads
only the compiled problem), :mod:`~clusterkit.partition.report` (the placement report and the
summary line), :mod:`~clusterkit.partition.json_format` (the partition JSON, its one writer and
reader), :mod:`~clusterkit.partition.plan` (re-applying a saved partition) and
:mod:`~clusterkit.partition.dot` (Graphviz DOT).
"""

from clusterkit.partition.cluster import Cluster, PartitionLike
from clusterkit.partition.dot import partition_dot
from clusterkit.partition.json_format import (
    partition_json,
    partition_json_text,
    read_partition_json,
)
from clusterkit.partition.metrics import cut_bytes
from clusterkit.partition.model import Partition
from clusterkit.partition.plan import apply_plan
from clusterkit.partition.reasons import Category, Reason
from clusterkit.partition.report import (
    cut_note,
    folded_note,
    placement_report,
    plural,
    summary_line,
)

__all__ = ["Category", "Cluster", "Partition", "PartitionLike", "Reason", "apply_plan",
           "cut_bytes", "cut_note", "folded_note", "partition_dot", "partition_json",
           "partition_json_text", "placement_report", "plural", "read_partition_json",
           "summary_line"]
