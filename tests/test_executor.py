"""Executor and backends: fused graphs run heterogeneously and compute what onnxruntime computes
on the unpartitioned model; compile failures fall back to the host; backend config and metrics.

The real-model check (every model of the onnx light set and the bundled models, two selectors that
leave ops unsupported, two strategies each, fused run *and* exported model against onnxruntime on
the original model) lives here so that each model's reference run is computed once."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clusterkit as ck
from clusterkit import BackendError, ExecutionError, OpsProperty
from clusterkit.cli import main as cli_main
from clusterkit.export.onnx_model import export_fused
from clusterkit.fusion import fuse
from clusterkit.runtime.backends import (
    OnnxRuntimeBackend,
    backend_names,
    get_backend,
    register_backend,
)
from clusterkit.runtime.executor import (
    DEFAULT_DIM,
    INT_HIGH,
    Executor,
    compare_outputs,
    random_inputs,
    run_model,
)
from support.models import ALL_MODELS, BUNDLED_MODELS, model_id
from support.onnx_models import (
    FAST_ORT,
    MULTI,
    intermediate_values,
    level_partition,
    load,
    onnx_models,
    partition_with,
    random_problems,
)

CONFIG = {"onnxruntime": FAST_ORT}
RTOL, ATOL = 1e-4, 1e-5
FEW = "acc=ops:Conv,Relu,Add,MatMul,Gemm,Mul,Softmax,Transpose,Sigmoid,MaxPool,Concat"


def two_devices(graph: ck.Graph) -> list[str]:
    """Two devices splitting the model's op types; every fourth op type is on neither."""
    ops = sorted(set(graph.op_types))
    return ["gpu=ops:" + ",".join(ops[0::2]), "dsp=ops:" + ",".join(ops[1::4])]


def _assert_match(expected, got, what):
    cmp = compare_outputs(expected, got, rtol=RTOL, atol=ATOL)
    assert cmp["outputs_match"], f"{what}: max |diff| {cmp['max_abs_diff']}: {cmp['outputs']}"


# ---------------------------------------------------------------------- every real model
def _configs(index: int, path) -> list[tuple[str, str]]:
    """Two selectors and two strategies per model: a multi-node strategy (rotating through the
    registered ones) with one selector and singleton with the other, alternating which selector
    gets which, so that across the model set every strategy meets both selectors. The 11k-node
    llama gets one pair (two devices, a multi-node strategy): its reference run, partition,
    ~1700 unit compiles and the load of its exported model take ~15 s of CPU per pair."""
    multi = MULTI or ["level"]
    strategy = multi[index % len(multi)]
    if "llama" in path.name:
        return [("two", strategy)]
    if index % 2:
        return [("few", "singleton"), ("two", strategy)]
    return [("few", strategy), ("two", "singleton")]


@pytest.mark.slow
@pytest.mark.parametrize("index,path", list(enumerate(ALL_MODELS)),
                         ids=[model_id(p) for p in ALL_MODELS])
def test_fused_run_and_export_match_onnxruntime(index, path):
    graph = load(path)
    feeds = random_inputs(graph)
    expected = _expected(graph, feeds)
    selectors = {"few": [FEW], "two": two_devices(graph)}
    for sel, strategy in _configs(index, path):
        problem = ck.make_problem(graph, selectors[sel])
        assert not problem.any_supported.all()  # the selector leaves ops to the host
        part = partition_with(problem, strategy)
        fg = fuse(part)
        ex = Executor(fg, backend_config=CONFIG)
        _assert_match(expected, ex.run(feeds), f"{path.stem} {sel} {strategy} fused run")
        assert not ex.fallbacks
        model = export_fused(fg)  # runs the onnx checker
        _assert_match(expected, run_model(model, feeds, FAST_ORT),
                      f"{path.stem} {sel} {strategy} exported")


@pytest.mark.parametrize("strategy", ["singleton"] + MULTI)
def test_every_strategy_fuses_and_runs(strategy):
    """Every registered strategy, on whole resnet blocks."""
    graph = load(BUNDLED_MODELS / "resnet50.onnx")
    feeds = random_inputs(graph)
    expected = _expected(graph, feeds)
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:Conv,Relu,Add,MaxPool"]), strategy)
    fg = fuse(part)
    _assert_match(expected, Executor(fg, backend_config=CONFIG).run(feeds), strategy)
    if strategy != "singleton":
        assert part.metrics()["largest_cluster"] >= 10


