"""The package's layering, read from the source: a module imports only its own layer or lower.

Every ``import`` / ``from ... import`` in every module counts, including imports inside functions
(a lazy import is still a dependency); imports under ``if TYPE_CHECKING:`` are annotations only and
do not count. The layers follow the data flow graph → constraints → engine → partition → fuse →
run, with readers low and writers and reports high.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "clusterkit"

#: (module prefix, layer); the longest matching prefix decides
LAYERS: list[tuple[str, float]] = [
    ("clusterkit.errors", 0), ("clusterkit.modes", 0), ("clusterkit.registry", 0), ("clusterkit.io.files", 0),
    ("clusterkit.io.partition_json", 0), ("clusterkit.io.json_text", 0),
    ("clusterkit.graph", 1),
    ("clusterkit.io.onnx", 2), ("clusterkit.io.networkx", 2), ("clusterkit.io.loader", 2),
    ("clusterkit.io.optimize", 2), ("clusterkit.io.ep_query", 2), ("clusterkit.io.ep_recorder", 2),
    ("clusterkit.io.node_link", 2),
    ("clusterkit.io.placement_instance", 2),
    ("clusterkit.selection", 3),
    ("clusterkit.constraints", 4), ("clusterkit.selectors", 4),
    ("clusterkit.reasons", 4),
    ("clusterkit.result", 5),
    ("clusterkit.passes", 5.5),
    ("clusterkit.engines", 6),
    ("clusterkit.api", 6.5),
    ("clusterkit.fusion", 7),
    ("clusterkit.runtime", 8),
    ("clusterkit.io", 9),
    ("clusterkit.analysis", 10),
    ("clusterkit.testing", 11),
    ("clusterkit.torch", 12),
    ("clusterkit.cli", 13),
    ("clusterkit.__main__", 14), ("clusterkit", 14),
]


def layer_of(module: str) -> float:
    best = max((p for p, _ in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return dict(LAYERS)[best]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every clusterkit import in ``path`` (or in ``source`` read
    as if it were that file)."""
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    skip = _type_checking_lines(tree)
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from clusterkit.graph import algorithms`` depends on the submodule
            found += [(node.lineno, f"{target}.{a.name}") if _is_module(f"{target}.{a.name}")
                      else (node.lineno, target) for a in node.names]
    return [(line, m) for line, m in found if m == "clusterkit" or m.startswith("clusterkit.")]


def _is_module(name: str) -> bool:
    if name == "clusterkit.selectors" or name.startswith("clusterkit.selectors."):
        name = name.replace("clusterkit.selectors", "selectors", 1)
    rel = Path(*name.split("."))
    return (REPO / rel).with_suffix(".py").exists() or (REPO / rel / "__init__.py").exists()


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_imports_a_higher_layer(path):
    mod = module_name(path)
    own = layer_of(mod)
    upward = sorted({f"line {line}: {target} (layer {layer_of(target)})"
                     for line, target in imports_of(path) if layer_of(target) > own})
    assert not upward, f"{mod} (layer {own}) imports higher layers: " + "; ".join(upward)


def test_at_most_eight_modules_at_the_top_of_the_package():
    top = sorted(p.name for p in PACKAGE.glob("*.py")
                 if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= 8, top


def test_the_checker_sees_a_backward_import():
    """The checker itself: a lazy import of a higher layer inside a function is found, and one
    under ``if TYPE_CHECKING:`` is not."""
    as_path = PACKAGE / "graph" / "core.py"
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from clusterkit.result import Partition\n"
              "def f():\n    from clusterkit.api import partition\n")
    assert [m for _, m in imports_of(as_path, source)] == ["clusterkit.api"]
    assert layer_of("clusterkit.api") > layer_of(module_name(as_path))
