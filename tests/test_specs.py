"""Selector specs with settings: ``NAME[key=value,...]``, ``exclude``/``include`` for every
selector, the ``clusterkit selectors`` listing, and plans that record and re-apply the spec."""

from __future__ import annotations

import json

import numpy as np
import pytest

import clusterkit as ck
from clusterkit.cli import main
from clusterkit.errors import SelectorError
from clusterkit.result.plan import plan_selectors
from clusterkit.selection.registry import SELECTORS, SHIPPED
from clusterkit.selection.specs import parse_selector, parse_selectors, split_settings
from clusterkit.testing.conformance import check_selector
from support.models import BUNDLED_MODELS

RESNET18 = str(BUNDLED_MODELS / "resnet18.onnx")
CONVNEXT = str(BUNDLED_MODELS / "convnext_tiny.onnx")


@pytest.fixture(scope="module")
def resnet18():
    return ck.load_graph(RESNET18)


# ---------------------------------------------------------------------- the parser
@pytest.mark.parametrize("spec, name, items", [
    ("nnapi", "nnapi", []),
    ("nnapi[]", "nnapi", []),
    ("tensorrt[exclude=Softmax|TopK]", "tensorrt", [("exclude", "Softmax|TopK")]),
    ("coreml[ model_format = NeuralNetwork , static_shapes_only=true ]", "coreml",
     [("model_format", "NeuralNetwork"), ("static_shapes_only", "true")]),
    ("x[a='1,2]',b=\"c=d\"]", "x", [("a", "1,2]"), ("b", "c=d")]),
    ("x[a='']", "x", [("a", "")]),
])
def test_split_settings(spec, name, items):
    assert split_settings(spec) == (name, items)


@pytest.mark.parametrize("spec, message", [
    ("nnapi[feature_level=3", r"'\[' is never closed"),
    ("nnapi]", r"'\]' without a matching '\['"),
    ("nnapi[feature_level=3]]", r"text after the closing '\]' \('\]'\)"),
    ("nnapi[feature_level=3]x", r"text after the closing '\]' \('x'\)"),
    ("nnapi[[feature_level=3]]", r"'\[' inside the settings"),
    ("[feature_level=3]", r"no selector name before '\['"),
    ("nnapi[feature_level]", "setting 'feature_level' has no value"),
    ("nnapi[=3]", "a setting has no name"),
    ("nnapi[feature_level=3,]", "an empty setting"),
    ("nnapi[feature_level='3]", "the quote ' is never closed"),
    ("nnapi[feature_level=3,feature_level=2]", "sets 'feature_level' twice"),
])
def test_malformed_specs_are_spec_errors(spec, message):
    with pytest.raises(SelectorError, match=message):
        parse_selector(spec)


def test_unknown_key_lists_the_known_ones_with_defaults():
    with pytest.raises(SelectorError, match=r"selector 'nnapi' has no setting 'level' \(known: "
                       r"feature_level=4, exclude=OP\|OP, include=OP\|OP, max_nodes=N, "
                       r"min_nodes=N, max_const_bytes=N\)"):
        parse_selector("nnapi[level=3]")
    with pytest.raises(SelectorError, match=r"'tensorrt' has no setting 'fp16' \(known: "
                       r"exclude=OP\|OP, include=OP\|OP, max_nodes=N, min_nodes=N, "
                       r"max_const_bytes=N\)"):
        parse_selector("tensorrt[fp16=true]")
    with pytest.raises(SelectorError, match="unknown selector 'nosuch'"):
        parse_selector("nosuch[exclude=Conv]")


@pytest.mark.parametrize("spec, message", [
    ("nnapi[feature_level=three]", r"setting feature_level takes an integer \(int, default 4\),"
                                   r" got 'three'"),
    ("nnapi[feature_level=2.5]", "feature_level takes an integer"),
    ("coreml[static_shapes_only=yes]", r"static_shapes_only takes true or false \(bool, default "
                                       r"false\), got 'yes'"),
    ("qnn[qairt_sdk=2.x]", r"qairt_sdk takes items separated by '\.' or '\|' \(tuple"),
    ("tensorrt[exclude=]", r"exclude= lists no op types"),
    ("tensorrt[include=|]", r"include= lists no op types"),
])
def test_a_bad_value_names_the_key_and_the_expected_type(spec, message):
    with pytest.raises(SelectorError, match=message):
        parse_selector(spec)


