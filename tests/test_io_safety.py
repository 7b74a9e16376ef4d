"""Outputs are written atomically (all or nothing, the old file intact on failure), failed writes
are one-line errors, and reading a model or a plan never runs code or hangs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from clusterkit.cli import main
from clusterkit.errors import GraphError, ModelLoadError, WriteError
from clusterkit.export import onnx_model as export_mod
from clusterkit.io.files import write_all, write_atomic
from clusterkit.io.loader import load_graph
from clusterkit.io.networkx import graph_from_node_link
from clusterkit.io.onnx import load_onnx
from clusterkit.result.plan import plan_selectors
from support.models import BUNDLED_MODELS

MODEL = str(BUNDLED_MODELS / "resnet18.onnx")
PARTITION = ["partition", MODEL, "--strategy", "singleton", "--selector", "ops:Conv,Relu"]


def _one_line_error(capsys, *fragments: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("clusterkit: error: ")
    for text in fragments:
        assert text in err, err
    return err


def _files(folder) -> list[str]:
    return sorted(os.listdir(folder))


# ---------------------------------------------------------------------- write_atomic itself
def test_write_atomic_writes_text_and_bytes_and_replaces(tmp_path):
    path = tmp_path / "sub" / "out.txt"
    path.parent.mkdir()
    write_atomic(path, "héllo\n")
    assert path.read_bytes() == "héllo\n".encode("utf-8")
    write_atomic(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert _files(tmp_path / "sub") == ["out.txt"]  # no temporary file left behind


def test_write_atomic_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    os.chmod(path, 0o640)
    write_atomic(path, "new")
    assert path.read_text() == "new" and (os.stat(path).st_mode & 0o777) == 0o640


def test_a_directory_as_target_is_a_write_error(tmp_path):
    target = tmp_path / "d"
    target.mkdir()
    with pytest.raises(WriteError, match=r"cannot write '.*d': Is a directory"):
        write_atomic(target, "x")
    assert _files(tmp_path) == ["d"] and _files(target) == []


def test_write_all_writes_nothing_unless_everything_can_be_written(tmp_path):
    keep = tmp_path / "a.json"
    keep.write_text("old")
    blocker = tmp_path / "file"
    blocker.write_text("I am a file")
    with pytest.raises(WriteError, match="file/b.json"):
        write_all([(keep, "new"), (blocker / "b.json", "new")])
    assert keep.read_text() == "old"
    assert _files(tmp_path) == ["a.json", "file"]


# ---------------------------------------------------------------------- the command line
def test_cli_output_that_is_a_directory_exits_2_with_one_line(tmp_path, capsys):
    target = tmp_path / "out"
    target.mkdir()
    assert main(PARTITION + ["--json", str(target)]) == 2
    _one_line_error(capsys, f"cannot write {str(target)!r}: Is a directory")
    assert _files(target) == []


def test_cli_output_in_an_unwritable_folder_exits_2_with_one_line(tmp_path, capsys):
    # a path under a regular file cannot be created, not even by root
    blocker = tmp_path / "existing_file"
    blocker.write_text("data")
    target = blocker / "out.json"
    assert main(PARTITION + ["--json", str(target)]) == 2
    _one_line_error(capsys, f"cannot write {str(target)!r}: Not a directory")
    assert blocker.read_text() == "data" and _files(tmp_path) == ["existing_file"]


def test_cli_json_ok_and_dot_failing_writes_neither(tmp_path, capsys):
    out = tmp_path / "p.json"
    out.write_text("previous plan")
    dot = tmp_path / "p.dot"
    dot.mkdir()
    assert main(PARTITION + ["--json", str(out), "--dot", str(dot)]) == 2
    _one_line_error(capsys, f"cannot write {str(dot)!r}")
    assert out.read_text() == "previous plan"
    assert _files(tmp_path) == ["p.dot", "p.json"] and _files(dot) == []
    fresh = tmp_path / "fresh.json"
    assert main(PARTITION + ["--json", str(fresh), "--dot", str(dot)]) == 2
    assert not fresh.exists()


def test_cli_export_failing_json_writes_no_model(tmp_path, capsys):
    model = tmp_path / "out.onnx"
    bad = tmp_path / "j"
    bad.mkdir()
    assert main(["export", MODEL, "--strategy", "singleton", "--selector", "ops:Conv,Relu",
                 "-o", str(model), "--json", str(bad)]) == 2
    _one_line_error(capsys, f"cannot write {str(bad)!r}")
    assert not model.exists()


_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from clusterkit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_size_limited_write_leaves_the_previous_file_byte_identical(tmp_path):
    out = tmp_path / "p.json"
    old = b'{"previous": "partition"}\n'
    out.write_bytes(old)
    limit = 2000  # the new JSON of resnet18's 50-odd clusters is several times larger
    done = subprocess.run([sys.executable, "-c", _LIMITED.format(limit=limit)] + PARTITION +
                          ["--json", str(out)], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    err = done.stderr.strip()
    assert err.splitlines() == [f"clusterkit: error: cannot write {str(out)!r}: File too large"]
    assert out.read_bytes() == old
    assert _files(tmp_path) == ["p.json"]
    # the same command without the limit writes a JSON larger than the limit
    assert main(PARTITION + ["--json", str(out)]) == 0
    assert len(out.read_bytes()) > limit and json.loads(out.read_text())["clusters"]


# ---------------------------------------------------------------------- large ONNX models
def _model_with_a_weight() -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.arange(64 * 64, dtype=np.float32).reshape(64, 64), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
                              initializer=[weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_model_too_large_for_one_protobuf_gets_external_data(tmp_path, monkeypatch):
    monkeypatch.setattr(export_mod, "MAX_MODEL_BYTES", 100)
    model = _model_with_a_weight()
    before = model.SerializeToString()
    path = tmp_path / "big.onnx"
    path.write_bytes(b"old")
    export_mod.save_model(model, path)
    assert model.SerializeToString() == before  # the caller's model is not modified
    assert _files(tmp_path) == ["big.onnx", "big.onnx.data"]
    stub = onnx.load(str(path), load_external_data=False)
    assert stub.graph.initializer[0].data_location == TensorProto.EXTERNAL
    again = onnx.load(str(path))
    np.testing.assert_array_equal(numpy_helper.to_array(again.graph.initializer[0]),
                                  numpy_helper.to_array(model.graph.initializer[0]))
    target = tmp_path / "dir.onnx"
    target.mkdir()
    with pytest.raises(WriteError, match="dir.onnx': Is a directory"):
        export_mod.save_model(model, target)
    assert _files(target) == [] and len(_files(tmp_path)) == 3


def test_a_small_model_is_one_file_as_onnx_save_writes_it(tmp_path):
    out, ref = tmp_path / "out", tmp_path / "ref"
    out.mkdir()
    ref.mkdir()
    for name in ("m.onnx", "m.onnxtxt", "m.json"):
        export_mod.save_model(_model_with_a_weight(), out / name)
        onnx.save(_model_with_a_weight(), str(ref / name))
        assert (out / name).read_bytes() == (ref / name).read_bytes()
    assert _files(out) == ["m.json", "m.onnx", "m.onnxtxt"]



# ---------------------------------------------------------------------- plans never run code
_EVIL = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")
from clusterkit.selection.protocol import OpsProperty
PROPERTY = OpsProperty(["Conv", "Relu"], device="acc")
"""


