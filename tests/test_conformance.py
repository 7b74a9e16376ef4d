"""check_selector: shipped selectors pass; deliberately broken selectors are caught, each by the
rule it breaks and with the node at fault named."""

from __future__ import annotations

import itertools
import re
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clusterkit as ck
from clusterkit.errors import SelectorError
from clusterkit.selectors._registry import SHIPPED
from clusterkit.testing.conformance import (
    CHECKS,
    DEFAULT_MODELS,
    RULES,
    ConformanceError,
    ConformanceReport,
    check_selector,
    default_graphs,
    rule_results,
)
from support.examples import TinyNpu, TinyNpuSelector
from support.models import BUNDLED_MODELS, LIGHT_DIR


@lru_cache(maxsize=None)
def alexnet() -> ck.Graph:
    return ck.load_graph(str(LIGHT_DIR / "light_bvlc_alexnet.onnx"))


def fresh_alexnet() -> ck.Graph:
    """For selectors that mutate: never share a mutated graph with other tests."""
    return ck.load_graph(str(LIGHT_DIR / "light_bvlc_alexnet.onnx"))


# ====================================================================== passing subjects
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_selector_passes(name):
    report = check_selector(ck.get_selector(name))
    assert isinstance(report, ConformanceReport)
    assert report.graphs == [f"light_{m}" for m in DEFAULT_MODELS]
    assert report.calls > report.nodes and report.seeds > 0
    assert "explain" in report.rules and "property" in report.rules


@pytest.mark.parametrize("name", ["xnnpack", "coreml"])
def test_shipped_selectors_pass_on_transformer_and_mobile_graphs(name):
    graphs = [BUNDLED_MODELS / "mobilenet_v2.onnx", BUNDLED_MODELS / "whisper_tiny_encoder.onnx"]
    check_selector(ck.get_selector(name), graphs, max_seeds=16)


def test_selector_in_every_form_passes():
    for subject in (TinyNpu(), TinyNpuSelector(), TinyNpuSelector,
                    lambda: TinyNpuSelector(limit=3), ck.OpsProperty(["Conv", "Relu"]),
                    ck.ContainOpSelector(["Conv", "MaxPool"])):
        check_selector(subject, [alexnet()])


def test_a_table_selector_instance_is_bound_to_each_graph():
    sel = ck.get_selector("nnapi").create_subgraph_selector()
    report = check_selector(sel, [alexnet()])
    assert "explain" in report.rules and "property" not in report.rules


def test_default_graphs_are_light_models_loaded_fresh():
    one, two = default_graphs(), default_graphs()
    assert [g.name for g in one] == [f"light_{m}" for m in DEFAULT_MODELS]
    assert all(a is not b for a, b in zip(one, two))


# ====================================================================== broken subjects
class NonBool(ck.SubgraphSelector):
    def select(self, node):
        return 1 if node.op_type == "Conv" else 0


class MutatesAttrs(ck.SubgraphSelector):
    def select(self, node):
        if node.op_type == "Relu":
            node.attrs["visited"] = 1
        return node.op_type in ("Conv", "Relu")


class ResetForgetsNothing(ck.SubgraphSelector):
    """Takes at most 3 nodes per cluster, but ``reset`` does not reset the count."""

    def __init__(self):
        self.taken = 0

    def select(self, node):
        ok = node.op_type in ("Conv", "Relu", "MaxPool") and self.taken < 3
        self.taken += ok
        return ok

    def reset(self):
        pass


class FilterAddsANode(ck.SubgraphSelector):
    def select(self, node):
        return node.op_type in ("Conv", "Relu")

    def filter(self, candidates):
        return list(candidates) + [ck.Node(-1, "intruder", "Relu")]


_instances = itertools.count()


class NonDeterministic(ck.SubgraphSelector):
    """Answers depend on how many selectors were created before it."""

    def __init__(self):
        self.parity = next(_instances) % 2

    def select(self, node):
        return (node.index + self.parity) % 2 == 0


class Raises(ck.SubgraphSelector):
    def select(self, node):
        if node.op_type == "Gemm":
            raise KeyError("no weights")
        return True


class BadMask(ck.SubgraphSelector):
    def select(self, node):
        return node.op_type == "Conv"

    def supported_mask(self, graph):
        return np.ones(graph.n, dtype=bool)


class ExplainsWrongly(ck.SubgraphProperty):
    def create_subgraph_selector(self):
        return ck.ContainOpSelector(["Conv"])

    def explain(self, node):
        return None  # claims every node is taken


class SharedSelector(ck.SubgraphProperty):
    value_inputs = {"Reshape": (-1,)}

    def __init__(self):
        super().__init__("acc")
        self.sel = ck.ContainOpSelector(["Conv"])

    def create_subgraph_selector(self):
        return self.sel


