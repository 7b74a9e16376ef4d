"""clusterkit's split handed to OpenVINO itself: the IR with HETERO affinities compiled by the
real HETERO plugin (the CPU plugin registered under a second device name stands in for the
accelerator), its submodels against the clusters, its outputs against onnxruntime; clusters
compiled by OpenVINO's runtime in the executor; the seed's HETERO example end to end."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import clusterkit as ck
from clusterkit.cli import main as cli_main
from clusterkit.export.openvino_ir import affinity_path, export_openvino
from clusterkit.fusion import fuse, root_of, source_model
from clusterkit.io.weights import random_weights
from clusterkit.runtime.backends import get_backend, parse_backend_spec
from clusterkit.runtime.executor import Executor, compare_outputs, random_inputs, run_model
from clusterkit.runtime.hetero_check import check_hetero
from support.models import REPO

MODELS_DIR = REPO / "tests" / "data" / "models"

pytest.importorskip("openvino")


def _split(name: str, selector: str, strategy: str):
    model = random_weights(onnx.load(str(MODELS_DIR / f"{name}.onnx")), 0)
    return ck.partition(model, [selector], strategy=strategy, fallback="CPU")


def _hetero(part, path):
    export_openvino(part, str(path))
    root = root_of(part.problem.graph)
    feeds = random_inputs(root)
    return check_hetero(part, str(path), feeds, run_model(source_model(root), feeds))


@pytest.fixture(scope="module")
def squeezenet(tmp_path_factory):
    part = _split("squeezenet1_1", "CPUB=ops:Conv,Relu", "hetero")
    return part, _hetero(part, tmp_path_factory.mktemp("ov") / "sq.xml")


def test_hetero_submodels_are_the_clusters(squeezenet):
    part, r = squeezenet
    assert r["device"] == "HETERO:CPUB,CPU" and r["stand_ins"] == {"CPUB": "CPUB"}
    assert r["same_split"] and r["outputs_match"] and r["max_abs_diff"] < 1e-4
    assert r["unsplit_device"] == "CPU" and r["split_keeps_outputs"]
    offloaded = [c for c in part.clusters if c.device != part.fallback]
    assert r["per_device"]["CPUB"] == {"clusters": len(offloaded), "submodels": len(offloaded)}
    assert r["submodels"] == r["per_device"]["CPUB"]["submodels"] + r["fallback_submodels"]
    assert all(row["verdict"] == "equal" for row in r["clusters"])


def test_affinity_map_covers_every_op_of_the_ir(squeezenet, tmp_path):
    import openvino as ov

    part, _ = squeezenet
    xml = tmp_path / "sq.xml"
    aff = export_openvino(part, str(xml))
    ops = [op.get_friendly_name() for op in ov.Core().read_model(str(xml)).get_ops()]
    written = json.loads(open(affinity_path(xml)).read())
    assert sorted(written) == sorted(ops) and set(written.values()) == {"CPU", "CPUB"}
    assert aff.unmapped == []
    assert (tmp_path / "sq.bin").exists()


def test_hetero_merges_adjacent_clusters_of_one_device(tmp_path):
    """max_nodes cuts one device's region into adjacent clusters: HETERO (no size limit of its
    own) makes one submodel of them, and the check names each merged cluster."""
    part = _split("resnet18", "CPUB=openvino_npu[max_nodes=20]", "cycles")
    r = _hetero(part, tmp_path / "r18.xml")
    assert r["outputs_match"] and not r["same_split"]
    assert r["per_device"]["CPUB"]["submodels"] == 1
    merged = [row for row in r["clusters"] if row["verdict"] == "merged"]
    present = [row for row in r["clusters"] if row["verdict"] != "absent"]  # absent: folded
    assert len(merged) == len(present) > 1
    assert all("also holds ops of cluster" in row["why"] for row in merged)


# ---------------------------------------------------------------------- the seed's example
SEED_EDGES = [(1, 2), (2, 3), (2, 4), (3, 5), (4, 5), (5, 6), (6, 7)]


def seed_model() -> onnx.ModelProto:
    """The seed's seven nodes as ONNX: op A is Add, op B (node 4) is Mul."""
    nodes = []
    for i in range(1, 8):
        ins = [f"t{u}" for u, v in SEED_EDGES if v == i] or ["x"]
        nodes.append(helper.make_node("Mul" if i == 4 else "Add", ins * (3 - len(ins)),
                                      [f"t{i}"], name=str(i)))
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", "t7")]
    graph = helper.make_graph(nodes, "seed", info[:1], info[1:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_seed_example_through_hetero(tmp_path):
    model = seed_model()
    part = ck.partition(model, ["first=ops:Add", "second=ops:Add,Mul"], strategy="hetero",
                        fallback="cpu")
    assert sorted((c.device, c.nodes) for c in part.clusters) == [
        ("first", (0, 1)), ("first", (2, 4, 5, 6)), ("second", (3,))]  # the seed's subgraphs
    xml = str(tmp_path / "seed.xml")
    export_openvino(part, xml, model=model)
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 4)).astype(np.float32)}
    r = check_hetero(part, xml, feeds, run_model(model, feeds))
    assert r["device"] == "HETERO:firstCPU,secondCPU,CPU" and r["outputs_match"]
    assert sorted(r["submodel_devices"]) == ["first", "first", "second"]
    assert r["per_device"]["first"] == {"clusters": 2, "submodels": 2}
    verdicts = {row["cluster"]: row for row in r["clusters"]}
    second = next(c.id for c in part.clusters if c.device == "second")
    assert verdicts[second]["verdict"] == "equal"
    # HETERO's manual-affinity collector joins node 3 to {1, 2} (its input's subgraph):
    # submodels {1, 2, 3}, {4}, {5, 6, 7}; the seed's selection took {3, 5, 6, 7} first
    big = next(c.id for c in part.clusters if len(c.nodes) == 4)
    assert verdicts[big]["verdict"] == "split" and "submodel 0: 3" in verdicts[big]["why"]


