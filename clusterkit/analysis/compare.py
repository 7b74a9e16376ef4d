"""Compare strategies side by side on one model or a folder of models.

:func:`compare` runs every strategy on one compiled problem and returns one row per strategy;
:func:`compare_many` sweeps several models, through any :class:`concurrent.futures.Executor`
(a process pool, or a Dask/Ray executor for large sweeps).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import Executor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from clusterkit.api import make_problem, run_strategy
from clusterkit.constraints.core import Constraints
from clusterkit.errors import ClusterkitError
from clusterkit.result import Partition
from clusterkit.engines import strategy_names

#: strategies that cluster (``placement``-like modes answer another question)
CLUSTERING = ("singleton", "cycles", "longest-path", "mxnet", "hetero", "cpsat")


def default_strategies() -> list[str]:
    """Every available clustering strategy, in a fixed order."""
    names = strategy_names()
    return [s for s in CLUSTERING if s in names]


@dataclass
class Row:
    """One strategy's figures on one model (``error`` set when the strategy failed)."""

    model: str
    strategy: str
    partitions: int | None = None
    largest_cluster: int | None = None
    offloaded_nodes: float | None = None
    offloaded_flops: float | None = None
    cut_bytes: int | None = None
    gap: float | None = None
    seconds: float | None = None
    status: str = "ok"
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Comparison:
    """All rows of one model, and the partitions (kept in-process only)."""

    model: str
    selector: str
    nodes: int
    rows: list[Row]
    partitions: dict[str, Partition] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "selector": self.selector, "nodes": self.nodes,
                "rows": [asdict(r) for r in self.rows]}


def node_flops(graph) -> np.ndarray:
    """FLOPs per node (from :mod:`clusterkit.constraints.costs` when available, else zeros)."""
    try:
        from clusterkit.constraints.costs import graph_flops as impl
    except ImportError:
        return np.zeros(graph.n)
    return np.asarray(impl(graph), dtype=float)


def compare(model: Any, selectors: Sequence[str], strategies: Iterable[str] | None = None,
            constraints: Constraints | None = None, fallback: str = "cpu",
            options: dict[str, dict[str, Any]] | None = None, name: str | None = None,
            coalesce_after: bool = False) -> Comparison:
    """Run each strategy on ``model`` and collect the comparison rows.

    ``options`` maps a strategy name to its keyword options (e.g.
    ``{"cpsat": {"time_limit": 10}}``); ``coalesce_after`` applies the coalescing pass after every
    strategy. A strategy that fails yields a row with ``error`` set;
    nothing is dropped silently."""
    problem = make_problem(model, selectors, constraints, fallback)
    label = name or problem.graph.name
    strategies = list(strategies) if strategies is not None else default_strategies()
    options = options or {}
    flops = node_flops(problem.graph)
    total_flops = float(flops.sum())
    rows: list[Row] = []
    parts: dict[str, Partition] = {}
    for strategy in strategies:
        row = Row(label, strategy)
        try:
            part = run_strategy(problem, strategy, selector=" ".join(selectors),
                                coalesce_after=coalesce_after, **options.get(strategy, {}))
        except ClusterkitError as exc:
            row.status, row.error = "error", str(exc)
            rows.append(row)
            continue
        parts[strategy] = part
        m = part.metrics()
        on_acc = np.zeros(problem.n, dtype=bool)
        for c in part.accelerator_clusters():
            on_acc[c.nodes] = True
        row.partitions = m["partitions"]
        row.largest_cluster = m["largest_cluster"]
        row.offloaded_nodes = m["offloaded_share"]
        row.offloaded_flops = float(flops[on_acc].sum() / total_flops) if total_flops else None
        row.cut_bytes = m["cut_bytes"]
        row.seconds = part.seconds
        status = part.info.get("status")
        if status:
            row.status = str(status)
            row.info = {k: part.info[k] for k in ("objective", "bound") if k in part.info}
        rows.append(row)
    _fill_gaps(rows)
    return Comparison(label, " ".join(selectors), problem.n, rows, parts)


def _fill_gaps(rows: list[Row]) -> None:
    """Gap of each row's cut_bytes to the CP-SAT result (relative; 0 when both are 0)."""
    ref = next((r for r in rows if r.strategy == "cpsat" and r.error is None), None)
    if ref is None or ref.cut_bytes is None:
        return
    for r in rows:
        if r.cut_bytes is None:
            continue
        if ref.cut_bytes == 0:
            r.gap = 0.0 if r.cut_bytes == 0 else float("inf")
        else:
            r.gap = (r.cut_bytes - ref.cut_bytes) / ref.cut_bytes


