"""``clusterkit partition MODEL --strategy NAME --selector SPEC ... [--json FILE] [--dot FILE]
[--svg FILE]``"""

from __future__ import annotations

import argparse
import gc
import importlib
import itertools
import logging
import os
from typing import Iterable, Iterator

from clusterkit.analysis import report
from clusterkit.analysis.verify import ep_grouping_notes
from clusterkit.api import run_strategy
from clusterkit.cli import common
from clusterkit.cli.gates import add_gate_args, gate_status, metrics_failures
from clusterkit.cli.tables import print_table
from clusterkit.engines.throughput import partition_split_text
from clusterkit.export.onnx_model import model_bytes, save_model
from clusterkit.fusion import source_model
from clusterkit.io.files import write_all
from clusterkit.result.dot import dump_files, partition_dot, partition_svg
from clusterkit.result.json_format import optimized_model_path, partition_json_chunks
from clusterkit.result.model import Partition
from clusterkit.result.report import plural

log = logging.getLogger(__name__)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("partition", help="partition a model and report the clusters")
    common.add_problem_args(p, selector_required=False,
                     unless="MODEL is a placement instance or --platform is given")
    common.add_platform_arg(p)
    p.add_argument("--json", metavar="FILE", help="write the partition JSON here")
    p.add_argument("--split", metavar="FILE", help="placement instances and --platform: write "
                   "the split in the paper's format ({fpgas: [{nodes}], cpus: [{nodes}]}, "
                   "original ids) here")
    p.add_argument("--dot", metavar="FILE", help="write a DOT picture of the clusters here")
    p.add_argument("--svg", metavar="FILE",
                   help="write the picture of the clusters as SVG here (needs Graphviz's dot)")
    p.add_argument("--dump-dot", metavar="DIR",
                   help="write <model>_affinity.dot and <model>_subgraphs.dot here")
    p.add_argument("--explain", action="store_true",
                   help="say why adjacent supported nodes ended in different clusters, grouped "
                   "by reason")
    common.add_explain_limit_arg(p, 30)
    add_gate_args(p)
    common.add_devices_arg(p)
    return p


def main(args: argparse.Namespace) -> int:
    common.check_output_args(args, ("json", "split", "dot", "svg"), ("dump_dot",))
    # the graph's millions of objects live until the command ends and hold no cycles: the
    # collector is kept from walking them while they are made and in every later collection
    gc.disable()
    try:
        problem = common.problem_from_args(args)
    finally:
        gc.freeze()
        gc.enable()
    result = run_strategy(problem, args.strategy, selector=" ".join(args.selector),
                          coalesce_after=args.coalesce, devices=args.devices,
                          **common.strategy_options(args))
    log.debug("strategy %s: %d clusters in %.3f s", result.strategy, len(result.clusters),
              result.seconds)
    name = common.model_label(args.model)
    print(result.summary())
    if "throughput" in result.info:
        print(throughput_line(result.info["throughput"]))
        if "latency" in result.info:
            print(latency_line(result.info["latency"]))
        print_loads(result.info["throughput"])
    elif args.strategy == "cpsat" and result.info.get("status"):
        from clusterkit.engines.cpsat.read import status_line  # cpsat's modules: on use only

        print(f"cpsat: {status_line(result.info)}")
    print_placement(result)
    hint = common.raw_graph_hint(args, result.problem.properties)
    if hint:
        print(hint)
    for note in ep_grouping_notes(result):
        print(note)
    if args.explain:
        print_explanations(result, args.explain_limit)
    outputs = []  # prepared in full before anything is written
    if args.json:
        outputs.extend(_json_outputs(args, result, name))
    if args.split:
        outputs.append((args.split, partition_split_text(result)))
    if args.dot:
        outputs.append((args.dot, partition_dot(result)))
    if args.svg:
        outputs.append((args.svg, partition_svg(result)))
    if args.dump_dot:
        outputs.extend(dump_files(result, args.dump_dot, name))
    write_all(outputs)
    for path, _ in outputs:
        log.info("wrote %s", path)
    return gate_status(metrics_failures(args, result.metrics()))


def throughput_line(fig: dict) -> str:
    """One line of a throughput placement's figures: max load, bottleneck, status, bound."""
    head = f"throughput: max load {fig['max_load']:.6g} on {fig['bottleneck']}"
    if fig.get("contiguous_optimum") is not None:
        return (f"{head} ({fig.get('method')}: its non-contiguous warm start, below the "
                f"contiguous optimum {fig['contiguous_optimum']:.6g} ({fig.get('status')})"
                f"{_bound(fig)})")
    return f"{head} {_method_status(fig)}"


def latency_line(fig: dict) -> str:
    """One line of a latency placement's figures: latency, critical path, status, bound."""
    return (f"latency: {fig['latency']:.6g} along {' -> '.join(fig['critical_path'])} "
            f"{_method_status(fig)}")


def _method_status(fig: dict) -> str:
    """``(method, status, contiguous or not, proven bound B)`` of a placement's figures."""
    return (f"({fig.get('method')}, {fig.get('status')}, "
            f"{'contiguous' if fig.get('contiguous') else 'non-contiguous'}{_bound(fig)})")


