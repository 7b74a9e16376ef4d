"""A drop-in for torch.fx's ``CapabilityBasedPartitioner`` that clusters with clusterkit.

Same constructor, same ``propose_partitions()`` (a list of :class:`Cluster`, a subclass of
torch's own ``torch.fx.passes.infra.partitioner.Partition``), ``fuse_partitions()`` and
``partition_and_fuse()``; changing the import switches a project over. The fx rules are kept
where they decide the result: unsupported nodes stay outside; ``getitem`` users of a node whose
users are all ``getitem`` follow their producer (one together group); without
``allows_single_node_partition`` a partition with at most one compute node (a ``call_function``
outside ``non_compute_ops``, counting twice when in ``allowed_single_node_partition_ops``) is
dropped. Device limits the predicate declares (``max_nodes``, ``min_nodes``,
``max_const_bytes``, its own or its wrapped clusterkit property's) hold, and so do a wrapped
property's stateful selector, ``filter`` and ``create_subgraph_node``. The clusters come from
a clusterkit strategy (``auto`` by default), whose partitions are validated acyclic; dropping a
partition turns its nodes into singletons outside, which keeps the quotient acyclic, so the
result is always valid, and deterministic.
"""

from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np
from torch.fx import GraphModule
from torch.fx import Node as FxNode
from torch.fx.node import _get_qualified_name
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner as _TorchPartitioner
from torch.fx.passes.infra.partitioner import Partition as _FxPartition
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from clusterkit._deprecated import module_getattr
from clusterkit.api import run_strategy
from clusterkit.constraints.acceptance import overrides
from clusterkit.constraints.core import Constraints
from clusterkit.graph.algorithms import UnionFind
from clusterkit.graph.core import Graph, Node
from clusterkit.result.model import Partition as ClusterkitPartition
from clusterkit.selection.protocol import (
    LIMIT_SETTINGS,
    SubgraphProperty,
    SubgraphSelector,
    call_create_subgraph_selector,
    call_filter,
    call_select,
    call_select_input,
    call_select_output,
    device_limits,
    is_stateful,
    set_device_limits,
)
from clusterkit.torch.reader import read_fx
from clusterkit.torch.support import FxSupportProperty

__all__ = ["CapabilityBasedPartitioner", "Cluster", "DEFAULT_NON_COMPUTE_OPS"]

class Cluster(_FxPartition):
    """One cluster of :meth:`CapabilityBasedPartitioner.propose_partitions`: its fx nodes in
    graph order. torch.fx calls it a partition (this is its
    ``torch.fx.passes.infra.partitioner.Partition``, which every torch.fx consumer takes);
    ``clusterkit.torch.Partition`` is the deprecated old name of this class."""


#: torch's own default non-compute ops of the single-node rule
DEFAULT_NON_COMPUTE_OPS = frozenset({"torch.ops.aten.view", "_operator.getitem"})


class _MaskSelector(SubgraphSelector):
    def __init__(self, mask: np.ndarray):
        self.mask = mask

    def select(self, node: Node) -> bool:
        return bool(self.mask[node.index])

    def supported_mask(self, graph: Graph) -> np.ndarray:
        return self.mask


class _MaskProperty(SubgraphProperty):
    """The fx predicate's answers after the getitem rule, as a device."""

    name = "fx"

    def __init__(self, mask: np.ndarray, device: str):
        super().__init__(device)
        self.mask = mask

    def create_subgraph_selector(self) -> SubgraphSelector:
        return _MaskSelector(self.mask)


class _WrappedSelector(SubgraphSelector):
    """A wrapped clusterkit property's selector on the fx answers after the getitem rule: a
    node the rule added (a getitem following its producer, ``own`` False) is taken without
    asking it; every other answer, its state, ``filter`` and ``reset`` are the selector's."""

    def __init__(self, mask: np.ndarray, own: np.ndarray, inner: SubgraphSelector):
        self.mask, self.own, self.inner = mask, own, inner

    @property
    def stateful(self) -> bool:  # answers for the wrapped selector
        return is_stateful(self.inner)

    def select(self, node: Node) -> bool:
        if not self.mask[node.index]:
            return False
        return call_select(self.inner, node) if self.own[node.index] else True

    def select_input(self, node: Node, new_node: Node) -> bool:
        if not self.mask[new_node.index]:
            return False
        return (call_select_input(self.inner, node, new_node) if self.own[new_node.index]
                else True)

    def select_output(self, node: Node, new_node: Node) -> bool:
        if not self.mask[new_node.index]:
            return False
        return (call_select_output(self.inner, node, new_node) if self.own[new_node.index]
                else True)

    def filter(self, candidates: list[Node]) -> list[Node]:
        asked = [c for c in candidates if self.own[c.index]]
        kept = {id(c) for c in call_filter(self.inner, asked)}
        return [c for c in candidates if id(c) in kept or not self.own[c.index]]

    def reset(self) -> None:
        self.inner.reset()

    def supported_mask(self, graph: Graph) -> np.ndarray:
        return self.mask


