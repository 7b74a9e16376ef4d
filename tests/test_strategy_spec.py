"""One registered spec per strategy: a strategy registered once is wherever its spec says.

A toy strategy (each node alone, as ``singleton``, counting its calls) is registered with
:func:`clusterkit.register_strategy` and then looked for where each list of strategies used to be
written by hand: ``strategy_names``, ``compare``'s default strategies, the command line's
``--strategy`` help and option flags, ``auto``'s members (only when ``in_portfolio``), the front
door's cost choice (skipped when ``places_devices``) and CP-SAT's warm start (not when ``exact``).
"""

from __future__ import annotations

import contextlib

import networkx as nx
import pytest

import clusterkit as ck
from clusterkit.analysis.compare import compare, default_strategies
from clusterkit.cli import build_parser
from clusterkit.cli.common import strategy_options
from clusterkit.engines import STRATEGIES, OptionFlag, StrategySpec, strategy_spec
from clusterkit.engines.auto import portfolio_members

TOY = "zz_toy"
SELECTORS = ["gpu=ops:Conv,Relu", "npu=ops:Conv"]


def _chain() -> ck.Graph:
    """n0 -> n1 -> n2 -> n3: Conv, Relu, Conv, Softmax."""
    g = nx.DiGraph([("n0", "n1"), ("n1", "n2"), ("n2", "n3")])
    nx.set_node_attributes(g, dict(zip(g, ["Conv", "Relu", "Conv", "Softmax"])), "op")
    nx.set_edge_attributes(g, 4, "bytes")
    return ck.from_networkx(g)


@contextlib.contextmanager
def toy(**spec):
    """The toy strategy registered with ``spec`` for the block; yields its list of calls (the
    ``toy_level`` each got)."""
    calls: list[int] = []
    singleton = ck.get_strategy("singleton")

    def run(problem, *, toy_level: int = 0):
        calls.append(toy_level)
        return singleton(problem)

    ck.register_strategy(TOY, run, **spec)
    try:
        yield calls
    finally:
        STRATEGIES.unregister(TOY)
    assert TOY not in ck.strategy_names()


def test_a_registered_strategy_is_named_and_compared_by_default():
    with toy(summary="each node alone") as calls:
        assert TOY in ck.strategy_names()
        assert strategy_spec(TOY).summary == "each node alone"
        assert TOY in default_strategies()
        assert default_strategies()[-1] == "cpsat"  # the exact ones stay last
        result = compare(_chain(), SELECTORS)
        rows = {row.strategy: row for row in result.rows}
        assert rows[TOY].error is None and rows[TOY].partitions == rows["singleton"].partitions
        # once for its row: compare starts cpsat from the best row instead of running the
        # heuristics again
        assert len(calls) == 1
        ck.run_strategy(ck.make_problem(_chain(), SELECTORS), "cpsat")
        assert len(calls) == 2  # alone, cpsat runs it as one of its warm starts (not exact)


def test_a_strategy_that_does_not_cluster_is_not_compared_by_default():
    with toy(clusters=False):
        assert TOY in ck.strategy_names() and TOY not in default_strategies()


def test_the_command_line_lists_the_strategy_and_its_own_flag(capsys):
    flag = OptionFlag("toy_level", "how much toy", type=int)
    with toy(flags=(flag,)):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["partition", "--help"])
        help_text = " ".join(capsys.readouterr().out.split())
        assert f"{TOY} (default: auto)" in help_text
        assert f"--toy-level TOY_LEVEL {TOY}: how much toy" in help_text
        args = build_parser().parse_args(["partition", "m.onnx", "--selector", "ops:Conv",
                                          "--strategy", TOY, "--toy-level", "3"])
        assert strategy_options(args) == {"toy_level": 3}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["partition", "--help"])
    assert "--toy-level" not in capsys.readouterr().out


def test_auto_runs_the_strategy_only_when_in_portfolio():
    problem = ck.make_problem(_chain(), SELECTORS)
    with toy() as calls:
        assert TOY not in portfolio_members()
        with pytest.raises(ck.StrategyError, match=f"unknown member '{TOY}'"):
            ck.run_strategy(problem, "auto", members=[TOY])
    with toy(in_portfolio=True, variants=((TOY + "+3", {"toy_level": 3}),)) as calls:
        assert portfolio_members()[TOY + "+3"] == (TOY, {"toy_level": 3})
        part = ck.run_strategy(problem, "auto", members=[TOY, TOY + "+3"], devices="priority")
        ran = [m["name"] for m in part.info["auto"]["members"]]
        assert ran[:2] == [TOY, TOY + "+3"] and calls == [0, 3]
    assert TOY not in portfolio_members()


@pytest.mark.parametrize("places", [False, True])
def test_cost_devices_leave_a_self_placing_strategy_be(places):
    problem = ck.make_problem(_chain(), SELECTORS)
    with toy(places_devices=places) as calls:
        ck.run_strategy(problem, TOY, devices="cost")
        assert len(calls) == (1 if places else 2)  # else once more on the narrowed problem


def test_an_exact_strategy_is_no_warm_start():
    pytest.importorskip("ortools")
    from clusterkit.engines.cpsat.warmstart import skipped

    with toy():
        assert TOY not in skipped()
    with toy(exact=True):
        assert TOY in skipped()


def test_replacing_a_shipped_function_keeps_its_spec_and_a_spec_registers_whole():
    original = strategy_spec("cpsat")
    ck.register_strategy("cpsat", lambda problem, **options: None, replace=True)
    try:
        assert strategy_spec("cpsat").places_devices and strategy_spec("cpsat").exact
    finally:
        STRATEGIES.unregister("cpsat")
    assert strategy_spec("cpsat") == original
    ck.register_strategy(TOY, StrategySpec("ignored", ck.get_strategy("singleton"),
                                           in_portfolio=True))
    try:
        assert strategy_spec(TOY).name == TOY and TOY in portfolio_members()
    finally:
        STRATEGIES.unregister(TOY)


def test_a_spec_that_contradicts_itself_is_refused():
    with pytest.raises(ck.StrategyError, match="need in_portfolio=True"):
        ck.register_strategy(TOY, ck.get_strategy("singleton"), growth=True)
    with pytest.raises(ck.StrategyError, match="kind must be one of value, many, switch"):
        OptionFlag("toy_level", "how much toy", kind="several")
    assert TOY not in ck.strategy_names()
