"""cpsat's wall-clock time against its ``time_limit`` on the bundled models, with a selector
whose ``create_subgraph_node`` rejects subgraphs above 40 nodes and a stateful one that grows
at most 20 nodes per cluster (the selectors of ``tests/test_contract.py``).

    .venv/bin/python benchmarks/bench_cpsat_wall.py [--limits 5,10,60] [--models a,b] [--out F]

One line per run: model, nodes, selector, limit, wall seconds (the whole ``ck.partition`` call
on a loaded graph), status, the steps' seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import onnx

import clusterkit as ck
from clusterkit.io.loader import load_graph

MODELS = Path(__file__).resolve().parents[1] / "tests" / "data" / "models"
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


class Counting(ck.SubgraphSelector):
    """A stateful selector: a cluster grows to at most ``limit`` nodes."""

    def __init__(self, limit: int = 20):
        self.limit, self.taken = limit, 0

    def select(self, node):
        ok = node.op_type in CNN_OPS
        self.taken += ok
        return ok

    def select_input(self, node, new_node):
        return self.taken < self.limit and self.select(new_node)

    def select_output(self, node, new_node):
        return self.taken < self.limit and self.select(new_node)

    def reset(self):
        self.taken = 0


class CountingProperty(ck.SubgraphProperty):
    def create_subgraph_selector(self):
        return Counting()


SELECTORS = {"reject>40": RejectAbove, "stateful<=20": lambda: CountingProperty("npu")}


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
                part = ck.partition(graph, [SELECTORS[sel]()], "cpsat", time_limit=limit)
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