# ---------------------------------------------------------------------- the backend
def test_backend_spec_takes_settings():
    assert parse_backend_spec("openvino[device=CPU]") == ("openvino", {"device": "CPU"})
    assert parse_backend_spec("ep:X[a=1]") == ("ep", {"ep": "X", "options": {"a": "1"}})
    with pytest.raises(ck.BackendError, match="no config key 'colour'"):
        get_backend("openvino[colour=red]", device="CPUB")
    with pytest.raises(ck.BackendError, match="has no device 'NOPE'"):
        get_backend("openvino[device=NOPE]", device="CPUB")


def test_executor_runs_openvino_clusters(squeezenet):
    part, _ = squeezenet
    fused = fuse(part)
    executor = Executor(fused, backends={"CPUB": "openvino[device=CPU]"},
                        backend_config={"openvino": {"perf_counts": True}})
    feeds = random_inputs(fused)
    got = executor.run(feeds)
    cmp = compare_outputs(run_model(source_model(fused), feeds), got)
    assert cmp["outputs_match"], cmp
    ov_steps = [u for u in executor.steps if u.runs_on == "OpenVINO:CPU"]
    assert ov_steps and all(u.compile_seconds > 0 for u in ov_steps)
    assert any(u.runs_on.startswith("CPUExecutionProvider") for u in executor.steps)
    timed = {rec["step"] for rec in executor.node_timings()}
    assert {u.name for u in ov_steps} <= timed


