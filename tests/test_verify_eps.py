"""The shipped EP selectors against the real execution providers (``clusterkit[qnn]``,
``clusterkit[openvino]``, installed by ``make test``), node by node, on every bundled and light
model; ``clusterkit verify``; and ``ep:`` selectors.

Each model is optimized once and both selectors are checked on that graph (the EP sessions stop
after partitioning, ``compile=False``: compiling every model for HTP alone takes minutes, and
what is compared is the EP's answer, recorded before compilation). A disagreement is accepted
only where the selector's data lists it (``verified.ep_faults``: the EP's own fault;
``verified.grouping_differs``: the same nodes, grouped otherwise), and then the listed
situation must be what is seen.
"""

from __future__ import annotations

import json
from functools import lru_cache

import onnx
import pytest

pytest.importorskip("onnxruntime_qnn", reason="needs clusterkit[qnn] (make test installs it)")
pytest.importorskip("onnxruntime_ep_openvino",
                    reason="needs clusterkit[openvino] (make test installs it)")

from clusterkit.analysis.verify import ep_of_selector, optimized_graph, verify_graph  # noqa: E402
from clusterkit.cli import main  # noqa: E402
from clusterkit.errors import BackendError  # noqa: E402
from clusterkit.io import ep_query  # noqa: E402
from clusterkit.io.optimize import optimize_model  # noqa: E402
from clusterkit.selection.specs import parse_selector  # noqa: E402
from support.models import BUNDLED_MODEL_PATHS, LIGHT_MODELS, model_id  # noqa: E402

MODELS = BUNDLED_MODEL_PATHS + LIGHT_MODELS
SELECTORS = ("qnn", "openvino_npu")


@lru_cache(maxsize=1)
def optimized(path):
    """The model's basic-optimized graph, kept for the next selector's check."""
    return optimized_graph(path)


def verified_block(selector: str) -> dict:
    return ep_of_selector(parse_selector(selector))[2]


@pytest.mark.parametrize("selector", SELECTORS)
@pytest.mark.parametrize("path", MODELS, ids=model_id)
def test_selector_agrees_with_the_real_ep(path, selector):
    proto, graph = optimized(path)
    r = verify_graph(proto, graph, selector, compile=False)
    block = verified_block(selector)
    assert r.ep_version == block["version"]
    fault = block["ep_faults"].get(graph.name)
    if fault:  # listed as the EP's fault: onnxruntime refused the EP's whole answer
        assert r.refused and len(r.refused) == sum(map(len, r.ep_partitions)), fault
        return
    diffs = [(d.name, d.op, d.reason) for d in r.only_ep + r.only_selector]
    assert diffs == [], f"{graph.name}: {len(diffs)} nodes differ, first {diffs[:3]}"
    assert not r.refused and r.ep_partitions, r.notes
    if graph.name in block["grouping_differs"]:
        assert len(r.partitions) == len(r.ep_partitions) and not r.same_partitions
    else:
        assert r.same_partitions, r.notes


def test_every_listed_disagreement_names_a_model_that_is_checked():
    names = {p.stem for p in MODELS}
    for selector in SELECTORS:
        block = verified_block(selector)
        assert set(block["ep_faults"]) | set(block["grouping_differs"]) <= names


def test_the_answer_is_recorded_when_the_ep_then_fails_to_compile():
    """The OpenVINO NPU has no compiler here: the session fails after the EP answered."""
    proto, graph = optimized_graph(BUNDLED_MODEL_PATHS[0].parent / "resnet18.onnx")
    answer = ep_query.query_ep(proto, "OpenVINOExecutionProvider", compile=True)
    assert answer.error and answer.assigned is None
    assert sorted(answer.nodes) == sorted(n.name for n in graph.nodes if not n.is_folded)
    assert answer.refused() == []


def test_onnxruntime_refusing_the_answer_is_reported():
    path = BUNDLED_MODEL_PATHS[0].parent / "fasterrcnn_mobilenet_v3_large_320_fpn.onnx"
    proto, graph = optimized(path)
    r = verify_graph(proto, graph, "qnn", compile=False)
    assert r.refused and any("onnxruntime refused" in n for n in r.notes)