class _WrappedProperty(_MaskProperty):
    """:class:`_MaskProperty` for a predicate wrapping a clusterkit property whose verdict
    depends on more than single nodes (a stateful selector, its own ``filter`` or
    ``create_subgraph_node``): its selector and its subgraph decisions are kept."""

    def __init__(self, mask: np.ndarray, own: np.ndarray, wrapped: SubgraphProperty,
                 device: str):
        super().__init__(mask, device)
        self.own, self.wrapped = own, wrapped

    def create_subgraph_selector(self) -> SubgraphSelector:
        return _WrappedSelector(self.mask, self.own, call_create_subgraph_selector(self.wrapped))

    def create_subgraph_node(self, subgraph: Any) -> Any:
        return self.wrapped.create_subgraph_node(subgraph)

    def explain_subgraph(self, subgraph: Any) -> str | None:
        explain = getattr(self.wrapped, "explain_subgraph", None)
        return explain(subgraph) if callable(explain) else None


def _fx_device(support: OperatorSupportBase, supported: np.ndarray,
               own: np.ndarray) -> SubgraphProperty:
    """The device of the fx answers ``supported`` (after the getitem rule; ``own``: before it):
    the wrapped clusterkit property's selector and subgraph decisions when they matter, and
    the limits the predicate declares."""
    wrapped = getattr(support, "property", None)
    base: SubgraphProperty = _MaskProperty(supported, "fx")
    if isinstance(wrapped, SubgraphProperty):
        sel = call_create_subgraph_selector(wrapped)
        if is_stateful(sel) or overrides(sel, "filter", SubgraphSelector) \
                or overrides(wrapped, "create_subgraph_node", SubgraphProperty):
            base = _WrappedProperty(supported, own, wrapped, "fx")
    return set_device_limits(base, **declared_limits(support))


