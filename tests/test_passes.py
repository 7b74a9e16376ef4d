"""The passes package: one signature per pass, the argument never edited, the old paths kept.

Each partition → partition pass runs on a real model's partitions (two devices, so that the
device choice and the merges have something to do) and must return a valid partition of the
same problem while leaving its argument's clusters as they were; the device choice must return
a problem whose every node keeps at most one device, among those that took it.
"""

from __future__ import annotations

import numpy as np
import pytest

import clusterkit as ck
from clusterkit.passes import POST_PASSES, PRE_PASSES
from tests.support.models import BUNDLED_MODELS

SELECTORS = ["gpu=ops:Conv,Relu,Add", "npu=ops:Conv,MaxPool,GlobalAveragePool"]


@pytest.fixture(scope="module")
def problem() -> ck.Problem:
    return ck.make_problem(BUNDLED_MODELS / "squeezenet1_1.onnx", SELECTORS)


@pytest.mark.parametrize("name", sorted(POST_PASSES))
@pytest.mark.parametrize("strategy", ["singleton", "cycles"])
def test_a_post_pass_returns_a_valid_partition_and_edits_nothing(problem, name, strategy):
    part = ck.run_strategy(problem, strategy)
    before = part.to_json()["clusters"]
    out = POST_PASSES[name](part)
    assert isinstance(out, ck.Partition) and out.problem is part.problem
    out.validate()
    assert part.to_json()["clusters"] == before
    assert out.figures()[0] <= part.figures()[0] or name in ("make_acceptable",
                                                            "reject_subgraphs")


def test_the_device_choice_keeps_one_device_per_node_among_those_that_took_it(problem):
    narrowed = PRE_PASSES["choose_devices"](problem, mode="cost")
    assert isinstance(narrowed, ck.Problem) and narrowed.graph is problem.graph
    assert (narrowed.supported.sum(axis=0) <= 1).all()
    assert not (narrowed.supported & ~problem.supported).any()
    assert not problem.groups  # so every node a device takes keeps one
    assert np.array_equal(narrowed.supported.any(axis=0), problem.supported.any(axis=0))
    assert (narrowed.supported != problem.supported).any()  # some node had two and lost one


def test_reject_subgraphs_old_name_warns_and_is_the_same_object():
    from clusterkit.engines import common
    from clusterkit.passes.reject import reject_subgraphs

    with pytest.warns(DeprecationWarning, match="clusterkit.engines.common.reject_subgraphs is "
                      "deprecated, use clusterkit.passes.reject.reject_subgraphs"):
        assert common.reject_subgraphs is reject_subgraphs
