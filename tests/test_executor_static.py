"""Values fixed by static input shapes (``static_info``): every one is what a session of the
whole model computes, including the shape chains onnxruntime would fuse into a Reshape."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import clusterkit as ck
from clusterkit.fusion import value_info
from clusterkit.runtime.backends.onnxruntime_backend import static_info
from clusterkit.runtime.executor import random_inputs
from support.models import BUNDLED_MODELS
from support.onnx_models import load


def _reshape_chain_model():
    """y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) * 2."""
    c = lambda name, v: helper.make_node(  # noqa: E731
        "Constant", [], [name], value=numpy_helper.from_array(np.asarray(v, dtype=np.int64)))
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"), c("i0", 0), c("ax", [0]),
             c("minus", [-1]), helper.make_node("Gather", ["s", "i0"], ["g"], name="gather"),
             helper.make_node("Unsqueeze", ["g", "ax"], ["u"], name="unsq"),
             helper.make_node("Concat", ["u", "minus"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
             helper.make_node("Add", ["r", "r"], ["y"], name="add")]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 3, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [2, 12])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_reshape_target_computed_from_shapes_is_known():
    info = static_info(ck.load_graph(_reshape_chain_model()))
    assert info is not None
    assert "target" in info.values
    np.testing.assert_array_equal(numpy_helper.to_array(info.values["target"]), [2, -1])


def test_static_values_are_what_the_whole_model_computes():
    graph = load(BUNDLED_MODELS / "swin_t.onnx")
    info = static_info(graph)
    assert info is not None and info.values
    model = type(graph.model)()
    model.CopyFrom(graph.model)
    names = sorted(info.values)
    model.graph.output.extend(value_info(graph.tensors[t]) for t in names)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    got = dict(zip(names, sess.run(names, random_inputs(graph))))
    for t in names:
        np.testing.assert_array_equal(numpy_helper.to_array(info.values[t]), got[t], err_msg=t)


def test_no_unit_only_computes_shape_arithmetic():
    """With the partial selector on swin_t, the shape arithmetic between steps (Shape, Gather,
    Cast of sizes: folded by a whole-model session) is known before any run, so no unit is left
    whose outputs are all integer tensors."""
    from clusterkit.fusion import fuse
    from clusterkit.runtime.executor import Executor

    graph = load(BUNDLED_MODELS / "swin_t.onnx")
    host_only = {"Softmax", "Erf", "Pow", "Sqrt", "ReduceMean", "Where", "GlobalAveragePool",
                 "Gather", "Cast"}
    ops = sorted(set(graph.op_types) - host_only)
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:" + ",".join(ops)]), "cycles")
    ex = Executor(fuse(part), backend_config={"onnxruntime": {"intra_op_num_threads": 1}})
    for u in ex.steps:
        kinds = {np.dtype(graph.tensors[t].dtype).kind for t in u.outputs}
        assert kinds - {"i", "u"}, (u.name, u.outputs)
