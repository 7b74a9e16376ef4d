"""The top-level selectors/ folder never shadows the standard library's selectors module, and
the shipped selectors load from an editable install and from a built wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from support.models import REPO

STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()


def _run(args, cwd, **kw):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, **kw)


def test_stdlib_selectors_wins_at_repo_root():
    code = ("import asyncio, subprocess, selectors; print(selectors.__file__); "
            "print(selectors.DefaultSelector.__name__)")
    out = _run([sys.executable, "-c", code], cwd=REPO)
    assert out.returncode == 0, out.stderr
    path, cls = out.stdout.split()
    assert Path(path).resolve() == STDLIB / "selectors.py"
    assert cls.endswith("Selector")


def test_pytest_and_venv_start_at_repo_root(tmp_path):
    out = _run([sys.executable, "-m", "pytest", "--version"], cwd=REPO)
    assert out.returncode == 0, out.stderr
    out = _run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], cwd=REPO)
    assert out.returncode == 0, out.stderr


def test_shipped_selectors_load_from_editable_install(tmp_path):
    code = ("import clusterkit.selectors as s, selectors as std; print(s.__file__); "
            "print(std.__file__)")
    out = _run([sys.executable, "-c", code], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ours, std = out.stdout.split()
    assert Path(ours).resolve() == REPO / "selectors" / "__init__.py"
    assert Path(std).resolve() == STDLIB / "selectors.py"


def _clean_source(dest: Path) -> Path:
    """A copy of the source tree without build output, virtual environments or caches, so that
    a stale ``build/`` folder can never slip a deleted module into the wheel."""
    skip = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                  ".hypothesis", "bench", "reports", "data")
    shutil.copytree(REPO, dest, ignore=skip)
    shutil.copytree(REPO / "selectors" / "data", dest / "selectors" / "data")
    return dest


def test_shipped_selectors_load_from_a_built_wheel(tmp_path):
    src = _clean_source(tmp_path / "src")
    out = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                "-q", "-w", str(tmp_path / "dist"), str(src)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    wheel = next((tmp_path / "dist").glob("clusterkit-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "clusterkit/selectors/__init__.py" in names
    assert "clusterkit/io/ep_recorder.c" in names  # built at first use by clusterkit verify
    assert not any(n.startswith("selectors/") for n in names)
    _check_typed_licensed_versioned(wheel, names)
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    modules = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "clusterkit").rglob("*.py"))
    assert set(modules) <= set(names), set(modules) - set(names)
    shipped = sorted(p.stem for p in (REPO / "selectors").glob("[a-z]*.py"))
    code = ("import clusterkit, clusterkit.selectors as s, selectors as std, importlib; "
            f"[importlib.import_module('clusterkit.selectors.' + m).make_property() "
            f"for m in {shipped!r}]; "
            "print(clusterkit.__file__); print(s.__file__); print(std.__file__)")
    # ``-c`` puts the working directory first on the path: the unpacked wheel shadows the
    # editable install; -E -s ignore PYTHONPATH and the user site
    env_out = _run([sys.executable, "-E", "-s", "-c", code], cwd=target)
    assert env_out.returncode == 0, env_out.stderr
    ck, ours, std = env_out.stdout.split()
    assert Path(ck).resolve().is_relative_to(target.resolve())
    assert Path(ours).resolve().is_relative_to(target.resolve())
    assert Path(std).resolve() == STDLIB / "selectors.py"


def _check_typed_licensed_versioned(wheel: Path, names: list[str]) -> None:
    """The wheel ships ``py.typed`` (PEP 561), the Apache-2.0 LICENSE, and the version stated
    once, in ``clusterkit/__init__.py``."""
    import clusterkit

    assert "clusterkit/py.typed" in names
    licence = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE")
                   or n.endswith(".dist-info/LICENSE"))
    text = zipfile.ZipFile(wheel).read(licence).decode()
    assert "Apache License" in text and "END OF TERMS AND CONDITIONS" in text
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA")))
    assert f"\nVersion: {clusterkit.__version__}\n" in meta.decode()
    assert wheel.name.startswith(f"clusterkit-{clusterkit.__version__}-")


def test_every_package_folder_is_listed_for_the_wheel():
    """``[tool.setuptools] packages`` names every folder of ``clusterkit/`` with an
    ``__init__.py`` (a package left out would be missing from the wheel)."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    folders = {".".join(p.parent.relative_to(REPO).parts)
               for p in (REPO / "clusterkit").rglob("__init__.py")}
    assert folders and folders <= listed, sorted(folders - listed)
