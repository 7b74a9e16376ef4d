"""Models saved with external data read, partition, run and export as the same model inline.

The bundled models keep their weights as ``ConstantOfShape`` stubs; a few stubs are turned into
real initializers (random values) first, so the external data file holds real weights. Every
model is then saved twice (inline, and with every tensor external) and the two must agree.
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.external_data_helper import uses_external_data

import clusterkit.io.onnx as onnx_io
from clusterkit import partition
from clusterkit.cli import main
from clusterkit.errors import ModelLoadError
from clusterkit.io.onnx import load_onnx
from support.models import BUNDLED_MODELS

MODELS = ["resnet18", "bert_base", "fasterrcnn_mobilenet_v3_large_320_fpn"]
#: stubs turned into initializers per model, and their largest size in elements
STUBS, STUB_ELEMENTS = 6, 1 << 16


def _materialize(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with up to :data:`STUBS` small ConstantOfShape weight stubs (shape from an
    initializer) replaced by initializers of random values."""
    inits = {t.name: t for t in model.graph.initializer}
    rng = np.random.default_rng(0)
    keep, turned = [], 0
    for node in model.graph.node:
        shape = inits.get(node.input[0]) if node.op_type == "ConstantOfShape" else None
        dims = numpy_helper.to_array(shape).tolist() if shape is not None else None
        if dims is None or turned == STUBS or int(np.prod(dims)) > STUB_ELEMENTS:
            keep.append(node)
            continue
        value = next((numpy_helper.to_array(a.t) for a in node.attribute if a.name == "value"),
                     np.zeros(1, np.float32))
        data = (0.1 * rng.standard_normal(dims)).astype(value.dtype)
        model.graph.initializer.append(numpy_helper.from_array(data, node.output[0]))
        turned += 1
    assert turned, "the model has weight stubs to turn into initializers"
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return model


@pytest.fixture(scope="module", params=MODELS)
def saved(request, tmp_path_factory):
    """(inline path, external path) of one bundled model with real weights."""
    folder = tmp_path_factory.mktemp(request.param)
    model = _materialize(onnx.load(BUNDLED_MODELS / f"{request.param}.onnx"))
    inline = folder / "inline" / f"{request.param}.onnx"
    external = folder / "external" / f"{request.param}.onnx"
    inline.parent.mkdir()
    external.parent.mkdir()
    onnx.save_model(model, inline)
    onnx.save_model(model, external, save_as_external_data=True, size_threshold=0,
                    location=f"{request.param}.weights")
    skeleton = onnx.load(external, load_external_data=False).graph.initializer
    assert all(uses_external_data(t) for t in skeleton), "every weight moved out"
    return inline, external


def _plan(part) -> tuple:
    data = part.to_json()
    clusters = sorted((c["device"], tuple(sorted(c["nodes"]))) for c in data["clusters"])
    return clusters, data["metrics"]


@pytest.mark.parametrize("selector", ["coreml", "nnapi"])
def test_partition_equals_the_inline_model(saved, selector):
    inline, external = saved
    a = partition(str(inline), selector)
    b = partition(str(external), selector)
    assert _plan(b) == _plan(a)
    sizes = {n: t.shape for n, t in load_onnx(inline).tensors.items()}
    assert {n: t.shape for n, t in load_onnx(external).tensors.items()} == sizes


def test_a_model_past_the_protobuf_limit_is_inferred_all_the_same(saved, monkeypatch):
    """A model too large to serialize (the limit lowered to 0 here) is shape-inferred with its
    large tensors' data set aside; the partition is the same and the model is left intact."""
    inline, _ = saved
    expected = _plan(partition(str(inline), "nnapi"))
    monkeypatch.setattr(onnx_io, "PROTOBUF_LIMIT", 0)
    graph = load_onnx(inline)
    assert _plan(partition(graph, "nnapi")) == expected
    assert graph.model == onnx.load(str(inline))


def test_run_check_matches(saved, tmp_path):
    _, external = saved
    out = tmp_path / "run.json"
    assert main(["run", str(external), "--selector", "coreml", "--check", "--json",
                 str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["outputs_match"] is True


def test_export_writes_external_data(saved, tmp_path):
    inline, external = saved
    out = tmp_path / "out" / "fused.onnx"
    out.parent.mkdir()
    assert main(["export", str(external), "--selector", "coreml", "-o", str(out),
                 "--verify"]) == 0
    assert (tmp_path / "out" / "fused.onnx.data").is_file()
    onnx.checker.check_model(str(out))
    model = onnx.load(str(out))
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(inline)).graph.initializer}
    for t in model.graph.initializer:
        np.testing.assert_array_equal(numpy_helper.to_array(t), weights[t.name])
    assert sorted(os.listdir(out.parent)) == ["fused.onnx", "fused.onnx.data"]


def test_missing_or_irregular_external_data_is_one_error(saved, tmp_path, capsys):
    _, external = saved
    folder = tmp_path / "m"
    folder.mkdir()
    model = folder / external.name
    model.write_bytes(external.read_bytes())
    with pytest.raises(ModelLoadError, match=r"external data '.*\.weights'.*no such file"):
        load_onnx(model)
    assert main(["partition", str(model), "--selector", "coreml"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ".weights" in err
    os.symlink("/dev/zero", folder / f"{external.stem}.weights")
    with pytest.raises(ModelLoadError, match="not a regular file"):
        load_onnx(model)


def test_external_data_outside_the_model_folder_is_refused(saved, tmp_path):
    _, external = saved
    proto = onnx.load(str(external), load_external_data=False)
    for t in proto.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = f"../{external.parent.name}/{entry.value}"
    model = tmp_path / "m" / "escape.onnx"
    model.parent.mkdir()
    model.write_bytes(proto.SerializeToString())
    weights = external.with_suffix(".weights")
    (tmp_path / weights.parent.name).mkdir()
    (tmp_path / weights.parent.name / weights.name).write_bytes(weights.read_bytes())
    with pytest.raises(ModelLoadError, match=r"cannot read external data '\.\./.*outside"):
        load_onnx(model)


def test_a_large_models_constant_nodes_keep_their_values(monkeypatch):
    """Shape inference of a model past SET_ASIDE_FROM runs with its large tensors' data set
    aside; the graph is read from the inferred copy, so the data goes back into the copy too
    (the values of its Constant nodes once came back empty, marked external)."""
    from onnx import TensorProto, helper

    monkeypatch.setattr(onnx_io, "SET_ASIDE_FROM", 1)
    values = np.arange(160 * 160, dtype=np.float32).reshape(160, 160)
    const = helper.make_node("Constant", [], ["w"], name="c",
                             value=numpy_helper.from_array(values, "w"))
    mm = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    g = helper.make_graph([const, mm], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 160])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 160])],
                          [numpy_helper.from_array(values + 1, "unused")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    graph = load_onnx(model)
    proto = graph.nodes[0].proto
    assert proto.op_type == "Constant"
    np.testing.assert_array_equal(numpy_helper.to_array(proto.attribute[0].t), values)
    assert not uses_external_data(proto.attribute[0].t)
    assert model.graph.node[0].attribute[0].t.raw_data  # the model given is left as it was
