"""Throughput placement on the NeurIPS 2020 instances (``benchmarks/data/placement``: the
throughput set, and the latency set's graphs under ``latency/``, 14 accelerators and 8 CPUs at
most, each CPU a device of its own): ours beside the paper's dynamic program and baselines.

Per instance: our contiguous CP-SAT optimum (warm-started from the chain heuristic, 60 s, 2
workers), our non-contiguous result (warm-started from the contiguous one, 60 s) and the chain
heuristic alone, each with its seconds and proven bound; then the paper's ``dp.cpp``: its DP
optimum (contiguous), ``-pipeDream``, ``-localSearch 10`` and the human experts' splits scored by
``-expert``. The paper's figures are computed when ``DNN_PARTITIONING`` names a checkout of
github.com/msr-fiddle/dnn-partitioning and ``g++`` is on the PATH (each run gets ``DP_TIMEOUT``
seconds, 900 by default: the DP needs more on Inception-v3); otherwise they come from
``data/placement/paper_figures.json``, which ``--refresh`` rewrites from computed ones. With
the paper's code at hand our contiguous split is also scored by its ``-expert`` evaluator
("ours by dp.exe"). The paper's C++ code is never stored here: it is compiled into a temporary
folder from the checkout.

    .venv/bin/python benchmarks/bench_placement.py [--quick] [--refresh]
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from clusterkit.engines.cpsat.throughput import solve_throughput
from clusterkit.engines.throughput import chain_heuristic, latency_bound
from clusterkit.io.files import write_atomic
from clusterkit.io.placement_instance import instance_from_dict, read_instance, split_dict

DATA = Path(__file__).resolve().parent / "data" / "placement"
CACHE = DATA / "paper_figures.json"
TIME_LIMIT = 60.0
QUICK = ("LayerGraphs",)
COLUMNS = ["instance", "nodes", "k", "DP opt", "DP s", "contig", "contig s", "contig status",
           "contig bound", "contig / DP", "ours by dp.exe", "non-contig", "non-contig s",
           "non-contig bound", "heuristic", "heur s", "heur / best bound", "pipeDream",
           "localSearch 10", "human expert"]
#: what each paper run prints last (on stderr)
PATTERNS = {"dp": r"objective = ([0-9.eE+-]+)", "pipeDream": r"objective = ([0-9.eE+-]+)",
            "localSearch": r"local search done\. maxLoad = ([0-9.eE+-]+)",
            "expert": r"max-load of the split: ([0-9.eE+-]+)"}


def instances(quick: bool) -> list[Path]:
    folders = QUICK if quick else ("LayerGraphs", "OperatorGraphs", "latency/LayerGraphs",
                                   "latency/OperatorGraphs")
    return [p for f in folders for p in sorted((DATA / f).glob("*.json"))]


def key_of(path: Path) -> str:
    """``LayerGraphs/x`` (the throughput set) or ``latency/LayerGraphs/x``."""
    key = f"{path.parent.name}/{path.stem}"
    return f"latency/{key}" if path.parent.parent.name == "latency" else key


def expert_file(path: Path) -> Path | None:
    """The human-expert split of a layer-graph instance, if the paper has one."""
    p = DATA / "human-experts" / f"{path.stem}_expert.json"
    return p if key_of(path).startswith("LayerGraphs/") and p.exists() else None


class PaperCode:
    """``dp.cpp`` compiled from a checkout named by ``DNN_PARTITIONING`` (never stored here)."""

    def __init__(self, exe: Path):
        self.exe = exe

    @classmethod
    def build(cls) -> "PaperCode | None":
        root = os.environ.get("DNN_PARTITIONING")
        gxx = shutil.which("g++")
        if not root or not gxx or not (Path(root) / "throughput-dp" / "dp.cpp").exists():
            return None
        out = Path(tempfile.mkdtemp(prefix="dp-")) / "dp.exe"
        src = Path(root) / "throughput-dp" / "dp.cpp"
        subprocess.run([gxx, "-O3", "-o", str(out), str(src)], check=True, timeout=600)
        return cls(out)

    def run(self, instance: Path, args: list[str], kind: str, timeout: float
            ) -> dict[str, Any]:
        """One run: ``{"max_load", "seconds"}``, or ``{"status": "timeout"/"failed"}``."""
        start = time.perf_counter()
        try:
            with open(instance, "rb") as fh:
                proc = subprocess.run([str(self.exe), *args], stdin=fh, capture_output=True,
                                      text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"status": f"timeout {timeout:.0f} s"}
        found = re.findall(PATTERNS[kind], proc.stderr)
        if proc.returncode or not found:
            return {"status": "failed", "stderr": proc.stderr[-300:]}
        return {"max_load": float(found[-1]), "seconds": time.perf_counter() - start}

    def expert(self, instance: Path, split: dict) -> dict[str, Any]:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(split, fh)
        try:
            return self.run(instance, ["-expert", fh.name], "expert", 300)
        finally:
            os.unlink(fh.name)


def paper_figures(code: PaperCode, path: Path) -> dict[str, Any]:
    """The paper's figures of one instance, computed."""
    timeout = float(os.environ.get("DP_TIMEOUT", "900"))
    out = {"dp": code.run(path, [], "dp", timeout),
           "pipeDream": code.run(path, ["-pipeDream"], "pipeDream", timeout),
           "localSearch10": code.run(path, ["-localSearch", "10"], "localSearch", timeout)}
    expert = expert_file(path)
    if expert is not None:
        out["expert"] = code.run(path, ["-expert", str(expert)], "expert", 300)
    return out


