"""Every old public name of the renames (CHANGELOG.md, "Renamed") still works for one release:
it is the very object of its new name, and using it emits a ``DeprecationWarning`` that names
the new name. New names warn nothing."""

from __future__ import annotations

import importlib
import warnings

import pytest

import clusterkit as ck
from clusterkit._deprecated import REMOVED_IN, renamed_keywords
from support.models import BUNDLED_MODELS

#: (old module, old name, new module, new name)
MODULE_NAMES = [
    ("clusterkit", "get_property", "clusterkit", "get_selector"),
    ("clusterkit", "register_property", "clusterkit", "register_selector"),
    ("clusterkit", "registered_properties", "clusterkit", "registered_selectors"),
    ("clusterkit.selection.registry", "get_property", "clusterkit.selection.registry",
     "get_selector"),
    ("clusterkit.selection.registry", "register_property", "clusterkit.selection.registry",
     "register_selector"),
    ("clusterkit.selection.registry", "registered_properties", "clusterkit.selection.registry",
     "registered_selectors"),
    ("clusterkit.selection.registry", "PROPERTIES", "clusterkit.selection.registry",
     "SELECTORS"),
    ("clusterkit.runtime.executor", "Unit", "clusterkit.runtime.executor", "Step"),
    ("clusterkit.engines.units", "UnitGraph", "clusterkit.engines.super_nodes",
     "SuperNodeGraph"),
    ("clusterkit.engines.units", "first_reentry", "clusterkit.engines.super_nodes",
     "first_reentry"),
    ("clusterkit.engines.units", "LANDMARKS", "clusterkit.engines.super_nodes", "LANDMARKS"),
    ("clusterkit.engines.growth", "Piece", "clusterkit.engines.growth", "GrowingCluster"),
    ("clusterkit.engines.cpsat.strategy", "solve_parts", "clusterkit.engines.cpsat.strategy",
     "solve_components"),
    # the front door's helpers, private now
    *[("clusterkit.api", name, "clusterkit.api", f"_{name}")
      for name in ("resolve_selectors", "selector_label", "check_options", "self_placing")],
    # off the top level, kept in their homes
    ("clusterkit", "cut_bytes", "clusterkit.result.metrics", "cut_bytes"),
    ("clusterkit", "DEFAULT_VALUE_INPUTS", "clusterkit.constraints.core", "DEFAULT_VALUE_INPUTS"),
    ("clusterkit", "graph_from_node_link", "clusterkit.io.node_link", "graph_from_node_link"),
]
TORCH_NAMES = [
    ("clusterkit.torch", "Partition", "clusterkit.torch", "Cluster"),
    ("clusterkit.torch.partitioner", "Partition", "clusterkit.torch.partitioner", "Cluster"),
]


def _check_module_alias(old_mod: str, old: str, new_mod: str, new: str) -> None:
    target = getattr(importlib.import_module(new_mod), new)
    with pytest.warns(DeprecationWarning) as record:
        got = getattr(importlib.import_module(old_mod), old)
    assert got is target
    assert [str(w.message) for w in record] == [
        f"{old_mod}.{old} is deprecated, use {new_mod}.{new} ({old_mod}.{old} is removed in "
        f"clusterkit {REMOVED_IN})"]
    assert record[0].filename == __file__  # points at the caller
    with pytest.warns(DeprecationWarning, match=f"use {new_mod}.{new}"):
        namespace: dict = {}
        exec(f"from {old_mod} import {old} as got", namespace)
    assert namespace["got"] is target


@pytest.mark.parametrize("old_mod, old, new_mod, new", MODULE_NAMES,
                         ids=[f"{m}.{o}" for m, o, _, _ in MODULE_NAMES])
def test_an_old_module_name_is_the_new_object_and_warns(old_mod, old, new_mod, new):
    _check_module_alias(old_mod, old, new_mod, new)


@pytest.mark.parametrize("old_mod, old, new_mod, new", TORCH_NAMES,
                         ids=[f"{m}.{o}" for m, o, _, _ in TORCH_NAMES])
def test_the_torch_drop_in_keeps_partition(old_mod, old, new_mod, new):
    pytest.importorskip("torch")
    _check_module_alias(old_mod, old, new_mod, new)
    from torch.fx.passes.infra.partitioner import Partition as FxPartition

    from clusterkit.torch import Cluster

    assert issubclass(Cluster, FxPartition) and "torch.fx calls it a partition" in Cluster.__doc__


