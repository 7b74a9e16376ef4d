"""Every example runs as a user would run it, on a real model."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO, SHARED_MODELS


def _run(script, *args):
    res = subprocess.run([sys.executable, str(REPO / "examples" / script), *map(str, args)],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_new_accelerator_example():
    out = _run("new_accelerator.py", SHARED_MODELS / "resnet18.onnx")
    m = re.search(r"(\d+)/81 nodes offloaded.*tinynpu: (\d+) nodes", out)
    assert m and int(m.group(1)) == int(m.group(2)) > 0


def test_compare_strategies_example():
    out = _run("compare_strategies.py", SHARED_MODELS / "squeezenet1_1.onnx",
               "ops:Conv,Relu,Concat,MaxPool")
    assert "lowest cut_bytes:" in out
    for strategy in ("singleton", "cycles", "longest-path"):
        assert strategy in out


def test_hetero_run_example_falls_back_and_matches():
    out = _run("hetero_run.py", SHARED_MODELS / "resnet18.onnx")
    assert "fell back to the host" in out and "Gemm is not supported" in out
    assert "match: True" in out