@pytest.fixture
def evil_plan(tmp_path, monkeypatch):
    """A valid plan for resnet18 whose recorded selector is a Python file that leaves a marker
    file when imported."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.py"
    evil.write_text(_EVIL.format(marker=str(marker)))
    plan = tmp_path / "plan.json"
    assert main(["partition", MODEL, "--strategy", "singleton", "--selector", "acc=ops:Conv,Relu",
                 "--json", str(plan)]) == 0
    return plan, evil, marker


@pytest.mark.parametrize("command", ["run", "export"])
@pytest.mark.parametrize("recorded", ["acc={evil}", "{evil}", "evil.py", "acc=evil.py",
                                      "coreml acc={evil}", "./evil"])
def test_a_plan_naming_a_selector_file_is_refused_without_importing_it(
        evil_plan, command, recorded, capsys):
    plan, evil, marker = evil_plan
    data = json.loads(plan.read_text())
    data["selector"] = recorded.format(evil=evil)
    plan.write_text(json.dumps(data))
    extra = ["-o", str(plan.parent / "out.onnx")] if command == "export" else []
    capsys.readouterr()
    assert main([command, MODEL, "--plan", str(plan)] + extra) == 2
    _one_line_error(capsys, f"plan {str(plan)!r} records selector", "--selector")
    assert not marker.exists()
    assert not (plan.parent / "out.onnx").exists()


def test_a_plan_with_an_explicit_selector_file_runs(evil_plan, capsys):
    plan, evil, marker = evil_plan
    data = json.loads(plan.read_text())
    data["selector"] = f"acc={evil}"
    plan.write_text(json.dumps(data))
    assert main(["run", MODEL, "--plan", str(plan), "--selector", f"acc={evil}"]) == 0
    assert marker.read_text() == "imported"


def test_a_plan_keeps_shipped_names_and_ops_specs(evil_plan, capsys):
    plan, _, marker = evil_plan
    out = plan.parent / "out.onnx"
    assert main(["export", MODEL, "--plan", str(plan), "-o", str(out)]) == 0
    assert out.is_file() and not marker.exists()
    specs = "coreml gpu=tensorrt acc=ops:Conv,Relu 'x=ops:A, B'"
    assert plan_selectors({"selector": specs}) == ["coreml", "gpu=tensorrt", "acc=ops:Conv,Relu",
                                                   "x=ops:A, B"]


# ---------------------------------------------------------------------- reading models
def test_a_non_regular_file_is_refused_as_a_model(tmp_path):
    for path in ("/dev/zero", "/dev/null"):
        for reader in (load_graph, load_onnx):
            with pytest.raises(ModelLoadError, match=f"'{path}': it is not a regular file"):
                reader(path)
    fifo = tmp_path / "pipe.onnx"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    with pytest.raises(ModelLoadError, match="pipe.onnx': it is not a regular file"):
        load_graph(fifo)
    with pytest.raises(ModelLoadError, match="it is a directory"):
        load_graph(tmp_path)


def test_the_cli_refuses_dev_zero_with_one_line(capsys):
    assert main(["partition", "/dev/zero", "--selector", "ops:Conv"]) == 2
    _one_line_error(capsys, "cannot read model '/dev/zero': it is not a regular file")


def _node_link(nodes, edges) -> dict:
    return {"directed": True, "multigraph": False, "graph": {}, "nodes": nodes, "edges": edges}


def _nodes(*ids):
    return [{"id": i, "op": "Relu"} for i in ids]


@pytest.mark.parametrize("data, error, message", [
    (_node_link(_nodes("a", "b", "a"), []), GraphError, "has a duplicate node id 'a'"),
    (_node_link(_nodes(1, 2, 1), [{"source": 1, "target": 2}]), GraphError,
     "has a duplicate node id 1"),
    (_node_link(_nodes("a", "b"), [{"source": "a", "target": "zz"}]), GraphError,
     "edge 'a' -> 'zz' names node 'zz', which is not in 'nodes'"),
    (_node_link(_nodes("a", "b"), [{"source": "yy", "target": "b"}]), GraphError,
     "edge 'yy' -> 'b' names node 'yy'"),
    (_node_link("abc", []), ModelLoadError, "'nodes' must be a list of objects with an 'id', "
     "got 'abc'"),
    (_node_link([{"op": "Relu"}], []), ModelLoadError, "'nodes' must be a list of objects"),
    (_node_link(_nodes("a"), "abc"), ModelLoadError, "'edges' must be a list of objects"),
    (_node_link(_nodes("a"), [["a", "a"]]), ModelLoadError, "'edges' must be a list"),
    (_node_link([], []), ModelLoadError, "node-link graph 'g' has no nodes"),
])
def test_malformed_node_link_graphs_are_one_line_errors(tmp_path, data, error, message):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    with pytest.raises(error) as info:
        load_graph(path)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("text, shown", [
    ("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf"), ("-1", "-1"),
    (str(2 ** 63), str(2 ** 63)), ("1e300", "1e+300"), ('"12"', "'12'"), ("true", "True"),
])
def test_bad_edge_and_node_bytes_are_one_line_errors(tmp_path, text, shown):
    # json.dumps cannot write NaN as an edge value we control, so the text is spliced in
    path = tmp_path / "g.json"
    for field, where in (("edge", "edge 'a' -> 'b'"), ("node", "node 'a'")):
        nodes = [{"id": "a", "op": "Relu"}, {"id": "b", "op": "Relu"}]
        edges = [{"source": "a", "target": "b"}]
        (edges[0] if field == "edge" else nodes[0])["bytes"] = "@BYTES@"
        path.write_text(json.dumps(_node_link(nodes, edges)).replace('"@BYTES@"', text))
        with pytest.raises(GraphError) as info:
            load_graph(path)
        msg = str(info.value)
        assert msg == f"'bytes' of {where} must be a non-negative number below 2**63, got {shown}"


def test_the_largest_byte_count_is_accepted(tmp_path):
    path = tmp_path / "g.json"
    nodes = [{"id": "a", "op": "Relu"}, {"id": "b", "op": "Relu"}]
    path.write_text(json.dumps(_node_link(nodes, [{"source": "a", "target": "b",
                                                   "bytes": 2 ** 63 - 1}])))
    graph = load_graph(path)
    assert graph.tensors["a:out"].nbytes == 2 ** 63 - 1


def test_an_empty_onnx_model_is_refused_in_the_same_style():
    graph = helper.make_graph([], "g", [], [])
    with pytest.raises(ModelLoadError, match="^ONNX model 'g' has no nodes$"):
        load_onnx(helper.make_model(graph))
    with pytest.raises(ModelLoadError, match="^node-link graph 'graph' has no nodes$"):
        graph_from_node_link(_node_link([], []))
