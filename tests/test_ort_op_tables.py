"""The shipped nnapi and coreml selectors' op tables against the tables onnxruntime ships in its
wheel (``onnxruntime/tools/mobile_helpers/*_supported_ops.md``).

An op the selector can take that the wheel's table does not list, or the reverse, must be listed
in the selector's data (``ort_table_differences``: op -> the documented reason, citing the
upstream file): the difference is asserted to be exactly that map. The wheel's tables are read
here with a parser of their own; the selector side is the property's ``ops`` and its answers on
every bundled model."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path

import onnx
import onnxruntime
import pytest

import clusterkit as ck
from clusterkit.selectors import coreml, nnapi
from support.models import ALL_MODELS, model_id

HELPERS = Path(onnxruntime.__file__).parent / "tools" / "mobile_helpers"
#: (case id, selector factory, settings, the wheel's table, data file, format key or None)
CASES = [
    ("nnapi", nnapi.make_property, {}, "nnapi_supported_ops.md", "nnapi_ep.json", None),
    ("coreml-MLProgram", coreml.make_property, {"model_format": "MLProgram"},
     "coreml_supported_mlprogram_ops.md", "coreml_ep.json", "MLProgram"),
    ("coreml-NeuralNetwork", coreml.make_property, {"model_format": "NeuralNetwork"},
     "coreml_supported_neuralnetwork_ops.md", "coreml_ep.json", "NeuralNetwork"),
]
IDS = [c[0] for c in CASES]
ROW = re.compile(r"^\|([A-Za-z0-9_.]+):([A-Za-z0-9_]+)\|")


@lru_cache(maxsize=None)
def wheel_table(md: str) -> frozenset[str]:
    """Op keys of one of the wheel's tables: ``Op`` for ai.onnx, ``domain:Op`` otherwise."""
    keys = set()
    for line in (HELPERS / md).read_text(encoding="utf-8").splitlines():
        m = ROW.match(line.strip())
        if m:
            domain, op = m.groups()
            keys.add(op if domain == "ai.onnx" else f"{domain}:{op}")
    assert len(keys) > 20, f"{md}: no operator rows found"
    return frozenset(keys)


def documented(data: str, fmt: str | None) -> dict[str, str]:
    """The selector data's ``ort_table_differences`` (for one CoreML format)."""
    raw = json.loads(resources.files("clusterkit.selectors").joinpath("data", data).read_text())
    diffs = raw["ort_table_differences"]
    return diffs[fmt] if fmt else diffs


def node_key(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"


@lru_cache(maxsize=None)
def model_op_keys() -> frozenset[str]:
    """Op keys of every node of every bundled model."""
    return frozenset(node_key(n) for p in ALL_MODELS
                     for n in onnx.load(str(p), load_external_data=False).graph.node)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_wheel_ships_the_tables(case):
    assert onnxruntime.__version__ and wheel_table(case[3])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_table_differences_are_exactly_the_documented_ones(case):
    _, make, settings, md, data, fmt = case
    ops = make(**settings).ops
    diff = set(ops) ^ wheel_table(md)
    docs = documented(data, fmt)
    assert diff == set(docs), (f"undocumented: {sorted(diff - set(docs))}, "
                               f"documented but equal: {sorted(set(docs) - diff)}")
    for op, reason in docs.items():
        assert reason.strip() and ("." in reason), op  # names the upstream file or table


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_over_the_bundled_models_the_op_sets_agree_but_for_documented_ops(case):
    _, make, settings, md, data, fmt = case
    seen = model_op_keys()
    takes = set(make(**settings).ops) & seen
    listed = set(wheel_table(md)) & seen
    assert takes ^ listed == set(documented(data, fmt)) & seen


@pytest.mark.parametrize("path", ALL_MODELS, ids=model_id)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_op_taken_on_a_real_model_is_in_the_wheel_table_or_documented(case, path):
    _, make, settings, md, data, fmt = case
    g = ck.load_graph(str(path))
    prop = make(**settings)
    mask = prop.query(g)
    taken = {prop.key_of(g.nodes[v]) for v in mask.nonzero()[0].tolist()}
    allowed = set(wheel_table(md)) | set(documented(data, fmt))
    assert taken <= allowed, sorted(taken - allowed)
