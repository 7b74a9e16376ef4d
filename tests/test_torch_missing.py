"""Without PyTorch, every module outside clusterkit.torch imports, and clusterkit.torch raises
one clear ImportError-derived clusterkit error naming the extra (simulated in a subprocess by
making ``import torch`` fail)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import importlib, pkgutil, sys
sys.modules["torch"] = None  # `import torch` now raises ImportError
import clusterkit
from clusterkit.errors import ClusterkitError
count = 0
for info in pkgutil.walk_packages(clusterkit.__path__, "clusterkit."):
    if info.name.startswith("clusterkit.torch") or info.name.endswith("__main__"):
        continue
    importlib.import_module(info.name)
    count += 1
print("imported", count)
try:
    import clusterkit.torch
except ImportError as err:
    print("error", type(err).__name__, isinstance(err, ClusterkitError), err)
else:
    print("no error")
"""


def test_clusterkit_works_without_torch_and_names_the_extra():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert int(lines[0].split()[1]) > 40  # every other module imported without torch
    kind, name, is_ours, message = lines[-1].split(" ", 3)
    assert (kind, name, is_ours) == ("error", "TorchMissingError", "True")
    assert "clusterkit[torch]" in message and "PyTorch" in message
