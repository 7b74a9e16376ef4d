"""Write every bundled model's partition (per shipped selector and strategy) as canonical JSON,
or compare two such folders: the check that a change leaves partitions as they were.

    python benchmarks/partition_identity.py write OUT_DIR [--models a,b] [--strategies s,t]
    python benchmarks/partition_identity.py compare BEFORE_DIR AFTER_DIR

Each file ``MODEL__SELECTOR__STRATEGY.json`` holds the clusters (device, source node indices),
the fallback reasons' categories and the placement report's fallen nodes (reason and detail);
the seconds are left out. Two devices (``qnn`` before ``coreml``) run with ``devices="cost"``
too, so the cost device choice is covered. Run ``write`` once with each
version (e.g. ``/work/main/.venv/bin/python`` from ``/work/main`` for the version before).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

MODELS = Path(__file__).resolve().parents[1] / "tests" / "data" / "models"
SELECTORS = ["ops:Conv,Relu,Add,MaxPool,MatMul,Gemm", "tensorrt", "qnn", "coreml", "qnn+coreml"]
STRATEGIES = ["singleton", "cycles", "longest-path", "mxnet", "hetero", "cpsat", "placement",
              "auto"]
#: the exact strategies run on graphs of at most this many nodes (their time grows fastest)
EXACT_LIMIT = 400


def canonical(part) -> dict:
    """The partition's clusters in source node indices, sorted, and the fallback reasons."""
    g = part.graph
    src = g.index_to_source
    clusters = sorted((c.device, sorted(int(src[v]) for v in c.nodes)) for c in part.clusters)
    reasons = {int(src[v]): str(getattr(r, "category", r)) for v, r in
               sorted(part.fallback_reasons.items())}
    report = {e["index"]: [e["reason"], e["detail"]] for e in part.placement()["fallen_back"]}
    return {"clusters": clusters, "fallback_reasons": reasons, "report": report}


def write(out: Path, models: list[str], strategies: list[str]) -> None:
    import clusterkit as ck

    out.mkdir(parents=True, exist_ok=True)
    for model in models:
        path = MODELS / f"{model}.onnx"
        for spec in SELECTORS:
            problem = ck.make_problem(str(path), spec.split("+"))
            mode = {"devices": "cost"} if "+" in spec else {}
            for strategy in strategies:
                if strategy in ("cpsat", "placement") and problem.n > EXACT_LIMIT:
                    continue
                name = re.sub(r"\W", "_", f"{model}__{spec}__{strategy}") + ".json"
                start = time.perf_counter()
                try:
                    part = ck.run_strategy(problem, strategy, selector=spec, **mode)
                    data = canonical(part)
                except Exception as exc:  # an error is a result too
                    data = {"error": f"{type(exc).__name__}: {exc}"}
                (out / name).write_text(json.dumps(data, sort_keys=True))
                print(f"{name} {time.perf_counter() - start:.2f}s", flush=True)


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")})
    differ = [n for n in names if not (before / n).exists() or not (after / n).exists()
              or json.loads((before / n).read_text()) != json.loads((after / n).read_text())]
    for n in differ:
        print("DIFFERS", n)
    print(f"{len(names) - len(differ)} of {len(names)} partitions identical")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("out", type=Path)
    w.add_argument("--models", default="")
    w.add_argument("--strategies", default=",".join(STRATEGIES))
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "compare":
        return compare(args.before, args.after)
    models = [m for m in args.models.split(",") if m] or sorted(p.stem for p in
                                                                 MODELS.glob("*.onnx"))
    write(args.out, models, [s for s in args.strategies.split(",") if s])
    return 0


if __name__ == "__main__":
    sys.exit(main())
