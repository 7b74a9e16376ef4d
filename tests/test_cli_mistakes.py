"""Mistakes in selector specs and run flags are errors: exit 2 with one line naming the mistake
(and, for a mistyped op type, the closest known name), never a silent empty partition."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterkit.cli import main

MODELS = Path(__file__).parent / "data" / "models"
RESNET18 = str(MODELS / "resnet18.onnx")


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize("spec, message", [
    ("ops:conv,relu", "unknown op type 'conv' in ops: spec; did you mean 'Conv'?"),
    ("ops:Cnv,Relu", "unknown op type 'Cnv' in ops: spec; did you mean 'Conv'?"),
    ("npu=ops:Conv,Rleu", "unknown op type 'Rleu' in ops: spec; did you mean 'Relu'?"),
    ("ops:Conv;Relu", "selector spec 'ops:Conv;Relu': ';' in op type 'Conv;Relu'; op types are "
                      "separated by ',' (e.g. ops:Conv,Relu)"),
    ("ops:Conv|Relu|Add", "'|' in op type 'Conv|Relu|Add'; op types are separated by ',' "
                          "(e.g. ops:Conv,Relu,Add)"),
    ("npu=ops:Conv[exclude=Relu]", "selector spec 'npu=ops:Conv[exclude=Relu]': an ops: spec "
                                   "has no setting 'exclude'"),
])
def test_a_mistaken_ops_spec_is_one_line_and_exit_2(capsys, spec, message):
    code, err = run_cli(capsys, "partition", RESNET18, "--selector", spec)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("clusterkit: error: ")
    assert message in err


def test_op_types_of_the_model_and_of_any_onnx_domain_are_accepted(capsys, tmp_path):
    """``LabelEncoder`` (ai.onnx.ml) is no op of resnet18 but an ONNX operator; a node-link graph
    may use op names of its own (``my.op``)."""
    code, err = run_cli(capsys, "partition", RESNET18, "--strategy", "singleton",
                        "--selector", "ops:Conv,LabelEncoder")
    assert (code, err) == (0, "")
    graph = tmp_path / "g.json"
    graph.write_text('{"directed": true, "multigraph": false, "graph": {}, "nodes": '
                     '[{"id": "a", "op": "my.op"}, {"id": "b", "op": "my.op"}], '
                     '"links": [{"source": "a", "target": "b"}]}')
    code, err = run_cli(capsys, "partition", str(graph), "--selector", "ops:my.op")
    assert (code, err) == (0, "")
    code, err = run_cli(capsys, "partition", str(graph), "--selector", "ops:my.opp")
    assert code == 2 and "did you mean 'my.op'?" in err


@pytest.mark.parametrize("backend, message", [
    ("npu=reference", "--backend npu=...: no selector defines device 'npu' (devices: acc)"),
    ("cpu=reference", "no selector defines device 'cpu' (the fallback's backend is "
                      "--host-backend)"),
])
def test_run_backend_for_a_device_no_selector_defines_is_an_error(capsys, backend, message):
    code, err = run_cli(capsys, "run", RESNET18, "--strategy", "singleton",
                        "--selector", "ops:Conv", "--backend", backend)
    assert code == 2
    assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize("command", ["report", "compare"])
def test_other_commands_refuse_a_mistyped_op_type_too(capsys, tmp_path, command):
    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    code, err = run_cli(capsys, command, RESNET18, "--selector", "ops:Conv,Relu,MaxPol", *extra)
    assert code == 2
    assert err == ("clusterkit: error: unknown op type 'MaxPol' in ops: spec; did you mean "
                   "'MaxPool'?\n")


# ---------------------------------------------------------------------- one line, nothing written
def _acme_model(path: Path) -> str:
    """Relu -> com.acme:Foo -> Relu: an op of a domain onnxruntime does not know."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Foo", ["a"], ["b"], name="foo", domain="com.acme"),
             helper.make_node("Relu", ["b"], ["y"], name="r2")]
    model = helper.make_model(helper.make_graph(nodes, "acme", [x], [y]), opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.acme", 1)])
    onnx.save(model, str(path))
    return str(path)


def _one_line(err: str) -> None:
    assert err.count("\n") == 1 and err.startswith("clusterkit: error: "), err


def test_export_verify_of_a_model_onnxruntime_cannot_run_is_one_line_and_writes_nothing(
        capsys, tmp_path):
    model = _acme_model(tmp_path / "acme.onnx")
    out = tmp_path / "X.onnx"
    code, err = run_cli(capsys, "export", model, "--selector", "ops:Relu", "-o", str(out),
                        "--verify")
    assert code == 2
    _one_line(err)
    assert "onnxruntime cannot run the model" in err and "com.acme:Foo" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acme.onnx"]


@pytest.mark.parametrize("argv", [
    ["partition", RESNET18, "--selector", "ops:Conv", "--json", "{d}/o.json"],
    ["partition", RESNET18, "--selector", "ops:Conv", "--dot", "{d}/o.dot"],
    ["partition", RESNET18, "--selector", "ops:Conv", "--split", "{d}/o.json"],
    ["partition", RESNET18, "--selector", "ops:Conv", "--dump-dot", "{d}"],
    ["export", RESNET18, "--selector", "ops:Conv", "-o", "{d}/o.onnx"],
    ["export", RESNET18, "--selector", "ops:Conv", "-o", "{t}/o.onnx", "--json", "{d}/p.json"],
    ["report", RESNET18, "--selector", "ops:Conv", "--strategies", "none", "-o", "{d}/r.html"],
    ["run", RESNET18, "--selector", "ops:Conv", "--strategy", "singleton", "--json",
     "{d}/r.json"],
    ["compare", RESNET18, "--selector", "ops:Conv", "--strategies", "singleton", "--json",
     "{d}/c.json"],
    ["compare", RESNET18, "--selector", "ops:Conv", "--strategies", "singleton", "--dot", "{d}"],
    ["verify", RESNET18, "--selector", "qnn", "--json", "{d}/v.json"],
], ids=["partition-json", "partition-dot", "partition-split", "partition-dump-dot", "export-o",
        "export-json", "report-o", "run-json", "compare-json", "compare-dot", "verify-json"])
def test_an_output_in_a_missing_folder_is_one_line_naming_it_and_no_folder_is_made(
        capsys, tmp_path, argv):
    missing = tmp_path / "nope"
    code, err = run_cli(capsys, *[a.format(d=missing, t=tmp_path) for a in argv])
    assert code == 2
    _one_line(err)
    assert f"{str(missing)!r}" in err and "does not exist" in err
    assert list(tmp_path.iterdir()) == []  # no folder made, nothing written


def test_the_write_helpers_never_create_a_folder(tmp_path):
    from clusterkit.errors import WriteError
    from clusterkit.io.files import write_atomic

    with pytest.raises(WriteError, match="the folder '.*sub' does not exist"):
        write_atomic(tmp_path / "sub" / "out.txt", "x")
    assert list(tmp_path.iterdir()) == []


def test_a_misspelt_provider_option_is_refused_with_the_options_the_ep_reads(capsys):
    pytest.importorskip("onnxruntime_qnn", reason="needs clusterkit[qnn]")
    code, err = run_cli(capsys, "partition", RESNET18, "--selector",
                        "ep:QNNExecutionProvider[backnd=htp]")
    assert code == 2
    _one_line(err)
    assert "QNNExecutionProvider has no provider option 'backnd'; did you mean 'backend'?" in err
    assert "soc_model" in err and "htp_performance_mode" in err


def test_an_option_of_an_ep_without_a_list_is_passed_on_with_a_warning_naming_it(caplog):
    from clusterkit.io.ep_query import PluginEp, check_option_keys

    with caplog.at_level("WARNING", logger="clusterkit"):
        check_option_keys(PluginEp("AcmeExecutionProvider", "onnxruntime_acme"), {"speed": "1"})
    assert "AcmeExecutionProvider: provider option 'speed' is passed on unchecked" in caplog.text


def test_ctrl_c_in_compare_before_any_model_finished_claims_no_rows_file(
        capsys, tmp_path, monkeypatch):
    from clusterkit.cli import compare_cmd
    from clusterkit.errors import SweepInterrupted

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "resnet18.onnx").symlink_to(RESNET18)

    def interrupted(*args, **kwargs):
        raise SweepInterrupted("interrupted after 0 of 1 models", [])

    monkeypatch.setattr(compare_cmd, "compare_many", interrupted)
    rows = tmp_path / "rows.jsonl"
    code = main(["compare", str(folder), "--selector", "ops:Conv", "--jsonl", str(rows)])
    err = capsys.readouterr().err
    assert code == 130 and not rows.exists()
    assert err == "clusterkit: interrupted: interrupted after 0 of 1 models\n"