def read_cache() -> dict[str, Any]:
    """The cached paper figures (``{"instances": {}}`` when there are none)."""
    return json.loads(CACHE.read_text()) if CACHE.exists() else {"instances": {}}


def ours(path: Path, time_limit: float) -> dict[str, Any]:
    """Our three answers on one instance, with seconds and bounds."""
    inst = read_instance(path)
    start = time.perf_counter()
    heur = chain_heuristic(inst)
    heur_s = time.perf_counter() - start
    contig = solve_throughput(inst, contiguous=True, time_limit=time_limit, workers=2,
                              warm=heur.device)
    loose = solve_throughput(inst, contiguous=False, time_limit=time_limit, workers=2,
                             warm=contig.device)
    return {"inst": inst, "heuristic": (heur.max_load, heur_s), "contig": contig,
            "noncontig": loose}


def _load(fig: dict | None) -> Any:
    if not fig:
        return "-"
    return fig["max_load"] if "max_load" in fig else fig.get("status", "-")


def _row(path: Path, got: dict, paper: dict, scored: dict | None) -> list:
    inst, c, nc = got["inst"], got["contig"], got["noncontig"]
    dp = paper.get("dp", {})
    heur, heur_s = got["heuristic"]
    heur_ratio = f"{heur / c.bound:.4f}" if c.bound > 0 else "-"
    ratio = f"{c.max_load / dp['max_load']:.5f}" if "max_load" in dp else "-"
    return [key_of(path), inst.n, inst.accelerators, _load(dp),
            round(dp["seconds"], 2) if "seconds" in dp else "-", c.max_load,
            round(c.seconds, 2), c.status, c.bound, ratio, _load(scored), nc.max_load,
            round(nc.seconds, 2), nc.bound, heur, round(heur_s, 3),
            heur_ratio, _load(paper.get("pipeDream")),
            _load(paper.get("localSearch10")), _load(paper.get("expert"))]


