"""The front door: exception hierarchy, registries, keyword-only options."""

from __future__ import annotations

import warnings

import networkx as nx
import pytest

import clusterkit as ck
from clusterkit import errors


def _chain():
    """n0 -> n1 -> n2 -> n3: Conv, Relu, Conv, Softmax."""
    g = nx.DiGraph([("n0", "n1"), ("n1", "n2"), ("n2", "n3")])
    nx.set_node_attributes(g, dict(zip(g, ["Conv", "Relu", "Conv", "Softmax"])), "op")
    nx.set_edge_attributes(g, 4, "bytes")
    return ck.from_networkx(g)


# ---------------------------------------------------------------------- exceptions
BUILTIN = {"ModelLoadError": ValueError, "WriteError": OSError, "GraphError": ValueError,
           "CycleError": ValueError,
           "SelectorError": ValueError, "ConstraintError": ValueError,
           "PartitionError": ValueError, "StrategyError": ValueError,
           "InfeasibleError": ValueError, "MemoryShortfallError": ValueError,
           "PlatformError": ValueError,
           "BackendError": RuntimeError, "ExecutionError": RuntimeError,
           "RenderError": RuntimeError, "UsageError": ValueError}


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_error_is_a_clusterkit_error_and_its_builtin(name):
    cls = getattr(errors, name)
    assert issubclass(cls, errors.ClusterkitError) and issubclass(cls, BUILTIN[name])
    assert getattr(ck, name) is cls


def test_every_error_class_in_the_module_is_mapped():
    classes = {n for n, v in vars(errors).items()
               if isinstance(v, type) and issubclass(v, errors.ClusterkitError)}
    assert classes - {"ClusterkitError"} == set(BUILTIN)


def test_except_value_error_catches_a_bad_constraint():
    with pytest.raises(ValueError, match="no node named 'nosuch'"):
        ck.Constraints(cut_edges=[("n0", "nosuch")]).compile(_chain())
    with pytest.raises(ValueError, match="max_size 1 is below min_size 2"):
        ck.Constraints(min_size=2, max_size=1).compile(_chain())


def test_except_value_error_catches_a_bad_selector_and_strategy():
    with pytest.raises(ValueError, match="unknown selector 'nosuch'"):
        ck.parse_selector("nosuch")
    with pytest.raises(ValueError, match="unknown strategy 'nosuch'"):
        ck.get_strategy("nosuch")


def test_except_runtime_error_catches_an_unknown_backend():
    from clusterkit.runtime.backends import get_backend

    with pytest.raises(RuntimeError, match="unknown backend 'nosuch'"):
        get_backend("nosuch")


# ---------------------------------------------------------------------- registries
def _registries():
    from clusterkit.engines import STRATEGIES, register_strategy
    from clusterkit.runtime.backends import BACKENDS, register_backend
    from clusterkit.selection.registry import SELECTORS

    return [(STRATEGIES, register_strategy, "cycles"), (SELECTORS, ck.register_selector, "coreml"),
            (BACKENDS, register_backend, "reference")]


@pytest.mark.parametrize("k", range(3), ids=["strategy", "selector", "backend"])
def test_registry_refuses_a_duplicate_name_unless_replace(k):
    registry, register, shipped = _registries()[k]
    stub = object()
    try:
        register("zz_test_entry", stub)
        with pytest.raises(errors.ClusterkitError,
                           match=f"{registry.kind} 'zz_test_entry' is already registered"):
            register("zz_test_entry", stub)
        with pytest.raises(ValueError if k < 2 else RuntimeError, match=f"'{shipped}'"):
            register(shipped, stub)
        register("zz_test_entry", stub, replace=True)
        assert "zz_test_entry" in registry.names()
    finally:
        registry.unregister("zz_test_entry")
    assert "zz_test_entry" not in registry.names()


def test_replace_overrides_a_shipped_strategy_and_unregister_restores_it():
    from clusterkit.engines import STRATEGIES

    original = ck.get_strategy("singleton")
    try:
        ck.register_strategy("singleton", lambda problem: original(problem), replace=True)
        assert ck.get_strategy("singleton") is not original
    finally:
        STRATEGIES.unregister("singleton")
    assert ck.get_strategy("singleton") is original


