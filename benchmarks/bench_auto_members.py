"""``auto`` against each of its members run on its own, on every light and bundled model.

Every model of the onnx light set and the bundled models, under the three op sets of
``clusterkit.testing.shapes.QUALITY_OP_SETS`` (default constraints): ``auto`` and each member of
:data:`clusterkit.engines.auto.MEMBERS` run separately through the front door (the member's
strategy with its options, raw and coalesced), each with its figures (fallback nodes, cut_bytes,
partitions) and seconds. A case is flagged ``WORSE`` when ``auto``'s figures rank after the best
member's (fallback nodes, then cut_bytes, then partitions): there must be none.

    .venv/bin/python benchmarks/bench_auto_members.py [--quick] [--models a,b]
    .venv/bin/python benchmarks/run.py --only auto_members
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _models import bundled_models, light_models

import clusterkit as ck
from clusterkit.engines.auto import MEMBERS
from clusterkit.testing.shapes import QUALITY_OP_SETS

QUICK = {"light_inception_v2", "light_densenet121", "bert_base", "resnet18", "swin_t"}
COMMAND = ".venv/bin/python benchmarks/bench_auto_members.py --models {model}"


def _timed(problem: ck.Problem, strategy: str, coalesce_after: bool = False,
           **options) -> tuple[tuple[int, int, int], float]:
    start = time.perf_counter()
    part = ck.run_strategy(problem, strategy, coalesce_after=coalesce_after, **options)
    return part.figures(), time.perf_counter() - start


def _case(path: Path, opset: str) -> tuple[list, bool]:
    """The row of one model x op set and whether ``auto`` is worse than its best member."""
    problem = ck.make_problem(ck.load_graph(str(path)), QUALITY_OP_SETS[opset])
    auto, auto_s = _timed(problem, "auto")
    figs: dict[str, tuple[int, int, int]] = {}
    row: list = [path.stem, opset, problem.n, _show(auto), round(auto_s, 2)]
    for name, (strategy, options) in MEMBERS.items():
        raw, raw_s = _timed(problem, strategy, **options)
        done, done_s = _timed(problem, strategy, coalesce_after=True, **options)
        figs[name], figs[name + " coalesced"] = raw, done
        row += [_show(done), round(done_s, 2)]
    best = min(figs, key=figs.__getitem__)
    worse = auto > figs[best]
    row += [f"{best} {_show(figs[best])}", "WORSE" if worse else "ok",
            COMMAND.format(model=path.stem)]
    return row, worse


def _show(fig: tuple[int, int, int]) -> str:
    return "/".join(map(str, fig))


def run(quick: bool = False, models: set[str] | None = None) -> dict:
    paths = [p for p in light_models() + bundled_models()
             if (not quick or p.stem in QUICK) and (not models or p.stem in models)]
    rows, worse = [], 0
    for path in paths:
        for opset in QUALITY_OP_SETS:
            row, bad = _case(path, opset)
            rows.append(row)
            worse += bad
            print(" | ".join(map(str, row[:5])), row[-3], row[-2], flush=True, file=sys.stderr)
    columns = ["model", "op set", "nodes", "auto", "auto s"]
    for name in MEMBERS:
        columns += [f"{name} (coalesced)", "s"]
    columns += ["best member (raw or coalesced)", "auto vs best", "command"]
    notes = [f"auto worse than its best member on {worse} of {len(rows)} cases (must be 0)",
             "figures: fallback nodes / cut_bytes / partitions, ranked in that order; each "
             "member also runs raw (not shown unless it is the best)",
             "op sets: " + "; ".join(f"{k} = {v}" for k, v in QUALITY_OP_SETS.items())]
    return {"title": "auto against each of its members run on its own", "columns": columns,
            "rows": rows, "notes": notes}


if __name__ == "__main__":
    from run import to_markdown
    chosen = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--models=")), "")
    if "--models" in sys.argv:
        chosen = sys.argv[sys.argv.index("--models") + 1]
    print(to_markdown(run(quick="--quick" in sys.argv,
                          models={m for m in chosen.split(",") if m} or None)))