def large_note(n: int = 12_000, seed: int = 0) -> str:
    """The heuristic alone on a synthetic instance of ``n`` nodes (a chain with random skip
    edges, 6 accelerators): its seconds and max load against the trivial lower bound."""
    rng = random.Random(seed)
    nodes = [{"id": i, "supportedOnFpga": 1, "cpuLatency": 10 * rng.random(),
              "fpgaLatency": rng.random(), "size": 1.0, "isBackwardNode": 0} for i in range(n)]
    cost = [0.5 * rng.random() for _ in range(n)]
    edges = [{"sourceId": p, "destId": i, "cost": cost[p]} for i in range(1, n)
             for p in sorted({i - 1, max(0, i - rng.randrange(1, 30))})]
    inst = instance_from_dict({"maxFPGAs": 6, "maxCPUs": 1, "maxSizePerFPGA": 1e9,
                               "nodes": nodes, "edges": edges}, "synthetic")
    start = time.perf_counter()
    res = chain_heuristic(inst)
    secs = time.perf_counter() - start
    low = latency_bound(inst)
    return (f"heuristic alone at scale: a synthetic {n:,}-node instance (chain + random skip "
            f"edges, 6 accelerators and the CPU) in {secs:.2f} s, max load "
            f"{res.max_load:.6g}, {res.max_load / low:.4f}x the latency-only lower bound "
            f"{low:.6g} (transfers ignored, nodes split fractionally)")


def run(quick: bool = False, refresh: bool = False) -> dict:
    code = PaperCode.build()
    rows, fresh = [], {}
    limit = 10.0 if quick else TIME_LIMIT
    for path in instances(quick):
        got = ours(path, limit)
        cache = read_cache()  # read per instance: another run may be filling it
        paper = cache["instances"].get(key_of(path), {})
        scored = None
        if code is not None:  # the paper's code at hand: its figures computed now
            paper = fresh[key_of(path)] = paper_figures(code, path)
            scored = code.expert(path, split_dict(got["inst"], got["contig"].device))
        rows.append(_row(path, got, paper, scored))
        print(rows[-1], flush=True)
    if refresh and fresh:
        cache = read_cache()
        cache = {"source": "github.com/msr-fiddle/dnn-partitioning throughput-dp/dp.cpp, "
                 "g++ -O3; seconds on the machine of the run", "instances":
                 {**cache["instances"], **fresh}}
        write_atomic(CACHE, json.dumps(cache, indent=1, sort_keys=True) + "\n")
    return {"title": "Throughput placement (NeurIPS 2020 instances): ours vs the paper's DP",
            "columns": COLUMNS, "rows": rows,
            "notes": notes(code is not None, code is not None, limit)
            + ([] if quick else [large_note()])}


def notes(live: bool, scored: bool, limit: float) -> list[str]:
    where = ("computed now from DNN_PARTITIONING's dp.cpp" if live else
             "cached in benchmarks/data/placement/paper_figures.json (DNN_PARTITIONING set to "
             "a checkout of msr-fiddle/dnn-partitioning recomputes them; --refresh also "
             "rewrites that cache)")
    score = ("ours by dp.exe: our contiguous split scored by the paper's -expert evaluator"
             if scored else "ours by dp.exe: '-' (set DNN_PARTITIONING and have g++ to score "
             "our splits with the paper's evaluator)")
    return [f"paper figures (DP opt, pipeDream, localSearch 10, human expert) {where}", score,
            f"contig/non-contig: cpsat objective=throughput, {limit:g} s, 2 workers; bound = "
            "CP-SAT's proven lower bound (times rounded down); non-contig is warm-started "
            "from contig, so never above it",
            "contig / DP: our contiguous max load over the DP optimum; heur / best bound: the "
            "heuristic over the contiguous bound (an upper bound of its excess)",
            "latency/ rows: the paper's latency-inputs/ graphs (up to 14 accelerators and 8 "
            "CPUs), each CPU a device of its own as its DP treats them; its -expert evaluator "
            "sums every CPU into one group, so 'ours by dp.exe' there is max(accelerator "
            "loads, sum of CPU loads), not the DP's objective",
            "reproduce: make bench, or .venv/bin/python benchmarks/bench_placement.py"]


if __name__ == "__main__":
    section = run(quick="--quick" in sys.argv, refresh="--refresh" in sys.argv)
    for row in section["rows"]:
        print(" | ".join(map(str, row)))
