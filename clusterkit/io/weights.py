"""Real-valued weights for models shipped without them.

The bundled models (and the ``onnx`` package's light models) keep their weights as
``ConstantOfShape`` stubs: every weight is one repeated value, whose sums overflow fp16 on an
accelerator that computes in it and say nothing of a compiled graph's numerics.
:func:`random_weights` replaces each such stub by a ``Constant`` node of the same name and output
holding seeded random values of the stub's shape, so node positions, names and every partition
stay the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from clusterkit.errors import ModelLoadError

if TYPE_CHECKING:
    import onnx


def random_weights(model: "onnx.ModelProto", seed: int = 0) -> "onnx.ModelProto":
    """A copy of ``model`` whose floating-point ``ConstantOfShape`` stubs with a constant shape
    (an initializer) are ``Constant`` nodes of seeded random values: normal with standard
    deviation ``1/sqrt(fan_in)`` (fan-in: the product of every axis after the first) for weights
    of rank 2 and more, so activations keep their scale layer after layer; uniform in [0.5, 1.5]
    for rank 0 and 1 (scales, variances: positive). Other nodes are untouched."""
    import onnx
    from onnx import helper, numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    shapes = {t.name: t for t in out.graph.initializer}
    rng = np.random.default_rng(seed)
    for k, node in enumerate(out.graph.node):
        if node.op_type != "ConstantOfShape" or node.domain not in ("", "ai.onnx"):
            continue
        fill = _fill_dtype(node)
        if fill is None or not node.input or node.input[0] not in shapes:
            continue
        shape = [int(d) for d in numpy_helper.to_array(shapes[node.input[0]]).reshape(-1)]
        values = _draw(rng, shape).astype(fill)
        out.graph.node[k].CopyFrom(helper.make_node(
            "Constant", [], list(node.output), name=node.name,
            value=numpy_helper.from_array(values, node.output[0])))
    return out


def _fill_dtype(node) -> np.dtype | None:
    """The float dtype a ``ConstantOfShape`` fills with (float32 by default), else None."""
    from onnx import helper, numpy_helper

    for attr in node.attribute:
        if attr.name == "value":
            dtype = numpy_helper.to_array(helper.get_attribute_value(attr)).dtype
            return dtype if dtype.kind == "f" else None
    return np.dtype(np.float32)


def _draw(rng: np.random.Generator, shape: list[int]) -> np.ndarray:
    if any(d < 0 for d in shape):
        raise ModelLoadError(f"a ConstantOfShape weight stub has a negative dimension: {shape}")
    if len(shape) < 2:
        return rng.uniform(0.5, 1.5, size=shape)
    fan_in = max(1, int(np.prod(shape[1:])))
    return rng.standard_normal(shape) / np.sqrt(fan_in)
