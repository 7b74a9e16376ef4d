"""clusterkit.torch: the fx reader, the support adapters and the drop-in partitioner, on models
defined here with torch, checked against torch's own partitioner and by running the fused
modules."""

from __future__ import annotations

import operator

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner as TorchPartitioner  # noqa: E402
from torch.fx.passes.operator_support import OperatorSupportBase  # noqa: E402

import clusterkit as ck  # noqa: E402
from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag  # noqa: E402
from clusterkit.torch import (  # noqa: E402
    CapabilityBasedPartitioner,
    FxSupportProperty,
    OpsSupport,
    SelectorSupport,
    op_name,
    read_fx,
)
from clusterkit.torch.synthetic import graph_module_from_dag, synthetic_support  # noqa: E402

CALLS = ("call_function", "call_module", "call_method")


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.pool(torch.relu(self.conv2(y)) + y)
        return self.fc(torch.flatten(self.pool(y), 1))


class FanOut(nn.Module):
    """A residual fan-out whose middle branch goes through sigmoid (which the support rejects)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)
        self.c = nn.Linear(16, 16)

    def forward(self, x):
        h = torch.relu(self.a(x))
        left = self.b(h) * 2.0
        middle = torch.sigmoid(h)
        right = torch.tanh(self.c(h))
        return left + middle * right + h


class Rejects(OperatorSupportBase):
    """Takes every function call except those whose op name contains one of ``words``."""

    def __init__(self, *words: str):
        self.words = words

    def is_node_supported(self, submodules, node) -> bool:
        return (node.op == "call_function"
                and not any(w in op_name(node, submodules) for w in self.words))


def _export(model: nn.Module, *args):
    return torch.export.export(model.eval(), args)


def _case(name: str):
    torch.manual_seed(0)
    if name == "cnn":
        return SmallCNN().eval(), (torch.randn(2, 3, 16, 16),), Rejects("max_pool")
    if name == "transformer":
        layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                           batch_first=True)
        return layer.eval(), (torch.randn(2, 5, 16),), Rejects("softmax")
    return FanOut().eval(), (torch.randn(4, 16),), Rejects("sigmoid")


def _units(gm, partitions) -> dict:
    unit = {nd: ("p", k) for k, p in enumerate(partitions) for nd in p.nodes}
    return {nd: unit.get(nd, ("n", nd.name)) for nd in gm.graph.nodes}


def is_acyclic(gm, partitions) -> bool:
    """Independent check: the graph of partitions (other nodes alone) has no cycle."""
    unit = _units(gm, partitions)
    succ: dict = {u: set() for u in unit.values()}
    indeg = dict.fromkeys(succ, 0)
    for nd in gm.graph.nodes:
        for src in nd.all_input_nodes:
            a, b = unit[src], unit[nd]
            if a != b and b not in succ[a]:
                succ[a].add(b)
                indeg[b] += 1
    ready = [u for u, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        u = ready.pop()
        seen += 1
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return seen == len(succ)


def names(partitions) -> list[set[str]]:
    return [{nd.name for nd in p.nodes} for p in partitions]


@pytest.mark.parametrize("case", ["cnn", "transformer", "fanout"])
def test_fused_module_matches_and_compares_with_torch(case):
    model, args, support = _case(case)
    expected = model(*args)
    ours = CapabilityBasedPartitioner(_export(model, *args).module(), support)
    theirs_gm = _export(model, *args).module()
    parts = ours.propose_partitions()
    theirs = TorchPartitioner(theirs_gm, support).propose_partitions()
    assert parts and is_acyclic(ours.graph_module, parts)
    for p in parts:  # nothing the support rejects, in graph order
        assert all(support.is_node_supported({}, nd) for nd in p.nodes
                   if nd.target is not operator.getitem)
        order = list(ours.graph_module.graph.nodes)
        assert list(p.nodes) == sorted(p.nodes, key=order.index)
    if is_acyclic(theirs_gm, theirs):
        assert len(parts) <= len(theirs)
        assert set().union(*names(parts)) == set().union(*names(theirs))
    fused = ours.fuse_partitions(parts)
    assert sum(1 for nd in fused.graph.nodes if str(nd.target).startswith("fused_")) == len(parts)
    torch.testing.assert_close(fused(*args), expected)


def test_partition_and_fuse_is_deterministic_and_single_nodes_follow_torch_rules():
    model, args, support = _case("fanout")
    runs = [names(CapabilityBasedPartitioner(_export(model, *args).module(), support,
                                             allows_single_node_partition=True)
                  .propose_partitions()) for _ in range(2)]
    assert runs[0] == runs[1]
    # with single nodes allowed, every supported node is placed
    gm = _export(model, *args).module()
    supported = {nd.name for nd in gm.graph.nodes if support.is_node_supported({}, nd)}
    assert set().union(*runs[0]) == supported
    # a partition that is one compute node is dropped unless its op is allowed alone
    lone = Rejects("linear", "relu", "mul", "add", "tanh")  # only sigmoid is left
    gm = _export(model, *args).module()
    assert CapabilityBasedPartitioner(gm, lone).propose_partitions() == []
    kept = CapabilityBasedPartitioner(
        gm, lone, allowed_single_node_partition_ops=["torch.ops.aten.sigmoid.default"])
    assert names(kept.propose_partitions()) == [{"sigmoid"}]
    fused = CapabilityBasedPartitioner(_export(model, *args).module(), support).partition_and_fuse()
    torch.testing.assert_close(fused(*args), model(*args))


def test_reader_on_exported_program_sizes_and_parameters():
    model, args, _ = _case("cnn")
    ep = _export(model, *args)
    graph = read_fx(ep)
    calls = [nd for nd in ep.graph_module.graph.nodes if nd.op in CALLS]
    assert [nd.name for nd in graph.nodes] == [nd.name for nd in calls]
    assert {nd.op_type for nd in graph.nodes} >= {"aten.conv2d.default", "aten.relu.default",
                                                  "aten.linear.default"}
    out = graph.tensors[graph.outputs[0]]
    assert out.nbytes == model(*args).numel() * 4
    params = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    assert sum(t.nbytes for t in graph.tensors.values() if t.is_initializer) == params
    assert graph.inputs == [nd.name for nd in ep.graph_module.graph.nodes
                            if nd.op == "placeholder" and nd.name not in
                            set(ep.graph_signature.inputs_to_parameters)
                            | set(ep.graph_signature.inputs_to_buffers)]


def test_reader_on_traced_modules_counts_module_parameters():
    model = SmallCNN()
    gm = torch.fx.symbolic_trace(model)
    graph = read_fx(gm)
    conv = graph.node("conv1")
    assert (conv.op_type, conv.domain) == ("Conv2d", "torch.nn.modules.conv")
    weight_bytes = sum(p.numel() * 4 for p in model.conv1.parameters())
    assert int(graph.const_bytes[conv.index]) == weight_bytes
    assert graph.node("flatten").op_type == "torch.flatten"


def test_fx_support_drives_clusterkit_and_clusterkit_selectors_drive_torch():
    model, args, support = _case("fanout")
    gm = _export(model, *args).module()
    graph = read_fx(gm)
    part = ck.partition(graph, [FxSupportProperty(support, gm, device="npu")], strategy="cycles")
    on_npu = {graph.nodes[v].name for c in part.offloaded_clusters() for v in c.nodes}
    assert on_npu == {nd.name for nd in gm.graph.nodes
                      if nd.op in CALLS and support.is_node_supported({}, nd)}
    # a clusterkit spec as an fx predicate, in torch's own partitioner
    spec = SelectorSupport("ops:aten.linear.default,aten.relu.default")
    theirs = TorchPartitioner(_export(model, *args).module(), spec).propose_partitions()
    ops = {op_name(nd) for p in theirs for nd in p.nodes}
    assert theirs and ops <= {"aten.linear.default", "aten.relu.default"}


def test_synthetic_long_edge_dag_partitions_valid_and_runnable():
    dag = long_edge_dag(300, seed=3)
    support = synthetic_support(LONG_EDGE_SUPPORTED)
    gm = graph_module_from_dag(dag)
    x = torch.randn(3)
    expected = gm(x)
    ours = CapabilityBasedPartitioner(gm, support, strategy="longest-path")
    parts = ours.propose_partitions()
    assert parts and is_acyclic(gm, parts)
    supported_ops = {f"synthetic.{op}" for op in LONG_EDGE_SUPPORTED}
    assert all(op_name(nd) in supported_ops for p in parts for nd in p.nodes)
    assert all(len(p.nodes) >= 2 for p in parts)
    assert sum(1 for op in dag.ops if op in LONG_EDGE_SUPPORTED) >= sum(map(len, names(parts)))
    torch.testing.assert_close(ours.fuse_partitions(parts)(x), expected)


def test_skip_horizontal_fusion_graph_where_torch_proposes_a_cycle():
    """long_edge_dag(60, seed=46): torch 2.13's partitioner with skip_horizontal_fusion=True
    proposes partitions that depend on each other (its fuser then refuses them); the drop-in
    accepts the flag and its partitions stay acyclic and fuse into a module that computes the
    same outputs."""
    support = synthetic_support(LONG_EDGE_SUPPORTED)
    gm = graph_module_from_dag(long_edge_dag(60, seed=46))
    x = torch.randn(2)
    expected = gm(x)
    ours = CapabilityBasedPartitioner(gm, support, skip_horizontal_fusion=True)
    parts = ours.propose_partitions()
    assert parts and is_acyclic(gm, parts)
    torch.testing.assert_close(ours.fuse_partitions(parts)(x), expected)


def test_refuses_what_is_not_a_graph_module():
    with pytest.raises(ck.errors.GraphError, match="GraphModule"):
        read_fx(nn.Linear(2, 2))
    with pytest.raises(ck.errors.SelectorError, match="is_node_supported"):
        FxSupportProperty(object(), torch.fx.symbolic_trace(FanOut()))
    assert OpsSupport(["torch.relu"]).is_node_supported({}, next(iter(
        torch.fx.symbolic_trace(FanOut()).graph.nodes))) is False
    gm = torch.fx.symbolic_trace(FanOut())
    with pytest.raises(ck.errors.StrategyError, match="nope"):
        CapabilityBasedPartitioner(gm, OpsSupport(["torch.relu"]), strategy="nope"
                                   ).propose_partitions()


class _CappedOps(OperatorSupportBase):
    """An fx predicate declaring a device limit of its own (``max_nodes``)."""

    max_nodes = 3

    def is_node_supported(self, submodules, node) -> bool:
        return op_name(node) in ("aten.linear.default", "aten.relu.default")


def _capped_supports():
    prop = ck.parse_selector("ops:aten.linear.default,aten.relu.default")
    prop.max_nodes = 3
    return [SelectorSupport(prop), _CappedOps()]


@pytest.mark.parametrize("strategy", ["auto", "mxnet", "cycles", "longest-path"])
@pytest.mark.parametrize("which", [0, 1], ids=["wrapped-property", "predicate-attribute"])
def test_the_drop_in_keeps_a_declared_max_nodes(strategy, which):
    """Six Linear+ReLU pairs, all supported, under a 3-node limit: every proposed partition
    holds at most 3 nodes, and together they still take all 12."""
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(4, 4), nn.ReLU())])
    gm = _export(model, torch.randn(2, 4)).module()
    support = _capped_supports()[which]
    parts = CapabilityBasedPartitioner(gm, support, strategy=strategy).propose_partitions()
    sizes = [len(p.nodes) for p in parts]
    assert sizes and max(sizes) <= 3, sizes
    wanted = [nd for nd in gm.graph.nodes if nd.op in CALLS and support.is_node_supported({}, nd)]
    assert len(wanted) == 12 and sum(sizes) == 12, sizes


class _CountingSelector(ck.SubgraphSelector):
    """Takes Linear and ReLU, at most ``limit`` per cluster (a count kept while it grows)."""

    OPS = ("aten.linear.default", "aten.relu.default")

    def __init__(self, limit: int):
        self.limit, self.taken = limit, 0

    def select(self, node) -> bool:
        ok = node.op_type in self.OPS
        self.taken += ok
        return ok

    def select_input(self, node, new_node) -> bool:
        return self.taken < self.limit and self.select(new_node)

    def select_output(self, node, new_node) -> bool:
        return self.taken < self.limit and self.select(new_node)

    def reset(self) -> None:
        self.taken = 0


class _CountingDevice(ck.SubgraphProperty):
    def create_subgraph_selector(self):
        return _CountingSelector(3)


class _RejectingDevice(ck.SubgraphProperty):
    """Takes Linear and ReLU; its compiler refuses a subgraph of more than 4 nodes."""

    def create_subgraph_selector(self):
        return ck.ContainOpSelector(_CountingSelector.OPS)

    def create_subgraph_node(self, subgraph):
        return None if len(subgraph.nodes) > 4 else super().create_subgraph_node(subgraph)


@pytest.mark.parametrize("strategy", ["auto", "mxnet", "cycles", "longest-path"])
@pytest.mark.parametrize("device, cap", [(_CountingDevice, 3), (_RejectingDevice, 4)],
                         ids=["stateful-selector", "create_subgraph_node"])
def test_the_drop_in_keeps_a_wrapped_propertys_own_decisions(strategy, device, cap):
    """A wrapped property whose verdict is not node by node (a count kept while a cluster
    grows; a compiler refusing large subgraphs): every proposed partition is one the property
    accepts (checked here by counting and by asking it), and together they take all 12."""
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(4, 4), nn.ReLU())])
    gm = _export(model, torch.randn(2, 4)).module()
    support = SelectorSupport(device("fx"))
    parts = CapabilityBasedPartitioner(gm, support, strategy=strategy).propose_partitions()
    sizes = [len(p.nodes) for p in parts]
    assert sizes and max(sizes) <= cap and sum(sizes) == 12, sizes