class RaisesInCreateSubgraphNode(ck.SubgraphProperty):
    def create_subgraph_selector(self):
        return ck.ContainOpSelector(["Conv", "Relu"])

    def create_subgraph_node(self, subgraph):
        raise ValueError("no compiler for this chip")


class RejectsEverySubgraph(RaisesInCreateSubgraphNode):
    def create_subgraph_node(self, subgraph):
        return None


class ReturnsAString(RaisesInCreateSubgraphNode):
    def create_subgraph_node(self, subgraph):
        return "fused"


class ContradictoryLimits(RaisesInCreateSubgraphNode):
    """Limits set on the instance after it was made (the constructor refuses them declared on
    the class)."""

    def __init__(self):
        super().__init__()
        self.min_nodes, self.max_nodes = 5, 3

    def create_subgraph_node(self, subgraph):
        return ck.SubgraphProperty.create_subgraph_node(self, subgraph)


class IgnoredLimit(ck.SubgraphProperty):
    """Declares max_nodes 2: the strategies keep it (the rule passes) unless one forgets it."""

    max_nodes = 2

    def create_subgraph_selector(self):
        return ck.ContainOpSelector(["Conv", "Relu"])


BROKEN = [
    (NonBool(), "bool", "returned int"),
    (MutatesAttrs(), "no-mutation", "attrs changed"),
    (ResetForgetsNothing(), "reset", "after reset"),
    (FilterAddsANode(), "filter-subset", "'intruder'"),
    (NonDeterministic, "deterministic", "fresh selectors"),
    (Raises(), "raises", "KeyError"),
    (BadMask(), "mask", "supported_mask says True"),
    (ExplainsWrongly(), "explain", "but select says False"),
    (SharedSelector(), "property", "same object twice"),
    (RejectsEverySubgraph(), "subgraph-node", "rejected all"),
    (ReturnsAString(), "subgraph-node", "returned str"),
    (ContradictoryLimits(), "limits", "min_nodes 5 is above max_nodes 3"),
]
BROKEN_IDS = ["non-bool", "mutates-attrs", "reset", "filter-adds", "non-deterministic", "raises",
              "mask", "explain", "property", "rejects-every-subgraph", "subgraph-node-str",
              "contradictory-limits"]


@pytest.mark.parametrize("subject,rule,fragment", BROKEN, ids=BROKEN_IDS)
def test_broken_selectors_fail_exactly_their_rule(subject, rule, fragment):
    g = fresh_alexnet()
    with pytest.raises(ConformanceError) as info:
        check_selector(subject, [g])
    err = info.value
    assert err.rules == [rule] or (rule == "property" and "property" in err.rules)
    assert isinstance(err, SelectorError) and isinstance(err, AssertionError)
    text = str(err)
    assert fragment in text and f"[{rule}]" in text
    graph_wide = rule in ("property", "limits") or subject.__class__ is RejectsEverySubgraph
    assert ("light_bvlc_alexnet" in text) == (not graph_wide)


@pytest.mark.parametrize("name, check", CHECKS, ids=[name for name, _ in CHECKS])
def test_each_named_check_runs_alone_on_a_shipped_selector(name, check):
    spec = "xnnpack[max_nodes=8]" if name == "limits" else "xnnpack"  # a limit to check
    report = check(ck.parse_selector(spec), [alexnet()], max_seeds=8)
    assert report.rules == (name,)
    assert check.__name__ == "check_" + name.replace("-", "_")


def test_the_named_checks_are_the_rules_in_order():
    assert tuple(name for name, _ in CHECKS) == RULES


@pytest.mark.parametrize("subject,rule,fragment", BROKEN, ids=BROKEN_IDS)
def test_a_broken_selector_fails_its_rule_check_and_passes_an_unrelated_one(subject, rule,
                                                                             fragment):
    checks = dict(CHECKS)
    with pytest.raises(ConformanceError) as info:
        checks[rule](subject, [fresh_alexnet()])
    assert info.value.rules == [rule]
    assert f"check_{rule.replace('-', '_')}(" in str(info.value) and fragment in str(info.value)
    other = "bool" if rule in ("mask", "deterministic") else "deterministic"
    if rule == "raises":  # a raising call blocks every check that makes it, and is reported
        with pytest.raises(ConformanceError, match=r"\[raises\].*KeyError"):
            checks[other](subject, [fresh_alexnet()])
    else:
        assert checks[other](subject, [fresh_alexnet()]).rules == (other,)


def test_failures_name_the_node_at_fault():
    with pytest.raises(ConformanceError) as info:
        check_selector(MutatesAttrs(), [fresh_alexnet()])
    relus = [n.name for n in alexnet().nodes if n.op_type == "Relu"]
    assert any(f"node {name!r} (Relu)" in info.value.args[0] for name in relus)
    bad = [m for r, _, m in info.value.failures if r == "no-mutation"]
    assert len(bad) == len(relus)  # every mutated node, and only those, is reported


