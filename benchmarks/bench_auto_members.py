"""``auto`` against each of its members run on its own, on every light and bundled model.

Every model of the onnx light set and the bundled models, under the three op sets of
``clusterkit.testing.shapes.QUALITY_OP_SETS`` and the shipped selectors ``tensorrt``, ``qnn`` and
``coreml`` (default constraints; ``auto`` at its defaults): ``auto`` and each member of
:data:`clusterkit.engines.auto.MEMBERS` run separately through the front door (the member's
strategy with its options, raw and coalesced), each with its figures (fallback nodes, cut_bytes,
partitions) and seconds. A case is flagged ``WORSE`` when ``auto``'s figures rank after the best
member's by ``auto``'s ranking (fallback nodes, then cut_bytes, then partitions; partitions before
cut_bytes for a restrictive device such as ``qnn``): there must be none.

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
#: op set name -> selector: the quality op sets and the shipped selectors
SELECTORS = {**QUALITY_OP_SETS, "tensorrt": "tensorrt", "qnn": "qnn", "coreml": "coreml"}


def _timed(problem: ck.Problem, strategy: str, coalesce_after: bool = False,
           **options) -> tuple[ck.Partition, float]:
    start = time.perf_counter()
    part = ck.run_strategy(problem, strategy, coalesce_after=coalesce_after, **options)
    return part, time.perf_counter() - start


def _case(path: Path, opset: str) -> tuple[list, bool]:
    """The row of one model x op set and whether ``auto`` is worse than its best member."""
    problem = ck.make_problem(ck.load_graph(str(path)), [SELECTORS[opset]])
    part, auto_s = _timed(problem, "auto")
    record = part.info["auto"]
    order = (lambda k: k) if record["ranking"] == "cut" else (lambda k: (k[0], k[2], k[1]))
    auto = part.figures()
    figs: dict[str, tuple[int, int, int]] = {}
    row: list = [path.stem, opset, problem.n, _show(auto), round(auto_s, 2),
                 record["winner"] + (" (at bound)" if record["at_lower_bound"] else "")]
    for name, (strategy, options) in MEMBERS.items():
        raw, _ = _timed(problem, strategy, **options)
        done, done_s = _timed(problem, strategy, coalesce_after=True, **options)
        figs[name], figs[name + " coalesced"] = raw.figures(), done.figures()
        row += [_show(figs[name + " coalesced"]), round(done_s, 2)]
    best = min(figs, key=lambda name: order(figs[name]))
    worse = order(auto) > order(figs[best])
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
        for opset in SELECTORS:
            row, bad = _case(path, opset)
            rows.append(row)
            worse += bad
            print(" | ".join(map(str, row[:6])), row[-3], row[-2], flush=True, file=sys.stderr)
    slowest = max(rows, key=lambda r: r[4])
    columns = ["model", "op set", "nodes", "auto", "auto s", "auto winner"]
    for name in MEMBERS:
        columns += [f"{name} (coalesced)", "s"]
    columns += ["best member (raw or coalesced)", "auto vs best", "command"]
    notes = [f"auto worse than its best member on {worse} of {len(rows)} cases (must be 0)",
             f"auto's slowest case: {slowest[0]} x {slowest[1]}, {slowest[4]} s "
             f"({slowest[2]} nodes); growth members run up to "
             "clusterkit.engines.auto.GROWTH_LIMIT nodes, after the cheaper members, unless "
             "one reaches the lower bound",
             "figures: fallback nodes / cut_bytes / partitions, ranked in that order (partitions "
             "before cut_bytes where auto ranks so: a restrictive device); each "
             "member also runs raw (not shown unless it is the best)",
             "op sets: " + "; ".join(f"{k} = {v}" for k, v in SELECTORS.items())]
    return {"title": "auto against each of its members run on its own", "columns": columns,
            "rows": rows, "notes": notes}


if __name__ == "__main__":
    from run import to_markdown
    chosen = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--models=")), "")
    if "--models" in sys.argv:
        chosen = sys.argv[sys.argv.index("--models") + 1]
    print(to_markdown(run(quick="--quick" in sys.argv,
                          models={m for m in chosen.split(",") if m} or None)))
