"""``Constraints`` checks what needs no graph when it is built: the error is raised at
``Constraints(...)``, one line naming the setting; ``compile`` keeps the checks that need the
graph."""

from __future__ import annotations

import dataclasses

import networkx as nx
import numpy as np
import pytest

from clusterkit import ConstraintError, Constraints, OpsProperty, from_networkx

BAD = {
    "min_size zero": ({"min_size": 0}, "min_size must be >= 1, got 0"),
    "min_size not a count": ({"min_size": 1.5}, "min_size must be an integer, got 1.5"),
    "max_size below min_size": ({"min_size": 2, "max_size": 1},
                                "max_size 1 is below min_size 2"),
    "max_size a string": ({"max_size": "3"}, "max_size must be an integer, got '3'"),
    "negative byte limit": ({"max_const_bytes": -1}, "max_const_bytes must be >= 0, got -1"),
    "cut_edges not a list": ({"cut_edges": "a,b"}, "cut_edges must be a list of node pairs"),
    "cut edge of three nodes": ({"cut_edges": [("a", "b", "c")]},
                                r"cut_edges: \('a', 'b', 'c'\) is not a pair of nodes"),
    "never pair with a float": ({"never_together": [("a", 1.0)]},
                                "never_together: a node is an index or a name, got 1.0"),
    "never pair naming one node": ({"never_together": [("a", "a")]},
                                   "never_together pair names node 'a' twice"),
    "together group a string": ({"together": ["ab"]},
                                "together: 'ab' is not a group of nodes"),
    "together member None": ({"together": [["a", None]]},
                             "together: a node is an index or a name, got None"),
    "value_inputs a list": ({"value_inputs": [("Reshape", 1)]},
                            "value_inputs must map op types to input positions"),
    "value_inputs bare position": ({"value_inputs": {"Reshape": 1}},
                                   "value_inputs of Reshape: expected a tuple of input positions"),
    "negative value-input position": ({"value_inputs": {"Reshape": (-1,)}},
                                      "value input of Reshape: input position -1 is not an "
                                      "index >= 0"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_constraints_fail_when_built(case):
    kwargs, message = BAD[case]
    with pytest.raises(ConstraintError, match=message) as err:
        Constraints(**kwargs)
    assert "\n" not in str(err.value)


def test_default_and_replace_check_too():
    with pytest.raises(ConstraintError, match="min_size must be >= 1"):
        Constraints.default(min_size=0)
    with pytest.raises(ConstraintError, match="max_size 1 is below min_size 3"):
        dataclasses.replace(Constraints(max_size=1), min_size=3, max_size=1)


def test_well_formed_constraints_are_accepted():
    cons = Constraints(cut_edges=[(0, "b")], never_together=[[np.int64(0), "c"]],
                       together=[{"a", "b"}], value_inputs={"Reshape": [1]}, min_size=1,
                       max_size=np.int64(3), max_const_bytes=0)
    assert cons.max_size == 3
    assert Constraints.default().value_inputs["Reshape"] == (1,)


def test_compile_keeps_the_checks_that_need_the_graph():
    g = nx.DiGraph([("a", "b")])
    nx.set_node_attributes(g, {"a": "Conv", "b": "Relu"}, "op")
    graph = from_networkx(g)
    cons = Constraints(never_together=[("a", 1)])  # the same node, by name and by index
    with pytest.raises(ConstraintError, match="never-together pair names node 'b' twice"):
        Constraints(never_together=[("b", 1)]).compile(graph, [OpsProperty(["Conv"])])
    cons.compile(graph, [OpsProperty(["Conv"])])  # 'a' and 'b' are two nodes
    with pytest.raises(ConstraintError, match="no node named 'zzz'"):
        Constraints(cut_edges=[("a", "zzz")]).compile(graph, [OpsProperty(["Conv"])])


def test_built_constraints_cannot_change_after_their_check():
    given = {"cut_edges": [(0, "b")], "together": [["a", "b"]], "never_together": [("a", "c")]}
    values = {"Reshape": [1]}
    cons = Constraints(value_inputs=values, **given)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cons.max_size = 0  # type: ignore[misc]
    with pytest.raises(TypeError):
        cons.value_inputs["Reshape"] = (-1,)  # type: ignore[index]
    given["cut_edges"].append(("b", 0))  # the caller's lists are not the object's
    values["Reshape"].append(-1)
    assert cons.cut_edges == ((0, "b"),) and cons.value_inputs["Reshape"] == (1,)
    assert Constraints(together=[{"c", "a", "b"}]).together == (("a", "b", "c"),)  # one order
    with pytest.raises(TypeError, match="unhashable type: 'Constraints'"):
        hash(cons)
    for name in ("cut_edges", "together", "never_together"):
        assert isinstance(getattr(cons, name), tuple)
        assert all(isinstance(item, tuple) for item in getattr(cons, name))


def test_frozen_constraints_copy_and_pickle_as_equal_objects():
    import copy
    import pickle

    cons = Constraints.default(cut_edges=[(0, "b")], max_size=4)
    for twin in (pickle.loads(pickle.dumps(cons)), copy.deepcopy(cons)):
        assert twin == cons and twin is not cons
        with pytest.raises(TypeError):
            twin.value_inputs["Reshape"] = (2,)  # type: ignore[index]
