"""Compare strategies side by side on one model or a folder of models.

:func:`compare` runs every strategy on one compiled problem and returns one row per strategy;
:func:`compare_many` sweeps several models, optionally through a
:class:`concurrent.futures.Executor`: a thread or process pool, or a Dask cluster's
(:mod:`clusterkit.analysis.dask_executor`). A failure never costs more than
its own rows: a failing strategy gives an error row, a model that fails to load, crashes its
worker process or outlives its time limit gives a model error row, and finished models can be
streamed to a JSON Lines file that a resumed sweep reads back.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Executor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence, Union

import numpy as np

from clusterkit.analysis.isolated import run_isolated
from clusterkit.api import _selector_label, make_problem, run_strategy
from clusterkit.constraints.core import Constraints
from clusterkit.constraints.costs import graph_flops
from clusterkit.constraints.objectives import parse_objective
from clusterkit.engines import strategy_spec, strategy_specs
from clusterkit.errors import ClusterkitError, RenderError, SweepInterrupted
from clusterkit.io.files import write_atomic
from clusterkit.io.loader import load_graph
from clusterkit.modes import OptimizeLevel
from clusterkit.result.dot import dot_to_svg, partition_dot
from clusterkit.result.model import Partition
from clusterkit.selection.protocol import SubgraphProperty

#: what :func:`compare` and :func:`compare_many` accept as selectors, as :func:`partition` does
Selectors = Union[str, SubgraphProperty, Sequence[Union[str, SubgraphProperty]]]



def default_strategies() -> list[str]:
    """Every available strategy whose spec ``clusters`` (``placement``-like modes answer another
    question), in registry order with the ``exact`` ones last (the gap is measured against
    ``cpsat``)."""
    specs = [spec for spec in strategy_specs() if spec.clusters]
    return [spec.name for spec in sorted(specs, key=lambda spec: spec.exact)]


def __getattr__(name: str) -> Any:
    """``CLUSTERING``: :func:`default_strategies` as a tuple when read (the registry may have
    grown)."""
    if name == "CLUSTERING":
        return tuple(default_strategies())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    gap_to: str | None = None


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


def compare(model: Any, selectors: Selectors, strategies: Iterable[str] | None = None,
            constraints: Constraints | None = None, fallback: str = "cpu",
            options: dict[str, dict[str, Any]] | None = None, name: str | None = None,
            coalesce_after: bool = False) -> Comparison:
    """Run each strategy on ``model`` and collect the comparison rows.

    ``options`` maps a strategy name to its keyword options (e.g.
    ``{"cpsat": {"time_limit": 10}}``); ``coalesce_after`` applies the coalescing pass after every
    strategy. ``selectors`` are specs or properties, one or a list, as for
    :func:`~clusterkit.api.partition`. A strategy that fails (with any exception) yields a row
    with ``error`` set; nothing is dropped silently."""
    problem = make_problem(model, selectors, constraints=constraints, fallback=fallback)
    label = name or problem.graph.name
    selector = _selector_label(selectors)
    strategies = list(strategies) if strategies is not None else default_strategies()
    options = options or {}
    flops = graph_flops(problem.graph)
    rows: list[Row] = []
    parts: dict[str, Partition] = {}
    for strategy in strategies:
        row = Row(label, strategy)
        try:
            part = run_strategy(problem, strategy, selector=selector,
                                coalesce_after=coalesce_after,
                                **strategy_options(strategy, options, parts))
        except Exception as exc:  # one strategy's failure is its row, not the comparison's end
            row.status, row.error = "error", describe_error(exc)
            rows.append(row)
            continue
        parts[strategy] = part
        rows.append(_fill_row(row, part, flops))
    _fill_gaps(rows)
    return Comparison(label, selector, problem.n, rows, parts)


#: the wall-clock seconds ``compare`` (and so ``report``) gives cpsat unless told otherwise
CPSAT_SECONDS = 10.0


def strategy_options(strategy: str, options: dict[str, dict[str, Any]],
                     parts: dict[str, Partition]) -> dict[str, Any]:
    """``strategy``'s options in a comparison: cpsat gets a :data:`CPSAT_SECONDS` wall-clock
    limit unless one is given, and the best partition of the strategies already run (by its
    objective) as its warm start unless one is given, so that it starts from the answer it is
    measured against (its info's ``warm_start`` names that strategy)."""
    opts = dict(options.get(strategy, {}))
    if strategy != "cpsat":
        return opts
    opts.setdefault("time_limit", CPSAT_SECONDS)
    heuristics = [p for name, p in parts.items() if not strategy_spec(name).exact]
    if "warm_start" not in opts and heuristics and opts.get("objective") != "throughput":
        objective = parse_objective(opts.get("objective", "cut"))
        opts["warm_start"] = min(heuristics, key=lambda p: (objective.key(p.metrics()),
                                                             p.figures()))
    return opts


def _fill_row(row: Row, part: Partition, flops: np.ndarray) -> Row:
    """``row`` with the figures of ``part`` (``flops``: per node, for the offloaded share)."""
    m = part.metrics()
    on_acc = np.zeros(len(flops), dtype=bool)
    for c in part.offloaded_clusters():
        on_acc[list(c.nodes)] = True
    total = float(flops.sum())
    row.partitions = m["partitions"]
    row.largest_cluster = m["largest_cluster"]
    row.offloaded_nodes = m["offloaded_share"]
    row.offloaded_flops = float(flops[on_acc].sum() / total) if total else None
    row.cut_bytes = m["cut_bytes"]
    row.seconds = part.seconds
    status = part.info.get("status")
    if status:
        row.status = str(status)
        row.info = {k: part.info[k] for k in INFO_KEYS if part.info.get(k) is not None}
        warm = part.info.get("warm_start")
        if isinstance(warm, dict) and warm.get("strategy"):
            row.info["warm_start"] = warm["strategy"]
    return row


#: the keys of an exact strategy's info a row keeps
INFO_KEYS = ("objective", "bound", "objective_name", "relaxed_status", "time_limit",
             "wall_seconds", "limit", "reason")


def describe_error(exc: BaseException) -> str:
    """A clusterkit error's own message; other exceptions prefixed with their type."""
    return str(exc) if isinstance(exc, ClusterkitError) else f"{type(exc).__name__}: {exc}"


def _fill_gaps(rows: list[Row]) -> None:
    """Gap of each row's cut_bytes to CP-SAT's result when it is proven optimal, else to its
    proven bound (on the cut objective; relative, 0 when both are 0); never to an unproven
    answer. ``gap_to`` says which (``cpsat``, ``bound``, or None: no gap)."""
    ref = next((r for r in rows if r.strategy == "cpsat" and r.error is None), None)
    if ref is None or ref.cut_bytes is None:
        return
    base = gap_base(ref)
    if base is None:
        return
    to, value = base
    for r in rows:
        if r.cut_bytes is None:
            continue
        r.gap_to = to
        if value == 0:
            r.gap = 0.0 if r.cut_bytes == 0 else float("inf")
        else:
            r.gap = (r.cut_bytes - value) / value


def gap_base(ref: Row) -> tuple[str, float] | None:
    """What the gaps are measured against: cpsat's cut when OPTIMAL, its proven bound on the
    cut objective otherwise, None when there is neither."""
    if ref.status == "OPTIMAL" and ref.cut_bytes is not None:
        return "cpsat", float(ref.cut_bytes)
    bound = ref.info.get("bound")
    if bound is not None and ref.info.get("objective_name", "cut") == "cut":
        return "bound", float(bound)
    return None


def _compare_model(path: str, selectors: Selectors, strategies: Sequence[str] | None,
                   constraints: Constraints | None, fallback: str,
                   options: dict[str, dict[str, Any]] | None, coalesce_after: bool,
                   optimize: OptimizeLevel = "none") -> dict[str, Any]:
    """One model's comparison in JSON form (partitions stay where it ran); any exception
    becomes the model's error row."""
    try:
        model = path if optimize == "none" else load_graph(path, optimize=optimize)
        return compare(model, selectors, strategies, constraints, fallback, options,
                       name=model_name(path), coalesce_after=coalesce_after).to_json()
    except Exception as exc:
        return model_error(path, selectors, exc)


def _compare_job(path: str, args: tuple, isolate: bool, timeout: float | None
                 ) -> dict[str, Any]:
    """Picklable task: :func:`_compare_model` in this process, or in a child process of its own
    (``isolate``) that a crash or ``timeout`` costs nothing but this model's row."""
    if not isolate:
        return _compare_model(path, *args)
    try:
        return run_isolated(_compare_model, (path, *args), timeout, label=f"model {path!r}")
    except ClusterkitError as exc:
        return model_error(path, args[0], exc)


def model_name(path: str) -> str:
    """The ``model`` field of a swept file: its name without the extension."""
    return os.path.splitext(os.path.basename(path))[0]


def model_error(path: str, selectors: Selectors, exc: BaseException) -> dict[str, Any]:
    """The JSON form of a model that could not be compared: one row with strategy ``-``."""
    name = model_name(path)
    return {"model": name, "selector": _selector_label(selectors), "nodes": 0,
            "rows": [asdict(Row(name, "-", status="error", error=describe_error(exc)))]}


def failed_models(results: Iterable[dict[str, Any]]) -> list[str]:
    """The models of a sweep that could not be compared at all (a row with strategy ``-``)."""
    return [r["model"] for r in results if any(row["strategy"] == "-" for row in r["rows"])]


def compare_many(paths: Sequence[str], selectors: Selectors,
                 strategies: Sequence[str] | None = None, constraints: Constraints | None = None,
                 fallback: str = "cpu", options: dict[str, dict[str, Any]] | None = None, *,
                 executor: Executor | None = None, isolate: bool = False,
                 timeout: float | None = None, jsonl: str | None = None,
                 progress: bool = False, coalesce_after: bool = False,
                 optimize: OptimizeLevel = "none") -> list[dict[str, Any]]:
    """Compare on every model in ``paths``; results (JSON form) in the order of ``paths``.

    With an ``executor`` the models run as its tasks (module-level functions with plain
    arguments, so a process pool or a Dask client's executor can ship them; the rows are the
    same as without an executor). With ``isolate`` (implied by ``timeout``,
    in seconds per model) each model runs in a child process of its own: a crash or a timeout
    becomes that model's error row. Any other failure of a model or task (a broken process
    pool included) also becomes an error row; finished rows are never lost. With ``jsonl``
    each finished model is appended to that file as one JSON object (with its ``path``), and
    models already in the file are not run again but read back. ``optimize="basic"`` compares
    on the graph onnxruntime's basic optimizations produce (see :mod:`clusterkit.io.optimize`)."""
    done = read_jsonl(jsonl) if jsonl else {}
    results = {k: done[os.path.abspath(p)] for k, p in enumerate(paths)
               if os.path.abspath(p) in done}
    todo = [k for k in range(len(paths)) if k not in results]
    args = (list(selectors) if isinstance(selectors, (list, tuple)) else selectors, strategies,
            constraints, fallback, options, coalesce_after, optimize)
    isolate = isolate or timeout is not None
    bar = _progress(len(todo), progress)

    def finish(k: int, result: dict[str, Any]) -> None:
        results[k] = result
        if jsonl:
            append_jsonl(jsonl, paths[k], result)
        bar.update(1)

    try:
        _run_jobs(paths, todo, (args, isolate, timeout), executor, finish)
    except KeyboardInterrupt:
        raise SweepInterrupted(f"{len(results)} of {len(paths)} models finished",
                               [results[k] for k in sorted(results)]) from None
    finally:
        bar.close()
    return [results[k] for k in range(len(paths))]


def _run_jobs(paths: Sequence[str], todo: list[int], job: tuple,
              executor: Executor | None, finish: Callable[[int, dict[str, Any]], None]) -> None:
    """Run :func:`_compare_job` (``job``: its arguments after the path) on ``paths[k]`` for
    every ``k`` of ``todo``, here or on ``executor``, and ``finish`` each as it ends; a task
    that fails becomes the model's error row. On Ctrl-C the tasks not started are cancelled."""
    if executor is None:
        for k in todo:
            finish(k, _compare_job(paths[k], *job))
        return
    futures = {executor.submit(_compare_job, paths[k], *job): k for k in todo}
    try:
        for fut in as_completed(futures):
            k = futures[fut]
            try:
                finish(k, fut.result())
            except Exception as exc:  # e.g. BrokenProcessPool: a worker died
                finish(k, model_error(paths[k], job[0][0], exc))
    except KeyboardInterrupt:
        for fut in futures:
            fut.cancel()
        raise


def read_jsonl(path: str) -> dict[str, dict[str, Any]]:
    """The models recorded in a sweep's JSON Lines file (absolute path → result); a missing
    file is empty, and a last line cut short by an interrupted run is ignored."""
    if not os.path.exists(path):
        return {}
    out = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                record = json.loads(line)
                out[os.path.abspath(record.pop("path"))] = record
            except (json.JSONDecodeError, AttributeError, KeyError, TypeError):
                continue
    return out


def append_jsonl(path: str, model_path: str, result: dict[str, Any]) -> None:
    """Append one finished model (with its ``path``) as one line, flushed at once; a last line
    cut short by an interrupted run is ended first."""
    with open(path, "a+b") as fh:
        if fh.tell() > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")
        fh.write((json.dumps({"path": model_path, **result}) + "\n").encode("utf-8"))


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


#: the columns of :func:`table_cells` that hold numbers
NUMERIC_COLUMNS = frozenset(c for c, key in COLUMNS if key not in ("strategy", "status"))


def table_cells(result: dict[str, Any] | Comparison) -> tuple[list[str], list[list[str]]]:
    """The header and the formatted cells of one model's rows (``-`` for the figures of a row
    that failed)."""
    data = result.to_json() if isinstance(result, Comparison) else result
    to = next((r.get("gap_to") for r in data["rows"] if r.get("gap_to")), "cpsat")
    header = [f"gap vs {to}" if key == "gap" else c for c, key in COLUMNS]
    cells = [[_fmt(key, row.get(key)) if row.get("error") is None or key in ("strategy",
                                                                              "status")
              else "-" for _, key in COLUMNS] for row in data["rows"]]
    return header, cells


def table_title(result: dict[str, Any] | Comparison) -> str:
    """``model (N nodes) — selector SPEC``: the line above a model's table."""
    data = result.to_json() if isinstance(result, Comparison) else result
    return f"{data['model']} ({data['nodes']} nodes) — selector {data['selector']}"


def row_errors(result: dict[str, Any] | Comparison) -> list[str]:
    """``strategy: error: message`` for every row that failed."""
    data = result.to_json() if isinstance(result, Comparison) else result
    return [f"{row['strategy']}: error: {row['error']}" for row in data["rows"]
            if row.get("error")]


def cpsat_note(result: dict[str, Any] | Comparison) -> str | None:
    """``cpsat: STATUS ...`` for a comparison with a cpsat row: its status and bound, where
    it started from and its wall seconds against its limit (None without such a row)."""
    from clusterkit.engines.cpsat.read import status_line  # cpsat's modules: on use only

    data = result.to_json() if isinstance(result, Comparison) else result
    row = next((r for r in data["rows"] if r["strategy"] == "cpsat" and not r.get("error")),
               None)
    if row is None or "time_limit" not in row.get("info", {}):
        return None
    info = dict(row["info"], status=row["status"],
                warm_start={"strategy": row["info"].get("warm_start")})
    return f"cpsat: {status_line(info)}"


def format_table(result: dict[str, Any] | Comparison) -> str:
    """A fixed-width text table of one model's rows."""
    header, lines = table_cells(result)
    widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h)
              for i, h in enumerate(header)]
    out = [table_title(result), "  ".join(h.ljust(w) for h, w in zip(header, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in lines]
    out += ["  " + line for line in row_errors(result)]
    note = cpsat_note(result)
    if note:
        out.append(note)
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
    for strategy, part in result.partitions.items():
        path = os.path.join(folder, f"{result.model}_{strategy}.dot")
        text = partition_dot(part)
        write_atomic(path, text)
        written.append(path)
        try:
            svg = dot_to_svg(text)
        except RenderError:  # no Graphviz, or it failed on this picture: the DOT is there
            continue
        write_atomic(path[:-4] + ".svg", svg)
        written.append(path[:-4] + ".svg")
    return written
