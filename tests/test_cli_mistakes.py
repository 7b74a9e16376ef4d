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
