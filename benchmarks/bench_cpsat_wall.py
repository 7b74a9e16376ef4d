"""cpsat's wall-clock time against its ``time_limit`` on the bundled models, with a selector
whose ``create_subgraph_node`` rejects subgraphs above 40 nodes (as ``tests/test_contract.py``'s)
and the stateful one of ``examples/new_accelerator.py`` (at most 24 nodes per cluster).

    .venv/bin/python benchmarks/bench_cpsat_wall.py [--limits 5,10,60] [--models a,b] [--out F]

One line per run: model, nodes, selector, limit, wall seconds (the whole ``ck.partition`` call
on a loaded graph), status, the steps' seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

import onnx

import clusterkit as ck
from clusterkit.io.loader import load_graph

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "tests" / "data" / "models"
EXAMPLES = REPO / "examples"
#: onnx's light set (GoogLeNet is ``light_inception_v1``)
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
CNN_OPS = ["Conv", "Relu", "Add", "MaxPool", "AveragePool", "Concat", "LRN",
           "GlobalAveragePool", "Flatten", "Gemm", "Dropout", "Softmax", "MatMul", "Mul",
           "Sigmoid", "HardSigmoid", "HardSwish", "Clip", "BatchNormalization", "Transpose",
           "Reshape"]


class RejectAbove(ck.OpsProperty):
    """``create_subgraph_node`` refuses more than ``limit`` nodes."""

    def __init__(self, limit: int = 40):
        super().__init__(CNN_OPS, device="npu")
        self.limit = limit

    def create_subgraph_node(self, subgraph):
        return None if len(subgraph.nodes) > self.limit else super().create_subgraph_node(
            subgraph)


def tiny_npu() -> ck.SubgraphProperty:
    """The stateful selector of ``examples/new_accelerator.py`` (24 nodes per cluster at most)."""
    path = EXAMPLES / "new_accelerator.py"
    spec = importlib.util.spec_from_file_location("new_accelerator", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TinyNpu()


SELECTORS = {"reject>40": RejectAbove, "stateful<=24": tiny_npu}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limits", default="5,10,60")
    ap.add_argument("--models", default="")
    ap.add_argument("--selectors", default=",".join(SELECTORS))
    ap.add_argument("--out", default=None, help="append JSON lines here")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m] or sorted(p.stem for p in
                                                              MODELS.glob("*.onnx"))
    for name in names:
        path = MODELS / f"{name}.onnx"
        graph = load_graph(str(path if path.exists() else LIGHT / f"{name}.onnx"))
        for sel in args.selectors.split(","):
            for limit in (float(x) for x in args.limits.split(",")):
                start = time.perf_counter()
                part = ck.partition(graph, [SELECTORS[sel]()], strategy="cpsat", time_limit=limit)
                wall = time.perf_counter() - start
                row = {"model": name, "nodes": part.problem.n, "selector": sel, "limit": limit,
                       "wall": round(wall, 2), "status": part.info.get("status"),
                       "relaxed": part.info.get("relaxed_status"),
                       "phases": part.info.get("phases")}
                print(json.dumps(row), flush=True)
                if args.out:
                    with open(args.out, "a") as fh:
                        fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
