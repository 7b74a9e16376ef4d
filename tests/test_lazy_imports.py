"""``import clusterkit`` loads no heavy dependency: each is imported where it is used.

A behaviour check, not a timing (the time is measured by the bench, ``bench_command.py``): a
fresh interpreter imports clusterkit and reports which top-level modules it has loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: packages that cost tenths of a second to import, needed only by some commands
HEAVY = ("ortools", "onnxruntime", "torch", "networkx", "scipy", "onnx", "rich", "pandas",
         "dask", "matplotlib")


def _loaded_after(code: str) -> set[str]:
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    return {name.split(".")[0] for name in json.loads(out.splitlines()[-1])}


def test_import_clusterkit_loads_no_heavy_dependency():
    loaded = _loaded_after("import clusterkit")
    assert "numpy" in loaded  # the check sees third-party modules at all
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_reading_node_link_json_needs_no_networkx(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"nodes": [{"id": 0, "op": "Relu"}, {"id": 1, "op": "Add"}],
                                "edges": [{"source": 0, "target": 1, "bytes": 4}]}))
    loaded = _loaded_after(f"import clusterkit\ng = clusterkit.load_graph({str(path)!r})\n"
                           "assert g.n == 2")
    assert "networkx" not in loaded


#: the pipeline after partitioning, at the front door and where each is defined
PIPELINE = {"fuse": "clusterkit.fusion", "flatten": "clusterkit.fusion",
            "FusedGraph": "clusterkit.fusion", "Executor": "clusterkit.runtime.executor",
            "run_model": "clusterkit.runtime.executor",
            "random_inputs": "clusterkit.runtime.executor",
            "compare_outputs": "clusterkit.runtime.executor",
            "OnnxRuntimeBackend": "clusterkit.runtime.backends",
            "get_backend": "clusterkit.runtime.backends",
            "register_backend": "clusterkit.runtime.backends",
            "export_fused": "clusterkit.export", "export_partition": "clusterkit.export",
            "compare": "clusterkit.analysis.compare", "format_table": "clusterkit.analysis.compare"}


@pytest.mark.parametrize("name", ["load_onnx", "load_graph", "graph_from_node_link",
                                  "from_networkx", "partition", *PIPELINE])
def test_public_names_stay_reachable(name):
    import clusterkit

    assert callable(getattr(clusterkit, name))
    assert name in clusterkit.__all__


@pytest.mark.parametrize("name", sorted(PIPELINE))
def test_the_front_door_gives_the_pipeline_objects_themselves(name):
    import importlib

    import clusterkit

    assert getattr(clusterkit, name) is getattr(importlib.import_module(PIPELINE[name]), name)
    assert name in dir(clusterkit)


def test_the_examples_use_the_front_door():
    from pathlib import Path

    examples = Path(__file__).resolve().parents[1] / "examples"
    for path in sorted(examples.glob("*.py")):
        text = path.read_text()
        for module in set(PIPELINE.values()):
            assert f"from {module} import" not in text, (path.name, module)