def _bound(fig: dict) -> str:
    bound = fig.get("bound")
    return f", proven bound {bound:.6g}" if bound is not None else ""


#: the per-device table of a throughput placement
LOAD_COLUMNS = [("device", False), ("nodes", True), ("pieces", True), ("compute", True),
                ("transfers", True), ("load", True), ("", False)]


def load_rows(fig: dict) -> tuple[list[list[str]], list[str]]:
    """The rows of :data:`LOAD_COLUMNS` for every device that holds a node (the bottleneck
    marked), and the names of the idle ones."""
    rows, idle = [], []
    for name, load in fig["loads"].items():
        count = len(fig.get("nodes", {}).get(name, ()))
        if not count and not load:
            idle.append(name)
            continue
        pieces = fig.get("pieces", {}).get(name)
        rows.append([name, str(count), "-" if pieces is None else plural(pieces, "piece"),
                     f"{fig.get('compute', {}).get(name, load):.6g}",
                     f"{fig.get('transfers', {}).get(name, 0.0):.6g}", f"{load:.6g}",
                     "bottleneck" if name == fig["bottleneck"] else ""])
    return rows, idle


def print_loads(fig: dict) -> None:
    """Every busy device's nodes, pieces and load (compute + transfers), then the idle ones."""
    rows, idle = load_rows(fig)
    print_table(LOAD_COLUMNS, rows, title="device loads:")
    if idle:
        print(f"idle: {', '.join(idle)}")


def print_placement(partition: Partition, max_nodes: int = 10) -> None:
    """The placement report as tables: one row per device, then one per fallback reason (its
    nodes by op type) and the first ``max_nodes`` fallen-back nodes (an equal share per
    reason)."""
    rep = report.get_placement(partition)
    print_table(report.DEVICE_COLUMNS, report.device_rows(rep), title="placement:")
    folded = report.folded_line(rep)
    if folded:
        print(folded)
    print(report.reasons_line(rep))
    if rep["fallen_back"]:
        print_table(report.REASON_COLUMNS, report.reason_rows(rep))
    shown = [e for entries in report.shown_fallbacks(rep, max_nodes).values() for e in entries]
    if shown:
        print_table(report.FALLBACK_COLUMNS, report.fallback_rows(shown))
    more = len(rep["fallen_back"]) - len(shown)
    if more > 0:
        print(f"... {more} more nodes in the JSON's placement.fallen_back")


def print_explanations(partition: Partition, limit: int) -> None:
    """Why adjacent supported nodes are apart: per reason its count, then up to ``limit`` pairs
    in all (an equal share per reason, at least one each, a share a reason does not fill
    going to the others: every pair when there are at most ``limit``)."""
    explain = importlib.import_module("clusterkit.analysis.explain")
    groups = explain.explain_by_reason(partition)
    total = sum(len(lines) for lines in groups.values())
    print(f"{plural(total, 'adjacent supported node pair')} split"
          + (", by reason:" if total else ""))
    shares = explain_shares([len(lines) for lines in groups.values()], limit)
    shown = 0
    for (kind, lines), share in zip(groups.items(), shares):
        print(f"  {kind}: {len(lines)}")
        for line in lines[:share]:
            print("    " + line)
            shown += 1
    if shown < total:
        print(f"  ... {total - shown} more pairs (--explain-limit {limit}; raise it to list "
              "them)")


def explain_shares(sizes: list[int], limit: int) -> list[int]:
    """How many of each reason's ``sizes`` pairs to list within ``limit`` (none when it is 0 or
    less): equal shares, at least one per reason, what a small reason leaves to the larger."""
    if limit <= 0:
        return [0] * len(sizes)
    left = max(limit, sum(1 for n in sizes if n))
    shares = [0] * len(sizes)
    order = sorted(range(len(sizes)), key=lambda k: sizes[k])
    for done, k in enumerate(order):
        shares[k] = min(sizes[k], left // (len(order) - done))
        left -= shares[k]
    return shares


def _prepared(pieces: Iterator[str]) -> Iterator[str]:
    """``pieces`` with their first one made now: the document behind them is complete (and any
    error raised) before a file is written; the text follows as the file is written."""
    first = next(pieces)
    return itertools.chain([first], pieces)


def _json_outputs(args: argparse.Namespace, result, name: str
                  ) -> list[tuple[str, str | bytes | Iterable[str]]]:
    """The partition JSON, and with ``--optimize`` the optimized model its indices refer to
    (written beside it, named in its ``model_file``)."""
    level = common.optimize_from_args(args)
    if level == "none":
        return [(args.json, _prepared(partition_json_chunks(result, name)))]
    model_path = optimized_model_path(args.json)
    result.info["optimize"] = level
    result.info["model_file"] = os.path.basename(model_path)
    outputs: list[tuple[str, str | bytes | Iterable[str]]] = [
        (args.json, _prepared(partition_json_chunks(result, name)))]
    model = source_model(result.graph)
    data = model_bytes(model, model_path)
    if data is None:  # too large for one protobuf: written with external data, first
        save_model(model, model_path)
        log.info("wrote %s", model_path)
    else:
        outputs.insert(0, (model_path, data))
    return outputs
