"""The package's layering, read from the source: a module imports only its own layer or lower.

Every ``import`` / ``from ... import`` in every module counts, including imports inside functions
(a lazy import is still a dependency); imports under ``if TYPE_CHECKING:`` are annotations only and
do not count. The layers follow the data flow graph → constraints → engine → partition → fuse →
run, with readers low and writers and reports high. ``selectors/`` is scanned too, as the
``clusterkit.selectors`` it is installed as.

No two modules import each other, directly or around a loop: for cycles *every* import counts,
those under ``if TYPE_CHECKING:`` included (an annotation is still a dependency a reader follows).
There are none (:data:`KNOWN_CYCLES` is empty).

The deprecated alias modules (:data:`ALIASES`) have no layer: each only re-exports names of the
module that replaced it, and no module of the package imports one.
"""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

from clusterkit._deprecated import REMOVED_IN

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "clusterkit"
SELECTORS = REPO / "selectors"

#: (module prefix, layer); the longest matching prefix decides
LAYERS: list[tuple[str, float]] = [
    ("clusterkit.errors", 0), ("clusterkit._deprecated", 0), ("clusterkit.modes", 0),
    ("clusterkit.registry", 0),
    ("clusterkit.graph", 1),
    ("clusterkit.io", 2),  # readers (ONNX, node-link, instances, EP queries), atomic files
    ("clusterkit.selection", 3),
    ("clusterkit.constraints", 4), ("clusterkit.selectors", 4),
    ("clusterkit.result.reasons", 4),  # the fallback vocabulary the affinity step records
    ("clusterkit.result", 5),  # the partition, its checks, figures, reports and formats
    ("clusterkit.passes", 5.5),
    ("clusterkit.engines", 6),
    ("clusterkit.api", 6.5),
    ("clusterkit.fusion", 7),
    ("clusterkit.export", 7.5),  # the fused model as ONNX
    ("clusterkit.runtime", 8),
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
    if parts[0] == "selectors":
        parts[0] = "clusterkit.selectors"
    return ".".join(parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(path: Path, source: str | None = None, annotations: bool = False
               ) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every clusterkit import in ``path`` (or in ``source`` read
    as if it were that file); those under ``if TYPE_CHECKING:`` only with ``annotations``."""
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    skip = set() if annotations else _type_checking_lines(tree)
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


MODULES = sorted(PACKAGE.rglob("*.py")) + sorted(SELECTORS.rglob("*.py"))

#: Import cycles known today, each as its set of modules; any other cycle fails the test, and so
#: does an entry here that is no longer a cycle.
KNOWN_CYCLES: list[frozenset[str]] = []

#: deprecated alias modules (kept for one release) → where their names live now
ALIASES: dict[str, tuple[str, ...]] = {
    "clusterkit.reasons": ("clusterkit.result.reasons", "clusterkit.result.report"),
    "clusterkit.io.partition_json": ("clusterkit.result.json_format",),
    "clusterkit.io.plan": ("clusterkit.result.plan",),
    "clusterkit.io.dot": ("clusterkit.result.dot",),
    "clusterkit.io.export": ("clusterkit.export.onnx_model",),
    "clusterkit.engines.acceptable": ("clusterkit.passes.acceptable",),
    "clusterkit.engines.coalesce": ("clusterkit.passes.coalesce",),
    "clusterkit.engines.devices": ("clusterkit.passes.devices",),
    "clusterkit.engines.horizontal": ("clusterkit.passes.horizontal",),
    "clusterkit.engines.refine": ("clusterkit.passes.refine",),
    "clusterkit.engines.units": ("clusterkit.engines.super_nodes",),
}


#: the modules that have a layer: all but the aliases
LAYERED = [p for p in MODULES if module_name(p) not in ALIASES]


@pytest.mark.parametrize("path", LAYERED, ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_imports_a_higher_layer(path):
    mod = module_name(path)
    own = layer_of(mod)
    upward = sorted({f"line {line}: {target} (layer {layer_of(target)})"
                     for line, target in imports_of(path) if layer_of(target) > own})
    assert not upward, f"{mod} (layer {own}) imports higher layers: " + "; ".join(upward)


def test_io_is_one_floor():
    """Every module of ``clusterkit.io`` has the same layer: readers and files, no writer that
    needs a higher layer."""
    io = [module_name(p) for p in LAYERED if module_name(p).startswith("clusterkit.io.")]
    assert len(io) > 5 and {layer_of(m) for m in io} == {layer_of("clusterkit.io")}
    assert not [p for p, _ in LAYERS if p.startswith("clusterkit.io.")]


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


def import_graph(paths: list[Path]) -> dict[str, dict[str, int]]:
    """Module → {imported module: first line}, over ``paths``, every import counted (annotations
    and function-level imports included); only imports of the scanned modules."""
    names = {module_name(p): p for p in paths}
    graph: dict[str, dict[str, int]] = {}
    for mod, path in names.items():
        edges = graph.setdefault(mod, {})
        for line, target in imports_of(path, annotations=True):
            if target in names and target != mod:
                edges.setdefault(target, line)
    return graph


def cycles_of(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        u = stack.pop()
                        on_stack.discard(u)
                        comp.add(u)
                        if u == v:
                            break
                    if len(comp) > 1:
                        found.append(frozenset(comp))
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on_stack.add(w)
                work.append((w, iter(sorted(graph.get(w, {})))))
            elif w in on_stack:
                low[v] = min(low[v], index[w])
    return found


def _describe(cycle: frozenset[str], graph: dict[str, dict[str, int]]) -> str:
    edges = [f"{a} -> {b} (line {graph[a][b]})" for a in sorted(cycle)
             for b in sorted(graph[a]) if b in cycle]
    return "{" + ", ".join(sorted(cycle)) + "}: " + "; ".join(edges)


def test_no_import_cycles_but_the_known_ones():
    graph = import_graph(MODULES)
    found = cycles_of(graph)
    new = [_describe(c, graph) for c in found if c not in KNOWN_CYCLES]
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert not new, "import cycles:\n" + "\n".join(new)
    assert not gone, f"known cycles that are gone (drop them from KNOWN_CYCLES): {gone}"


def test_the_cycle_checker_sees_annotations_and_lazy_imports():
    """An import under ``if TYPE_CHECKING:`` and one inside a function both close a cycle."""
    as_path = PACKAGE / "graph" / "core.py"
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from clusterkit.result import Partition\n"
              "def f():\n    from clusterkit.api import partition\n")
    assert [m for _, m in imports_of(as_path, source, annotations=True)] == [
        "clusterkit.result", "clusterkit.api"]
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}, "e": {"e": 5}}
    assert cycles_of(graph) == [frozenset("abc")]


def _alias_path(mod: str) -> Path:
    return (REPO / Path(*mod.split("."))).with_suffix(".py")


def _shim_homes(path: Path) -> tuple[str, ...] | None:
    """The new homes a module is a shim of: its body is a docstring, the import of
    ``moved_module`` and ``__getattr__ = moved_module(__name__, *homes)``; else None."""
    body = ast.parse(path.read_text()).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if [ast.unparse(n) for n in body[:1]] != ["from clusterkit._deprecated import moved_module"]:
        return None
    last = body[1:]
    if len(last) != 1 or not isinstance(last[0], ast.Assign) \
            or ast.unparse(last[0].targets[0]) != "__getattr__":
        return None
    call = last[0].value
    assert isinstance(call, ast.Call) and ast.unparse(call.func) == "moved_module"
    return tuple(ast.literal_eval(a) for a in call.args[1:])


def _silent(path: Path) -> bool:
    """Whether a module only re-exports: nothing but a docstring, imports and ``__all__``."""
    body = ast.parse(path.read_text()).body
    kinds = {type(n) for n in body if not (isinstance(n, ast.Expr)
                                           and isinstance(n.value, ast.Constant))}
    named = [ast.unparse(t) for n in body if isinstance(n, ast.Assign) for t in n.targets]
    return bool(kinds) and kinds <= {ast.ImportFrom, ast.Import, ast.Assign} \
        and set(named) <= {"__all__"} and path.name != "__init__.py"


def test_every_shim_is_an_alias_and_none_is_silent():
    """Every moved module is a shim made by ``_deprecated.moved_module`` and listed in
    :data:`ALIASES` with its homes; no module re-exports another's names without a warning."""
    shims = {module_name(p): _shim_homes(p) for p in MODULES if _shim_homes(p) is not None}
    assert shims == ALIASES
    assert not [module_name(p) for p in sorted(PACKAGE.rglob("*.py")) if _silent(p)]


def test_the_shim_finder_tells_a_silent_re_export(tmp_path):
    silent = tmp_path / "old.py"
    silent.write_text('"""Old home."""\n\nfrom clusterkit.passes.refine import refine\n\n'
                      '__all__ = ["refine"]\n')
    assert _silent(silent) and _shim_homes(silent) is None
    shim = tmp_path / "shim.py"
    shim.write_text('"""Old."""\n\nfrom clusterkit._deprecated import moved_module\n\n'
                    '__getattr__ = moved_module(__name__, "clusterkit.passes.refine")\n')
    assert _shim_homes(shim) == ("clusterkit.passes.refine",) and not _silent(shim)


def _public(home: str) -> list[str]:
    namespace = vars(importlib.import_module(home))
    return list(namespace.get("__all__", [k for k in namespace if not k.startswith("_")]))


@pytest.mark.parametrize("mod", sorted(ALIASES))
def test_an_alias_warns_with_the_one_wording_and_gives_the_new_objects(mod):
    """Each public name of each home, read from the alias: the very object, and one
    ``DeprecationWarning`` in the one wording, pointing at the reader."""
    alias = importlib.import_module(mod)
    home_of: dict[str, str] = {}  # each public name of the homes -> the first home giving it
    for home in ALIASES[mod]:
        for name in _public(home):
            home_of.setdefault(name, home)
    for name, home in home_of.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = getattr(alias, name)
        assert got is getattr(importlib.import_module(home), name), name
        assert [str(w.message) for w in caught] == [
            f"{mod}.{name} is deprecated, use {home}.{name} ({mod}.{name} is removed in "
            f"clusterkit {REMOVED_IN})"], name
        assert caught[0].filename == __file__ and caught[0].category is DeprecationWarning
    checked = len(home_of)
    assert checked
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        name = _public(ALIASES[mod][0])[0]
        with pytest.raises(DeprecationWarning):
            exec(f"from {mod} import {name}", {})
    with pytest.raises(AttributeError, match="no_such_name"):
        alias.no_such_name  # noqa: B018


def test_nothing_imports_an_alias():
    """Neither the package nor its tests import an alias (so the aliases may warn)."""
    scanned = MODULES + sorted((REPO / "tests").rglob("*.py"))
    users = sorted(f"{module_name(p)} -> {target}" for p in scanned
                   for _, target in imports_of(p, annotations=True) if target in ALIASES)
    assert not users