_EXPECTED: dict = {}


def _expected(graph, feeds):
    """onnxruntime on the whole model, once per model and input set."""
    key = (graph.name, tuple((k, v.tobytes()) for k, v in sorted(feeds.items())))
    if key not in _EXPECTED:
        _EXPECTED[key] = run_model(graph.model, feeds, FAST_ORT)
    return _EXPECTED[key]


def test_a_multi_node_strategy_ran():
    """The strategy parametrizations above are not vacuous."""
    assert MULTI, "no multi-node strategy (cycles, longest-path, mxnet, hetero) is registered"


def test_default_backend_config_matches_within_tolerance():
    """Full onnxruntime optimizations and default threads, as the CLI runs."""
    for name in ("resnet18", "bert_base"):
        graph = load(BUNDLED_MODELS / f"{name}.onnx")
        feeds = random_inputs(graph)
        expected = run_model(graph.model, feeds)
        part = partition_with(ck.make_problem(graph, [FEW]), (MULTI or ["level"])[0])
        _assert_match(expected, Executor(fuse(part)).run(feeds), name)


# ---------------------------------------------------------------------- random graphs
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_problems(), st.sampled_from(["singleton", "level"] + MULTI), st.booleans())
def test_random_models_run_fused_and_nested(mp, strategy, nest):
    model, problem = mp
    feeds = random_inputs(problem.graph, seed=3)
    expected = run_model(model, feeds, FAST_ORT)
    fg = fuse(partition_with(problem, strategy))
    if nest:  # partition the fused graph again: fused nodes inside new clusters
        ops = sorted(set(fg.op_types))
        again = ck.Constraints.default().compile(fg, [OpsProperty(ops[::2], device="outer")])
        fg = fuse(level_partition(again))
    _assert_match(expected, Executor(fg, backend_config=CONFIG).run(feeds), "random")
    _assert_match(expected, run_model(export_fused(fg), feeds, FAST_ORT), "random export")


# ---------------------------------------------------------------------- fallbacks
class FlakyBackend(OnnxRuntimeBackend):
    """Fails to compile every subgraph holding a MatMul or a Conv."""

    name = "flaky"

    def _compile(self, sub, *args):
        if any(sub.graph.nodes[v].op_type in ("MatMul", "Conv") for v in sub.nodes):
            raise RuntimeError("out of on-chip memory")
        return super()._compile(sub, *args)


register_backend("flaky", FlakyBackend)


def test_a_refused_cluster_is_split_and_only_what_no_piece_holds_falls_back():
    graph = load(BUNDLED_MODELS / "resnet18.onnx")
    feeds = random_inputs(graph)
    expected = _expected(graph, feeds)
    part = partition_with(ck.make_problem(graph, [FEW]), (MULTI or ["level"])[0])
    fg = fuse(part)
    ex = Executor(fg, backends={"acc": "flaky"},
                  backend_config={"flaky": FAST_ORT, "onnxruntime": FAST_ORT})
    _assert_match(expected, ex.run(feeds), "with fallbacks")
    heavy = {v for c in part.clusters if c.device == "acc" for v in c.nodes
             if graph.nodes[v].op_type in ("MatMul", "Conv")}
    assert heavy, "the test needs offloaded Conv/MatMul nodes"
    failing = [u for u in ex.steps if u.fallback_reason]
    fallen = {v for u in failing for v in u.subgraph.nodes}
    assert fallen == heavy  # exactly the nodes no piece the backend compiles can hold
    assert all(u.kind == "host" and u.device == "cpu" and u.backend == "onnxruntime"
               and "out of on-chip memory" in u.fallback_reason for u in failing)
    on_acc = [u for u in ex.steps if u.device == "acc"]
    assert all(u.backend == "flaky" and not heavy & set(u.subgraph.nodes) for u in on_acc)
    assert len(ex.fallbacks) == len(failing)
    assert all(t["fell_back"] for t in ex.timings() if t["name"] in {u.name for u in failing})
    split = [c for c in ex.clusters if c["verdict"] == "split"]
    refused = {c.id for c in part.clusters if heavy & set(c.nodes)}
    assert len(split) == len(refused) and all("out of on-chip memory" in c["reason"]
                                              for c in split)
    assert sum(c["pieces"] for c in split) == len([u for u in on_acc if ".piece" in u.name])
    assert sum(c["fallen"] for c in split) == len(heavy)


