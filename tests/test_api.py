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
