"""Small DAG shapes for exhaustive checks, and the named ``ops:`` selector sets that the tests and
the benchmarks share.

:func:`shape_edges` draws the edges of a tiny DAG of a named shape (``chain``, ``fan``,
``diamond``, ``random``, ``dense``); the randomness comes from a ``coin`` callable so that
hypothesis strategies and seeded numpy generators draw the same shapes.
"""

from __future__ import annotations

from typing import Callable

from clusterkit.errors import GraphError

SHAPES = ("random", "chain", "fan", "diamond", "dense")

#: ``ops:`` selector sets for real-model sweeps (a CNN accelerator, a wide one, two devices)
SELECTOR_SETS: dict[str, list[str]] = {
    "cnn": ["npu=ops:Conv,Relu,BatchNormalization,MaxPool,AveragePool,GlobalAveragePool,Clip,"
            "HardSwish,HardSigmoid,Sigmoid,Mul"],
    "wide": ["npu=ops:Conv,MatMul,Gemm,Add,Mul,Relu,Softmax,Transpose,Reshape,Concat,MaxPool,"
             "BatchNormalization"],
    "two": ["npu=ops:Conv,Relu,Add,MaxPool",
            "gpu=ops:Conv,MatMul,Gemm,Add,Mul,Softmax,Relu,Concat,Transpose,Reshape,"
            "LayerNormalization,Erf,Div"],
}

#: the op sets of the quality sweep (each as ``ops:...``): a convolution NPU, an XNNPACK-like
#: CPU accelerator, a transformer accelerator
QUALITY_OP_SETS: dict[str, str] = {
    "conv-npu": "ops:Conv,Relu,MaxPool,AveragePool,GlobalAveragePool,Add,Mul,BatchNormalization,"
                "Gemm,MatMul,Sum,Clip,Sigmoid,Flatten,ConstantOfShape",
    "xnnpack-like": "ops:AveragePool,Clip,Conv,ConvTranspose,Gemm,MatMul,MaxPool,Relu,Resize,"
                    "Softmax",
    "transformer": "ops:MatMul,Gemm,Add,Mul,Div,Sub,Softmax,LayerNormalization,Erf,Tanh,Pow,Sqrt,"
                   "ReduceMean,Transpose,Reshape,Relu,Conv,ConstantOfShape,Constant",
}


def shape_edges(shape: str, n: int, coin: Callable[[], float]) -> list[tuple[int, int]]:
    """Edges ``(u, v)`` with ``u < v`` of an ``n``-node DAG of the named shape; ``random`` and
    ``dense`` keep each forward pair when ``coin()`` falls below 0.3 and 0.6."""
    if shape == "chain":
        return [(v, v + 1) for v in range(n - 1)]
    if shape == "fan":
        mid = n // 2
        return ([(0, v) for v in range(1, mid + 1)]
                + [(v, n - 1) for v in range(1, mid + 1) if v != n - 1])
    if shape == "diamond":
        pairs = []
        for v in range(0, n - 3, 3):
            pairs += [(v, v + 1), (v, v + 2), (v + 1, v + 3), (v + 2, v + 3)]
        return pairs
    if shape not in ("random", "dense"):
        raise GraphError(f"unknown DAG shape {shape!r} (known: {', '.join(SHAPES)})")
    p = 0.6 if shape == "dense" else 0.3
    return [(u, v) for u in range(n) for v in range(u + 1, n) if coin() < p]