def test_every_failed_rule_is_listed_together():
    class Everything(ResetForgetsNothing):
        def select(self, node):
            return 1 if super().select(node) else 0

        def filter(self, candidates):
            return list(candidates) * 2

    with pytest.raises(ConformanceError) as info:
        check_selector(Everything(), [fresh_alexnet()])
    assert {"bool", "filter-subset"} <= set(info.value.rules)


def test_not_a_selector_is_refused():
    with pytest.raises(SelectorError, match="not a selector"):
        check_selector(42, [alexnet()])


# ====================================================================== property-based
OPS = sorted(set(alexnet().op_types))


@settings(max_examples=15, deadline=None)
@given(st.sets(st.sampled_from(OPS)))
def test_any_op_set_selector_passes(ops):
    check_selector(ck.ContainOpSelector(ops), [alexnet()], max_seeds=8)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 4))
def test_a_count_limited_selector_passes_iff_reset_resets(limit):
    class Limited(ck.SubgraphSelector):
        def __init__(self):
            self.taken = 0

        def select(self, node):
            ok = node.op_type in ("Conv", "Relu", "MaxPool", "LRN") and self.taken < limit
            self.taken += ok
            return ok

    class Good(Limited):
        def reset(self):
            self.taken = 0

    check_selector(Good(), [alexnet()], max_seeds=8)
    with pytest.raises(ConformanceError) as info:
        check_selector(Limited(), [alexnet()], max_seeds=8)
    assert info.value.rules == ["reset"]


# ====================================================================== judged, or n/a
def _status(subject, graphs=None) -> dict[str, str]:
    _, results = rule_results(subject, graphs or [fresh_alexnet()], max_seeds=8)
    return {r.rule: r.status for r in results}


def test_a_raising_create_subgraph_node_fails_with_the_exception():
    with pytest.raises(ConformanceError) as info:
        check_selector(RaisesInCreateSubgraphNode(), [fresh_alexnet()], max_seeds=8)
    assert info.value.rules == ["raises", "subgraph-node"]
    assert "ValueError('no compiler for this chip')" in str(info.value)
    with pytest.raises(ck.SelectorError, match="create_subgraph_node raised ValueError"):
        ck.partition(fresh_alexnet(), [RaisesInCreateSubgraphNode()], strategy="mxnet")


def test_a_select_returning_none_fails_bool_and_leaves_growth_rules_unjudged():
    class NoneSelector(ck.SubgraphSelector):
        def select(self, node):
            return None

    class NoneNpu(ck.SubgraphProperty):
        def create_subgraph_selector(self):
            return NoneSelector()

    status = _status(NoneNpu())
    assert status["bool"] == status["raises"] == "fail"
    assert status["filter-subset"] == status["reset"] == status["subgraph-node"] == "n/a"
    assert status["limits"] == "n/a"


def test_a_selector_that_takes_nothing_passes_only_what_it_was_asked():
    class Nothing(ck.SubgraphSelector):
        def select(self, node):
            return False

    _, results = rule_results(Nothing(), [fresh_alexnet()], max_seeds=8)
    status = {r.rule: r.status for r in results}
    assert status["bool"] == status["deterministic"] == status["raises"] == "pass"
    assert status["filter-subset"] == status["reset"] == "n/a"
    reasons = {r.rule: r.reason for r in results}
    assert reasons["filter-subset"].startswith("never called (")
    assert reasons["property"] == "a selector, not a SubgraphProperty"


def test_declared_limits_are_checked_on_the_strategies_partitions(monkeypatch):
    from clusterkit import api
    from clusterkit.testing.conformance import check_limits

    report = check_limits(IgnoredLimit(), [fresh_alexnet()])
    assert report.rules == ("limits",)  # every strategy keeps max_nodes 2
    real = api.partition

    def ignoring(graph, props, strategy):  # a strategy that forgot the device's limit
        free = IgnoredLimit()
        free.max_nodes = None
        return real(graph, [free], strategy=strategy)

    monkeypatch.setattr(api, "partition", ignoring)
    with pytest.raises(ConformanceError) as info:
        check_limits(IgnoredLimit(), [fresh_alexnet()])
    assert info.value.rules == ["limits"]
    assert re.search(r"strategy cycles: cluster \d+ has \d+ nodes, above max_nodes 2",
                     str(info.value))


def test_a_leaky_selector_fails_reset_and_passes_the_rest():
    status = _status(ResetForgetsNothing())
    assert status["reset"] == "fail"
    assert [r for r, s in status.items() if s == "fail"] == ["reset"]
