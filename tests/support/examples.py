"""The example scripts' classes, loaded from their files as a user's script would define them."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from support.models import REPO

EXAMPLES = REPO / "examples"


def load_example(stem: str) -> ModuleType:
    """Import ``examples/<stem>.py`` by path (its ``__main__`` block does not run)."""
    spec = importlib.util.spec_from_file_location(f"example_{stem}", EXAMPLES / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_new_accelerator = load_example("new_accelerator")
TinyNpu = _new_accelerator.TinyNpu
TinyNpuSelector = _new_accelerator.TinyNpuSelector