def test_unknown_names_still_raise_attribute_error():
    for mod in ("clusterkit", "clusterkit.api", "clusterkit.runtime.executor",
                "clusterkit.engines.units",
                "clusterkit.engines.growth", "clusterkit.selection.registry"):
        with pytest.raises(AttributeError, match="no_such_name"):
            importlib.import_module(mod).no_such_name  # noqa: B018


def test_new_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _, _, new_mod, new in MODULE_NAMES:
            getattr(importlib.import_module(new_mod), new)
        assert ck.registered_selectors() == ck.selection.registry.registered_selectors()


def test_the_moved_names_leave_the_top_level_and_self_placing_stays():
    from clusterkit.api import SELF_PLACING, _self_placing

    moved = {"cut_bytes", "DEFAULT_VALUE_INPUTS", "graph_from_node_link"}
    assert not moved & (set(ck.__all__) | set(dir(ck)))
    assert "cpsat" in SELF_PLACING and SELF_PLACING == _self_placing()


def _problem():
    """squeezenet with its first Conv and the Relu after it a together group (one super-node)."""
    graph = ck.load_graph(BUNDLED_MODELS / "squeezenet1_1.onnx")
    conv = next(v for v in range(graph.n) if graph.nodes[v].op_type == "Conv")
    relu = next(w for w in graph.succ_lists[conv] if graph.nodes[w].op_type == "Relu")
    return ck.make_problem(graph, ["acc=ops:Conv,Relu"],
                           constraints=ck.Constraints.default(together=[[conv, relu]]))


def _check_attribute(obj, old: str, new: str, owner: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"{owner}.{old} is deprecated, use "
                                                f"{owner}.{new}"):
        got = getattr(obj, old)
    assert got is getattr(obj, new) or got == getattr(obj, new)


def test_old_attributes_read_the_new_ones():
    from clusterkit.engines.cpsat.reduce import reduce_problem
    from clusterkit.engines.growth import GrowingCluster
    from clusterkit.engines.longest_path import plan
    from clusterkit.engines.super_nodes import SuperNodeGraph

    problem = _problem()
    graph = SuperNodeGraph(problem)
    _check_attribute(graph, "unit_of", "super_node_of", "SuperNodeGraph")
    with pytest.warns(DeprecationWarning, match="use SuperNodeGraph.super_node_const_bytes"):
        assert graph.unit_const_bytes(0) == graph.super_node_const_bytes(0)
    conv, relu = problem.groups[0].tolist()
    assert graph.super_node_of[conv] == graph.super_node_of[relu] and graph.n == problem.n - 1
    cluster = GrowingCluster(0, [3, 1])
    _check_attribute(cluster, "units", "super_nodes", "GrowingCluster")
    red = reduce_problem(problem)
    _check_attribute(red, "parts", "components", "Reduction")
    longest = plan(problem)
    _check_attribute(longest, "units", "super_nodes", "Plan")
    assert isinstance(longest.super_nodes, SuperNodeGraph)
    assert red.stats["parts"] == red.stats["components"] == len(red.components)


def test_executor_units_and_merge_units():
    from clusterkit.fusion import fuse
    from clusterkit.runtime.executor import Executor

    fused = fuse(ck.run_strategy(_problem(), "cycles"))
    with pytest.warns(DeprecationWarning, match="merge_steps="):
        plain = Executor(fused, merge_units=False)
    assert plain.merge_steps is False
    _check_attribute(plain, "units", "steps", "Executor")
    merged = Executor(fused)
    assert len(merged.steps) <= len(plain.steps) and merged.merge_steps is True
    replaced = list(reversed(plain.steps))
    with pytest.warns(DeprecationWarning, match="use Executor.steps"):
        plain.units = replaced
    assert plain.steps is replaced
    with pytest.raises(TypeError, match="both merge_units= and merge_steps="):
        Executor(fused, merge_units=False, merge_steps=True)


def test_renamed_keywords_passes_the_value_on():
    @renamed_keywords(old="new")
    def f(*, new: int = 0) -> int:
        return new

    with pytest.warns(DeprecationWarning, match="new="):
        assert f(old=5) == 5
    assert f(new=7) == 7
