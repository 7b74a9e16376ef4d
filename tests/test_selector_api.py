"""The selector protocol, properties, specs and the registry."""

from __future__ import annotations

import textwrap

import networkx as nx
import pytest

from clusterkit import (
    Constraints,
    ContainOpSelector,
    OpsProperty,
    SelectorError,
    SubgraphProperty,
    SubgraphSelector,
    from_networkx,
    parse_selector,
    parse_selectors,
    partition,
)
from clusterkit.selection.protocol import call_filter


def _chain():
    g = nx.DiGraph()
    for v, op in enumerate(["Conv", "Relu", "Conv", "Softmax"]):
        g.add_node(f"n{v}", op=op)
    for v in range(3):
        g.add_edge(f"n{v}", f"n{v + 1}", bytes=4)
    return from_networkx(g)


class _Prop(SubgraphProperty):
    def __init__(self, selector_cls, device="acc"):
        super().__init__(device)
        self.selector_cls = selector_cls

    def create_subgraph_selector(self):
        return self.selector_cls()


class Raising(SubgraphSelector):
    def select(self, node):
        if node.op_type == "Relu":
            raise RuntimeError("boom")
        return True


class NonBool(SubgraphSelector):
    def select(self, node):
        return "yes"


class NoConvToRelu(SubgraphSelector):
    """Takes Conv and Relu but refuses to follow Conv -> Relu edges."""

    def select(self, node):
        return node.op_type in ("Conv", "Relu")

    def select_output(self, node, new_node):
        return not (node.op_type == "Conv" and new_node.op_type == "Relu")

    def select_input(self, node, new_node):
        return not (node.op_type == "Relu" and new_node.op_type == "Conv")


def test_contain_op_selector():
    g = _chain()
    sel = ContainOpSelector(["Conv"])
    assert [sel.select(nd) for nd in g.nodes] == [True, False, True, False]
    assert sel.supported_mask(g).tolist() == [True, False, True, False]
    assert not sel.edge_sensitive


def test_selector_that_raises_names_selector_and_node():
    with pytest.raises(SelectorError, match="Raising.select raised .*boom.*'n1' \\(Relu\\)"):
        Constraints().compile(_chain(), [_Prop(Raising)])


def test_selector_returning_non_bool_names_selector_and_node():
    with pytest.raises(SelectorError, match="NonBool.select returned str 'yes' for node 'n0'"):
        Constraints().compile(_chain(), [_Prop(NonBool)])


def test_edge_answers_are_compiled_per_edge():
    g = _chain()
    p = Constraints().compile(g, [_Prop(NoConvToRelu)])
    assert p.supported[0].tolist() == [True, True, True, False]
    # n0->n1 is Conv->Relu (refused), n1->n2 is Relu->Conv (followed)
    e01, e12 = g.edge_index(0, 1), g.edge_index(1, 2)
    assert not p.edge_ok[0, e01] and p.edge_ok[0, e12]
    part = partition(g, [_Prop(NoConvToRelu)], strategy="singleton")
    part.validate()


def test_filter_must_return_a_subset():
    g = _chain()

    class Adds(SubgraphSelector):
        def select(self, node):
            return True

        def filter(self, candidates):
            return candidates + [g.nodes[3]]

    with pytest.raises(SelectorError, match="Adds.filter returned node 'n3'"):
        call_filter(Adds(), [g.nodes[0], g.nodes[1]])


def test_specs():
    p = parse_selector("ops:Conv,Relu")
    assert isinstance(p, OpsProperty) and p.device == "acc"
    assert p.op_types == {"Conv", "Relu"}
    p = parse_selector("npu=ops:MatMul")
    assert p.device == "npu" and p.op_types == {"MatMul"}
    with pytest.raises(SelectorError, match="unknown selector 'nosuch'"):
        parse_selector("nosuch")
    with pytest.raises(SelectorError, match="lists no op types"):
        parse_selector("ops:")
    with pytest.raises(SelectorError, match="both use device 'acc'"):
        parse_selectors(["ops:Conv", "ops:Relu"])


def test_spec_from_python_file(tmp_path):
    f = tmp_path / "my_chip.py"
    f.write_text(textwrap.dedent("""
        from clusterkit import SubgraphProperty, ContainOpSelector

        class MyChip(SubgraphProperty):
            def __init__(self):
                super().__init__("mychip")
            def create_subgraph_selector(self):
                return ContainOpSelector({"Conv"})
    """))
    prop = parse_selector(str(f))
    assert prop.device == "mychip"
    prop2 = parse_selector(f"other={f}")
    assert prop2.device == "other"
    part = partition(_chain(), [str(f)], strategy="singleton")
    assert {c.device for c in part.clusters} == {"mychip", "cpu"}
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('nope')\n")
    with pytest.raises(SelectorError, match="failed to import.*nope"):
        parse_selector(str(broken))
    with pytest.raises(SelectorError, match="does not exist"):
        parse_selector(str(tmp_path / "absent.py"))


def test_a_property_whose_selector_factory_fails_is_named():
    class Raises(SubgraphProperty):
        def create_subgraph_selector(self):
            raise KeyError("table")

    class ReturnsNone(SubgraphProperty):
        def create_subgraph_selector(self):
            return None

    with pytest.raises(SelectorError, match=r"Raises \(acc\)\.create_subgraph_selector raised "
                                            r"KeyError\('table'\)"):
        Constraints().compile(_chain(), [Raises()])
    with pytest.raises(SelectorError, match="ReturnsNone .*returned NoneType, which has no select"):
        Constraints().compile(_chain(), [ReturnsNone()])
