"""The front door: exception hierarchy, registries, keyword-only options."""

from __future__ import annotations

import networkx as nx
import pytest

import clusterkit as ck
from clusterkit import errors


def _chain():
    g = nx.DiGraph()
    for v, op in enumerate(["Conv", "Relu", "Conv", "Softmax"]):
        g.add_node(f"n{v}", op=op)
    for v in range(3):
        g.add_edge(f"n{v}", f"n{v + 1}", bytes=4)
    return ck.from_networkx(g)


# ---------------------------------------------------------------------- exceptions
BUILTIN = {"ModelLoadError": ValueError, "GraphError": ValueError, "CycleError": ValueError,
           "SelectorError": ValueError, "ConstraintError": ValueError,
           "PartitionError": ValueError, "StrategyError": ValueError,
           "BackendError": RuntimeError, "ExecutionError": RuntimeError}


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
    from clusterkit.selection.registry import PROPERTIES

    return [(STRATEGIES, register_strategy, "cycles"), (PROPERTIES, ck.register_property, "coreml"),
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
    from clusterkit.selection.registry import PROPERTIES

    (tmp_path / "zz_broken_selector.py").write_text("import zz_missing_dependency_of_selector\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(PROPERTIES.shipped, "broken", "zz_broken_selector:make_property")
    for call in (lambda: ck.get_property("broken"), ck.registered_properties,
                 lambda: ck.parse_selector("broken")):
        with pytest.raises(ImportError, match="zz_missing_dependency_of_selector"):
            call()


def test_an_absent_shipped_module_is_not_available_rather_than_unknown(monkeypatch):
    from clusterkit.selection.registry import PROPERTIES

    monkeypatch.setitem(PROPERTIES.shipped, "gone", "clusterkit.selectors.zz_gone:make_property")
    with pytest.raises(ck.SelectorError, match="selector 'gone' is not available in this build"):
        ck.get_property("gone")
    assert "gone" not in ck.registered_properties()


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
            "assert ck.get_property('coreml').device == 'coreml'; "
            "assert 'clusterkit.selectors.coreml' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
