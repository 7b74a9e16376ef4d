"""``clusterkit report MODEL --selector SPEC [--strategy NAME] [--strategies a,b,...|none]
-o REPORT.html``: one self-contained HTML page (:mod:`clusterkit.analysis.html_page`) with the
partition's summary, the strategies compared on the same model, the picture of the clusters and
every fallback reason, to open in a browser or attach to a bug report."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from clusterkit.analysis.compare import compare, cpsat_note, default_strategies
from clusterkit.analysis.explain import explain
from clusterkit.analysis.html_page import draw_partition, report_page
from clusterkit.api import run_strategy
from clusterkit.cli import common
from clusterkit.cli.gates import add_gate_args, gate_status, metrics_failures
from clusterkit.engines import strategy_names
from clusterkit.errors import StrategyError
from clusterkit.io.files import write_atomic

log = logging.getLogger(__name__)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help="write one self-contained HTML page about a partition")
    common.add_problem_args(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the HTML page to write")
    p.add_argument("--strategies", default=None, metavar="A,B,...",
                   help="the strategies to compare on the model (default: every clustering "
                   "strategy; 'none': no comparison)")
    p.add_argument("--svg-max-nodes", type=int, default=2000, metavar="N",
                   help="draw the picture only for graphs of at most N nodes (default: 2000)")
    common.add_explain_limit_arg(p, 200)
    add_gate_args(p)
    common.add_devices_arg(p)
    return p


def main(args: argparse.Namespace) -> int:
    common.check_output_args(args, ("output",))
    strategies = _strategies(args.strategies)
    problem = common.problem_from_args(args)
    shared = common.strategy_options(args)
    compared = {s: {**common.options_for(s, shared), "devices": args.devices} for s in strategies}
    result = run_strategy(problem, args.strategy, selector=" ".join(args.selector),
                          coalesce_after=args.coalesce, devices=args.devices,
                          **_main_options(args.strategy, shared, compared))
    print(result.summary())
    name = common.model_label(args.model)
    comparison = None
    if strategies:
        log.info("comparing %s", ", ".join(strategies))
        comparison = compare(problem.graph, args.selector, strategies,
                             common.constraints_from_args(args), args.fallback, compared, name=name,
                             coalesce_after=args.coalesce)
        note = cpsat_note(comparison)
        if note:  # the compared cpsat's budget (10 s unless --time-limit) and its status
            print(note)
    picture = draw_partition(result, args.svg_max_nodes)
    if picture.note:
        log.warning("the report shows the DOT text, not a picture: %s", picture.note)
    page = report_page(result, model=name, comparison=comparison, picture=picture,
                       splits=explain(result, limit=max(0, args.explain_limit)))
    write_atomic(args.output, page)
    log.info("wrote %s", args.output)
    return gate_status(metrics_failures(args, result.metrics()))


def _main_options(strategy: str, shared: dict[str, Any],
                  compared: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The options for the report's own strategy: those it takes, and those no strategy of the
    report takes (so that the strategy refuses them by name), but not the ones meant for a
    compared strategy only (``--time-limit`` for cpsat while the report's strategy is auto)."""
    takes = common.options_for(strategy, shared)
    elsewhere = {k for opts in compared.values() for k in opts}
    return {k: v for k, v in shared.items() if k in takes or k not in elsewhere}


def _strategies(text: str | None) -> list[str]:
    """The strategies to compare: every clustering one by default, none for ``none``; an
    unknown name is a :class:`StrategyError`."""
    if text is None:
        return default_strategies()
    names = [s.strip() for s in text.split(",") if s.strip()]
    if names == ["none"]:
        return []
    known = strategy_names()
    for s in names:
        if s not in known:
            raise StrategyError(f"unknown strategy {s!r} (known: {', '.join(known)})")
    return names
