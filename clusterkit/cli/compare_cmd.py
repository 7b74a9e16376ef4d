"""``clusterkit compare MODEL|DIR --selector SPEC [--strategies a,b,...] [--json FILE]
[--dot DIR] [--jobs N | --dask [--dask-workers N] | --scheduler ADDRESS] [--timeout SECONDS]
[--jsonl FILE]``

For a folder every model runs in a child process of its own, so a model that crashes or runs
out of time costs only its own rows; the command then exits with status 2 and says how many
models failed, after printing and writing the rows of the others. The models run one after the
other, on a local process pool (``--jobs``), on a local Dask cluster (``--dask``) or on the
Dask cluster whose scheduler is at ``--scheduler``; the rows are the same.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import sys
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Iterator

from clusterkit.analysis.compare import (
    NUMERIC_COLUMNS,
    compare,
    compare_many,
    cpsat_note,
    default_strategies,
    failed_models,
    row_errors,
    table_cells,
    table_title,
    write_dots,
)
from clusterkit.analysis.isolated import quiet_worker, stop_pool
from clusterkit.cli import common
from clusterkit.cli.gates import add_gate_args, gate_status, rows_failures
from clusterkit.cli.tables import print_table
from clusterkit.engines import strategy_names
from clusterkit.errors import ClusterkitError, ModelLoadError, StrategyError, SweepInterrupted
from clusterkit.io.files import write_atomic
from clusterkit.io.loader import load_graph
from clusterkit.selection.specs import check_op_types

log = logging.getLogger(__name__)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("compare", help="compare strategies side by side on a model or a folder")
    p.add_argument("model", metavar="MODEL|DIR", help="an .onnx/.json model, or a folder of them")
    p.add_argument("--selector", action="append", default=[], metavar="SPEC", required=True,
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
    p.add_argument("--dask", action="store_true",
                   help="sweep the folder on a local Dask cluster started for the run "
                        "(needs clusterkit[dask])")
    p.add_argument("--dask-workers", type=int, default=None, metavar="N",
                   help="worker processes of the --dask cluster (default: one per CPU)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="sweep the folder on the Dask cluster whose scheduler is at ADDRESS "
                        "(e.g. tcp://10.0.0.5:8786; needs clusterkit[dask])")
    p.add_argument("--scheduler-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to try to reach --scheduler (default 10)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    for add in (common.add_devices_arg, common.add_dim_arg, common.add_optimize_arg,
                common.add_constraint_args, add_gate_args):
        add(p)
    return p


def main(args: argparse.Namespace) -> int:
    common.check_output_args(args, ("json", "jsonl"), ("dot",))
    if not args.selector:
        raise StrategyError("give at least one --selector (e.g. --selector ops:Conv,Relu)")
    strategies = ([s.strip() for s in args.strategies.split(",") if s.strip()]
                  if args.strategies else default_strategies())
    known = strategy_names()
    for s in strategies:
        if s not in known:
            raise StrategyError(f"unknown strategy {s!r} (known: {', '.join(known)})")
    cons = common.constraints_from_args(args)
    shared = common.strategy_options(args)
    options = {s: {**common.options_for(s, shared), "devices": args.devices} for s in strategies}
    failed: list[str] = []
    dims = common.dims_from_args(args)
    level = common.optimize_from_args(args)
    _check_executor_args(args)
    if os.path.isdir(args.model):
        if dims:
            raise ModelLoadError(f"--dim fixes the symbolic dims of one model; give a model, "
                                 f"not the folder {args.model!r}")
        payload, failed = _sweep(args, strategies, cons, options, level)
    else:
        model = load_graph(args.model, dims=dims, optimize=level)
        check_op_types(args.selector, model.op_types)
        res = compare(model, args.selector, strategies, cons, args.fallback, options,
                      name=common.model_label(args.model), coalesce_after=args.coalesce)
        print_comparison(res)
        payload = res.to_json()
        if args.dot:
            for path in write_dots(res, args.dot):
                log.info("wrote %s", path)
    if args.json:
        write_atomic(args.json, json.dumps(payload, indent=1) + "\n")
        log.info("wrote %s", args.json)
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
    sweep = dict(isolate=True, timeout=args.timeout, jsonl=args.jsonl,
                 progress=not args.no_progress, coalesce_after=args.coalesce, optimize=optimize)
    try:
        with _executor(args) as executor:
            results = compare_many(paths, args.selector, strategies, cons, args.fallback,
                                   options, executor=executor, **sweep)
    except SweepInterrupted as stop:  # Ctrl-C: the finished models' tables, then one line
        _print_all(stop.results)
        kept = (f", kept in {args.jsonl}" if args.jsonl and stop.results
                and os.path.exists(args.jsonl) else "")
        raise SweepInterrupted(f"{stop}{kept}", stop.results) from None
    _print_all(results)
    if args.jsonl:
        log.info("wrote %s", args.jsonl)
    return {"models": results}, failed_models(results)


def _print_all(results: list[dict]) -> None:
    for res in results:
        print_comparison(res)
        print()


def print_comparison(result) -> None:
    """One model's comparison (a :class:`Comparison` or its JSON form) as a table, then one
    line per strategy that failed."""
    header, cells = table_cells(result)
    print_table([(h, h in NUMERIC_COLUMNS) for h in header], cells, title=table_title(result))
    for line in row_errors(result):
        print("  " + line)
    note = cpsat_note(result)
    if note:
        print(note)


def _check_executor_args(args: argparse.Namespace) -> None:
    """Refuse executor flags that contradict each other or the model argument."""
    chosen = [flag for flag, on in (("--jobs", args.jobs > 1), ("--dask", args.dask),
                                    ("--scheduler", args.scheduler)) if on]
    if len(chosen) > 1:
        raise ClusterkitError(f"choose one of {' and '.join(chosen)}: each runs the sweep on "
                              "its own executor")
    if args.dask_workers is not None and not args.dask:
        raise ClusterkitError("--dask-workers sizes the cluster --dask starts; add --dask")
    if args.dask_workers is not None and args.dask_workers < 1:
        raise ClusterkitError(f"--dask-workers must be at least 1, not {args.dask_workers}")
    if (args.dask or args.scheduler) and not os.path.isdir(args.model):
        raise ClusterkitError(f"--dask and --scheduler sweep a folder of models; "
                              f"{args.model!r} is not a folder")


@contextmanager
def _executor(args: argparse.Namespace) -> Iterator[Executor | None]:
    """The executor of a sweep: none (one model after the other), a local process pool
    (``--jobs``) or a Dask cluster's (``--dask``, ``--scheduler``)."""
    if args.dask or args.scheduler:
        from clusterkit.analysis.dask_executor import dask_executor

        with dask_executor(args.scheduler, workers=args.dask_workers,
                           connect_timeout=args.scheduler_timeout) as executor:
            yield executor
    elif args.jobs > 1:
        pool = ProcessPoolExecutor(max_workers=args.jobs, initializer=quiet_worker)
        try:
            yield pool
        except BaseException:  # Ctrl-C included: do not wait for the running models
            stop_pool(pool)
            raise
        pool.shutdown()
    else:
        yield None
