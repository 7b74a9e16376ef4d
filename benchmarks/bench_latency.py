"""Latency placement (``--objective latency``) on the NeurIPS 2020 latency set
(``benchmarks/data/placement/latency/``: 8 inference graphs, 4 to 14 accelerators) and on two
bundled models with ``examples/platform.json``.

Per instance: the all-CPU latency, ``auto``'s (the latency heuristic) and ``cpsat``'s (the
exact contiguous optimum, warm-started from ``auto``, ``--time-limit`` seconds, 2 workers) with
status, proven bound and seconds. When ``DNN_PARTITIONING`` names a checkout of
github.com/msr-fiddle/dnn-partitioning and ``g++`` is on the PATH, the paper's
``latency-greedy/greedy.cpp`` is compiled into a temporary folder (never stored here) and
scores our cpsat split (``-computeLatency``, printed to 3 decimals: "cpsat by greedy.exe"), and
its greedy baseline's latency is shown. ``paper_figures.json`` holds no latency figures (its
``latency/`` keys are ``dp.exe``'s max loads), so there is no paper optimum to compare.

    .venv/bin/python benchmarks/bench_latency.py [--time-limit SECONDS] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from clusterkit.constraints.platform import model_instance, read_platform
from clusterkit.engines.cpsat.latency import solve_latency
from clusterkit.engines.latency import latency_heuristic, latency_of
from clusterkit.io.files import write_atomic
from clusterkit.io.placement_instance import PlacementInstance, read_instance, split_dict

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "placement" / "latency"
MODELS = ["squeezenet1_1", "resnet18"]


class Greedy:
    """``greedy.cpp`` compiled from the checkout ``DNN_PARTITIONING`` names."""

    def __init__(self, exe: Path):
        self.exe = exe

    @classmethod
    def build(cls) -> "Greedy | None":
        root, gxx = os.environ.get("DNN_PARTITIONING"), shutil.which("g++")
        src = Path(root or "") / "latency-greedy" / "greedy.cpp"
        if not root or not gxx or not src.exists():
            return None
        out = Path(tempfile.mkdtemp(prefix="greedy-")) / "greedy.exe"
        subprocess.run([gxx, "-O3", "-o", str(out), str(src)], check=True, timeout=600)
        return cls(out)

    def _run(self, inst_file: Path, args: list[str]) -> subprocess.CompletedProcess:
        with open(inst_file, "rb") as fh:
            return subprocess.run([str(self.exe), *args], stdin=fh, capture_output=True,
                                  text=True, timeout=300)

    def score(self, inst_file: Path, split: dict) -> float | None:
        """The paper's latency of ``split`` (3 decimals), None when it fails."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(split, fh)
        try:
            found = re.findall(r"latency of given split is: ([0-9.eE+-]+)",
                               self._run(inst_file, ["-computeLatency", fh.name]).stdout)
        finally:
            os.unlink(fh.name)
        return float(found[-1]) if found else None

    def baseline(self, inst_file: Path) -> float | None:
        """The latency of the paper's greedy baseline."""
        found = re.findall(r"objective = ([0-9.eE+-]+)", self._run(inst_file, []).stderr)
        return float(found[-1]) if found else None


def cases(quick: bool) -> list[tuple[str, PlacementInstance, Path | None]]:
    """(label, instance, its file when it is one of the paper's)."""
    files = sorted(DATA.glob("*/*.json"))
    out = [(f"{p.parent.name}/{p.stem}", read_instance(p), p) for p in files]
    plat = read_platform(ROOT / "examples" / "platform.json")
    for name in MODELS:
        model = ROOT / "tests" / "data" / "models" / f"{name}.onnx"
        out.append((f"{name} (platform.json)", model_instance(model, plat), None))
    return out[:3] + out[-1:] if quick else out


def measure(inst: PlacementInstance, time_limit: float) -> dict[str, Any]:
    """The figures of one instance."""
    start = time.perf_counter()
    auto = latency_heuristic(inst)
    auto_s = time.perf_counter() - start
    res = solve_latency(inst, time_limit=time_limit, warm=auto)
    return {"n": inst.n, "k": inst.accelerators,
            "cpu": latency_of(inst, np.full(inst.n, -1)), "auto": latency_of(inst, auto),
            "auto_s": auto_s, "cpsat": res.latency, "status": res.status, "bound": res.bound,
            "cpsat_s": res.seconds, "device": res.device}


COLUMNS = ["instance", "nodes", "k", "all CPU", "auto", "auto s", "cpsat", "status", "bound",
           "cpsat s"]


def cells(label: str, f: dict[str, Any]) -> list[Any]:
    """One row of :data:`COLUMNS` from :func:`measure`'s figures."""
    return [label, f["n"], f["k"], f"{f['cpu']:.6g}", f"{f['auto']:.6g}", round(f["auto_s"], 2),
            f"{f['cpsat']:.6g}", f["status"], f"{f['bound']:.6g}", round(f["cpsat_s"], 1)]


def run(quick: bool = False, time_limit: float = 20.0) -> dict:
    """The ``make bench`` section (``benchmarks/run.py``): the table without the paper's
    evaluator."""
    limit = 5.0 if quick else time_limit
    rows = [cells(label, measure(inst, limit)) for label, inst, _ in cases(quick)]
    return {"title": "Latency placement (--objective latency): auto and cpsat",
            "columns": COLUMNS, "rows": rows,
            "notes": ["cpsat: the exact contiguous optimum warm-started from auto, "
                      f"{limit:g} s wall limit, 2 workers"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", default=str(ROOT / "bench" / "latency.md"))
    args = ap.parse_args()
    greedy = Greedy.build()
    columns = COLUMNS + (["cpsat by greedy.exe", "greedy baseline"] if greedy else [])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for label, inst, path in cases(args.quick):
        f = measure(inst, args.time_limit)
        row = cells(label, f)
        if greedy:
            scored = greedy.score(path, split_dict(inst, f["device"])) if path else None
            base = greedy.baseline(path) if path else None
            row += ["-" if scored is None else f"{scored:.3f}",
                    "-" if base is None else f"{base:.6g}"]
        lines.append("| " + " | ".join(map(str, row)) + " |")
        print(lines[-1], flush=True)
    Path(args.o).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.o, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
