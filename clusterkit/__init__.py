"""clusterkit: cluster the operator graph of a neural network into subgraphs an accelerator can
run, under constraints, with interchangeable strategies, and fuse each cluster into one op."""

from clusterkit.api import make_problem, partition, run_strategy
from clusterkit.constraints.core import DEFAULT_VALUE_INPUTS, Constraints, Problem
from clusterkit.engines import (
    OptionFlag,
    StrategySpec,
    get_strategy,
    register_strategy,
    strategy_names,
    strategy_spec,
)
from clusterkit.errors import (
    BackendError,
    ClusterkitError,
    ConstraintError,
    CycleError,
    ExecutionError,
    GraphError,
    ModelLoadError,
    PartitionError,
    RenderError,
    SelectorError,
    StrategyError,
    UsageError,
    WriteError,
)
from clusterkit.graph.core import Graph, Node, Tensor
from clusterkit.graph.subgraph import Subgraph, SubgraphNode
from clusterkit.io.loader import load_graph
from clusterkit.io.networkx import (
    from_networkx,
    graph_from_node_link,
    load_node_link,
    to_networkx,
    to_node_link,
)
from clusterkit.result import Cluster, Partition, cut_bytes
from clusterkit.selection.protocol import (
    ContainOpSelector,
    OpsProperty,
    SubgraphProperty,
    SubgraphSelector,
)
from clusterkit.selection.registry import get_property, register_property, registered_properties
from clusterkit.selection.specs import parse_selector, parse_selectors

__version__ = "0.1.0"

#: names resolved on first use, so that ``import clusterkit`` loads no heavy dependency
#: (``load_onnx`` brings in the ``onnx`` package)
_LAZY = {"load_onnx": "clusterkit.io.onnx"}


def __getattr__(name: str):
    """A :data:`_LAZY` name, imported on first access (PEP 562)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'clusterkit' has no attribute {name!r}")

__all__ = [
    "BackendError", "Cluster", "ClusterkitError", "ConstraintError", "Constraints",
    "ContainOpSelector", "CycleError", "DEFAULT_VALUE_INPUTS", "ExecutionError", "Graph",
    "GraphError", "ModelLoadError", "Node", "OpsProperty", "OptionFlag", "Partition",
    "PartitionError", "Problem", "RenderError", "SelectorError", "StrategyError", "StrategySpec",
    "Subgraph", "SubgraphNode",
    "SubgraphProperty", "SubgraphSelector", "Tensor", "cut_bytes", "from_networkx",
    "get_property", "get_strategy", "graph_from_node_link", "load_graph", "load_node_link",
    "load_onnx", "make_problem",
    "parse_selector", "parse_selectors", "partition", "register_property", "register_strategy",
    "registered_properties", "run_strategy", "strategy_names", "strategy_spec",
    "to_networkx", "to_node_link",
    "WriteError", "UsageError",
]