def test_host_failure_is_fatal_and_named():
    class NoHost(OnnxRuntimeBackend):
        def _compile(self, sub, *args):
            raise RuntimeError("host is down")

    graph = load(BUNDLED_MODELS / "resnet18.onnx")
    fg = fuse(ck.run_strategy(ck.make_problem(graph, ["acc=ops:Relu"]), "singleton"))
    with pytest.raises(ExecutionError, match="host is down"):
        Executor(fg, host=NoHost(device="cpu"))


# ---------------------------------------------------------------------- reference backend
def test_reference_backend_runs_its_device_with_per_node_counters():
    graph = load(BUNDLED_MODELS / "resnet18.onnx")
    feeds = random_inputs(graph)
    expected = _expected(graph, feeds)
    ops = ["Relu", "Add", "MaxPool", "Flatten", "GlobalAveragePool"]
    part = level_partition(ck.make_problem(graph, ["ref=ops:" + ",".join(ops)]))
    ex = Executor(fuse(part), backends={"ref": "reference"},
                  backend_config={"reference": {"perf_counts": True}, "onnxruntime": FAST_ORT})
    _assert_match(expected, ex.run(feeds), "reference backend")
    ref_units = [u for u in ex.steps if u.kind == "subgraph"]
    assert ref_units and all(u.backend == "reference" for u in ref_units)
    counters = [r for r in ex.node_timings() if r["step"] in {u.name for u in ref_units}]
    assert {r["op_type"] for r in counters} <= set(ops)
    assert sum(r["calls"] for r in counters) == sum(len(u.subgraph.nodes) for u in ref_units)


def test_onnxruntime_perf_counts_give_per_node_times():
    graph = load(BUNDLED_MODELS / "resnet18.onnx")
    part = level_partition(ck.make_problem(graph, ["acc=ops:Conv,Relu,Add"]))
    cfg = dict(FAST_ORT, perf_counts=True)
    ex = Executor(fuse(part), backend_config={"onnxruntime": cfg})
    ex.run(random_inputs(graph))
    recs = ex.node_timings()
    convs = [r for r in recs if r["op_type"] == "Conv"]
    assert len(convs) == graph.op_types.count("Conv")
    assert all(r["calls"] == 1 and r["seconds"] >= 0 for r in recs)
    t = ex.timings()
    assert [u["name"] for u in t] == [u.name for u in ex.steps]
    assert all(u["runs"] == 1 and u["total_seconds"] > 0 for u in t)


# ---------------------------------------------------------------------- backend API
@pytest.mark.parametrize("name", ["onnxruntime", "reference"])
def test_backend_config_and_metrics(name):
    prop = OpsProperty(["Relu", "Add", "NoSuchOp"], device="npu")
    b = get_backend(name, restrict=prop)
    assert b.name == name and b.device == "npu" and name in backend_names()
    with pytest.raises(BackendError, match=f"'{name}'.*no config key 'bogus'"):
        b.get_config("bogus")
    with pytest.raises(BackendError, match="bogus"):
        b.set_config({"perf_counts": True, "bogus": 1})
    assert b.get_config("perf_counts") is False  # a bad key changes nothing
    b.set_config(perf_counts=True)
    assert b.get_config("perf_counts") is True
    with pytest.raises(BackendError, match="perf_counts"):
        b.set_config(perf_counts="maybe")
    m = b.metrics()
    assert "npu" in m["FULL_DEVICE_NAME"] and m["DEVICE"] == "npu" and m["BACKEND"] == name
    assert m["SUPPORTED_OPS"] == ["Add", "Relu"]
    assert "perf_counts" in m["SUPPORTED_CONFIG_KEYS"]
    with pytest.raises(BackendError, match="no metric"):
        b.get_metric("COLOR")
    unrestricted = get_backend(name)
    assert {"Conv", "MatMul", "Relu"} <= set(unrestricted.get_metric("SUPPORTED_OPS"))


def test_onnxruntime_config_values_are_checked():
    b = OnnxRuntimeBackend()
    for key, bad in [("intra_op_num_threads", -1), ("graph_optimization_level", "max"),
                     ("providers", ["NoSuchExecutionProvider"])]:
        with pytest.raises(BackendError, match=key if key != "providers" else "provider"):
            b.set_config({key: bad})


