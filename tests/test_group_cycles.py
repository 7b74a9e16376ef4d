"""Together groups that depend on each other are refused once, when the constraints are compiled,
with the same one-line message for every strategy, through the library and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import networkx as nx
import pytest

import clusterkit
from clusterkit import Constraints
from clusterkit.errors import ConstraintError

TOGETHER = [["a1", "a2"], ["b1", "b2"]]
MESSAGE = ("together groups {a1,a2} and {b1,b2} depend on each other: "
           "a1 -> x -> b1 and b2 -> y -> a2")


def mutual() -> nx.DiGraph:
    """a1 -> x -> b1 and b2 -> y -> a2: each group is convex, but each needs the other first."""
    g = nx.DiGraph()
    for name in ("a1", "x", "b1", "b2", "y", "a2"):
        g.add_node(name, op="Relu")
    g.add_edges_from([("a1", "x"), ("x", "b1"), ("b2", "y"), ("y", "a2")], bytes=4)
    return g


@pytest.mark.parametrize("strategy", clusterkit.strategy_names())
def test_library_refuses_with_both_groups_and_a_path_each_way(strategy):
    with pytest.raises(ConstraintError) as err:
        clusterkit.partition(mutual(), ["ops:Relu"], strategy=strategy,
                             constraints=Constraints(together=TOGETHER))
    assert str(err.value) == MESSAGE


def test_compile_refuses_before_any_strategy_runs():
    with pytest.raises(ConstraintError, match="depend on each other"):
        clusterkit.make_problem(mutual(), ["ops:Relu"], constraints=Constraints(together=TOGETHER))


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("g") / "g.json"
    path.write_text(json.dumps(nx.node_link_data(mutual(), edges="edges")))
    return path


@pytest.mark.parametrize("strategy", clusterkit.strategy_names())
def test_cli_exits_2_with_one_line(graph_file, strategy):
    res = subprocess.run([sys.executable, "-m", "clusterkit", "partition", str(graph_file),
                          "--selector", "ops:Relu", "--together", "a1,a2", "--together", "b1,b2",
                          "--strategy", strategy], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1
    assert MESSAGE in res.stderr


def test_a_group_that_is_not_convex_keeps_its_own_error():
    g = mutual()
    g.nodes["x"]["op"] = "Softmax"  # a node between the members that no device takes
    with pytest.raises(ConstraintError, match=r"together group 0 is not convex.*'x'"):
        clusterkit.make_problem(g, ["ops:Relu"], constraints=Constraints(together=[["a1", "b1"]]))
