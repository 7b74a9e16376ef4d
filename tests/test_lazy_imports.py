"""``import clusterkit`` loads no heavy dependency: each is imported where it is used.

A behaviour check, not a timing (the time is measured by the bench, ``bench_command.py``): a
fresh interpreter imports clusterkit and reports which top-level modules it has loaded.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

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


def _type_checking_imports(source: str) -> dict[str, str]:
    """name -> module of the imports under ``if TYPE_CHECKING:`` of a module's source."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom), ast.unparse(imp)
                found.update({a.asname or a.name: imp.module or "" for a in imp.names})
    return found


def test_the_type_checking_block_lists_exactly_the_lazy_names():
    """The lazy table is the one list of the lazy names; the ``TYPE_CHECKING`` block (for type
    checkers, not run) cannot be made from it, so it is read: each name from its lazy module."""
    import clusterkit

    source = Path(clusterkit.__file__).read_text()
    assert _type_checking_imports(source) == clusterkit._LAZY


def test_the_block_reader_sees_a_wrong_module():
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from clusterkit.fusion import fuse\n    from a.b import c as d\n")
    assert _type_checking_imports(source) == {"fuse": "clusterkit.fusion", "d": "a.b"}


@pytest.mark.parametrize("name", ["load_onnx", "load_graph", "from_networkx", "partition",
                                  "fuse", "export_fused", "profile_model"])
def test_public_names_stay_reachable(name):
    import clusterkit

    assert callable(getattr(clusterkit, name))
    assert name in clusterkit.__all__


def test_the_front_door_gives_the_lazy_objects_themselves():
    import importlib

    import clusterkit

    assert len(clusterkit._LAZY) > 20
    for name, module in clusterkit._LAZY.items():
        assert getattr(clusterkit, name) is getattr(importlib.import_module(module), name)
        assert name in dir(clusterkit) and name in clusterkit.__all__


def test_the_examples_use_the_front_door():
    import clusterkit

    examples = Path(__file__).resolve().parents[1] / "examples"
    for path in sorted(examples.glob("*.py")):
        text = path.read_text()
        for module in set(clusterkit._LAZY.values()):
            assert f"from {module} import" not in text, (path.name, module)
