"""The shipped EP selectors against the real EPs on every bundled and light model.

For each of the 19 bundled models (``tests/data/models``) and the 9 ``onnx`` light models, and
each shipped selector verified against its EP (``qnn``, ``openvino_npu``), runs what
``clusterkit verify MODEL --selector S --json`` runs and prints one Markdown row: the EP's
partitions and offloaded nodes, clusterkit's, and whether they agree (or why not).

    python benchmarks/verify_eps.py [--json FILE] [--no-compile]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import onnx

from clusterkit.analysis.verify import verify
from clusterkit.io.files import write_all
from clusterkit.selection.registry import SHIPPED_TRAITS

REPO = Path(__file__).resolve().parents[1]
#: the shipped selectors verified against their real EP (``SelectorEntry.verified``)
SELECTORS = tuple(name for name, traits in SHIPPED_TRAITS.items() if traits.verified)


def models() -> list[Path]:
    """The bundled models, then the ``onnx`` package's light models."""
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return sorted((REPO / "tests" / "data" / "models").glob("*.onnx")) + sorted(
        light.glob("*.onnx"))


def verdict(data: dict) -> str:
    """The table's last column."""
    if data["agree"]:
        return "agree" + ep_failure(data)
    why = []
    if data["known_fault"]:
        why.append(f"EP's fault (listed): {data['known_fault']}")
    elif data["same_nodes"] and data["known_grouping"]:
        why.append("same nodes, other grouping (listed)")
    if not data["same_nodes"]:
        ops = sorted({d["op"] for d in data["only_ep"]})
        mine = sorted({d["op"] for d in data["only_selector"]})
        why.append(f"EP only: {len(data['only_ep'])} {'/'.join(ops)}; "
                   f"clusterkit only: {len(data['only_selector'])} {'/'.join(mine)}")
    why.extend(data["notes"])
    return "differ: " + "; ".join(why)


def ep_failure(data: dict) -> str:
    """A short note of the EP's failure after answering, for the table."""
    return " (EP then failed to compile)" if data["ep_error"] else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="FILE", help="write every verify JSON here")
    parser.add_argument("--no-compile", action="store_true",
                        help="stop each EP session after partitioning (quicker)")
    args = parser.parse_args(argv)
    rows, out = [], []
    print("| model | selector | EP partitions | EP nodes | clusterkit partitions (strategy / "
          "as onnxruntime groups) | clusterkit nodes | result |")
    print("|---|---|---|---|---|---|---|")
    for path in models():
        for sel in SELECTORS:
            data = verify(path, sel, compile=not args.no_compile).to_json()
            out.append(data)
            print(f"| {data['model']} | {sel} | {len(data['ep_partitions'])} | "
                  f"{data['ep_offloaded']} | {len(data['partitions'])} / "
                  f"{len(data['ort_grouped'])} | {data['offloaded']} | {verdict(data)} |",
                  flush=True)
            rows.append(data["agree"] or bool(data["known_fault"])
                        or (data["same_nodes"] and bool(data["known_grouping"])))
    if args.json:
        write_all([(args.json, json.dumps(out, indent=1) + "\n")])
    print(f"\n{sum(rows)}/{len(rows)} agree or are listed in the selector's data", file=sys.stderr)
    return 0 if all(rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("ORT_LOGGING_LEVEL", "3")
    sys.exit(main())