def _custom_op_model():
    from onnx import TensorProto, helper

    vi = lambda t: helper.make_tensor_value_info(t, TensorProto.FLOAT, [2])  # noqa: E731
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("Frobnicate", ["a"], ["b"], name="frob", domain="vendor.ops"),
             helper.make_node("Neg", ["b"], ["y"], name="neg")]
    g = helper.make_graph(nodes, "custom", [vi("x")], [vi("y")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("vendor.ops", 1)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("name", ["onnxruntime", "reference"])
def test_query_and_compile_refuse_unsupported_nodes(name):
    graph = ck.load_graph(_custom_op_model())
    b = get_backend(name, restrict=OpsProperty(["Relu", "Frobnicate"], device="npu"))
    assert b.query(graph).tolist() == [True, False, False]  # frob: not implemented; neg: not in set
    assert get_backend(name).query(graph).tolist() == [True, False, True]
    with pytest.raises(BackendError, match="'frob' \\(Frobnicate\\).*does not implement"):
        b.compile(ck.Subgraph.from_nodes(graph, [1], "npu", 0))
    with pytest.raises(BackendError, match="'neg' \\(Neg\\).*outside the op set"):
        b.compile(ck.Subgraph.from_nodes(graph, [2], "npu", 0))
    compiled = b.compile(ck.Subgraph.from_nodes(graph, [0], "npu", 0))
    out = compiled({"x": np.asarray([-1.0, 2.0], dtype=np.float32)})
    assert out["a"].tolist() == [0.0, 2.0]


def test_query_of_a_fused_graph_needs_every_member():
    graph = load(BUNDLED_MODELS / "resnet18.onnx")
    fg = fuse(level_partition(ck.make_problem(graph, ["acc=ops:Conv,Relu,Add"])))
    relu_only = OnnxRuntimeBackend(restrict=OpsProperty(["Relu", "FusedSubgraph"], device="x"))
    mask = relu_only.query(fg)
    for v in range(fg.n):
        ops = {graph.op_types[m] for m in fg.members[v]}
        assert mask[v] == (ops <= {"Relu"})


# ---------------------------------------------------------------------- executor edges
def test_executor_errors_name_the_problem():
    graph = load(BUNDLED_MODELS / "resnet18.onnx")
    ex = Executor(graph, backend_config=CONFIG)  # an unfused graph: all on the host
    assert [u.kind for u in ex.steps] == ["host"]
    with pytest.raises(ExecutionError, match="missing graph input 'image'"):
        ex.run({})
    with pytest.raises(ExecutionError, match="'bogus' is not a graph input"):
        ex.run({**random_inputs(graph), "bogus": np.zeros(1)})
    import networkx as nx

    g = nx.DiGraph()
    g.add_node("a", op="Relu")
    with pytest.raises(ExecutionError, match="not read from an ONNX model"):
        Executor(ck.from_networkx(g))


def test_host_nodes_are_grouped_into_few_steps():
    """Host runs are maximal: two host steps are always separated by a fused node."""
    graph = load(BUNDLED_MODELS / "bert_base.onnx")
    fg = fuse(level_partition(ck.make_problem(graph, ["acc=ops:MatMul,Softmax"])))
    ex = Executor(fg, backend_config=CONFIG)
    kinds = [u.kind for u in ex.steps]
    assert all(not (a == b == "host") for a, b in zip(kinds, kinds[1:]))
    assert sum(u.kind == "subgraph" for u in ex.steps) == len(
        [v for v in fg.fused_nodes() if not fg.nodes[v].is_constant])


def test_random_inputs_follow_the_documented_ranges():
    bert = random_inputs(load(BUNDLED_MODELS / "bert_base.onnx"), seed=1)
    assert bert["input_ids"].dtype == np.int64
    assert 0 <= bert["input_ids"].min() and bert["input_ids"].max() < INT_HIGH
    assert (bert["attention_mask"] == 1).all() and (bert["token_type_ids"] == 0).all()
    llama = load(next(p for p in ALL_MODELS if "llama" in p.name))
    shapes = {k: v.shape for k, v in random_inputs(llama).items()}
    assert shapes == {"input_ids": (1, DEFAULT_DIM), "attention_mask": (1, DEFAULT_DIM)}
    assert random_inputs(llama, dims={"seq": 5})["input_ids"].shape == (1, 5)
    again = random_inputs(load(BUNDLED_MODELS / "bert_base.onnx"), seed=1)
    assert all(np.array_equal(bert[k], again[k]) for k in bert)


def test_compare_outputs_reports_the_largest_difference():
    a = {"y": np.asarray([1.0, 2.0], dtype=np.float32)}
    b = {"y": np.asarray([1.0, 2.5], dtype=np.float32)}
    cmp = compare_outputs(a, b)
    assert cmp["max_abs_diff"] == pytest.approx(0.5) and not cmp["outputs_match"]
    assert compare_outputs(a, a)["outputs_match"]
    assert not compare_outputs(a, {"y": np.zeros(3, np.float32)})["outputs_match"]


# ---------------------------------------------------------------------- CLI
def test_cli_run_checks_and_writes_json(tmp_path, capsys):
    model = str(BUNDLED_MODELS / "resnet18.onnx")
    out = tmp_path / "run.json"
    code = cli_main(["run", model, "--strategy", "singleton", "--selector", "acc=ops:Conv,Relu",
                     "--check", "--json", str(out), "--config",
                     "onnxruntime.graph_optimization_level=\"disable\"", "--repeat", "2"])
    assert code == 0
    text = capsys.readouterr().out
    assert "outputs match onnxruntime" in text and "acc_subgraph_" in text
    data = json.loads(out.read_text())
    assert data["outputs_match"] is True and data["max_abs_diff"] <= ATOL
    assert len(data["subgraphs"]) >= 2 and all(s["runs"] == 2 for s in data["subgraphs"])
    single = data["single_session_mean_seconds"]
    assert single > 0 and data["ratio_to_single_session"] == pytest.approx(
        data["mean_run_seconds"] / single)
    assert "fused / one session = " in text
    assert {s["device"] for s in data["subgraphs"]} == {"acc", "cpu"}
    # re-use a saved partition without partitioning
    plan = tmp_path / "plan.json"
    assert cli_main(["partition", model, "--strategy", "singleton", "--selector",
                     "acc=ops:Conv,Relu", "--json", str(plan)]) == 0
    capsys.readouterr()
    assert cli_main(["run", model, "--plan", str(plan), "--check", "--backend",
                     "acc=reference"]) == 0
    text = capsys.readouterr().out
    assert "plan:singleton" in text and "reference" in text and "outputs match" in text


def test_cli_run_with_a_plan_for_another_model_fails_clearly(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    cli_main(["partition", str(BUNDLED_MODELS / "resnet18.onnx"), "--strategy", "singleton",
              "--selector", "acc=ops:Conv,Relu", "--json", str(plan)])
    capsys.readouterr()
    code = cli_main(["run", str(BUNDLED_MODELS / "squeezenet1_1.onnx"), "--plan", str(plan)])
    err = capsys.readouterr().err
    assert code == 2
    assert "does not match model 'squeezenet1_1'" in err and "'resnet18'" in err


@pytest.mark.parametrize("flag, text", [("onnxruntime.turbo=1", "no config key 'turbo'"),
                                        ("onnxrt.threads=1", "unknown backend 'onnxrt'")])
def test_cli_run_unknown_backend_key_is_an_error(capsys, flag, text):
    code = cli_main(["run", str(BUNDLED_MODELS / "resnet18.onnx"), "--strategy", "singleton",
                     "--selector", "acc=ops:Relu", "--config", flag])
    assert code == 2
    assert text in capsys.readouterr().err


def test_export_keeps_checker_happy_on_the_random_model_set():
    """A quick extra: models with constant graph outputs export and run too."""
    from hypothesis import find

    model = find(onnx_models(), lambda m: any(o.name == "stub" for o in m.graph.output))
    graph = ck.load_graph(model)
    feeds = random_inputs(graph)
    fg = fuse(ck.run_strategy(ck.make_problem(graph, ["acc=ops:Relu,Add,Mul,ConstantOfShape"]),
                              "singleton"))
    expected = run_model(model, feeds, FAST_ORT)
    _assert_match(expected, Executor(fg, backend_config=CONFIG).run(feeds), "constant output")
    onnx.checker.check_model(export_fused(fg))


def test_cluster_reading_only_constants_through_an_if_body_still_runs():
    """An If whose inputs are all constant is not constant (its bodies read outer tensors): its
    fused node must run, not be folded away."""
    from onnx import TensorProto, helper, numpy_helper

    vi = lambda t: helper.make_tensor_value_info(t, TensorProto.FLOAT, [2])  # noqa: E731
    then_g = helper.make_graph([helper.make_node("Identity", ["w"], ["a"])], "then", [], [vi("a")])
    else_g = helper.make_graph([helper.make_node("Neg", ["w"], ["b"])], "else", [], [vi("b")])
    nodes = [helper.make_node("If", ["cond"], ["picked"], name="if", then_branch=then_g,
                              else_branch=else_g),
             helper.make_node("Add", ["x", "picked"], ["y"], name="add")]
    inits = [numpy_helper.from_array(np.asarray(False), "cond"),
             numpy_helper.from_array(np.asarray([1.0, 2.0], dtype=np.float32), "w")]
    g = helper.make_graph(nodes, "if_const", [vi("x")], [vi("y")], initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    graph = ck.load_graph(model)
    assert not graph.nodes[0].is_constant
    fg = fuse(ck.run_strategy(ck.make_problem(graph, ["acc=ops:If"]), "singleton"))
    assert not fg.nodes[fg.fused_nodes()[0]].is_constant
    feeds = {"x": np.asarray([10.0, 20.0], dtype=np.float32)}
    for backend in ("onnxruntime", "reference"):
        out = Executor(fg, backends={"acc": backend}).run(feeds)
        assert out["y"].tolist() == [9.0, 18.0]
    assert run_model(export_fused(fg), feeds)["y"].tolist() == [9.0, 18.0]


# ---------------------------------------------------------------------- static values
def test_static_values_are_what_the_whole_model_computes():
    """The probe's values (folded from static shapes) equal the tensors the whole model
    computes; a model with dynamic inputs gets no probe."""
    from onnx import numpy_helper

    from clusterkit.runtime.backends.onnxruntime_backend import static_info

    graph = load(BUNDLED_MODELS / "vit_b_16.onnx")
    info = static_info(graph)
    assert info is not None and info.values
    assert not any(graph.tensors[t].is_constant for t in info.values)
    oracle = intermediate_values(graph.model, graph, sorted(info.values),
                                 random_inputs(graph, seed=5))
    for t, proto in info.values.items():
        np.testing.assert_array_equal(numpy_helper.to_array(proto), oracle[t], err_msg=t)
    assert static_info(load(next(p for p in ALL_MODELS if "llama" in p.name))) is None


def _shape_reshape_model():
    from onnx import TensorProto, helper, numpy_helper

    vi = lambda t: helper.make_tensor_value_info(t, TensorProto.FLOAT, [2, 3])  # noqa: E731
    i64 = lambda name, v: numpy_helper.from_array(np.asarray(v, dtype=np.int64), name)  # noqa
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Shape", ["r"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["b"], name="gather", axis=0),
             helper.make_node("Unsqueeze", ["b", "axes"], ["bu"], name="unsq"),
             helper.make_node("Concat", ["bu", "minus1"], ["shp"], name="concat", axis=0),
             helper.make_node("Reshape", ["r", "shp"], ["y"], name="reshape"),
             helper.make_node("Neg", ["y"], ["out"], name="neg")]
    g = helper.make_graph(nodes, "shape_reshape", [vi("x")], [vi("out")],
                          initializer=[i64("zero", 0), i64("axes", [0]), i64("minus1", [-1])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_values_fixed_by_static_shapes_are_folded_once():
    model = _shape_reshape_model()
    graph = ck.load_graph(model)
    fg = fuse(ck.run_strategy(ck.make_problem(graph, ["acc=ops:Reshape,Neg"]), "singleton"))
    feeds = {"x": np.arange(-3, 3, dtype=np.float32).reshape(2, 3)}
    expected = np.negative(np.maximum(feeds["x"], 0))
    folded = Executor(fg)
    plain = Executor(fg, fold_static=False)
    np.testing.assert_array_equal(folded.run(feeds)["out"], expected)
    np.testing.assert_array_equal(plain.run(feeds)["out"], expected)
    assert folded.static is not None
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(folded.static.values["shp"]),
                                  [2, -1])

    def reshape(ex):
        return next(u for u in ex.steps
                    if any(graph.op_types[v] == "Reshape" for v in u.subgraph.nodes))

    assert reshape(folded).inputs == ["r"]  # the target shape is a constant of its model
    assert sorted(reshape(plain).inputs) == ["r", "shp"]
    host = [u for u in folded.steps if u.kind == "host"]
    assert [u.outputs for u in host] == [["r"]]  # Shape, Gather, ... never run
