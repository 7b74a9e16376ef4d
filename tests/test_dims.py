"""``dims`` / ``--dim NAME=N``: symbolic dims fixed before shape inference, on real models."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import shape_inference

from clusterkit import partition
from clusterkit.cli import main
from clusterkit.errors import ModelLoadError
from clusterkit.io.loader import load_graph
from clusterkit.io.onnx import load_onnx
from support.models import BUNDLED_MODELS

LLAMA = BUNDLED_MODELS / "llama_48l_dynamic.onnx"
LLAMA_DIMS = {"batch": 1, "seq": 16}
#: a smaller model with symbolic dims, for the commands that run or export it
RCNN = BUNDLED_MODELS / "fasterrcnn_mobilenet_v3_large_320_fpn.onnx"
RCNN_DIMS = {"image_dynamic_axes_1": 320, "image_dynamic_axes_2": 320}


def _flags(dims: dict[str, int]) -> list[str]:
    return [x for k, v in dims.items() for x in ("--dim", f"{k}={v}")]


def _static_nodes(model: onnx.ModelProto, dims: dict[str, int]) -> int:
    """Written apart from clusterkit: graph-input dims set by hand, onnx shape inference with data
    propagation, then the nodes whose every input has a fully static shape."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for vi in model.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in dims:
                d.dim_value = dims[d.dim_param]
    g = shape_inference.infer_shapes(model, data_prop=True).graph
    static = {t.name for t in g.initializer}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        shape = vi.type.tensor_type.shape
        if vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value")
                                                         for d in shape.dim):
            static.add(vi.name)
    return sum(all(t in static for t in n.input if t) for n in g.node)


def _clusterkit_static_nodes(graph) -> int:
    def static(t):
        shape = graph.tensors[t].shape
        return shape is not None and all(isinstance(d, int) for d in shape)

    return sum(all(static(t) for t in n.inputs if t) for n in graph.nodes)


def _offloaded(part) -> int:
    return sum(len(c.nodes) for c in part.offloaded_clusters())


def test_fixed_dims_make_llama_static_and_offloaded():
    model = onnx.load(LLAMA)
    before, after = load_graph(LLAMA), load_graph(LLAMA, dims=LLAMA_DIMS)
    for name in after.inputs:
        assert all(isinstance(d, int) for d in after.tensors[name].shape), name
    assert [after.tensors[t].shape for t in after.inputs] == [(1, 16), (1, 16)]
    assert _clusterkit_static_nodes(before) == _static_nodes(model, {})
    assert _clusterkit_static_nodes(after) == _static_nodes(model, LLAMA_DIMS)
    assert _static_nodes(model, LLAMA_DIMS) > _static_nodes(model, {})
    assert _offloaded(partition(before, "nnapi")) < _offloaded(partition(after, "nnapi"))


def test_a_model_proto_given_is_not_modified():
    model = onnx.load(LLAMA)
    raw = model.SerializeToString()
    graph = load_onnx(model, dims=LLAMA_DIMS)
    assert model.SerializeToString() == raw
    assert graph.tensors[graph.inputs[0]].shape == (1, 16)


@pytest.mark.parametrize("dims, message", [
    ({"sequence": 4}, r"dim 'sequence' is not a symbolic dim .*: batch, seq\)"),
    ({"batch": 0}, r"dim 'batch' is given size 0; a size must be a positive integer"),
    ({"seq": -3}, r"size -3"),
    ({"seq": 2.5}, r"size 2.5"),
])
def test_bad_dims_are_errors(dims, message):
    with pytest.raises(ModelLoadError, match=message):
        load_graph(LLAMA, dims=dims)


def test_dims_of_a_static_or_non_onnx_model_are_errors(tmp_path):
    with pytest.raises(ModelLoadError, match=r"symbolic dims: none"):
        load_graph(BUNDLED_MODELS / "resnet18.onnx", dims={"batch": 1})
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"directed": True, "multigraph": False, "graph": {},
                                "nodes": [{"id": 0, "op": "Relu"}], "edges": []}))
    with pytest.raises(ModelLoadError, match=r"dims fix symbolic dims of an ONNX model"):
        load_graph(path, dims={"batch": 1})


@pytest.mark.parametrize("flag", ["batch", "batch=x", "=3", "seq=0", "len=4"])
def test_bad_dim_flags_are_one_line_errors(flag, capsys):
    assert main(["partition", str(LLAMA), "--selector", "nnapi", "--dim", flag]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "dim" in err


def test_partition_flag(tmp_path):
    out = tmp_path / "p.json"
    args = ["partition", str(LLAMA), "--selector", "nnapi", "--json", str(out)]
    assert main(args) == 0
    before = json.loads(out.read_text())["metrics"]["nodes_offloaded"]
    assert main(args + _flags(LLAMA_DIMS)) == 0
    assert before == 0 and json.loads(out.read_text())["metrics"]["nodes_offloaded"] > 0


def test_compare_flag(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["compare", str(LLAMA), "--selector", "nnapi", "--strategies", "cycles",
                 "--json", str(out), "--no-progress"] + _flags(LLAMA_DIMS)) == 0
    data = json.loads(out.read_text())
    assert data["model"] == "llama_48l_dynamic" and data["rows"][0]["offloaded_nodes"] > 0
    assert main(["compare", str(BUNDLED_MODELS), "--selector", "nnapi", "--dim", "seq=4"]) == 2
    assert "not the folder" in capsys.readouterr().err


def test_run_flag(tmp_path):
    out = tmp_path / "run.json"
    assert main(["run", str(RCNN), "--selector", "nnapi", "--check", "--json", str(out)]
                + _flags(RCNN_DIMS)) == 0
    report = json.loads(out.read_text())
    assert report["outputs_match"] is True


def test_export_flag(tmp_path):
    out = tmp_path / "rcnn.onnx"
    assert main(["export", str(RCNN), "--selector", "nnapi", "-o", str(out)]
                + _flags(RCNN_DIMS)) == 0
    onnx.checker.check_model(str(out))
    image = onnx.load(str(out)).graph.input[0].type.tensor_type.shape
    assert [d.dim_value for d in image.dim][-2:] == [320, 320]
