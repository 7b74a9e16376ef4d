"""fx GraphModules with the structure of a clusterkit Graph, for benchmarks and tests.

:func:`graph_module_from_graph` makes one ``call_function`` fx node per Graph node, in the
Graph's topological order, whose arguments are the fx nodes of its producers; nodes without a
producer read the one placeholder ``x``, and the nodes without consumers are returned. Each
node's target is a small function named after its op type in the ``synthetic`` namespace
(op name ``synthetic.<op>``) that adds its arguments, so the module runs on a tensor ``x``, and
its ``tensor_meta`` gives the node's byte size (a ``uint8`` vector of that length).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Iterable

import torch
from torch.fx import Graph as FxGraph
from torch.fx import GraphModule
from torch.fx.passes.shape_prop import TensorMetadata

from clusterkit.graph.core import Graph
from clusterkit.graph.fast import graph_from_dag
from clusterkit.torch.support import OpsSupport

__all__ = ["SYNTHETIC_NAMESPACE", "graph_module_from_graph", "graph_module_from_dag",
           "synthetic_op", "synthetic_support"]

#: the module name of the synthetic op functions (their op names are ``synthetic.<op>``)
SYNTHETIC_NAMESPACE = "synthetic"


@lru_cache(maxsize=None)
def synthetic_op(op_type: str) -> Callable:
    """The fx target standing for ``op_type``: adds its arguments."""

    def op(*args):
        total = args[0]
        for arg in args[1:]:
            total = total + arg
        return total

    op.__name__ = op.__qualname__ = op_type
    op.__module__ = SYNTHETIC_NAMESPACE
    return op


def synthetic_support(op_types: Iterable[str]) -> OpsSupport:
    """An fx predicate taking the synthetic nodes of these op types."""
    return OpsSupport(f"{SYNTHETIC_NAMESPACE}.{op}" for op in op_types)


def _meta(nbytes: int | None) -> TensorMetadata | None:
    if nbytes is None:
        return None
    return TensorMetadata(shape=torch.Size([int(nbytes)]), dtype=torch.uint8,
                          requires_grad=False, stride=(1,), memory_format=None,
                          is_quantized=False, qparams={})


def graph_module_from_graph(graph: Graph) -> GraphModule:
    """A runnable fx GraphModule with ``graph``'s structure (see the module docstring); fx node
    ``n<i>`` stands for Graph node ``i``."""
    fx = FxGraph()
    x = fx.placeholder("x")
    made: list = []  # fx nodes
    preds = graph.pred_lists
    nbytes = graph.tensor_table.nbytes.tolist() if graph.n else []
    producer = graph.tensor_table.producer.tolist() if graph.n else []
    size_of = {p: b for p, b in zip(producer, nbytes) if p >= 0}
    for node in graph.nodes:
        args = tuple(made[p] for p in preds[node.index]) or (x,)
        fx_node = fx.create_node("call_function", synthetic_op(node.op_type), args,
                                 name=f"n{node.index}")
        meta = _meta(size_of.get(node.index))
        if meta is not None:
            fx_node.meta["tensor_meta"] = meta
        made.append(fx_node)
    sinks = [made[v] for v in range(graph.n) if not graph.succ_lists[v]]
    fx.output(tuple(sinks) if sinks else x)
    return GraphModule(torch.nn.Module(), fx, class_name=graph.name.replace("-", "_") or "G")


def graph_module_from_dag(dag, name: str = "synthetic") -> GraphModule:
    """:func:`graph_module_from_graph` of a :class:`clusterkit.testing.synthetic.SyntheticDAG`."""
    return graph_module_from_graph(graph_from_dag(dag, name=name))
