"""The `clusterkit partition` contract on every real model, and its errors."""

from __future__ import annotations

import json
import subprocess
import sys

import networkx as nx
import pytest

from clusterkit import Constraints, Partition, load_graph, parse_selectors, strategy_names
from clusterkit.cli import main
from support.models import ALL_MODELS, BUNDLED_MODELS, REPO, model_id
from support.partitions import timeless

SELECTOR_SETS = [
    ["ops:Conv,Relu,Add,MatMul,Gemm,BatchNormalization"],
    ["npu=ops:Conv,MatMul,Gemm,Mul", "gpu=ops:Relu,Add,Softmax,Transpose,Reshape"],
]
STRATEGY = "cycles" if "cycles" in strategy_names() else "singleton"


def _check_json(model_path, data, selectors):
    graph = load_graph(model_path)
    nodes = sorted(v for c in data["clusters"] for v in c["nodes"])
    assert nodes == list(range(graph.n)), "every graph.node index appears exactly once"
    problem = Constraints.default().compile(graph, parse_selectors(selectors))
    Partition.from_json(problem, data).validate()
    assert data["metrics"]["partitions"] == sum(1 for c in data["clusters"]
                                                if c["device"] != "cpu")


@pytest.mark.parametrize("path", ALL_MODELS, ids=model_id)
def test_partition_writes_a_valid_json_for_two_selector_sets(path, tmp_path, capsys):
    for k, selectors in enumerate(SELECTOR_SETS):
        out = tmp_path / f"p{k}.json"
        args = ["partition", str(path), "--strategy", STRATEGY, "--json", str(out)]
        for s in selectors:
            args += ["--selector", s]
        assert main(args) == 0
        data = json.loads(out.read_text())
        assert data["model"] == path.stem and data["strategy"] == STRATEGY
        _check_json(path, data, selectors)
    assert "partitions" in capsys.readouterr().out


def test_node_link_model_and_dot(tmp_path, capsys):
    g = nx.DiGraph()
    for v, op in enumerate(["Conv", "Relu", "Cpu", "Conv"]):
        g.add_node(v, op=op)
    g.add_edges_from([(0, 1), (1, 2), (2, 3)])
    path = tmp_path / "g.json"
    path.write_text(json.dumps(nx.node_link_data(g, edges="edges")))
    out = tmp_path / "p.json"
    dot = tmp_path / "p.dot"
    assert main(["partition", str(path), "--strategy", STRATEGY, "--selector", "ops:Conv,Relu",
                 "--json", str(out), "--dot", str(dot)]) == 0
    data = json.loads(out.read_text())
    _check_json(path, data, ["ops:Conv,Relu"])
    assert dot.read_text().startswith("digraph")


@pytest.mark.parametrize("args, message", [
    (["partition", "nope.onnx", "--selector", "ops:Conv"], "no such file"),
    (["partition", "{resnet}", "--selector", "bogus"], "unknown selector 'bogus'"),
    (["partition", "{resnet}", "--selector", "ops:Conv", "--strategy", "zzz"],
     "unknown strategy 'zzz'"),
    (["partition", "{resnet}"], "the following arguments are required: --selector"),
    (["partition", "{resnet}", "--selector", "ops:Conv", "--never", "a"], "--never takes two"),
    (["partition", "{resnet}", "--selector", "ops:Conv", "--strategy", "singleton",
      "--time-limit", "3"], "strategy 'singleton' has no option 'time_limit'"),
])
def test_bad_input_gives_one_line_error(args, message, capsys):
    args = [a.replace("{resnet}", str(BUNDLED_MODELS / "resnet18.onnx")) for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("clusterkit: error:") and message in err
    assert len(err.splitlines()) == 1


def test_console_script_and_module_agree(tmp_path):
    model = str(BUNDLED_MODELS / "squeezenet1_1.onnx")
    outs = []
    for cmd in ([sys.executable, "-m", "clusterkit"],
                [str(REPO / ".venv" / "bin" / "clusterkit")] if (REPO / ".venv" / "bin" /
                                                                 "clusterkit").exists() else None):
        if cmd is None:
            continue
        target = tmp_path / f"{len(outs)}.json"
        res = subprocess.run(cmd + ["partition", model, "--strategy", "singleton", "--selector",
                                    "ops:Conv,Relu", "--json", str(target)],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        outs.append(timeless(json.loads(target.read_text())))
    assert outs and all(o == outs[0] for o in outs)
    bad = subprocess.run([sys.executable, "-m", "clusterkit", "partition", "missing.onnx",
                          "--selector", "ops:Conv"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
