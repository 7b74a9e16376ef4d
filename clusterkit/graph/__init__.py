"""The graph model and the graph algorithms every later stage shares.

:class:`Graph` holds an operator DAG (nodes numbered in a topological order, tensors with sizes,
CSR successor/predecessor arrays); :mod:`.fast` builds one from integer arrays;
:mod:`.subgraph` describes a set of its nodes with its boundary; :mod:`.algorithms` holds the
shared primitives on integer edge lists (topological order, union-find, contraction of groups);
:mod:`.convexity` tells whether a path leaves a node set and comes back; :mod:`.graphcycles` keeps
a dynamic topological order under edge contraction.
"""

from clusterkit.graph.core import HOST, Graph, Node, Tensor
from clusterkit.graph.subgraph import Subgraph, SubgraphNode

__all__ = ["HOST", "Graph", "Node", "Subgraph", "SubgraphNode", "Tensor"]
