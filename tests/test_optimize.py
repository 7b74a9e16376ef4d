"""``--optimize basic``: partition the graph onnxruntime hands its execution providers.

The figures are checked against onnxruntime itself: the optimized model written beside the JSON
is what its basic level produces, and onnxruntime's own usability checker counts the same nodes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import onnx
import onnxruntime as ort
import pytest

from clusterkit.cli import main
from clusterkit.errors import ModelLoadError
from clusterkit.io.loader import load_graph
from clusterkit.io.optimize import optimize_model
from support.models import BUNDLED_MODELS

SWIN = BUNDLED_MODELS / "swin_t.onnx"
BERT = BUNDLED_MODELS / "bert_base.onnx"
RESNET = BUNDLED_MODELS / "resnet18.onnx"


def _partition(model, tmp_path, level: str) -> tuple[dict, str]:
    out = tmp_path / f"{model.stem}_{level}.json"
    code = main(["partition", str(model), "--selector", "nnapi", "--optimize", level,
                 "--json", str(out)])
    assert code == 0
    return json.loads(out.read_text()), str(out)


def _compute_share(data: dict) -> tuple[int, int]:
    """(offloaded, total) non-folded nodes, counted from the clusters (not the metrics)."""
    folded = set(data["folded"])
    offloaded = total = 0
    for c in data["clusters"]:
        nodes = [v for v in c["nodes"] if v not in folded]
        total += len(nodes)
        offloaded += len(nodes) if c["device"] != data["fallback"] else 0
    return offloaded, total


def _checker_counts(model) -> tuple[int, int]:
    """onnxruntime's usability checker: (nodes NNAPI can handle, nodes of its graph)."""
    proc = subprocess.run([sys.executable, "-m",
                           "onnxruntime.tools.check_onnx_model_mobile_usability", str(model)],
                          capture_output=True, text=True, check=True)
    found = re.search(r"(\d+)/(\d+) nodes can be handled by the NNAPI EP",
                      proc.stdout + proc.stderr)
    assert found, proc.stdout + proc.stderr
    return int(found.group(1)), int(found.group(2))


@pytest.mark.parametrize("model", [SWIN, BERT], ids=lambda p: p.stem)
def test_basic_offloads_a_larger_share_and_matches_the_checker_graph(model, tmp_path):
    raw, _ = _partition(model, tmp_path, "none")
    opt, path = _partition(model, tmp_path, "basic")
    raw_off, raw_total = _compute_share(raw)
    opt_off, opt_total = _compute_share(opt)
    assert opt_off / opt_total > raw_off / raw_total
    checker_ok, checker_total = _checker_counts(model)
    written = onnx.load(str(tmp_path / opt["model_file"]))
    # the checker looks at the graph onnxruntime optimized, the one partitioned here
    assert checker_total == len(written.graph.node) == opt_total + len(opt["folded"])
    # the checker reads op types (and a few conditions) only: an upper bound on what is taken
    assert 0 < opt_off <= checker_ok


def test_the_written_model_is_the_one_the_indices_refer_to(tmp_path):
    data, path = _partition(BERT, tmp_path, "basic")
    assert data["optimize"] == "basic"
    assert data["model_file"] == "bert_base_basic.optimized.onnx"
    written = onnx.load(str(tmp_path / data["model_file"]))
    onnx.checker.check_model(written)
    indices = sorted(v for c in data["clusters"] for v in c["nodes"])
    assert indices == list(range(len(written.graph.node)))  # each node exactly once
    for c in data["clusters"]:
        assert c["names"] == [written.graph.node[v].name for v in c["nodes"]]
    # it is what onnxruntime's basic level writes, node for node
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(tmp_path / "ort.onnx")
    ort.InferenceSession(str(BERT), opts, providers=["CPUExecutionProvider"])
    ours = [(n.name, n.op_type) for n in written.graph.node]
    assert ours == [(n.name, n.op_type) for n in onnx.load(str(tmp_path / "ort.onnx")).graph.node]


def test_raw_json_has_no_optimize_keys_and_writes_no_model(tmp_path):
    data, _ = _partition(RESNET, tmp_path, "none")
    assert "optimize" not in data and "model_file" not in data
    assert not list(tmp_path.glob("*.optimized.onnx"))


