"""``clusterkit compare MODEL|DIR --selector SPEC [--strategies a,b,...] [--json FILE]
[--dot DIR] [--jobs N] [--timeout SECONDS] [--jsonl FILE]``

For a folder every model runs in a child process of its own, so a model that crashes or runs
out of time costs only its own rows; the command then exits with status 2 and says how many
models failed, after printing and writing the rows of the others.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor

from clusterkit.analysis.compare import (compare, compare_many, default_strategies, failed_models,
                                         format_table, write_dots)
from clusterkit.cli.common import (constraints_from_args, dims_from_args, model_label,
                                   optimize_from_args, strategy_options)
from clusterkit.cli.gates import add_gate_args, gate_status, rows_failures
from clusterkit.engines import strategy_names
from clusterkit.errors import ClusterkitError, ModelLoadError, StrategyError
from clusterkit.io.files import write_atomic
from clusterkit.io.loader import load_graph


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("compare", help="compare strategies side by side on a model or a folder")
    p.add_argument("model", metavar="MODEL|DIR", help="an .onnx/.json model, or a folder of them")
    p.add_argument("--selector", action="append", default=[], metavar="SPEC",
                   help="as for partition; repeat for devices in priority order")
    p.add_argument("--fallback", default="cpu")
    p.add_argument("--strategies", default=None,
                   help="comma-separated (default: every clustering strategy available)")
    p.add_argument("--json", metavar="FILE", help="write the comparison JSON here")
    p.add_argument("--dot", metavar="DIR", help="one DOT (and SVG with Graphviz) per strategy")
    p.add_argument("--jobs", type=int, default=1, help="models compared in parallel (DIR)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="time limit per model (DIR); a model past it is reported as failed")
    p.add_argument("--jsonl", metavar="FILE",
                   help="append each model's result here as it finishes (DIR); a rerun with "
                        "the same FILE skips the models already in it")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--devices", choices=("priority", "cost"), default=None,
                   help="as for partition")
    from clusterkit.cli.common import add_constraint_args, add_dim_arg, add_optimize_arg

    add_dim_arg(p)
    add_optimize_arg(p)
    add_constraint_args(p)
    add_gate_args(p)
    return p


def main(args: argparse.Namespace) -> int:
    if not args.selector:
        raise StrategyError("give at least one --selector (e.g. --selector ops:Conv,Relu)")
    strategies = ([s.strip() for s in args.strategies.split(",") if s.strip()]
                  if args.strategies else default_strategies())
    known = strategy_names()
    for s in strategies:
        if s not in known:
            raise StrategyError(f"unknown strategy {s!r} (known: {', '.join(known)})")
    cons = constraints_from_args(args)
    shared = strategy_options(args)
    options = {s: {**_options_for(s, shared), "devices": args.devices} for s in strategies}
    failed: list[str] = []
    dims = dims_from_args(args)
    level = optimize_from_args(args)
    if os.path.isdir(args.model):
        if dims:
            raise ModelLoadError(f"--dim fixes the symbolic dims of one model; give a model, "
                                 f"not the folder {args.model!r}")
        payload, failed = _sweep(args, strategies, cons, options, level)
    else:
        model = (load_graph(args.model, dims=dims, optimize=level) if dims or level != "none"
                 else args.model)
        res = compare(model, args.selector, strategies, cons, args.fallback, options,
                      name=model_label(args.model), coalesce_after=args.coalesce)
        print(format_table(res))
        payload = res.to_json()
        if args.dot:
            for path in write_dots(res, args.dot):
                print(f"wrote {path}")
    if args.json:
        write_atomic(args.json, json.dumps(payload, indent=1) + "\n")
        print(f"wrote {args.json}")
    if failed:
        print(f"clusterkit: error: {len(failed)} of {len(payload['models'])} models failed: "
              f"{', '.join(failed)}", file=sys.stderr)
        return 2
    return gate_status(rows_failures(args, payload.get("models", [payload])))


def _sweep(args: argparse.Namespace, strategies: list[str], cons, options: dict,
           optimize: str = "none") -> tuple[dict, list[str]]:
    """Compare every model of the folder ``args.model``, each in its own child process;
    returns the JSON payload and the models that failed."""
    paths = sorted(glob.glob(os.path.join(args.model, "*.onnx")) +
                   glob.glob(os.path.join(args.model, "*.json")))
    if not paths:
        raise ClusterkitError(f"no .onnx or .json models in folder {args.model!r}")
    common = dict(isolate=True, timeout=args.timeout, jsonl=args.jsonl,
                  progress=not args.no_progress, coalesce_after=args.coalesce,
                  optimize=optimize)
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            results = compare_many(paths, args.selector, strategies, cons, args.fallback,
                                   options, executor=pool, **common)
    else:
        results = compare_many(paths, args.selector, strategies, cons, args.fallback, options,
                               **common)
    for res in results:
        print(format_table(res))
        print()
    if args.jsonl:
        print(f"wrote {args.jsonl}")
    return {"models": results}, failed_models(results)


def _options_for(strategy: str, shared: dict) -> dict:
    """Pass each flag only to the strategies that take it (cpsat: objective/time limit/...;
    hetero: affinity)."""
    import inspect

    from clusterkit.engines import get_strategy

    params = inspect.signature(get_strategy(strategy)).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(shared)
    return {k: v for k, v in shared.items() if k in params}
