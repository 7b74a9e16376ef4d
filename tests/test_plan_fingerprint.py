"""Plans keyed by more than node index: the partition JSON records the model's fingerprint and
each cluster's node names; a plan is refused on another model (naming the first node that
differs), applied by name with ``--force``, and an older plan without a fingerprint still
applies by index."""

from __future__ import annotations

import json

import onnx
import pytest

import clusterkit as ck
from clusterkit.cli import main
from clusterkit.errors import PartitionError
from clusterkit.result.plan import apply_plan
from support.models import BUNDLED_MODELS

RESNET18 = BUNDLED_MODELS / "resnet18.onnx"
SPEC = "npu=nnapi[exclude=Add]"
RENAMED = 40  # a Conv inside an npu cluster


def _resave(tmp_path, name, edit):
    model = onnx.load(str(RESNET18))
    edit(model.graph.node)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _rename(nodes):
    nodes[RENAMED].name += "_renamed"


def _relu_to_sigmoid(nodes):
    relu = next(nd for nd in nodes if nd.op_type == "Relu")
    relu.op_type = "Sigmoid"


@pytest.fixture
def plan(tmp_path, capsys):
    path = tmp_path / "plan.json"
    assert main(["partition", str(RESNET18), "--selector", SPEC, "--json", str(path)]) == 0
    capsys.readouterr()
    return path


def _fingerprint(path, tmp_path, name):
    out = tmp_path / f"{name}.json"
    assert main(["partition", str(path), "--selector", "ops:Conv", "--strategy", "singleton",
                 "--json", str(out)]) == 0
    return json.loads(out.read_text())["fingerprint"]


def test_the_json_records_the_fingerprint_and_each_clusters_names(plan):
    data = json.loads(plan.read_text())
    assert data["fingerprint"].startswith("sha256:") and len(data["fingerprint"]) == 71
    proto = onnx.load(str(RESNET18)).graph.node
    for c in data["clusters"]:  # independent: the names and ops of the onnx graph.node list
        assert c["names"] == [proto[v].name for v in c["nodes"]]
        assert c["op_types"] == [proto[v].op_type for v in c["nodes"]]


def test_the_fingerprint_follows_names_and_op_types_only(tmp_path, capsys):
    base = _fingerprint(RESNET18, tmp_path, "base")
    assert _fingerprint(RESNET18, tmp_path, "again") == base

    def doc(nodes):
        nodes[3].doc_string = "edited"

    assert _fingerprint(_resave(tmp_path, "doc", doc), tmp_path, "doc") == base
    renamed = _fingerprint(_resave(tmp_path, "renamed", _rename), tmp_path, "renamed")
    retyped = _fingerprint(_resave(tmp_path, "retyped", _relu_to_sigmoid), tmp_path, "retyped")
    assert len({base, renamed, retyped}) == 3


def test_a_plan_on_a_model_with_a_renamed_node_names_it(plan, tmp_path, capsys):
    other = _resave(tmp_path, "resnet18", _rename)
    name = onnx.load(str(RESNET18)).graph.node[RENAMED].name
    for command in (["run"], ["export", "-o", str(tmp_path / "out.onnx")]):
        assert main([command[0], str(other), "--plan", str(plan)] + command[1:]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err
        assert (f"first mismatched node at graph.node index {RENAMED}: the plan expects "
                f"{name!r} (Conv), the model has {name + '_renamed'!r} (Conv)") in err
        assert "--force" in err
    assert not (tmp_path / "out.onnx").exists()


def test_force_applies_the_plan_by_name(plan, tmp_path, capsys):
    other = _resave(tmp_path, "resnet18", _rename)
    out = tmp_path / "forced.json"
    assert main(["export", str(other), "--plan", str(plan), "--force", "--verify",
                 "-o", str(tmp_path / "out.onnx"), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "plan applied by node name (--force): 80 nodes matched by name" in printed
    assert "1 model nodes the plan does not place go to the fallback" in printed
    assert "exported model outputs match the original" in printed
    before, after = json.loads(plan.read_text()), json.loads(out.read_text())
    device = {v: c["device"] for c in before["clusters"] for v in c["nodes"]}
    assert device[RENAMED] == "npu"  # the renamed node was offloaded by the plan
    placed = {v: c["device"] for c in after["clusters"] for v in c["nodes"]}
    assert placed[RENAMED] == "cpu"
    assert all(placed[v] == device[v] for v in device if v != RENAMED)
    assert after["plan_by_name"]["to_fallback"] == [
        onnx.load(str(other)).graph.node[RENAMED].name]
    assert after["fingerprint"] != before["fingerprint"]
    # the re-keyed output is a plan of the new model: it applies without --force
    assert main(["run", str(other), "--plan", str(out), "--check"]) == 0


def test_an_op_type_change_is_named_and_forced_to_the_fallback(plan, tmp_path):
    other = _resave(tmp_path, "resnet18", _relu_to_sigmoid)
    problem = ck.make_problem(ck.load_graph(str(other)), [SPEC])
    with pytest.raises(PartitionError, match=r"the plan expects '[^']+' \(Relu\), the model has "
                                             r"'[^']+' \(Sigmoid\)"):
        apply_plan(problem, plan)
    part = apply_plan(problem, plan, force=True)
    report = part.info["plan_by_name"]
    assert len(report["op_type_changed"]) == 1 and report["plan_nodes_not_found"] == []
    g = part.graph
    sig = next(v for v in range(g.n) if g.nodes[v].op_type == "Sigmoid")
    assert part.device_of_nodes()[sig] == "cpu"


def test_a_plan_without_a_fingerprint_applies_by_index(plan, tmp_path):
    data = json.loads(plan.read_text())
    del data["fingerprint"]
    for c in data["clusters"]:
        del c["names"], c["op_types"]
    other = _resave(tmp_path, "resnet18", _rename)
    problem = ck.make_problem(ck.load_graph(str(other)), [SPEC])
    part = apply_plan(problem, data)
    src = part.graph.index_to_source
    got = sorted(sorted(src[list(c.nodes)].tolist()) for c in part.clusters)
    assert got == sorted(c["nodes"] for c in data["clusters"])
    with pytest.raises(PartitionError, match="records no node names"):
        apply_plan(problem, dict(data, fingerprint="sha256:0"), force=True)