def test_run_check_matches_the_original_model(tmp_path):
    out = tmp_path / "run.json"
    assert main(["run", str(BERT), "--selector", "nnapi", "--optimize", "basic", "--check",
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text())["outputs_match"] is True


def test_a_plan_made_on_the_optimized_graph_applies_to_it(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    assert main(["partition", str(RESNET), "--selector", "coreml", "--optimize", "basic",
                 "--json", str(plan)]) == 0
    out = tmp_path / "run.json"
    assert main(["run", str(RESNET), "--plan", str(plan), "--check", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["outputs_match"] is True


def test_compare_and_export_flags(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["compare", str(BERT), "--selector", "nnapi", "--strategies", "mxnet",
                 "--optimize", "basic", "--json", str(out), "--no-progress"]) == 0
    single = json.loads(out.read_text())
    row = single["rows"][0]
    assert row["offloaded_nodes"] > 0
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "bert_base.onnx").write_bytes(BERT.read_bytes())
    swept = tmp_path / "s.json"
    assert main(["compare", str(folder), "--selector", "nnapi", "--strategies", "mxnet",
                 "--optimize", "basic", "--json", str(swept), "--no-progress"]) == 0
    sweep = json.loads(swept.read_text())["models"][0]
    # the folder sweep partitions the same optimized graph as the single-model compare
    assert sweep["nodes"] == single["nodes"] < load_graph(BERT).n
    assert sweep["rows"][0]["offloaded_nodes"] == row["offloaded_nodes"]
    assert main(["compare", str(folder), "--selector", "nnapi", "--dim", "batch=1"]) == 2
    assert "not the folder" in capsys.readouterr().err
    model = tmp_path / "r.onnx"
    assert main(["export", str(RESNET), "--selector", "coreml", "--optimize", "basic",
                 "--verify", "-o", str(model)]) == 0
    onnx.checker.check_model(str(model))


@pytest.mark.parametrize("selector, hinted", [("nnapi", True), ("npu=coreml[exclude=Relu]", True),
                                              ("ops:Conv,Relu", False)])
def test_raw_graph_hint(selector, hinted, capsys):
    assert main(["partition", str(RESNET), "--selector", selector]) == 0
    assert ("--optimize basic" in capsys.readouterr().out) is hinted
    assert main(["partition", str(RESNET), "--selector", selector, "--optimize", "basic"]) == 0
    assert "--optimize basic" not in capsys.readouterr().out


def test_a_bad_level_is_a_one_line_error(capsys):
    assert main(["partition", str(RESNET), "--selector", "nnapi", "--optimize", "fast"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--optimize" in err and "'fast'" in err
    with pytest.raises(ModelLoadError, match="optimize must be one of none, basic, got 'extended'"):
        optimize_model(RESNET, "extended")


def test_a_model_onnxruntime_cannot_load_is_a_model_load_error(tmp_path):
    model = onnx.load(str(RESNET))
    model.graph.node[0].op_type = "NoSuchOp"
    with pytest.raises(ModelLoadError, match="onnxruntime cannot load") as info:
        optimize_model(model)
    assert "\n" not in str(info.value)


def test_dims_are_fixed_before_optimizing():
    llama = BUNDLED_MODELS / "llama_48l_dynamic.onnx"
    graph = load_graph(llama, dims={"batch": 1, "seq": 8}, optimize="basic")
    raw = load_graph(llama, dims={"batch": 1, "seq": 8})
    assert len(graph.nodes) < len(raw.nodes)
    shapes = [graph.tensors[name].shape for name in graph.inputs]
    assert shapes and all(isinstance(d, int) for s in shapes for d in s)
    assert graph.name == "llama_48l_dynamic"


def test_optimize_of_a_non_onnx_model_is_an_error(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"directed": True, "multigraph": False, "graph": {},
                                "nodes": [{"id": 0, "op": "Relu"}], "edges": []}))
    with pytest.raises(ModelLoadError, match="optimize rewrites an ONNX model"):
        load_graph(path, optimize="basic")


def test_a_model_with_external_data_optimizes_as_the_inline_one(tmp_path):
    model = onnx.load(str(RESNET))
    folder = tmp_path / "ext"
    folder.mkdir()
    onnx.save_model(model, str(folder / "resnet18.onnx"), save_as_external_data=True,
                    location="resnet18.onnx.data", size_threshold=0)
    inline, _ = _partition(RESNET, tmp_path, "basic")
    external, _ = _partition(folder / "resnet18.onnx", folder, "basic")
    assert [c["nodes"] for c in external["clusters"]] == [c["nodes"] for c in inline["clusters"]]
    written = onnx.load(str(folder / external["model_file"]))
    other = onnx.load(str(tmp_path / inline["model_file"]))
    assert len(written.graph.initializer) == len(other.graph.initializer) > 0
    out = folder / "run.json"
    assert main(["run", str(folder / "resnet18.onnx"), "--selector", "coreml", "--optimize",
                 "basic", "--check", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["outputs_match"] is True


def test_an_ir3_models_folded_initializers_leave_no_dangling_inputs():
    """Below IR 4 every initializer is a graph input too; the optimized graph keeps none of the
    inputs whose initializers onnxruntime folded away, so every input left is given a value
    (an initializer) or read by a node, and the model runs on what random_inputs feeds it."""
    from clusterkit.runtime.executor import random_inputs, run_model
    from support.models import LIGHT_DIR

    source = LIGHT_DIR / "light_shufflenet.onnx"
    assert onnx.load(source).ir_version < 4
    proto = optimize_model(source, "basic")
    inits = {t.name for t in proto.graph.initializer}
    read = {t for n in proto.graph.node for t in n.input}
    assert all(vi.name in inits or vi.name in read for vi in proto.graph.input)
    graph = load_graph(source, optimize="basic")
    feeds = random_inputs(graph)
    assert set(feeds) == {"gpu_0/data_0"}
    run_model(onnx.load(source), feeds)  # the original takes exactly those feeds
