"""Every example runs as a user would run it, on a real model: with a model argument, and with
none from another working directory (the default is a model inside the repository)."""

from __future__ import annotations

import re
import subprocess
import sys

from support.models import BUNDLED_MODELS, REPO


def _run(script, *args, cwd=REPO):
    res = subprocess.run([sys.executable, str(REPO / "examples" / script), *map(str, args)],
                         capture_output=True, text=True, timeout=600, cwd=cwd)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def _check_new_accelerator(out):
    m = re.search(r"(\d+)/49 compute nodes offloaded.*compute nodes: .*tinynpu (\d+)", out)
    assert m and int(m.group(1)) == int(m.group(2)) > 0
    largest = re.search(r"largest (\d+) nodes", out)
    assert largest and int(largest.group(1)) <= 24, out  # the chip's limit, kept


def test_new_accelerator_keeps_its_limit_under_the_default_strategy():
    """The CLI's default strategy on ResNet-50 with the example's selector file: every cluster
    within the 24 nodes the selector counts, connected (it grows over edges), and as many
    compute nodes offloaded as MXNet's growth (119 of 122)."""
    import networkx as nx

    import clusterkit as ck

    part = ck.partition(BUNDLED_MODELS / "resnet50.onnx",
                        str(REPO / "examples" / "new_accelerator.py"))
    g = part.graph
    for c in part.offloaded_clusters():
        inner = nx.Graph()
        inner.add_nodes_from(c.nodes)
        inner.add_edges_from((u, v) for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist())
                             if u in inner and v in inner)
        assert len(c.nodes) <= 24 and nx.is_connected(inner), c
    mx = ck.partition(BUNDLED_MODELS / "resnet50.onnx",
                      str(REPO / "examples" / "new_accelerator.py"), strategy="mxnet")
    assert part.metrics()["compute_offloaded"] == mx.metrics()["compute_offloaded"] == 119


def _check_hetero_run(out):
    assert "fell back to the host" in out and "Gemm is not supported" in out
    assert "match: True" in out


def test_new_accelerator_example():
    _check_new_accelerator(_run("new_accelerator.py", BUNDLED_MODELS / "resnet18.onnx"))


def test_new_accelerator_example_default_model(tmp_path):
    _check_new_accelerator(_run("new_accelerator.py", cwd=tmp_path))


def test_compare_strategies_example():
    out = _run("compare_strategies.py", BUNDLED_MODELS / "squeezenet1_1.onnx",
               "ops:Conv,Relu,Concat,MaxPool")
    assert "lowest cut_bytes:" in out
    for strategy in ("singleton", "cycles", "longest-path"):
        assert strategy in out


def test_compare_strategies_example_default_model(tmp_path):
    out = _run("compare_strategies.py", cwd=tmp_path)
    assert "lowest cut_bytes:" in out and "longest-path" in out


def test_hetero_run_example_falls_back_and_matches():
    _check_hetero_run(_run("hetero_run.py", BUNDLED_MODELS / "resnet18.onnx"))


def test_hetero_run_example_default_model(tmp_path):
    _check_hetero_run(_run("hetero_run.py", cwd=tmp_path))
