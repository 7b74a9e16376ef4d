"""Export (clusters as ONNX local functions, one domain per device) and re-applying a saved
partition JSON. Numerical agreement of exported models on every real model is checked in
test_executor.py (test_fused_run_and_export_match_onnxruntime)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import clusterkit as ck
import clusterkit.export.onnx_model as export_mod
from clusterkit import PartitionError
from clusterkit.cli import main as cli_main
from clusterkit.export.onnx_model import (
    PARTITION_KEY,
    device_domain,
    export_fused,
    export_partition,
    partition_json_of,
)
from clusterkit.fusion import fuse
from clusterkit.result.plan import apply_plan, load_plan, plan_selectors
from clusterkit.runtime.executor import Executor, compare_outputs, random_inputs, run_model
from support.models import BUNDLED_MODELS, LIGHT_DIR
from support.onnx_models import FAST_ORT, MULTI, level_partition, load, partition_with

STRATEGY = (MULTI or ["level"])[0]
RESNET = BUNDLED_MODELS / "resnet50.onnx"
TWO = ["gpu=ops:Conv,Relu", "dsp=ops:Add,MaxPool,Flatten"]


def _clusters(part) -> set:
    """Clusters as comparable (device, node ids) pairs."""
    return {(c.device, tuple(sorted(c.nodes))) for c in part.clusters}


def _session(model):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def test_each_cluster_is_a_function_in_its_device_domain():
    graph = load(RESNET)
    part = partition_with(ck.make_problem(graph, TWO), STRATEGY)
    fg = fuse(part)
    model = export_fused(fg, model_name="resnet50")
    src = graph.model
    acc = part.offloaded_clusters()
    assert len(model.functions) == len(acc)
    extra = {op.domain: op.version for op in model.opset_import
             if op.domain not in {o.domain for o in src.opset_import}}
    assert extra == {"clusterkit.gpu": 1, "clusterkit.dsp": 1}
    assert [(o.domain, o.version) for o in model.opset_import][:len(src.opset_import)] == \
        [(o.domain, o.version) for o in src.opset_import]
    assert model.ir_version == src.ir_version
    calls = {nd.op_type: nd for nd in model.graph.node if nd.domain.startswith("clusterkit.")}
    by_members = {tuple(fg.members[v]): v for v in fg.fused_nodes()}
    pos = {n.SerializeToString(): k for k, n in enumerate(src.graph.node)}
    for fn in model.functions:
        assert list(fn.opset_import) == list(src.opset_import)
        call = calls[fn.name]
        assert call.domain == fn.domain and list(call.input) == list(fn.input)
        assert list(call.output) == list(fn.output)
        # the body is exactly the cluster's nodes, in order
        members = graph.source_to_index[[pos[n.SerializeToString()] for n in fn.node]].tolist()
        assert members == sorted(members)
        v = by_members[tuple(members)]
        assert fn.domain == device_domain(fg.device_of(v)) and call.name == fg.nodes[v].name
    ordinary = [nd for nd in model.graph.node if not nd.domain.startswith("clusterkit.")]
    assert len(ordinary) == sum(len(c.nodes) for c in part.clusters if c.device == "cpu")
    onnx.checker.check_model(model)


def test_export_of_an_ir3_model_moves_to_ir8_and_keeps_its_opset(tmp_path):
    graph = load(LIGHT_DIR / "light_squeezenet.onnx")
    part = partition_with(ck.make_problem(graph, ["acc=ops:Conv,Relu,Concat"]), STRATEGY)
    out = tmp_path / "sq.onnx"
    model = export_partition(part, out)
    assert model.ir_version == export_mod.FUNCTION_IR_VERSION
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 9), ("clusterkit.acc", 1)]
    assert [i.name for i in model.graph.input] == graph.inputs  # weights are no inputs now
    loaded = onnx.load(str(out))
    onnx.checker.check_model(loaded)
    feeds = random_inputs(graph)
    cmp = compare_outputs(run_model(graph.model, feeds, FAST_ORT), run_model(loaded, feeds))
    assert cmp["outputs_match"], cmp


def test_saved_partition_is_reapplied_without_partitioning(tmp_path):
    graph = load(RESNET)
    problem = ck.make_problem(graph, TWO)
    part = partition_with(problem, STRATEGY)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(part.to_json(model="resnet50")))
    again = apply_plan(problem, path, model_name="resnet50")
    assert _clusters(again) == _clusters(part)
    assert again.strategy == f"plan:{part.strategy}"
    # the exported model carries the same plan
    model = export_fused(fuse(part), model_name="resnet50")
    stored = partition_json_of(model)
    assert stored["clusters"] == part.to_json()["clusters"]
    assert _clusters(apply_plan(problem, stored)) == _clusters(part)


def test_plan_of_a_twice_fused_graph_is_over_the_original_nodes():
    graph = load(RESNET)
    problem = ck.make_problem(graph, TWO)
    fg = fuse(partition_with(problem, STRATEGY))
    outer = ck.Constraints.default().compile(fg, [ck.OpsProperty(["FusedSubgraph", "Add"],
                                                                 device="gpu")])
    fg2 = fuse(level_partition(outer))
    model = export_fused(fg2)
    plan = partition_json_of(model)
    flat = ck.Partition.from_json(problem, plan)
    expect = {(fg2.device_of(v) or "cpu", tuple(fg2.members[v])) for v in range(fg2.n)
              if fg2.fused[v] is not None}
    got = {(c.device, tuple(c.nodes)) for c in flat.clusters if c.device != "cpu"}
    assert got == expect
    feeds = random_inputs(graph)
    cmp = compare_outputs(run_model(graph.model, feeds, FAST_ORT), run_model(model, feeds,
                                                                            FAST_ORT))
    assert cmp["outputs_match"], cmp


@pytest.fixture(scope="module")
def resnet_plan():
    graph = load(RESNET)
    problem = ck.make_problem(graph, TWO)
    part = partition_with(problem, STRATEGY)
    return problem, part.to_json(model="resnet50")


def _edited(plan, fn):
    data = json.loads(json.dumps(plan))
    fn(data)
    return data


def test_plan_for_another_model_is_refused_clearly(resnet_plan):
    problem, plan = resnet_plan
    other = ck.make_problem(load(BUNDLED_MODELS / "resnet18.onnx"), TWO)
    with pytest.raises(PartitionError, match=r"does not match model 'resnet18' \(81 nodes\) "
                       r"\(the plan was made for model 'resnet50'\)"):
        apply_plan(other, plan)
    no_metrics = _edited(plan, lambda d: d.pop("metrics"))
    with pytest.raises(PartitionError, match="names node index"):
        apply_plan(other, no_metrics)


@pytest.mark.parametrize("edit, text", [
    (lambda d: d["clusters"].pop(), "in no cluster"),
    (lambda d: d["clusters"][1]["nodes"].append(d["clusters"][0]["nodes"][0]),
     "is in 2 clusters"),
    (lambda d: d["clusters"][0].update(device="tpu"), "device 'tpu', but the selectors define"),
    (lambda d: d["clusters"][0].update(nodes=["x"]), "non-integer"),
    (lambda d: d.pop("clusters"), "no 'clusters' list"),
])
def test_plan_that_does_not_fit_says_why(resnet_plan, edit, text):
    problem, plan = resnet_plan
    data = _edited(plan, lambda d: (d.pop("metrics"), edit(d)))
    with pytest.raises(PartitionError, match=text):
        apply_plan(problem, data)


def test_plan_that_breaks_a_constraint_is_refused(resnet_plan):
    problem, plan = resnet_plan
    g = problem.graph
    add = next(v for v in range(g.n) if g.op_types[v] == "Add")

    def move(d):  # put an Add (not a gpu op) into a gpu cluster
        src = int(g.index_to_source[add])
        for c in d["clusters"]:
            if src in c["nodes"]:
                c["nodes"].remove(src)
        d["clusters"] = [c for c in d["clusters"] if c["nodes"]]
        gpu = next(c for c in d["clusters"] if c["device"] == "gpu")
        gpu["nodes"].append(src)

    with pytest.raises(PartitionError, match="does not match model.*does not support it"):
        apply_plan(problem, _edited(plan, move))


def test_plan_file_errors(tmp_path):
    problem = ck.make_problem(load(BUNDLED_MODELS / "resnet18.onnx"), TWO)
    with pytest.raises(PartitionError, match="no such file"):
        apply_plan(problem, tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PartitionError, match="not a readable JSON"):
        load_plan(bad)
    assert plan_selectors({"selector": "gpu=ops:Conv,Relu dsp=ops:Add"}) == [
        "gpu=ops:Conv,Relu", "dsp=ops:Add"]


def test_many_clusters_share_identical_functions(monkeypatch):
    """Past onnx's local-function limit, clusters with identical bodies share a function."""
    graph = load(BUNDLED_MODELS / "resnet18.onnx")
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:Conv,Relu,Add"]), "singleton")
    monkeypatch.setattr(export_mod, "MAX_LOCAL_FUNCTIONS", 5)
    model = export_fused(fuse(part))
    src = graph.model.graph.node
    # oracle: singleton clusters are identical when op type, attributes and arity agree
    kinds = set()
    for c in part.offloaded_clusters():
        nd = src[int(graph.index_to_source[c.nodes[0]])]
        attrs = tuple(a.SerializeToString() for a in nd.attribute)
        kinds.add((nd.op_type, attrs, len(nd.input), len(nd.output)))
    assert len(model.functions) == len(kinds) < len(part.offloaded_clusters())
    calls = [nd for nd in model.graph.node if nd.domain == "clusterkit.acc"]
    assert len(calls) == len(part.offloaded_clusters())
    assert {nd.op_type for nd in calls} == {fn.name for fn in model.functions}
    feeds = random_inputs(graph)
    cmp = compare_outputs(run_model(graph.model, feeds, FAST_ORT), run_model(model, feeds,
                                                                            FAST_ORT))
    assert cmp["outputs_match"], cmp


