"""The checks of ``make lint``: ruff on ``clusterkit/``, ``selectors/``, ``tests/``,
``benchmarks/``, ``examples/`` and ``tools/``, then mypy on the package as it is installed,
``selectors/`` checked as ``clusterkit.selectors``.

mypy cannot read the ``package-dir`` mapping of ``pyproject.toml`` (it would call the folder
``selectors``, a name the standard library already uses), so this script hands mypy every file
with its installed module name. Both tools take their settings from ``pyproject.toml``.
Run it from anywhere with the project's interpreter: ``.venv/bin/python tools/lint.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: source folder -> the module name it is installed as
PACKAGES = {"clusterkit": "clusterkit", "selectors": "clusterkit.selectors"}
#: folders ruff also checks (mypy checks the package only)
LINTED = ("tests", "benchmarks", "examples", "tools")


def run_ruff() -> bool:
    """``ruff check`` on the package folders; True when clean."""
    cmd = [sys.executable, "-m", "ruff", "check", "--quiet", *PACKAGES, *LINTED]
    return subprocess.run(cmd, cwd=REPO).returncode == 0


def sources() -> list[tuple[str, str]]:
    """Every module of the installed package as (path, module name)."""
    found = []
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found.append((str(path), ".".join([package, *parts])))
    return found


def run_mypy() -> bool:
    """mypy with the ``[tool.mypy]`` settings; True when clean."""
    from mypy import build
    from mypy.errors import CompileError
    from mypy.main import process_options
    from mypy.modulefinder import BuildSource

    config = str(REPO / "pyproject.toml")
    _, options = process_options(["--config-file", config, str(REPO / "clusterkit")])
    options.cache_dir = str(REPO / ".mypy_cache")
    targets = [BuildSource(path, module) for path, module in sources()]
    cwd = os.getcwd()
    # mypy puts the working directory first on its search path; the repository root would
    # make ``selectors/`` shadow the standard library's ``selectors`` module.
    with tempfile.TemporaryDirectory() as empty:
        os.chdir(empty)
        try:
            messages = build.build(targets, options).errors
        except CompileError as err:
            messages = err.messages
        finally:
            os.chdir(cwd)
    for line in messages:
        print(line.replace(f"{REPO}{os.sep}", ""))
    return not any(": error:" in line for line in messages)


def main() -> int:
    ok = True
    for name, check in (("ruff", run_ruff), ("mypy", run_mypy)):
        start = time.perf_counter()
        passed = check()
        print(f"{name}: {'clean' if passed else 'FAILED'} ({time.perf_counter() - start:.1f} s)")
        ok = ok and passed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
