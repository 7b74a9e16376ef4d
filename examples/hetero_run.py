"""A heterogeneous run with fallback: two devices in priority order plus the CPU fallback.

The "npu" takes convolutions, activations and matrix products, the "gpu" pooling; everything else
falls back to the host. One npu cluster is made to fail at compile time (a backend that refuses
Gemm, standing in for a driver bug): the executor runs that cluster on the host, reports it, and
the outputs still match onnxruntime on the unpartitioned model.

Run: python examples/hetero_run.py [MODEL.onnx]
"""

import sys
from pathlib import Path

import clusterkit as ck

#: the example models shipped with the repository
BUNDLED = Path(__file__).resolve().parents[1] / "tests" / "data" / "models"


class FlakyNpu(ck.OnnxRuntimeBackend):
    """An onnxruntime backend whose compiler rejects any subgraph holding a Gemm."""

    def compile(self, subgraph, *args, **kwargs):
        if "Gemm" in ck.flatten(subgraph).op_types:
            raise ck.BackendError("flaky npu: Gemm is not supported by this driver")
        return super().compile(subgraph, *args, **kwargs)


model = sys.argv[1] if len(sys.argv) > 1 else str(BUNDLED / "resnet18.onnx")
selectors = ["npu=ops:Conv,Relu,Add,Gemm,MatMul", "gpu=ops:MaxPool,GlobalAveragePool"]
strategy = "hetero" if "hetero" in ck.strategy_names() else "singleton"
part = ck.partition(model, selectors, strategy=strategy)
print(part.summary())

fused = ck.fuse(part)
executor = ck.Executor(fused, backends={"npu": FlakyNpu()})
feeds = ck.random_inputs(fused, seed=0)
outputs = executor.run(feeds)
print(executor.summary())
for fb in executor.fallbacks:
    print(f"fell back to the host: {fb['step']} on {fb['device']} ({fb['error']})")

expected = ck.run_model(part.graph.model, feeds)
diff = ck.compare_outputs(expected, outputs)
print(f"max |fused - onnxruntime| = {diff['max_abs_diff']:.3g}; match: {diff['outputs_match']}")
sys.exit(0 if diff["outputs_match"] else 1)