def test_cli_export_openvino_verify(tmp_path, capsys):
    model = str(MODELS_DIR / "squeezenet1_1.onnx")
    rc = cli_main(["export", model, "--selector", "CPUB=ops:Conv,Relu", "--strategy", "hetero",
                   "--fallback", "CPU", "--random-weights", "--format", "openvino", "-o",
                   str(tmp_path / "sq.xml"), "--verify"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "HETERO's submodels are clusterkit's clusters; outputs match" in out
    assert (tmp_path / "sq.affinity.json").exists()


def test_cli_verify_tells_kernel_differences_from_the_split(tmp_path, capsys):
    """resnet50 on OpenVINO's CPU plugin differs from onnxruntime's by more than the fp32
    check's atol on outputs near zero (max |diff| about 5e-5 against outputs up to about 70),
    whether split or not: --verify says the split keeps OpenVINO's outputs, exit 0."""
    model = str(MODELS_DIR / "resnet50.onnx")
    rc = cli_main(["export", model, "--selector", "CPUB=ops:Conv,Relu,Add", "--strategy",
                   "hetero", "--fallback", "CPU", "--random-weights", "--format", "openvino",
                   "-o", str(tmp_path / "r50.xml"), "--verify"])
    out = capsys.readouterr().out
    assert "outputs DO NOT match the original" in out, out
    assert "HETERO's outputs match the same IR compiled unsplit on CPU" in out, out
    assert "OpenVINO's kernels differ from onnxruntime's, not the split" in out
    assert rc == 0


def test_the_guides_dot_dumps_match_clusterkits(tmp_path):
    """HETERO's own dumps (OPENVINO_HETERO_VISUALIZE=1: the guide's hetero_affinity and
    hetero_subgraphs files) against clusterkit's --dump-dot of the same partition: HETERO draws
    exactly the clusters clusterkit draws, and each dump gives every device one colour."""
    from clusterkit.result.dot import affinity_dot, subgraphs_dot
    from clusterkit.runtime.hetero_check import compare_dot_dumps, hetero_dots

    model = onnx.load(str(MODELS_DIR / "squeezenet1_1.onnx"))
    part = ck.partition(model, ["CPUB=ops:Conv,Relu"], strategy="hetero", fallback="CPU")
    xml = tmp_path / "sq.xml"
    export_openvino(part, str(xml))
    work = tmp_path / "dumps"
    work.mkdir()
    hetero = hetero_dots(str(xml), ["CPUB", "CPU"], str(work))
    assert "subgraph=" in hetero["subgraphs"] and "device=CPUB" in hetero["affinity"]
    ours = {"affinity": affinity_dot(part), "subgraphs": subgraphs_dot(part)}
    r = compare_dot_dumps(part, str(xml), hetero, ours)
    offloaded = [c for c in part.clusters if c.device == "CPUB"]
    assert r["clusterkit_draws_the_clusters"] and r["same_split"]
    assert [row["verdict"] for row in r["clusters"]] == ["equal"] * len(offloaded)
    assert r["one_colour_per_device"]
    assert set(r["colours"]["hetero"]) == set(r["colours"]["clusterkit"]) == {"CPU", "CPUB"}
    # HETERO's subgraph dump colours by submodel (from a palette it cycles): one colour each
    by_sub: dict[str, set[str]] = {}
    for sub, colour in re.findall(r"subgraph=(\d+)\\ndevice=\w+\" fillcolor=(\w+)",
                                  hetero["subgraphs"]):
        by_sub.setdefault(sub, set()).add(colour)
    assert len(by_sub) == r["submodels"] and all(len(c) == 1 for c in by_sub.values())


def det_model() -> onnx.ModelProto:
    """Relu -> Det -> Abs: OpenVINO's ONNX front end has no conversion rule for Det (measured
    with openvino 2026.4), onnxruntime's CPU provider runs it."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Det", ["r"], ["d"], name="det"),
             helper.make_node("Abs", ["d"], ["y"], name="abs")]
    graph = helper.make_graph(
        nodes, "det", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_cluster_openvino_refuses_is_carved_with_openvinos_message():
    model = det_model()
    part = ck.partition(model, ["CPUB=ops:Relu,Det,Abs"], strategy="hetero", fallback="CPU")
    assert [len(c.nodes) for c in part.clusters if c.device == "CPUB"] == [3]
    fused = fuse(part)
    executor = Executor(fused, backends={"CPUB": "openvino[device=CPU]"})
    feeds = random_inputs(fused)
    cmp = compare_outputs(run_model(model, feeds), executor.run(feeds))
    assert cmp["outputs_match"], cmp
    [record] = executor.clusters
    assert record["verdict"] == "split" and record["pieces"] == 2 and record["fallen"] == 1
    # OpenVINO's own words: its ONNX front end has no conversion rule for the op
    assert record["reason"].startswith("OpenVINO's ONNX front end cannot read")
    assert "No conversion rule found for operations: Det" in record["reason"]
    runs = {u.name: (u.runs_on, [root_of(part.problem.graph).nodes[v].name
                                 for v in u.subgraph.nodes]) for u in executor.steps}
    on_ov = sorted(names for on, names in runs.values() if on == "OpenVINO:CPU")
    assert on_ov == [["abs"], ["relu"]]
    assert any(names == ["det"] and on.startswith("CPUExecutionProvider")
               for on, names in runs.values())
