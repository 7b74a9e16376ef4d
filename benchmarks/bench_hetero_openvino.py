"""clusterkit's splits compiled by OpenVINO's real HETERO plugin (issue #34).

Every bundled CNN (``--quick``: two), with seeded random weights in place of the weight stubs,
split by ``hetero`` and by ``auto`` for the device ``CPUB`` (OpenVINO's CPU plugin registered a
second time under that name stands in for the accelerator) with two selectors, the shipped
``openvino_npu`` and ``ops:Conv,Relu,Add`` (a device of convolutions, their activation and the
residual sum, which splits every model), and the fallback ``CPU``, exported as IR with its
affinity map (``clusterkit export MODEL --selector CPUB=SEL --strategy S --fallback CPU
--random-weights --format openvino -o OUT.xml --verify``, through the library's functions),
compiled with ``HETERO:CPUB,CPU``: clusterkit's offloaded clusters against HETERO's submodels
on ``CPUB`` (and in all), whether every cluster is one submodel with the same ops, the largest
output difference from onnxruntime's run of the unpartitioned model, HETERO's compile seconds.

    python benchmarks/bench_hetero_openvino.py [--quick]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import onnx
from _models import BUNDLED_MODELS

MODELS = ["squeezenet1_1", "resnet18", "mobilenet_v2", "shufflenet_v2_x1_0", "efficientnet_b0",
          "mobilenet_v3_large", "densenet121", "resnet50"]
QUICK = MODELS[:2]
SELECTORS = ["openvino_npu", "ops:Conv,Relu,Add"]
COLUMNS = ["model", "selector", "strategy", "clusters", "submodels on CPUB", "submodels",
           "same clusters", "outputs match", "max |diff|", "max rel diff", "compile s"]


def measure(name: str, selector: str, strategy: str, folder: str) -> list:
    import clusterkit as ck
    from clusterkit.export.openvino_ir import export_openvino
    from clusterkit.fusion import root_of, source_model
    from clusterkit.io.weights import random_weights
    from clusterkit.runtime.executor import random_inputs, run_model
    from clusterkit.runtime.hetero_check import check_hetero

    model = random_weights(onnx.load(str(BUNDLED_MODELS / f"{name}.onnx")), 0)
    part = ck.partition(model, [f"CPUB={selector}"], strategy=strategy, fallback="CPU")
    xml = str(Path(folder) / f"{name}_{strategy}_{len(selector)}.xml")
    export_openvino(part, xml)
    root = root_of(part.problem.graph)
    feeds = random_inputs(root)
    clusters = sum(1 for c in part.clusters if c.device == "CPUB")
    try:
        r = check_hetero(part, xml, feeds, run_model(source_model(root), feeds))
    except ck.BackendError as exc:  # OpenVINO's own failure, kept as the row's finding
        return [name, selector, strategy, clusters, "-", "-", f"HETERO fails: {exc}", "-", "-",
                "-", "-"]
    equal = all(row["verdict"] in ("equal", "absent") for row in r["clusters"])
    return [name, selector, strategy, clusters, r["per_device"]["CPUB"]["submodels"],
            r["submodels"], "yes" if equal else "no", "yes" if r["outputs_match"] else "no",
            f"{r['max_abs_diff']:.2e}", f"{r['max_rel_diff']:.1e}", round(r["compile_seconds"], 2)]


def run(quick: bool = False) -> dict:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in QUICK if quick else MODELS:
            for selector in SELECTORS:
                for strategy in ("hetero", "auto"):
                    rows.append(measure(name, selector, strategy, folder))
    return {"title": "OpenVINO HETERO: clusterkit's clusters against HETERO's submodels",
            "columns": COLUMNS, "rows": rows,
            "notes": ["CPUB is OpenVINO's CPU plugin registered a second time: HETERO:CPUB,CPU",
                      "same clusters: every offloaded cluster is one HETERO submodel with the "
                      "same ops; outputs match: against onnxruntime's run of the unpartitioned "
                      "model at rtol 1e-4, atol 1e-5; max rel diff: to the output's largest "
                      "value"]}


if __name__ == "__main__":
    from run import to_markdown

    print(to_markdown(run(quick="--quick" in sys.argv[1:])))
