"""The selector contract on real models: largest cluster, partitions and offloaded compute nodes
per strategy, for three devices a strategy must not overrule (issue 23's "Done when").

- ``count20``: ``examples/new_accelerator.py``'s stateful selector with a limit of 20 nodes per
  subgraph (a count kept while a cluster grows, ``reset`` forgets it);
- ``reject40``: a stateless selector whose ``create_subgraph_node`` returns ``None`` for a
  subgraph of more than 40 nodes (a compiler's graph-size limit);
- ``max32``: a stateless selector whose property declares ``max_nodes = 32``.

Each takes the same op set (:data:`OPS`; the counting one, as the example, no grouped Conv).
Run it with each version to compare, e.g.

    (cd /work/main && .venv/bin/python /path/to/benchmarks/contract_table.py -o before.json)
    .venv/bin/python benchmarks/contract_table.py -o after.json --before before.json

and it prints a markdown table (with ``--before``: before → after per figure). A device that
overrules its limit shows a largest cluster above 20 / 40 / 32.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import onnx

import clusterkit as ck

REPO = Path(__file__).resolve().parents[1]
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = {"resnet50": REPO / "tests/data/models/resnet50.onnx",
          "inception_v1": LIGHT / "light_inception_v1.onnx",
          "densenet121": REPO / "tests/data/models/densenet121.onnx",
          "bert_base": REPO / "tests/data/models/bert_base.onnx"}
STRATEGIES = ["cycles", "longest-path", "mxnet", "hetero", "cpsat", "auto"]
#: strategy options: CP-SAT gets 5 deterministic seconds (a size limit makes its model hard)
OPTIONS = {"cpsat": {"time_limit": 5.0}}
OPS = {"Conv", "Relu", "Add", "MaxPool", "AveragePool", "GlobalAveragePool", "Concat", "LRN",
       "BatchNormalization", "MatMul", "Gemm", "Softmax", "Mul", "Div", "Sub", "Erf", "Sqrt",
       "Pow", "ReduceMean", "Transpose", "Reshape", "Dropout", "Flatten", "Tanh", "Where",
       "LayerNormalization", "Gelu"}


class OpSelector(ck.SubgraphSelector):
    def select(self, node):
        return node.op_type in OPS


def _example():
    """``examples/new_accelerator.py`` as a module (its counting selector is reused here)."""
    spec = importlib.util.spec_from_file_location("new_accelerator",
                                                  REPO / "examples" / "new_accelerator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CountingSelector(_example().TinyNpuSelector):
    """The example's counting selector (at most ``limit`` nodes per growing subgraph) on
    :data:`OPS`."""

    OPS = OPS


class Count20(ck.SubgraphProperty):
    def __init__(self, device="npu"):
        super().__init__(device)

    def create_subgraph_selector(self):
        return CountingSelector(20)


class Reject40(ck.SubgraphProperty):
    def __init__(self, device="npu"):
        super().__init__(device)

    def create_subgraph_selector(self):
        return OpSelector()

    def create_subgraph_node(self, subgraph):
        return None if len(subgraph.nodes) > 40 else super().create_subgraph_node(subgraph)


class Max32(ck.SubgraphProperty):
    max_nodes = 32

    def __init__(self, device="npu"):
        super().__init__(device)

    def create_subgraph_selector(self):
        return OpSelector()


DEVICES = {"count20": Count20, "reject40": Reject40, "max32": Max32}


def measure(model: str, device: str, strategy: str) -> dict:
    part = ck.partition(str(MODELS[model]), [DEVICES[device]()], strategy=strategy,
                        **OPTIONS.get(strategy, {}))
    m = part.metrics()
    sizes = [len(c.nodes) for c in part.offloaded_clusters()]
    return {"model": model, "device": device, "strategy": strategy,
            "largest": max(sizes, default=0), "partitions": m["partitions"],
            "offloaded": f"{m['compute_offloaded']}/{m['compute_nodes']}",
            "seconds": round(part.seconds, 2)}


def table(rows: list[dict], before: dict | None) -> str:
    out = ["| model | device | strategy | largest | partitions | offloaded compute |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        b = (before or {}).get((r["model"], r["device"], r["strategy"]))
        cells = [str(r[k]) if b is None else f"{b[k]} → {r[k]}"
                 for k in ("largest", "partitions", "offloaded")]
        out.append(f"| {r['model']} | {r['device']} | {r['strategy']} | " + " | ".join(cells)
                   + " |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, help="write the rows as JSON here")
    ap.add_argument("--before", type=Path, help="rows of the version before, to compare")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    args = ap.parse_args()
    rows = []
    for model in args.models.split(","):
        for device in DEVICES:
            for strategy in args.strategies.split(","):
                start = time.perf_counter()
                rows.append(measure(model, device, strategy))
                print(f"{model} {device} {strategy} {time.perf_counter() - start:.1f}s",
                      file=sys.stderr, flush=True)
    if args.output:
        args.output.write_text(json.dumps(rows, indent=1))
    before = None
    if args.before:
        before = {(r["model"], r["device"], r["strategy"]): r
                  for r in json.loads(args.before.read_text())}
    print(table(rows, before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
