"""Random ONNX models and the helpers the fusion, executor and export tests share: each real
model loaded once, an independent leveled partition, the multi-node strategy list."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnxruntime as ort
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import clusterkit as ck
from clusterkit import OpsProperty, Partition
from clusterkit.fusion import value_info

MULTI = [s for s in ("cycles", "longest-path", "mxnet", "hetero") if s in ck.strategy_names()]
UNARY = ["Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Identity"]
BINARY = ["Add", "Mul", "Sub", "Max", "Min"]
SHAPE = [2, 3]
FAST_ORT = {"graph_optimization_level": "disable", "intra_op_num_threads": 1}


@functools.lru_cache(maxsize=None)
def load(path) -> ck.Graph:
    """Each real model loaded once per test session."""
    return ck.load_graph(str(path))


def level_partition(problem) -> Partition:
    """An independent multi-node partition (TVM's longest-path leveling, written here from
    scratch): a node's level is the longest path from the sources where an edge weighs 0 when both
    ends sit on the same device and may share a cluster, 1 otherwise; a cluster is the nodes of one
    level and device. Checked with validate()."""
    g = problem.graph
    dev = problem.first_device.tolist()
    ok = {d: problem.contractible(d).tolist() for d in range(len(problem.devices))}
    src = g.edge_src.tolist()
    pred_edge, ptr = g.pred_edge.tolist(), g.pred_ptr.tolist()
    level = [0] * g.n
    for v in range(g.n):
        best = 0
        for k in range(ptr[v], ptr[v + 1]):
            e = pred_edge[k]
            u = src[e]
            w = 0 if dev[u] == dev[v] >= 0 and ok[dev[v]][e] else 1
            best = max(best, level[u] + w)
        level[v] = best
    labels = np.asarray(level, dtype=np.int64) * (len(problem.devices) + 1) + np.asarray(dev) + 1
    part = Partition.from_assignment(problem, labels, dev, strategy="level")
    return part.validate()


def partition_with(problem, strategy: str) -> Partition:
    """``level`` (the helper above) or a registered strategy (validated)."""
    if strategy == "level":
        return level_partition(problem)
    return ck.run_strategy(problem, strategy)


@st.composite
def onnx_models(draw, max_nodes: int = 10):
    """A random ONNX model of elementwise ops on [2, 3] float tensors: one or two graph inputs,
    an initializer, optionally a ConstantOfShape weight stub and a constant computed from it;
    every dangling tensor and a random few others are graph outputs."""
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    inputs = ["in0"] + (["in1"] if draw(st.booleans()) else [])
    inits = [numpy_helper.from_array(rng.standard_normal(SHAPE).astype(np.float32), "w0")]
    nodes = []
    avail = list(inputs) + ["w0"]
    if draw(st.booleans()):
        inits.append(numpy_helper.from_array(np.asarray(SHAPE, dtype=np.int64), "stub_shape"))
        nodes.append(helper.make_node(
            "ConstantOfShape", ["stub_shape"], ["stub"], name="stub",
            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])))
        avail.append("stub")
        if draw(st.booleans()):
            nodes.append(helper.make_node("Mul", ["stub", "w0"], ["stub_w"], name="stub_w"))
            avail.append("stub_w")
    n = draw(st.integers(1, max_nodes))
    for k in range(n):
        op = draw(st.sampled_from(UNARY + BINARY))
        arity = 1 if op in UNARY else 2
        ins = [avail[draw(st.integers(0, len(avail) - 1))] for _ in range(arity)]
        if all(t in ("w0", "stub", "stub_w") for t in ins) and draw(st.booleans()):
            ins[0] = draw(st.sampled_from(inputs))
        nodes.append(helper.make_node(op, ins, [f"t{k}"], name=f"n{k}"))
        avail.append(f"t{k}")
    read = {t for nd in nodes for t in nd.input}
    produced = [o for nd in nodes for o in nd.output]
    outs = [t for t in produced if t not in read]
    outs += [t for t in produced if t not in outs and draw(st.integers(0, 4)) == 0]
    vi = lambda t: helper.make_tensor_value_info(t, TensorProto.FLOAT, SHAPE)  # noqa: E731
    graph = helper.make_graph(nodes, "random", [vi(t) for t in inputs], [vi(t) for t in outs],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def float_model(nodes, name: str, inputs: list[str], outputs: list[str],
                shape=(2, 3)) -> onnx.ModelProto:
    """A small opset-17 model of ``nodes`` whose inputs and outputs are float tensors of
    ``shape``."""
    vi = lambda t: helper.make_tensor_value_info(t, TensorProto.FLOAT, list(shape))  # noqa: E731
    graph = helper.make_graph(nodes, name, [vi(t) for t in inputs], [vi(t) for t in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@st.composite
def random_problems(draw, max_nodes: int = 10, max_devices: int = 2):
    """(model, problem): a random model and 1..max_devices ``ops:`` devices over its op types."""
    model = draw(onnx_models(max_nodes))
    graph = ck.load_graph(model)
    ops = sorted(set(graph.op_types))
    props = []
    for d in range(draw(st.integers(1, max_devices))):
        take = draw(st.sets(st.sampled_from(ops), min_size=1))
        props.append(OpsProperty(sorted(take), device=f"dev{d}"))
    return model, ck.Constraints.default().compile(graph, props)


def intermediate_values(model: onnx.ModelProto, graph: ck.Graph, names, feeds):
    """Values of any tensors of the original model (exposed as extra outputs): the oracle."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(value_info(graph.tensors[t]) for t in names if t not in have)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(list(names), feeds)))