def test_metadata_and_value_info_come_along():
    graph = load(BUNDLED_MODELS / "resnet18.onnx")
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:Conv"]), "singleton")
    model = export_fused(fuse(part), check=False)
    src_vi = {vi.name for vi in graph.model.graph.value_info}
    main_vi = {vi.name for vi in model.graph.value_info}
    visible = {t for nd in model.graph.node for t in nd.output}
    assert main_vi == (src_vi & visible) - {o.name for o in model.graph.output}
    fn = model.functions[0]
    assert {vi.name for vi in fn.value_info} <= src_vi
    assert json.loads(next(p.value for p in model.metadata_props
                           if p.key == PARTITION_KEY))["strategy"] == "singleton"


# ---------------------------------------------------------------------- CLI
def test_cli_export_then_reuse_the_plan(tmp_path, capsys):
    model = str(BUNDLED_MODELS / "squeezenet1_1.onnx")
    out, plan = tmp_path / "sq.onnx", tmp_path / "plan.json"
    args = ["export", model, "--strategy", STRATEGY if STRATEGY != "level" else "singleton",
            "--selector", "acc=ops:Conv,Relu", "-o", str(out), "--json", str(plan), "--verify"]
    assert cli_main(args) == 0
    got = capsys.readouterr()
    assert "onnx checker passed" in got.err and "clusterkit.acc" in got.err  # wrote ...: stderr
    assert "exported model outputs match the original" in got.out
    first = onnx.load(str(out))
    onnx.checker.check_model(first)
    _session(first)
    out2 = tmp_path / "again.onnx"
    assert cli_main(["export", model, "--plan", str(plan), "-o", str(out2)]) == 0
    second = onnx.load(str(out2))
    assert [f.name for f in second.functions] == [f.name for f in first.functions]
    assert [n.SerializeToString() for f in second.functions for n in f.node] == \
        [n.SerializeToString() for f in first.functions for n in f.node]
    feeds = random_inputs(load(BUNDLED_MODELS / "squeezenet1_1.onnx"))
    a, b = run_model(first, feeds), run_model(second, feeds)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_executor_runs_the_reapplied_plan_like_the_original():
    graph = load(BUNDLED_MODELS / "resnet18.onnx")
    problem = ck.make_problem(graph, TWO)
    plan = partition_with(problem, STRATEGY).to_json()
    fg = fuse(apply_plan(problem, plan))
    feeds = random_inputs(graph)
    got = Executor(fg, backend_config={"onnxruntime": FAST_ORT}).run(feeds)
    cmp = compare_outputs(run_model(graph.model, feeds, FAST_ORT), got)
    assert cmp["outputs_match"], cmp
