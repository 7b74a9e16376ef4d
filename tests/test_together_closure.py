"""Together groups that are not convex, as ExecuTorch's GroupBasedPartitioner treats them: the
nodes on a path between two members join the group when a device of the group takes them;
otherwise compiling the constraints fails with one line naming such a node.

The expected closures are written here by hand from the graphs (not computed by the code under
test); every registered strategy must then keep the closed group whole in one device cluster."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import clusterkit as ck
from clusterkit import Constraints
from clusterkit.errors import ConstraintError

MODELS = Path(__file__).parent / "data" / "models"
RESNET18 = str(MODELS / "resnet18.onnx")
#: resnet18's stem MaxPool and the Add of the first residual block, and the three nodes of the
#: block's main branch between them (read off the model: MaxPool -> conv1 -> relu -> conv2 -> Add,
#: and MaxPool -> Add directly)
BLOCK = ["/maxpool/MaxPool", "/layer1/layer1.0/Add"]
BRANCH = ["/layer1/layer1.0/conv1/Conv", "/layer1/layer1.0/relu/Relu",
          "/layer1/layer1.0/conv2/Conv"]
OPTIONS = {"cpsat": {"time_limit": 5.0, "workers": 1}, "placement": {"time_limit": 5.0,
                                                                     "workers": 1}}


def dag(edges: list[tuple[str, str]], ops: dict[str, str]) -> nx.DiGraph:
    g = nx.DiGraph()
    for name, op in ops.items():
        g.add_node(name, op=op)
    g.add_edges_from(edges, bytes=8)
    return g


def group_names(problem: ck.Problem) -> list[list[str]]:
    names = [nd.name for nd in problem.graph.nodes]
    return [sorted(names[v] for v in grp.tolist()) for grp in problem.groups]


def cluster_of(part: ck.Partition, name: str):
    v = part.graph.name_to_index[name]
    return next(c for c in part.clusters if v in c.nodes)


def test_a_chain_between_two_members_joins_the_group():
    g = dag([("a", "x"), ("x", "y"), ("y", "c"), ("c", "d")],
            {"a": "Conv", "x": "Relu", "y": "Relu", "c": "Conv", "d": "Relu"})
    p = ck.make_problem(g, ["ops:Conv,Relu"], constraints=Constraints(together=[["a", "c"]]))
    assert group_names(p) == [["a", "c", "x", "y"]]


def test_a_node_between_that_no_device_of_the_group_takes_is_the_one_line_error():
    g = dag([("a", "x"), ("x", "c"), ("a", "c")], {"a": "Conv", "x": "Softmax", "c": "Conv"})
    with pytest.raises(ConstraintError) as err:
        ck.make_problem(g, ["npu=ops:Conv", "gpu=ops:Softmax"],
                        constraints=Constraints(together=[["a", "c"]]))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("together group 0 is not convex")
    assert "'x' (Softmax), which no device of the group (npu) takes" in msg


def test_nodes_between_taken_only_by_different_devices_are_an_error():
    """npu and gpu both take a and c; x only npu, y only gpu: no one device takes the closure."""
    g = dag([("a", "x"), ("x", "c"), ("a", "y"), ("y", "c")],
            {"a": "Add", "x": "Relu", "y": "Tanh", "c": "Add"})
    with pytest.raises(ConstraintError, match="no one device of the group .npu, gpu. takes"):
        ck.make_problem(g, ["npu=ops:Add,Relu", "gpu=ops:Add,Tanh"],
                        constraints=Constraints(together=[["a", "c"]]))


def test_the_group_goes_to_the_device_that_takes_the_nodes_between():
    g = dag([("a", "x"), ("x", "c")], {"a": "Add", "x": "Tanh", "c": "Add"})
    for strategy in ck.strategy_names():
        part = ck.partition(g, ["npu=ops:Add", "gpu=ops:Add,Tanh"], strategy=strategy,
                            constraints=Constraints(together=[["a", "c"]]),
                            **OPTIONS.get(strategy, {}))
        names = sorted(part.graph.nodes[v].name for v in cluster_of(part, "a").nodes)
        # placement weighs offloading against the cut and may keep the group on the host
        device = "cpu" if strategy == "placement" else "gpu"
        assert cluster_of(part, "a").device in ("gpu", device), strategy
        assert names == ["a", "c", "x"], strategy


def test_a_group_reached_by_the_closure_merges_with_it():
    """a -> b -> c with groups {a, c} and {b, d}: b joins the first group, so d must too."""
    g = dag([("a", "b"), ("b", "c"), ("b", "d")], {v: "Relu" for v in "abcd"})
    p = ck.make_problem(g, ["ops:Relu"], constraints=Constraints(together=[["a", "c"], ["b", "d"]]))
    assert group_names(p) == [["a", "b", "c", "d"]]
    assert p.group_of.tolist() == [0, 0, 0, 0]


def test_a_closure_contradicting_a_never_pair_is_refused():
    g = dag([("a", "x"), ("x", "c")], {"a": "Relu", "x": "Relu", "c": "Relu"})
    with pytest.raises(ConstraintError, match="'a' and 'x' must be together"):
        ck.make_problem(g, ["ops:Relu"], constraints=Constraints(together=[["a", "c"]],
                                                     never_together=[("a", "x")]))


@pytest.mark.parametrize("strategy", ck.strategy_names())
def test_every_strategy_keeps_a_residual_block_whole_on_resnet18(strategy):
    part = ck.partition(RESNET18, ["npu=ops:Conv,Relu,Add,MaxPool"], strategy=strategy,
                        constraints=Constraints.default(together=[BLOCK]),
                        **OPTIONS.get(strategy, {}))
    part.validate()
    cluster = cluster_of(part, BLOCK[0])
    names = {part.graph.nodes[v].name for v in cluster.nodes}
    assert cluster.device == "npu"
    assert set(BLOCK + BRANCH) <= names


def test_the_cli_names_the_refused_node_on_resnet18():
    res = subprocess.run([sys.executable, "-m", "clusterkit", "partition", RESNET18,
                          "--selector", "ops:Conv,Add,MaxPool", "--together", ",".join(BLOCK),
                          "--strategy", "cycles"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1
    assert res.stderr.startswith("clusterkit: error: together group 0 is not convex")
    assert "'/layer1/layer1.0/relu/Relu' (Relu), which no device of the group" in res.stderr


def test_the_closure_is_every_node_between_the_members_on_random_dags():
    """Against a plain oracle (networkx descendants and ancestors) on 300 seeded random DAGs."""
    rng = random.Random(23)
    for _ in range(300):
        n = rng.randint(3, 14)
        g = nx.DiGraph()
        g.add_nodes_from((f"n{k}", {"op": "Relu"}) for k in range(n))
        g.add_edges_from(((f"n{a}", f"n{b}") for a in range(n) for b in range(a + 1, n)
                          if rng.random() < 0.25), bytes=8)
        members = rng.sample(sorted(g), rng.randint(2, 3))
        after = set().union(*(nx.descendants(g, m) for m in members))
        before = set().union(*(nx.ancestors(g, m) for m in members))
        expected = sorted(set(members) | (after & before))
        problem = ck.make_problem(g, ["ops:Relu"], constraints=Constraints(together=[members]))
        assert group_names(problem) == [expected], members
