"""``clusterkit partition MODEL --strategy NAME --selector SPEC ... [--json FILE] [--dot FILE]``"""

from __future__ import annotations

import argparse
import importlib
import json

from clusterkit.api import run_strategy
from clusterkit.cli.common import (add_problem_args, model_label, problem_from_args, strategy_options,
                     write_text)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("partition", help="partition a model and report the clusters")
    add_problem_args(p)
    p.add_argument("--json", metavar="FILE", help="write the partition JSON here")
    p.add_argument("--dot", metavar="FILE", help="write a DOT picture of the clusters here")
    p.add_argument("--dump-dot", metavar="DIR",
                   help="write <model>_affinity.dot and <model>_subgraphs.dot here")
    p.add_argument("--explain", action="store_true",
                   help="say why adjacent supported nodes ended in different clusters")
    return p


def main(args: argparse.Namespace) -> int:
    problem = problem_from_args(args)
    result = run_strategy(problem, args.strategy, selector=" ".join(args.selector),
                          coalesce_after=args.coalesce, **strategy_options(args))
    name = model_label(args.model)
    print(result.summary())
    report = _optional("clusterkit.analysis.report")
    if report is not None:
        print(report.format_placement(result))
    if args.explain:
        explain = importlib.import_module("clusterkit.analysis.explain")
        lines = explain.explain(result)
        print(f"{len(lines)} adjacent supported node pairs are split:")
        for line in lines:
            print("  " + line)
    if args.json:
        write_text(args.json, json.dumps(result.to_json(model=name), indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.dot:
        write_text(args.dot, result.to_dot())
        print(f"wrote {args.dot}")
    if args.dump_dot:
        dumps = importlib.import_module("clusterkit.io.dumps")
        for path in dumps.dump_dot(result, args.dump_dot, name):
            print(f"wrote {path}")
    return 0


def _optional(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise
