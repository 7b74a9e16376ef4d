"""The partition: a cluster and a device for every node, what it is checked against, what it
measures and says, and its file formats."""

from clusterkit.partition.json_format import (
    partition_json,
    partition_json_text,
    read_partition_json,
)
from clusterkit.partition.model import Cluster, Partition, cut_bytes
from clusterkit.partition.plan import apply_plan
from clusterkit.partition.reasons import Category, Reason, placement_report

__all__ = ["Category", "Cluster", "Partition", "Reason", "apply_plan", "cut_bytes",
           "partition_json", "partition_json_text", "placement_report", "read_partition_json"]