def test_values_take_the_defaults_type_and_reach_the_factory():
    prop = parse_selector("coreml[model_format='NeuralNetwork',coreml_version=6,"
                          "static_shapes_only=TRUE]")
    assert prop.settings["model_format"] == "NeuralNetwork"
    assert prop.settings["coreml_version"] == 6 and type(prop.settings["coreml_version"]) is int
    assert prop.settings["static_shapes_only"] is True
    assert parse_selector("coreml[static_shapes_only=false]").settings["static_shapes_only"] \
        is False
    assert parse_selector("qnn[qairt_sdk=2.48]").settings["qairt_sdk"] == (2, 48)
    assert parse_selector("qnn[qairt_sdk=2|47]").settings["qairt_sdk"] == (2, 47)
    with pytest.raises(SelectorError, match="model_format must be one of"):
        parse_selector("coreml[model_format=Foo]")  # the factory's own check still speaks


def test_device_prefix_with_settings():
    prop = parse_selector("npu=nnapi[feature_level=2]")
    assert prop.device == "npu" and prop.settings["feature_level"] == 2
    prop = parse_selector("gpu=tensorrt[exclude=Softmax|TopK]")
    assert prop.device == "gpu" and prop.name == "tensorrt"
    a, b = parse_selectors(["npu=tensorrt[exclude=Conv]", "gpu=tensorrt[include=Conv]"])
    assert (a.device, b.device) == ("npu", "gpu")


def test_feature_level_changes_what_nnapi_takes():
    """The NNAPI doc gates Div on feature level 2: convnext_tiny's Divs are taken at the default
    level 4 and refused at level 1, and nothing else changes."""
    g = ck.load_graph(CONVNEXT)
    default, low = parse_selector("nnapi"), parse_selector("nnapi[feature_level=1]")
    assert low.settings["feature_level"] == 1 and default.settings["feature_level"] == 4
    a, b = default.query(g), low.query(g)
    assert not (b & ~a).any()
    lost = np.flatnonzero(a & ~b)
    assert len(lost) > 0 and {g.nodes[v].op_type for v in lost} == {"Div"}
    assert all("feature level 2" in low.explain(g.nodes[v], g) for v in lost)


# ---------------------------------------------------------------------- exclude / include
def _offloaded_ops(part, device):
    g = part.graph
    return [g.nodes[v].op_type for c in part.clusters if c.device == device for v in c.nodes]


def test_exclude_keeps_those_ops_off_the_device(resnet18):
    plain = ck.partition(resnet18, ["tensorrt"], strategy="cycles")
    assert "Conv" in _offloaded_ops(plain, "tensorrt")
    part = ck.partition(resnet18, ["tensorrt[exclude=Conv]"], strategy="cycles").validate()
    ops = _offloaded_ops(part, "tensorrt")
    assert ops and "Conv" not in ops
    convs = [v for v in range(resnet18.n) if resnet18.nodes[v].op_type == "Conv"]
    assert set(part.device_of_nodes()[v] for v in convs) == {"cpu"}
    # every other op is placed as before
    assert sorted(o for o in _offloaded_ops(plain, "tensorrt") if o != "Conv") == sorted(ops)
    prop = parse_selector("tensorrt[exclude=Conv|Softmax]")
    conv = resnet18.nodes[convs[0]]
    assert "excluded by the spec (exclude=Conv|Softmax)" in prop.explain(conv, resnet18)


