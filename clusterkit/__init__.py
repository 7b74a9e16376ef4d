"""clusterkit: cluster the operator graph of a neural network into subgraphs an accelerator can
run, under constraints, with interchangeable strategies, and fuse each cluster into one op."""

from typing import TYPE_CHECKING, Any

from clusterkit._deprecated import module_getattr, warn_renamed
from clusterkit.api import make_problem, partition, run_strategy
from clusterkit.constraints.core import Constraints, Problem
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
    InfeasibleError,
    MemoryShortfallError,
    ModelLoadError,
    PartitionError,
    PlatformError,
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
    load_node_link,
    to_networkx,
    to_node_link,
)
from clusterkit.result.cluster import Cluster
from clusterkit.result.model import Partition
from clusterkit.selection.protocol import (
    ContainOpSelector,
    OpsProperty,
    SubgraphProperty,
    SubgraphSelector,
)
from clusterkit.selection.registry import get_selector, register_selector, registered_selectors
from clusterkit.selection.specs import parse_selector, parse_selectors

__version__ = "0.1.0"

#: names resolved on first use (PEP 562), so that ``import clusterkit`` loads no heavy
#: dependency: ``load_onnx`` and the ONNX export bring in ``onnx``, the executor ``onnxruntime``
#: when it runs; the rest of the pipeline (fusion, execution, comparison) is loaded on demand
_LAZY = {
    "load_onnx": "clusterkit.io.onnx",
    "fuse": "clusterkit.fusion", "flatten": "clusterkit.fusion",
    "FusedGraph": "clusterkit.fusion",
    "Executor": "clusterkit.runtime.executor", "run_model": "clusterkit.runtime.executor",
    "random_inputs": "clusterkit.runtime.executor",
    "compare_outputs": "clusterkit.runtime.executor",
    "OnnxRuntimeBackend": "clusterkit.runtime.backends",
    "get_backend": "clusterkit.runtime.backends",
    "register_backend": "clusterkit.runtime.backends",
    "export_fused": "clusterkit.export", "export_partition": "clusterkit.export",
    "compare": "clusterkit.analysis.compare", "format_table": "clusterkit.analysis.compare",
    "Platform": "clusterkit.constraints.platform",
    "AcceleratorSpec": "clusterkit.constraints.platform",
    "CpuSpec": "clusterkit.constraints.platform",
    "read_platform": "clusterkit.constraints.platform",
    "model_instance": "clusterkit.constraints.platform",
    "PlacementInstance": "clusterkit.io.placement_instance",
    "read_instance": "clusterkit.io.placement_instance",
    "write_instance": "clusterkit.io.placement_instance",
    "profile_model": "clusterkit.runtime.profile",
}

if TYPE_CHECKING:  # the lazy names for type checkers and editors (tests/test_lazy_imports.py
    # checks they are _LAZY's; they reach __all__ through it: pyproject lets ruff know)
    from clusterkit.analysis.compare import compare, format_table
    from clusterkit.constraints.platform import (
        AcceleratorSpec,
        CpuSpec,
        Platform,
        model_instance,
        read_platform,
    )
    from clusterkit.export import export_fused, export_partition
    from clusterkit.fusion import FusedGraph, flatten, fuse
    from clusterkit.io.onnx import load_onnx
    from clusterkit.io.placement_instance import PlacementInstance, read_instance, write_instance
    from clusterkit.runtime.backends import OnnxRuntimeBackend, get_backend, register_backend
    from clusterkit.runtime.executor import Executor, compare_outputs, random_inputs, run_model
    from clusterkit.runtime.profile import profile_model


#: old public names (deprecated, with a warning): old -> new
_RENAMED = {"get_property": "get_selector", "register_property": "register_selector",
            "registered_properties": "registered_selectors"}
_renamed = module_getattr(__name__, _RENAMED, globals(), stacklevel=4)
#: names no longer at the top level (deprecated, with a warning naming their home): name -> home
_MOVED = {"cut_bytes": "clusterkit.result.metrics",
          "DEFAULT_VALUE_INPUTS": "clusterkit.constraints.core",
          "graph_from_node_link": "clusterkit.io.node_link"}


def __getattr__(name: str) -> Any:
    """A :data:`_LAZY` name, imported on first access (PEP 562), or a deprecated old or
    :data:`_MOVED` name (with a warning)."""
    if name in _RENAMED:
        return _renamed(name)
    home = _LAZY.get(name) or _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'clusterkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    if name in _MOVED:
        warn_renamed(f"{__name__}.{name}", f"{home}.{name}")
    else:
        globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy ones included."""
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "BackendError", "Cluster", "ClusterkitError", "ConstraintError", "Constraints",
    "ContainOpSelector", "CycleError", "ExecutionError", "Graph", "GraphError",
    "InfeasibleError", "MemoryShortfallError", "ModelLoadError", "Node", "OpsProperty",
    "OptionFlag", "Partition", "PartitionError", "PlatformError", "Problem", "RenderError",
    "SelectorError", "StrategyError", "StrategySpec", "Subgraph", "SubgraphNode",
    "SubgraphProperty", "SubgraphSelector", "Tensor", "UsageError", "WriteError",
    "from_networkx", "get_selector", "get_strategy", "load_graph", "load_node_link",
    "make_problem", "parse_selector", "parse_selectors", "partition", "register_selector",
    "register_strategy", "registered_selectors", "run_strategy", "strategy_names",
    "strategy_spec", "to_networkx", "to_node_link",
    *_LAZY,  # loaded on first use
]
