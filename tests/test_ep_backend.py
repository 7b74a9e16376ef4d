"""The ``ep`` backend on the real QNN HTP (``clusterkit[qnn]``, installed by ``make test``): every
offloaded cluster compiled and run by the EP's own toolchain, a refusal carved into pieces with
the EP's reason, a silent CPU fallback caught, and the compiled export loaded by a plain
onnxruntime session without clusterkit.

The bundled models' weights are ``ConstantOfShape`` stubs whose sums overflow fp16: the models
here get seeded random weights of their own shapes first (checked below). The HTP computes in
fp16, so its outputs are compared with onnxruntime's CPU provider at the fp16 tolerance, and
they must *differ* from the CPU's float32 outputs: equal outputs would mean the CPU ran them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

pytest.importorskip("onnxruntime_qnn", reason="needs clusterkit[qnn] (make test installs it)")

import clusterkit as ck  # noqa: E402
from clusterkit.constraints.acceptance import acceptance  # noqa: E402
from clusterkit.errors import BackendError, SelectorError  # noqa: E402
from clusterkit.export.compiled import (  # noqa: E402
    CONTEXTS_KEY,
    compiled_model,
    run_deployed,
    write_compiled,
)
from clusterkit.fusion import fuse  # noqa: E402
from clusterkit.io.weights import random_weights  # noqa: E402
from clusterkit.runtime.backends.base import TOLERANCES  # noqa: E402
from clusterkit.runtime.executor import (  # noqa: E402
    Executor,
    compare_outputs,
    random_inputs,
    run_model,
)
from support.models import BUNDLED_MODELS  # noqa: E402

QNN = "QNNExecutionProvider"
FP16 = TOLERANCES["fp16"]


def weighted(name: str) -> onnx.ModelProto:
    return random_weights(onnx.load(BUNDLED_MODELS / f"{name}.onnx"), seed=0)


def test_random_weights_keep_the_graph_and_give_each_weight_its_own_values():
    src = onnx.load(BUNDLED_MODELS / "squeezenet1_1.onnx")
    out = random_weights(src, seed=3)
    assert [n.name for n in out.graph.node] == [n.name for n in src.graph.node]
    assert [list(n.output) for n in out.graph.node] == [list(n.output) for n in src.graph.node]
    shapes = {t.name: numpy_helper.to_array(t) for t in src.graph.initializer}
    stubs = [n for n in src.graph.node if n.op_type == "ConstantOfShape"]
    assert stubs
    for stub, new in zip(src.graph.node, out.graph.node):
        if stub.op_type != "ConstantOfShape":
            assert new == stub
            continue
        values = numpy_helper.to_array(new.attribute[0].t)
        assert new.op_type == "Constant"
        assert list(values.shape) == shapes[stub.input[0]].tolist()
        assert np.isfinite(values).all() and values.std() > 0
        if values.ndim >= 2:  # about unit variance after a layer: std 1/sqrt(fan-in)
            assert 0.5 < values.std() * np.sqrt(values[0].size) < 2.0
    again = random_weights(src, seed=3)
    assert again == out and random_weights(src, seed=4) != out


@pytest.fixture(scope="module")
def squeezenet():
    model = weighted("squeezenet1_1")
    part = ck.run_strategy(ck.make_problem(ck.load_graph(model), ["qnn"]), "auto")
    fused = fuse(part)
    return model, part, fused, Executor(fused, backends={"qnn": "ep"})


def test_the_htp_compiles_and_runs_every_offloaded_cluster_at_fp16(squeezenet):
    model, part, fused, ex = squeezenet
    offloaded = [c for c in part.clusters if c.device == "qnn"]
    assert offloaded
    device_steps = [u for u in ex.steps if u.device == "qnn"]
    assert sorted(v for u in device_steps for v in u.subgraph.nodes) == \
        sorted(v for c in offloaded for v in c.nodes)
    assert all(u.runs_on == QNN and u.compile_seconds > 0 for u in device_steps)
    assert [c["verdict"] for c in ex.clusters] == ["compiled"] * len(offloaded)
    feeds = random_inputs(fused, seed=1)
    got = ex.run(feeds)
    cmp = compare_outputs(run_model(model, feeds), got, *FP16)
    assert cmp["outputs_match"], cmp
    assert ex.tolerance() == FP16
    # the HTP's fp16 arithmetic, not a CPU run: the float32 answer is not reproduced exactly
    assert cmp["max_abs_diff"] > 1e-5


def sandwich(middle: str = "Sinh") -> onnx.ModelProto:
    """Conv -> Relu -> MIDDLE -> Relu -> Conv, real weights (the QNN EP refuses Sinh)."""
    rng = np.random.default_rng(0)
    w = [numpy_helper.from_array((rng.standard_normal((4, 4, 3, 3)) / 6).astype(np.float32),
                                 f"w{k}") for k in (1, 2)]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"], name="relu1"),
             helper.make_node(middle, ["b"], ["c"], name="mid"),
             helper.make_node("Relu", ["c"], ["d"], name="relu2"),
             helper.make_node("Conv", ["d", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "sandwich",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
                          w)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(m)


def test_a_cluster_the_ep_refuses_becomes_pieces_and_only_the_refused_node_falls_back():
    model = sandwich()
    part = ck.run_strategy(ck.make_problem(ck.load_graph(model), ["acc=ops:Conv,Relu,Sinh"]),
                           "auto")
    assert [len(c.nodes) for c in part.clusters if c.device == "acc"] == [5]
    fused = fuse(part)
    ex = Executor(fused, backends={"acc": f"ep:{QNN}[backend=htp]"})
    names = {u.name: [fused.root.nodes[v].name for v in u.subgraph.nodes] for u in ex.steps}
    by_device = {u.name: (u.device, u.runs_on) for u in ex.steps}
    assert sorted(names.values()) == [["conv1", "relu1"], ["mid"], ["relu2", "conv2"]]
    for name, nodes in names.items():
        assert by_device[name] == (("cpu", "CPUExecutionProvider") if nodes == ["mid"]
                                   else ("acc", QNN))
    [verdict] = ex.clusters
    assert verdict["verdict"] == "split" and verdict["pieces"] == 2 and verdict["fallen"] == 1
    # the EP's own words name what it refused
    assert "Sinh" in verdict["reason"] and QNN in verdict["reason"]
    [fallback] = ex.fallbacks
    assert "Sinh" in fallback["error"]
    feeds = random_inputs(fused)
    assert compare_outputs(run_model(model, feeds), ex.run(feeds), *FP16)["outputs_match"]


def test_a_silent_cpu_fallback_of_the_ep_is_caught():
    # the QNN GPU backend cannot initialise here; onnxruntime would then run every node on the
    # CPU without a word: the backend calls that a refusal, with the EP's own message
    model = sandwich("Relu")
    fused = fuse(ck.run_strategy(ck.make_problem(ck.load_graph(model), ["acc=ops:Conv,Relu"]),
                                 "auto"))
    ex = Executor(fused, backends={"acc": f"ep:{QNN}[backend=gpu]"})
    assert all(u.device == "cpu" and u.runs_on == "CPUExecutionProvider" for u in ex.steps)
    assert [c["verdict"] for c in ex.clusters] == ["fell back"]
    assert "initialize" in ex.clusters[0]["reason"].lower()


def test_backend_mistakes_are_one_line_errors():
    fused = fuse(ck.run_strategy(ck.make_problem(ck.load_graph(sandwich("Relu")),
                                                 ["acc=ops:Conv,Relu"]), "auto"))
    with pytest.raises(BackendError, match="no installed plugin execution provider is named "
                                           "'NoSuchEP'"):
        Executor(fused, backends={"acc": "ep:NoSuchEP"})
    with pytest.raises(SelectorError, match="models no plugin execution provider; name one"):
        Executor(fused, backends={"acc": "ep"})
    with pytest.raises(BackendError, match="only 'ep:' takes"):
        Executor(fused, backends={"acc": "onnxruntime:QNN"})


def test_a_merged_step_must_be_acceptable_to_the_device(tmp_path):
    # six clusters of a 24-node device: consecutive ones are not run as one larger step
    graph = ck.load_graph(BUNDLED_MODELS / "resnet50.onnx")
    part = ck.run_strategy(ck.make_problem(graph, ["qnn[max_nodes=24]"]), "auto")
    sizes = [len(c.nodes) for c in part.clusters if c.device == "qnn"]
    assert len(sizes) > 1 and max(sizes) <= 24
    ex = Executor(fuse(part), backend_config={"onnxruntime": {"intra_op_num_threads": 1}})
    steps = [u for u in ex.steps if u.kind == "subgraph"]
    assert len(steps) == len(sizes) and max(len(u.subgraph.nodes) for u in steps) <= 24


@pytest.fixture(scope="module")
def resnet18_parts():
    model = weighted("resnet18")
    part = ck.run_strategy(ck.make_problem(ck.load_graph(model), ["qnn[max_nodes=20]"]), "auto")
    return model, part, fuse(part)


@pytest.mark.parametrize("embed", [False, True])
def test_the_compiled_export_loads_in_plain_onnxruntime_and_matches(tmp_path, resnet18_parts,
                                                                    embed):
    model, part, fused = resnet18_parts
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    ex = Executor(fused, backends={"qnn": "ep"}, merge_steps=False,
                  backend_config={"ep": {"context_dir": str(ctx), "embed_context": embed}})
    out, binaries = compiled_model(ex, "r18", "resnet18")
    path = tmp_path / "r18.onnx"
    written = write_compiled(out, binaries, str(path))
    onnx.checker.check_model(str(path))
    loaded = onnx.load(str(path), load_external_data=False)
    ctx_nodes = [n for n in loaded.graph.node if n.op_type == "EPContext"]
    offloaded = [c for c in part.clusters if c.device == "qnn"]
    # one EPContext node per offloaded cluster, mapped to the partition JSON's clusters in order
    assert len(ctx_nodes) == len(offloaded) > 1
    mapping = json.loads({p.key: p.value for p in loaded.metadata_props}[CONTEXTS_KEY])
    assert [m["cluster"] for m in mapping] == [c.id for c in offloaded]
    assert sorted(m["node"] for m in mapping) == sorted(n.name for n in ctx_nodes)
    assert len(written) == (0 if embed else len(ctx_nodes))
    assert sorted(os.listdir(tmp_path)) == sorted(["ctx", "r18.onnx"] + [
        os.path.basename(p) for p in written])
    feeds = random_inputs(fused, seed=2)
    got, facts = run_deployed(str(path), QNN, ex.backends["qnn"].provider_options, feeds)
    assert facts == {"on_ep": len(ctx_nodes), "clusterkit_imported": False}
    assert compare_outputs(run_model(model, feeds), got, *FP16)["outputs_match"]


def test_an_interrupted_compiled_export_leaves_no_file(tmp_path, monkeypatch, resnet18_parts):
    _, _, fused = resnet18_parts
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    ex = Executor(fused, backends={"qnn": "ep"}, merge_steps=False,
                  backend_config={"ep": {"context_dir": str(ctx)}})
    out, binaries = compiled_model(ex, "r18", "resnet18")
    import clusterkit.io.files as files

    real = files._stage
    calls = []

    def interrupted(path, data):
        calls.append(path)
        if len(calls) == len(binaries):  # the last binary: Ctrl-C while it is written
            raise KeyboardInterrupt
        return real(path, data)

    monkeypatch.setattr(files, "_stage", interrupted)
    (tmp_path / "out").mkdir()
    with pytest.raises(KeyboardInterrupt):
        write_compiled(out, binaries, str(tmp_path / "out" / "r18.onnx"))
    assert os.listdir(tmp_path / "out") == []


def test_run_and_export_on_the_htp_from_the_command_line(tmp_path):
    model = BUNDLED_MODELS / "squeezenet1_1.onnx"
    cmd = [sys.executable, "-m", "clusterkit"]
    run = subprocess.run(cmd + ["run", str(model), "--selector", "qnn", "--backend", "qnn=ep",
                                "--random-weights", "--check", "--json", str(tmp_path / "r.json")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "LIBNATIVE" not in run.stdout + run.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert {s["ep"] for s in report["subgraphs"] if s["device"] == "qnn"} == {QNN}
    assert report["rtol"] == FP16[0] and report["outputs_match"]
    assert "logits: max |diff|" in run.stdout
    out = tmp_path / "sq.onnx"
    exp = subprocess.run(cmd + ["export", str(model), "--selector", "qnn", "--random-weights",
                                "--compile", "-o", str(out), "--verify"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert exp.returncode == 0, exp.stderr
    assert "outputs match the original" in exp.stdout
    assert out.exists() and (tmp_path / "sq_ctx0.bin").exists()


# ---------------------------------------------------------------------- the selector contract
CNN = ["Conv", "Relu", "Add", "MaxPool", "GlobalAveragePool", "Flatten", "Gemm"]


class RejectAbove(ck.OpsProperty):
    """A compiler that takes at most ``limit`` nodes (``create_subgraph_node`` says no)."""

    def __init__(self, limit: int):
        super().__init__(CNN, device="npu")
        self.limit = limit

    def create_subgraph_node(self, subgraph):
        return None if len(subgraph.nodes) > self.limit else super().create_subgraph_node(
            subgraph)


class CountConvs(ck.SubgraphSelector):
    """A stateful selector: at most two Conv nodes per cluster."""

    def __init__(self):
        self.convs = 0

    def select(self, node):
        return self._take(node)

    def select_input(self, node, new_node):
        return self._take(new_node)

    def select_output(self, node, new_node):
        return self._take(new_node)

    def _take(self, node):
        if node.op_type not in CNN:
            return False
        if node.op_type == "Conv":
            if self.convs == 2:
                return False
            self.convs += 1
        return True

    def reset(self):
        self.convs = 0


class TwoConvs(ck.SubgraphProperty):
    def create_subgraph_selector(self):
        return CountConvs()


@pytest.mark.parametrize("prop", [RejectAbove(6), TwoConvs("npu")], ids=["rejecting", "stateful"])
def test_the_compiled_steps_are_the_partitions_clusters_for_a_users_selector(resnet18_parts,
                                                                             prop):
    model = resnet18_parts[0]
    part = ck.run_strategy(ck.make_problem(ck.load_graph(model), [prop]), "auto")
    clusters = sorted(sorted(c.nodes) for c in part.clusters if c.device == "npu")
    assert len(clusters) > 1
    fused = fuse(part)
    ex = Executor(fused, backends={"npu": f"ep:{QNN}[backend=htp]"})
    steps = [u for u in ex.steps if u.device == "npu"]
    assert all(u.runs_on == QNN for u in steps)
    # merged steps only where the user's device accepts the union, else the clusters themselves
    problem = part.problem
    for u in steps:
        members = [sorted(p.subgraph.nodes) for p in u.parts] or [sorted(u.subgraph.nodes)]
        assert all(m in clusters for m in members)
        assert acceptance(problem).verdict(sorted(u.subgraph.nodes), 0) is None
    assert sorted(m for u in steps for m in ([sorted(p.subgraph.nodes) for p in u.parts]
                                            or [sorted(u.subgraph.nodes)])) == clusters
    feeds = random_inputs(fused)
    assert compare_outputs(run_model(model, feeds), ex.run(feeds), *FP16)["outputs_match"]


def test_a_saved_plan_runs_its_own_clusters_on_the_ep(tmp_path):
    model = BUNDLED_MODELS / "resnet18.onnx"
    plan = tmp_path / "plan.json"
    cmd = [sys.executable, "-m", "clusterkit"]
    made = subprocess.run(cmd + ["partition", str(model), "--selector", "qnn[max_nodes=12]",
                                 "--strategy", "cycles", "--json", str(plan), "-q"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    wanted = sorted(len(c["nodes"]) for c in json.loads(plan.read_text())["clusters"]
                    if c["device"] == "qnn")
    out = tmp_path / "run.json"
    run = subprocess.run(cmd + ["run", str(model), "--plan", str(plan), "--backend", "qnn=ep",
                                "--random-weights", "--no-merge-steps", "--json", str(out)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    got = sorted(s["nodes"] for s in report["subgraphs"] if s["device"] == "qnn")
    assert got == wanted and {s["ep"] for s in report["subgraphs"] if s["device"] == "qnn"} == {QNN}
    assert [c["verdict"] for c in report["clusters"]] == ["compiled"] * len(wanted)


def test_ctrl_c_during_the_compile_of_an_export_writes_nothing(tmp_path):
    """SIGINT while the HTP compiles the clusters (after the partition's summary line): exit
    130, no model, no context binary, and no temporary folder of contexts left behind."""
    import signal
    import time

    out, tmp = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "clusterkit", "export", str(BUNDLED_MODELS / "resnet50.onnx"),
         "--selector", "qnn[max_nodes=6]", "--strategy", "cycles", "--random-weights",
         "--compile", "-o", str(out / "r50.onnx")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp)}, start_new_session=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the summary: the 26 compiles (about 3 s) start now
    assert "strategy cycles" in first, first
    # once the first context binary is written: the QNN libraries are loaded (a SIGINT while
    # the first session loads them was lost once in about ten runs: exit 0, every context
    # written), and 25 compiles are still to come
    deadline = time.monotonic() + 60
    while not any(files for _, _, files in os.walk(tmp) if files != [".ses"]):
        assert time.monotonic() < deadline and proc.poll() is None, "no context was written"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert os.listdir(out) == []
    # (the QNN library leaves a small ".ses" file of its own in TMPDIR at every run)
    assert [name for name in os.listdir(tmp) if name != ".ses"] == []


def test_a_refusal_costs_only_the_compiles_it_must(monkeypatch):
    """The sandwich's cluster: one refused compile of the whole (the EP names Sinh as the node
    it does not take), then one compile per piece; the pieces' steps reuse those sessions."""
    import clusterkit.runtime.backends.ep_backend as ep_backend

    calls = []
    real = ep_backend.compile_on_ep

    def counted(data, *args, **kwargs):
        calls.append(len(onnx.load_from_string(data).graph.node))
        return real(data, *args, **kwargs)

    monkeypatch.setattr(ep_backend, "compile_on_ep", counted)
    model = sandwich()
    fused = fuse(ck.run_strategy(ck.make_problem(ck.load_graph(model),
                                                 ["acc=ops:Conv,Relu,Sinh"]), "auto"))
    ex = Executor(fused, backends={"acc": f"ep:{QNN}[backend=htp]"})
    assert calls == [5, 2, 2]
    assert [len(u.subgraph.nodes) for u in ex.steps] == [2, 1, 2]


def test_a_missing_ep_is_one_line_naming_its_extra(monkeypatch):
    from clusterkit.io import ep_query
    from clusterkit.runtime.backends import get_backend

    monkeypatch.setattr(ep_query, "plugin_eps", lambda: {})
    with pytest.raises(BackendError, match=r"^QNNExecutionProvider is not installed: pip "
                                           r"install 'clusterkit\[qnn\]'$"):
        get_backend("ep:QNNExecutionProvider", device="npu")
    with pytest.raises(BackendError, match=r"is not installed: pip install 'clusterkit\[qnn\]'"):
        get_backend("ep", device="qnn", restrict=ck.parse_selector("qnn"))