def test_include_takes_only_those_ops(resnet18):
    part = ck.partition(resnet18, ["npu=nnapi[include=Conv|Relu]"], strategy="cycles")
    ops = set(_offloaded_ops(part.validate(), "npu"))
    assert ops == {"Conv", "Relu"}
    both = parse_selector("tensorrt[include=Conv|Relu,exclude=Relu]").query(resnet18)
    assert {resnet18.nodes[v].op_type for v in np.flatnonzero(both)} == {"Conv"}


def test_exclude_works_for_every_shipped_selector(resnet18):
    for name in SHIPPED:
        base = parse_selector(name).query(resnet18)
        taken = {resnet18.nodes[v].op_type for v in np.flatnonzero(base)}
        for op in taken:
            mask = parse_selector(f"{name}[exclude={op}]").query(resnet18)
            ops = np.array([nd.op_type == op for nd in resnet18.nodes])
            assert not (mask & ops).any(), (name, op)
            assert (mask == (base & ~ops)).all(), (name, op)


@pytest.mark.parametrize("spec", ["npu=dnnl[exclude=Conv]", "tensorrt[include=Conv|Relu]"])
def test_a_restricted_selector_keeps_the_protocol(spec, resnet18):
    report = check_selector(parse_selector(spec), [resnet18], max_seeds=8)
    assert "mask" in report.rules and "explain" in report.rules


def test_exclude_on_a_python_file_spec(tmp_path, resnet18):
    f = tmp_path / "chip.py"
    f.write_text("from clusterkit import OpsProperty\n"
                 "PROPERTY = OpsProperty(['Conv', 'Relu'], device='chip')\n")
    mask = parse_selector(f"{f}[exclude=Relu]").query(resnet18)
    assert {resnet18.nodes[v].op_type for v in np.flatnonzero(mask)} == {"Conv"}
    with pytest.raises(SelectorError, match="has no setting 'x'"):
        parse_selector(f"{f}[x=1]")


def test_registered_selector_settings_and_listing(capsys):
    def factory(device="mine", *, ops="Conv|Relu", limit=3):
        return ck.OpsProperty(ops.split("|"), device=device)

    ck.register_selector("mine_test", factory, "a test selector")
    try:
        assert parse_selector("mine_test[ops=Add]").op_types == {"Add"}
        with pytest.raises(SelectorError, match="limit takes an integer"):
            parse_selector("mine_test[limit=x]")
        assert main(["selectors"]) == 0
        out = capsys.readouterr().out
        assert "mine_test" in out and "ops=Conv|Relu (str), limit=3 (int)" in out
    finally:
        SELECTORS.unregister("mine_test")


# ---------------------------------------------------------------------- the CLI
def test_cli_lists_every_shipped_selector_with_its_settings(capsys):
    assert main(["selectors"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for name in SHIPPED:
        assert any(line.startswith(name + " ") for line in lines), name
    assert "feature_level=4 (int)" in out
    assert "static_shapes_only=false (bool)" in out
    assert "exclude=OP|OP" in out and "include=OP|OP" in out


def test_cli_spec_errors_are_one_line(capsys):
    assert main(["partition", RESNET18, "--selector", "nnapi[feature_level=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'[' is never closed" in err


def test_a_plan_records_the_full_spec_and_reapplies_it(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    spec = "npu=tensorrt[exclude=Conv|Gemm]"
    assert main(["partition", RESNET18, "--selector", spec, "--json", str(plan)]) == 0
    data = json.loads(plan.read_text())
    assert data["selector"] == spec and plan_selectors(data) == [spec]
    out = tmp_path / "out.json"
    assert main(["export", RESNET18, "--plan", str(plan), "-o", str(tmp_path / "m.onnx"),
                 "--json", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["selector"] == spec
    assert [c["nodes"] for c in again["clusters"]] == [c["nodes"] for c in data["clusters"]]
    g = ck.load_graph(RESNET18)
    on_npu = [g.nodes[g.source_to_index[v]].op_type for c in again["clusters"]
              if c["device"] == "npu" for v in c["nodes"]]
    assert on_npu and not {"Conv", "Gemm"} & set(on_npu)
