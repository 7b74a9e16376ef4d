"""``make demo``: compare every strategy on a real model that the onnx package ships, with a
real accelerator's selector, print the table and write the report files (the comparison, one
partition JSON and DOT per strategy, and the HTML page of ``clusterkit report`` for ``auto``).

    python -m clusterkit.cli.demo [--model light_inception_v2] [--selector coreml] [--out reports]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import onnx

from clusterkit.analysis.compare import compare, default_strategies, write_dots
from clusterkit.analysis.explain import explain
from clusterkit.analysis.html_page import draw_partition, report_page
from clusterkit.cli.compare_cmd import print_comparison
from clusterkit.io.files import write_all
from clusterkit.result.json_format import partition_json_text

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="light_inception_v2",
                        help="a model of the onnx package's light set, or a path")
    parser.add_argument("--selector", default="coreml", help="a --selector spec")
    parser.add_argument("--out", default="reports", help="folder for the report files")
    parser.add_argument("--time-limit", type=float, default=30.0, help="cpsat seconds")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)  # make demo's own report folder, by its name
    path = Path(args.model)
    if not path.exists():
        path = LIGHT / f"{args.model}.onnx"
    strategies = default_strategies()
    print(f"clusterkit demo: {path.name} with selector {args.selector!r}, strategies "
          f"{', '.join(strategies)}\n", flush=True)
    options = {"cpsat": {"time_limit": args.time_limit}}
    result = compare(str(path), [args.selector], strategies, options=options, name=path.stem)
    print_comparison(result)
    report = os.path.join(args.out, f"{path.stem}_compare.json")
    outputs = [(report, json.dumps(result.to_json(), indent=1) + "\n")]
    outputs += [(os.path.join(args.out, f"{path.stem}_{strategy}.json"),
                 partition_json_text(part, path.stem))
                for strategy, part in result.partitions.items()]
    if "auto" in result.partitions:
        auto = result.partitions["auto"]
        page = report_page(auto, model=path.stem, comparison=result,
                           picture=draw_partition(auto, 2000), splits=explain(auto, limit=200))
        outputs.append((os.path.join(args.out, f"{path.stem}_report.html"), page))
    write_all(outputs)
    written = [p for p, _ in outputs] + write_dots(result, args.out)
    print(f"\nwrote {len(written)} report files to {os.path.abspath(args.out)}/ "
          f"(comparison: {report}; one partition JSON and DOT per strategy; "
          f"the page to open: {path.stem}_report.html)")
    return 1 if any(r.error for r in result.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
