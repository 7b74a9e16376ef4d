"""Fused heterogeneous run vs one onnxruntime session on the whole model.

For resnet50, bert_base and swin_t, with a selector that takes every op of the model and with one
that leaves a few ops to the host: partition (best multi-node strategy available), fuse, compile
every step as an onnxruntime session, and time the fused run against one onnxruntime session of
the unpartitioned model built with the same session options (threads, optimization level,
spinning), in the same process, on the same random inputs. The two run in turn, which one goes
first alternating from round to round, after warm-up runs; ``ratio`` is the median over the
rounds of fused / single (target <= 1.05). ``ratio_vs_default`` compares the fused median with a
whole-model session on onnxruntime's default options (spinning thread pools), timed alone.
``ratio_vs_cut`` compares the fused run (paired the same way) with one session of the whole model
in which every tensor passed between steps is also a graph output: onnxruntime cannot fuse nodes
across a device boundary there either, so it runs the fused run's kernels without the executor
(what is left is the executor's and the sessions' own cost). ``cut_cost`` = ratio /
ratio_vs_cut estimates the cut model / the whole model: what onnxruntime loses by not fusing
across the boundaries, which no executor can win back. ``in_sessions`` is the share of the fused
run's time spent inside the steps' sessions (the rest is the executor's own work).

Run: ``python benchmarks/bench_fusion.py [--quick] [--threads=N]`` (or through
``benchmarks/run.py``); ``--threads=1`` gives steadier figures on a busy machine.
"""

from __future__ import annotations

import statistics
import sys
import time
from functools import partial

from _models import BUNDLED_MODELS, real_weights

MODELS = ["resnet50", "bert_base", "swin_t"]
#: ops a typical accelerator lacks: the "partial" selector takes every op type but these
HOST_ONLY = ("Softmax", "Erf", "Pow", "Sqrt", "ReduceMean", "Where", "GlobalAveragePool",
             "Gather", "Cast")
STRATEGY_PREFERENCE = ("cycles", "longest-path", "hetero", "mxnet", "singleton")
COLUMNS = ["model", "selector", "strategy", "partitions", "units", "single_default_ms",
           "single_same_opts_ms", "fused_ms", "ratio", "ratio_vs_default", "single_cut_ms",
           "ratio_vs_cut", "cut_cost", "in_sessions", "compile_s", "outputs_match"]