class CapabilityBasedPartitioner(_TorchPartitioner):
    """torch.fx's partitioner interface over clusterkit's strategies (see the module docstring).

    ``skip_horizontal_fusion`` is accepted for compatibility and changes nothing: the partitions
    are acyclic either way. ``strategy`` names a clusterkit strategy and ``options`` are its
    keyword options; ``auto`` ranks by partitions before cut here (``prefer="partitions"``,
    torch's own aim: fewest partitions) unless ``options`` say otherwise."""

    def __init__(self, graph_module: GraphModule, operator_support: OperatorSupportBase,
                 allows_single_node_partition: bool = False,
                 non_compute_ops: Sequence[str] | None = None,
                 allowed_single_node_partition_ops: Sequence[str] | None = None,
                 skip_horizontal_fusion: bool = False, *, strategy: str = "auto",
                 options: dict[str, Any] | None = None) -> None:
        # torch's __init__ is not called: it precomputes every node's downstream set
        self.graph_module = graph_module
        self.operator_support = operator_support
        self.allows_single_node_partition = allows_single_node_partition
        self.non_compute_ops = list(non_compute_ops) if non_compute_ops is not None else []
        self.allowed_single_node_partition_ops = (
            list(allowed_single_node_partition_ops)
            if allowed_single_node_partition_ops is not None else [])
        self.skip_horizontal_fusion = skip_horizontal_fusion
        self.strategy = strategy
        self.options = dict(options or {})
        if strategy == "auto":
            self.options.setdefault("prefer", "partitions")
        #: the clusterkit partition behind the last :meth:`propose_partitions`
        self.last_partition: ClusterkitPartition | None = None

    def propose_partitions(self) -> list[Cluster]:
        """Clusters of the supported nodes (torch.fx's partitions: each a :class:`Cluster`, a
        torch ``Partition``), their nodes in graph order (ids in order of their first node)."""
        graph = read_fx(self.graph_module)
        fx_nodes = {nd.name: nd for nd in self.graph_module.graph.nodes}
        prop = FxSupportProperty(self.operator_support, self.graph_module, device="fx")
        supported = prop.create_subgraph_selector().supported_mask(graph)
        assert supported is not None  # FxSupportProperty's selectors always have a mask
        own = supported
        supported, groups = _getitem_rule(graph, fx_nodes, supported)
        device = _fx_device(self.operator_support, supported, own)
        problem = Constraints(together=groups).compile(graph, [device])
        part = run_strategy(problem, self.strategy, **self.options)
        self.last_partition = part
        order = {nd: k for k, nd in enumerate(reversed(self.graph_module.graph.nodes))}
        out: list[Cluster] = []
        for cluster in part.offloaded_clusters():
            members = [fx_nodes[graph.nodes[v].name] for v in cluster.nodes]
            if not self.allows_single_node_partition and self._compute_count(members) <= 1:
                continue
            members.sort(key=order.__getitem__, reverse=True)
            out.append(Cluster(id=len(out), nodes=members,
                               node_orders=[order[nd] for nd in members]))
        return out

    def _compute_count(self, members: list[FxNode]) -> int:
        """torch's count of compute nodes for the single-node rule."""
        non_compute = DEFAULT_NON_COMPUTE_OPS | set(self.non_compute_ops)
        allowed = set(self.allowed_single_node_partition_ops)
        count = 0
        for nd in members:
            if nd.op != "call_function":
                continue
            qualified = _get_qualified_name(nd.target)
            count += (qualified not in non_compute) + (qualified in allowed)
        return count

    def fuse_partitions(self, partitions: Sequence[_FxPartition], prefix: str = "fused_"
                        ) -> GraphModule:
        """Replace each partition by a call to a submodule ``<prefix><k>`` (torch's fuser)."""
        return fuse_by_partitions(self.graph_module, [p.nodes for p in partitions],
                                  prefix=prefix)

    def partition_and_fuse(self, prefix: str = "fused_") -> GraphModule:
        """:meth:`propose_partitions` then :meth:`fuse_partitions`."""
        return self.fuse_partitions(self.propose_partitions(), prefix=prefix)


def declared_limits(support: OperatorSupportBase) -> dict[str, int | None]:
    """The device limits (``max_nodes``, ``min_nodes``, ``max_const_bytes``) an fx predicate
    declares: its own attributes, else those of the clusterkit property it wraps
    (:class:`~clusterkit.torch.support.SelectorSupport`'s ``property``)."""
    own = device_limits(support)
    wrapped = device_limits(getattr(support, "property", None))
    return {k: own[k] if own[k] is not None else wrapped[k] for k in LIMIT_SETTINGS}


def _getitem_rule(graph: Graph, fx_nodes: dict[str, FxNode], supported: np.ndarray
                  ) -> tuple[np.ndarray, list[list[int | str]]]:
    """torch's getitem rule: the ``getitem`` users of a node whose users are all ``getitem``
    go where the node goes. Returns the support after the rule and the together groups (a
    supported producer with its getitems; chains of getitems joined)."""
    supported = supported.copy()
    index = graph.name_to_index
    uf = UnionFind(graph.n)
    follows = False
    for nd in graph.nodes:  # topological: a producer is decided before its getitems
        users = list(fx_nodes[nd.name].users)
        if not users or not all(_is_getitem(u) for u in users):
            continue
        for user in users:
            u = index.get(user.name)
            if u is None:
                continue
            supported[u] = supported[nd.index]
            if supported[nd.index]:
                uf.union(nd.index, u)
                follows = True
    if not follows:
        return supported, []
    members: dict[int, list[int | str]] = {}  # the node refs of Constraints.together
    for v in range(graph.n):
        members.setdefault(uf.find(v), []).append(v)
    return supported, [g for g in members.values() if len(g) > 1]


def _is_getitem(node: FxNode) -> bool:
    return node.op == "call_function" and node.target is operator.getitem


__getattr__ = module_getattr(__name__, {"Partition": "Cluster"}, globals())