def test_a_broken_shipped_selector_module_shows_its_import_error(tmp_path, monkeypatch):
    from clusterkit.selection.registry import SELECTORS

    (tmp_path / "zz_broken_selector.py").write_text("import zz_missing_dependency_of_selector\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(SELECTORS.shipped, "broken", "zz_broken_selector:make_property")
    for call in (lambda: ck.get_selector("broken"), ck.registered_selectors,
                 lambda: ck.parse_selector("broken")):
        with pytest.raises(ImportError, match="zz_missing_dependency_of_selector"):
            call()


def test_an_absent_shipped_module_is_not_available_rather_than_unknown(monkeypatch):
    from clusterkit.selection.registry import SELECTORS

    monkeypatch.setitem(SELECTORS.shipped, "gone", "clusterkit.selectors.zz_gone:make_property")
    with pytest.raises(ck.SelectorError, match="selector 'gone' is not available in this build"):
        ck.get_selector("gone")
    assert "gone" not in ck.registered_selectors()


def test_selection_does_not_import_the_shipped_selectors():
    import pathlib
    import subprocess
    import sys

    folder = pathlib.Path(ck.__file__).parent / "selection"
    for path in folder.glob("*.py"):
        text = path.read_text()
        assert "import clusterkit.selectors" not in text and "from clusterkit.selectors" not in text
        assert "from clusterkit import selectors" not in text, path
    code = ("import sys, clusterkit as ck; assert 'clusterkit.selectors' not in sys.modules; "
            "assert ck.get_selector('coreml').device == 'coreml'; "
            "assert 'clusterkit.selectors.coreml' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------- front door
def test_cpsat_own_coalesce_option_reaches_cpsat_and_no_post_pass_runs():
    pytest.importorskip("ortools")
    from clusterkit.engines import STRATEGIES

    real = ck.get_strategy("cpsat")
    seen = {}

    def spy(problem, **options):
        seen.update(options)
        seen["result"] = real(problem, **options)
        return seen["result"]

    problem = ck.make_problem(_chain(), ["ops:Conv,Relu"])
    ck.register_strategy("cpsat", spy, replace=True)
    try:
        part = ck.run_strategy(problem, "cpsat", coalesce=False, time_limit=10)
    finally:
        STRATEGIES.unregister("cpsat")
    assert seen["coalesce"] is False and seen["time_limit"] == 10
    assert part.clusters == seen["result"].clusters and part.strategy == "cpsat"
    # only the subgraph rejection ran after it, and changed nothing
    assert [(r["name"], r["changed"]) for r in part.info["pipeline"]] == \
        [("reject_subgraphs", False)]


def test_coalesce_after_runs_the_post_pass_and_keeps_the_partition_valid():
    problem = ck.make_problem(_chain(), ["ops:Conv,Relu"])
    plain = ck.run_strategy(problem, "singleton")
    merged = ck.run_strategy(problem, "singleton", coalesce_after=True)
    assert merged.metrics()["partitions"] < plain.metrics()["partitions"]
    assert {v for c in merged.clusters for v in c.nodes} == set(range(4))


def test_front_door_options_are_keyword_only():
    problem = ck.make_problem(_chain(), ["ops:Conv"])
    with pytest.raises(TypeError):
        ck.run_strategy(problem, "singleton", "label")
    with pytest.raises(TypeError):
        ck.partition(_chain(), ["ops:Conv"], "singleton", None)
    with pytest.raises(ck.StrategyError, match="strategy 'singleton' has no option 'coalesce'"):
        ck.run_strategy(problem, "singleton", coalesce=True)


def _relu_model(shape=("N", 3)):
    from onnx import helper

    from support.onnx_models import float_model

    return float_model([helper.make_node("Relu", ["x"], ["y"], name="r")], "relu", ["x"], ["y"],
                       shape=shape)


def _front_door_calls(tmp_path):
    """(name, the function, its first arguments, old positional options, the same as keywords,
    the figure the two calls are compared by)."""
    from clusterkit.export.openvino_ir import export_openvino
    from clusterkit.fusion import source_model

    part = ck.partition(_chain(), ["ops:Conv"], strategy="singleton")
    relu = ck.partition(_relu_model((2, 3)), ["ops:Relu"], strategy="singleton", fallback="CPU")
    model = lambda m: (m.graph.name, [(p.key, p.value) for p in m.metadata_props])  # noqa: E731
    return [
        ("make_problem", ck.make_problem, (_chain(), ["ops:Conv"]),
         (ck.Constraints(max_size=1), "host"),
         {"constraints": ck.Constraints(max_size=1), "fallback": "host"},
         lambda p: (p.fallback, ck.run_strategy(p, "cycles").clusters)),
        ("partition", ck.partition, (_chain(), ["ops:Conv"]), ("singleton",),
         {"strategy": "singleton"}, lambda r: (r.strategy, r.clusters)),
        ("fuse", ck.fuse, (part,), (False,), {"validate": False},
         lambda f: ([n.op_type for n in f.nodes], f.members)),
        ("export_fused", ck.export_fused, (ck.fuse(relu), None), ("m1", False),
         {"model_name": "m1", "check": False}, model),
        ("export_partition", ck.export_partition, (relu, None), ("m1", False),
         {"model_name": "m1", "check": False}, model),
        ("export_openvino", export_openvino, (relu, tmp_path / "r.xml"),
         (source_model(relu.graph),), {"model": source_model(relu.graph)}, lambda a: a.device),
        ("load_graph", ck.load_graph, (_relu_model(),), ({"N": 2}, "none"),
         {"dims": {"N": 2}, "optimize": "none"}, lambda g: g.tensors["x"].shape),
    ]


FRONT_DOOR = ["make_problem", "partition", "fuse", "export_fused", "export_partition",
              "export_openvino", "load_graph"]


@pytest.mark.parametrize("k", range(len(FRONT_DOOR)), ids=FRONT_DOOR)
def test_an_old_positional_option_warns_and_gives_the_same(k, tmp_path):
    """The options after the model (and selectors, and an export's path) are keyword-only in
    the signature; passed positionally they still work for one release, with a warning in the
    one wording that points at the caller."""
    import inspect

    from clusterkit._deprecated import REMOVED_IN

    if FRONT_DOOR[k] == "export_openvino":
        pytest.importorskip("openvino")
    name, func, first, old, new, figure = _front_door_calls(tmp_path)[k]
    assert name == FRONT_DOOR[k]
    params = inspect.signature(func).parameters
    assert [p for p in params if params[p].kind is inspect.Parameter.KEYWORD_ONLY][:len(new)] \
        == list(new)
    with pytest.warns(DeprecationWarning) as caught:
        got = func(*first, *old)
    was, now = ", ".join(new), ", ".join(f"{p}=..." for p in new)
    assert [str(w.message) for w in caught] == [
        f"{name}(..., {was}) is deprecated, use {name}(..., {now}) ({name}(..., {was}) is "
        f"removed in clusterkit {REMOVED_IN})"]
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert figure(got) == figure(func(*first, **new))


def test_keyword_only_after_refuses_a_signature_it_cannot_keep():
    from clusterkit._deprecated import keyword_only_after

    def spread(model, *more, strict=False):
        return model

    def fixed(model, selectors, /, strict=False):
        return model

    with pytest.raises(TypeError, match=r"spread has positional-only or \*args parameters"):
        keyword_only_after(1)(spread)
    with pytest.raises(TypeError, match="fixed has positional-only"):
        keyword_only_after(1)(fixed)
    assert keyword_only_after(2)(fixed)(1, 2, strict=True) == 1


def test_one_positional_option_of_two_names_that_one():
    with pytest.warns(DeprecationWarning, match=r"^load_graph\(\.\.\., dims\) is deprecated, "
                                                r"use load_graph\(\.\.\., dims=\.\.\.\) "):
        graph = ck.load_graph(_relu_model(), {"N": 5})
    assert graph.tensors["x"].shape == (5, 3)


@pytest.mark.parametrize("reserved", ["validate", "fallback", "coalesce_after"])
def test_a_strategy_option_named_like_a_front_door_parameter_is_refused(reserved):
    import inspect

    from clusterkit.engines import STRATEGIES

    def clashing(problem, **options):
        return ck.get_strategy("singleton")(problem)

    clashing.__signature__ = inspect.Signature([
        inspect.Parameter("problem", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter(reserved, inspect.Parameter.KEYWORD_ONLY, default=1)])
    ck.register_strategy("zz_clash", clashing)
    try:
        with pytest.raises(ck.StrategyError, match=f"option '{reserved}'.*front-door"):
            ck.run_strategy(ck.make_problem(_chain(), ["ops:Conv"]), "zz_clash")
    finally:
        STRATEGIES.unregister("zz_clash")


def test_no_shipped_strategy_option_is_named_like_a_front_door_parameter():
    import inspect

    from clusterkit.api import FRONT_DOOR_PARAMETERS

    for name in ck.strategy_names():
        params = set(inspect.signature(ck.get_strategy(name)).parameters)
        assert not params & set(FRONT_DOOR_PARAMETERS), name


def test_partition_takes_one_spec_or_property_or_a_list_of_either():
    prop = ck.OpsProperty(["Conv"], device="npu")
    one = ck.partition(_chain(), "npu=ops:Conv", strategy="singleton")
    assert one.selector == "npu=ops:Conv"
    for sels in (prop, [prop], ["npu=ops:Conv"], [prop, "gpu=ops:Relu"]):
        part = ck.partition(_chain(), sels, strategy="singleton")
        devices = {c.device for c in part.clusters}
        assert "npu" in devices, sels