def _median_seconds(fns, runs: int, warmup: int) -> list[float]:
    """Median time of each function, the functions called in turn (so that changes in machine
    load hit all of them alike)."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for k, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def _paired(single, fused, runs: int) -> tuple[list[float], list[float]]:
    """Seconds of ``single`` and ``fused`` per round; the order within a round alternates."""
    ts, tf = [], []
    for k in range(runs):
        for fn, out in ((single, ts), (fused, tf))[::1 if k % 2 == 0 else -1]:
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return ts, tf


def _cut_model(graph, executor):
    """The whole model with every tensor the executor passes between steps made a graph output
    too: onnxruntime cannot fuse nodes across those tensors any more, so one session of it runs
    the kernels the fused run runs, without the executor."""
    import onnx

    from clusterkit.fusion import value_info

    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    made = {t for u in executor.steps for t in u.outputs}
    cut = sorted({t for u in executor.steps for t in u.inputs if t in made} - set(graph.outputs))
    model.graph.output.extend(value_info(graph.tensors[t]) for t in cut)
    return model.SerializeToString()


def run(quick: bool = False, threads: int = 0) -> dict:
    import onnx
    import onnxruntime as ort

    import clusterkit as ck
    from clusterkit.runtime.backends import OnnxRuntimeBackend
    from clusterkit.runtime.executor import random_inputs

    strategy = next(s for s in STRATEGY_PREFERENCE if s in ck.strategy_names())
    runs, warmup = (7, 2) if quick else (21, 3)
    rows = []
    for name in MODELS:
        # distinct weights: the stubs' equal values let a whole-model session share them
        graph = ck.load_graph(real_weights(onnx.load(str(BUNDLED_MODELS / f"{name}.onnx"))))
        ops = sorted(set(graph.op_types))
        feeds = random_inputs(graph)
        data = graph.model.SerializeToString()
        sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        expected = dict(zip(names, sess.run(names, feeds)))
        # alone: its spinning pool threads would slow down whatever runs next
        single_default, = _median_seconds([partial(sess.run, names, feeds)], runs, warmup)
        sess = None  # its threads go away before the next timings
        config = {"intra_op_num_threads": threads}
        options = OnnxRuntimeBackend(config=config).session_options()
        same = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        whole = (partial(same.run, names, feeds), expected, single_default)
        for label, take in (("every op", ops), ("partial", [o for o in ops
                                                          if o not in HOST_ONLY])):
            problem = ck.make_problem(graph, ["acc=ops:" + ",".join(take)])
            part = ck.run_strategy(problem, strategy)
            rows.append([name, label, strategy, part.metrics()["partitions"]]
                        + _case(part, feeds, whole, (config, options), (runs, warmup)))
    return {
        "title": "Fused heterogeneous run / one onnxruntime session",
        "columns": COLUMNS,
        "rows": rows,
        "notes": _notes(rows, runs, warmup, threads),
    }


def _case(part, feeds: dict, whole: tuple, opts: tuple, timing: tuple[int, int]) -> list:
    """The timed columns of one row: the fused run of ``part`` paired with the whole-model
    session (``whole``: its run, its outputs, its median alone on default options) and with
    the cut model."""
    import onnxruntime as ort

    from clusterkit.fusion import fuse
    from clusterkit.runtime.executor import Executor, compare_outputs

    run_same, expected, single_default = whole
    config, options = opts
    runs, warmup = timing
    executor = Executor(fuse(part), backend_config={"onnxruntime": config})
    check = compare_outputs(expected, executor.run(feeds))
    cut = ort.InferenceSession(_cut_model(part.graph, executor), options,
                               providers=["CPUExecutionProvider"])
    cut_feeds = {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()}
    run_cut = partial(cut.run_with_ort_values, None, cut_feeds)
    for _ in range(warmup):
        run_same()
        executor.run(feeds)
        run_cut()
    before = sum(u.total_seconds for u in executor.steps)
    ts, tf = _paired(run_same, partial(executor.run, feeds), runs)
    inside = (sum(u.total_seconds for u in executor.steps) - before) / sum(tf)
    tc, tf2 = _paired(run_cut, partial(executor.run, feeds), runs)
    single, fused = statistics.median(ts), statistics.median(tf)
    ratio = statistics.median(f / s for s, f in zip(ts, tf))
    ratio_cut = statistics.median(f / c for c, f in zip(tc, tf2))
    compile_s = sum(u.compile_seconds for u in executor.steps)
    return [len(executor.steps), round(single_default * 1e3, 2), round(single * 1e3, 2),
            round(fused * 1e3, 2), round(ratio, 3), round(fused / single_default, 3),
            round(statistics.median(tc) * 1e3, 2), round(ratio_cut, 3),
            round(ratio / ratio_cut, 3), round(inside, 3), round(compile_s, 2),
            check["outputs_match"]]


def _notes(rows: list[list], runs: int, warmup: int, threads: int) -> list[str]:
    """The section's notes, with the worst ratios of ``rows``."""
    ratio, vs_cut = COLUMNS.index("ratio"), COLUMNS.index("ratio_vs_cut")
    worst = {label: max((r[ratio] for r in rows if r[1] == label), default=0.0)
             for label in ("every op", "partial")}
    worst_cut = max((r[vs_cut] for r in rows), default=0.0)
    return [
        "each model with weights of its real size, every tensor with values of its own "
        "(real_weights: the stubs' equal values let a whole-model session share them); "
        f"{runs} rounds after {warmup} warm-up rounds, same process, same inputs; a round "
        "runs the whole-model session with the executor's options (allow_spinning off, "
        f"intra-op threads {threads or 'default'}, optimization level all, shared "
        "allocator) and the fused run, alternating which goes "
        "first; ratio = median over the rounds of fused / single; single_default = the "
        "whole model on onnxruntime's default options, timed alone (ratio_vs_default = "
        "median fused / its median); fused = clusterkit Executor (every unit an "
        "onnxruntime session, consecutive fused nodes of one device in one unit, tensors "
        "passed as OrtValues, values fixed by static shapes "
        "folded); in_sessions = share of the fused time inside the steps' sessions",
        "'every op' selector: acc=ops:<every op type of the model>; 'partial': the same minus "
        f"{', '.join(HOST_ONLY)} (those run on the host); default constraints (value inputs "
        "such as a Reshape's computed shape force cuts)",
        f"target: ratio <= 1.05; worst here {worst['every op']:.3f} with every op supported, "
        f"{worst['partial']:.3f} with the partial selector (a whole-model session fuses "
        "patterns across the device boundary, such as Gelu = Div, Erf, Add, Mul, that a "
        f"heterogeneous run cannot); worst ratio_vs_cut {worst_cut:.3f} (single_cut = the "
        "whole model with every tensor passed between steps also a graph output, run with "
        "OrtValues, paired with the fused run the same way)",
    ]


if __name__ == "__main__":  # pragma: no cover
    threads = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--threads=")), 0)
    result = run(quick="--quick" in sys.argv, threads=threads)
    print(result["title"])
    print(" | ".join(result["columns"]))
    for row in result["rows"]:
        print(" | ".join(str(x) for x in row))
    for note in result["notes"]:
        print("- " + note)