def _compare_job(path: str, selectors: Sequence[str], strategies: Sequence[str] | None,
                 constraints: Constraints | None, fallback: str,
                 options: dict[str, dict[str, Any]] | None, coalesce_after: bool = False
                 ) -> dict[str, Any]:
    """Picklable worker for executors: returns the JSON form (partitions stay in the worker)."""
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        return compare(path, selectors, strategies, constraints, fallback, options,
                       name=name, coalesce_after=coalesce_after).to_json()
    except ClusterkitError as exc:
        return {"model": name, "selector": " ".join(selectors), "nodes": 0,
                "rows": [asdict(Row(name, "-", status="error", error=str(exc)))]}


def compare_many(paths: Sequence[str], selectors: Sequence[str],
                 strategies: Sequence[str] | None = None, constraints: Constraints | None = None,
                 fallback: str = "cpu", options: dict[str, dict[str, Any]] | None = None,
                 executor: Executor | None = None, progress: bool = False,
                 coalesce_after: bool = False) -> list[dict[str, Any]]:
    """Compare on every model in ``paths``; results (JSON form) in the order of ``paths``.
    With an ``executor`` the models run as its tasks."""
    bar = _progress(len(paths), progress)
    results: list[dict[str, Any] | None] = [None] * len(paths)
    if executor is None:
        for k, path in enumerate(paths):
            results[k] = _compare_job(path, selectors, strategies, constraints, fallback, options,
                                      coalesce_after)
            bar.update(1)
    else:
        futures = {executor.submit(_compare_job, path, list(selectors), strategies, constraints,
                                   fallback, options, coalesce_after): k
                   for k, path in enumerate(paths)}
        for fut in as_completed(futures):
            results[futures[fut]] = fut.result()
            bar.update(1)
    bar.close()
    return [r for r in results if r is not None]


class _NoBar:
    def update(self, k: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, enabled: bool):
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="model", desc="compare", leave=False)


COLUMNS = [("strategy", "strategy"), ("partitions", "partitions"), ("largest", "largest_cluster"),
           ("offload nodes", "offloaded_nodes"), ("offload FLOPs", "offloaded_flops"),
           ("cut_bytes", "cut_bytes"), ("gap vs cpsat", "gap"), ("seconds", "seconds"),
           ("status", "status")]


def format_table(result: dict[str, Any] | Comparison) -> str:
    """A fixed-width text table of one model's rows."""
    data = result.to_json() if isinstance(result, Comparison) else result
    header = [c for c, _ in COLUMNS]
    lines = [[_fmt(key, row.get(key)) if row.get("error") is None or key in ("strategy",
                                                                              "status")
              else "-" for _, key in COLUMNS] for row in data["rows"]]
    widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h)
              for i, h in enumerate(header)]
    out = [f"{data['model']} ({data['nodes']} nodes) — selector {data['selector']}",
           "  ".join(h.ljust(w) for h, w in zip(header, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in lines]
    for row in data["rows"]:
        if row.get("error"):
            out.append(f"  {row['strategy']}: error: {row['error']}")
    return "\n".join(out)


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key in ("offloaded_nodes", "offloaded_flops"):
        return f"{100 * value:.1f}%"
    if key == "gap":
        return "inf" if value == float("inf") else f"{100 * value:+.1f}%"
    if key == "seconds":
        return f"{value:.3f}"
    if key == "cut_bytes":
        return f"{value:,}"
    return str(value)


def write_dots(result: Comparison, folder: str) -> list[str]:
    """One DOT picture per strategy (and SVG when Graphviz's ``dot`` is installed)."""
    os.makedirs(folder, exist_ok=True)
    written = []
    dot_bin = shutil.which("dot")
    for strategy, part in result.partitions.items():
        path = os.path.join(folder, f"{result.model}_{strategy}.dot")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(part.to_dot())
        written.append(path)
        if dot_bin:
            svg = path[:-4] + ".svg"
            done = subprocess.run([dot_bin, "-Tsvg", path, "-o", svg], capture_output=True,
                                  timeout=300)
            if done.returncode == 0:
                written.append(svg)
    return written
