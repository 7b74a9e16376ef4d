"""Fused heterogeneous run vs one onnxruntime session on the whole model.

For resnet50, bert_base and swin_t, with a selector that takes every op of the model and with one
that leaves a few ops to the host: partition (best multi-node strategy available), fuse, compile
every unit as an onnxruntime session, and time the fused run against one onnxruntime session of
the unpartitioned model in the same process, on the same random inputs. Figures are medians over
the timed runs; the ratio is fused / single, single being the faster of onnxruntime's default
options and the options the units use (target <= 1.2 when every op is supported).

Run: ``python -m benchmarks.bench_fusion`` (or through ``benchmarks/run.py``).
"""

from __future__ import annotations

import statistics
import sys
import time
from functools import partial

from _models import BUNDLED_MODELS

MODELS = ["resnet50", "bert_base", "swin_t"]
#: ops a typical accelerator lacks: the "partial" selector takes every op type but these
HOST_ONLY = ("Softmax", "Erf", "Pow", "Sqrt", "ReduceMean", "Where", "GlobalAveragePool",
             "Gather", "Cast")
STRATEGY_PREFERENCE = ("cycles", "longest-path", "hetero", "mxnet", "singleton")


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


def run(quick: bool = False) -> dict:
    import onnxruntime as ort

    import clusterkit as ck
    from clusterkit.fusion import fuse
    from clusterkit.runtime.backends import OnnxRuntimeBackend
    from clusterkit.runtime.executor import Executor, compare_outputs, random_inputs

    strategy = next(s for s in STRATEGY_PREFERENCE if s in ck.strategy_names())
    runs, warmup = (3, 1) if quick else (15, 3)
    rows = []
    worst_all = 0.0
    for name in MODELS:
        graph = ck.load_graph(str(BUNDLED_MODELS / f"{name}.onnx"))
        ops = sorted(set(graph.op_types))
        feeds = random_inputs(graph)
        data = graph.model.SerializeToString()
        sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        expected = dict(zip(names, sess.run(names, feeds)))
        # alone: its spinning pool threads would slow down whatever runs next
        single_default, = _median_seconds([partial(sess.run, names, feeds)], runs, warmup)
        sess = None  # its threads go away before the next timings
        same = ort.InferenceSession(data, OnnxRuntimeBackend().session_options(),
                                    providers=["CPUExecutionProvider"])
        for label, take in (("every op", ops), ("partial", [o for o in ops
                                                          if o not in HOST_ONLY])):
            problem = ck.make_problem(graph, ["acc=ops:" + ",".join(take)])
            part = ck.run_strategy(problem, strategy)
            executor = Executor(fuse(part))
            got = executor.run(feeds)
            check = compare_outputs(expected, got)
            single_same, fused = _median_seconds(
                [partial(same.run, names, feeds), partial(executor.run, feeds)], runs, warmup)
            ratio = fused / min(single_default, single_same)
            if label == "every op":
                worst_all = max(worst_all, ratio)
            compile_s = sum(u.compile_seconds for u in executor.units)
            rows.append([name, label, strategy, part.metrics()["partitions"],
                         len(executor.units), round(single_default * 1e3, 2),
                         round(single_same * 1e3, 2), round(fused * 1e3, 2),
                         round(ratio, 3), round(compile_s, 2), check["outputs_match"]])
    return {
        "title": "Fused heterogeneous run / one onnxruntime session",
        "columns": ["model", "selector", "strategy", "partitions", "units",
                    "single_default_ms", "single_same_opts_ms", "fused_ms", "ratio", "compile_s",
                    "outputs_match"],
        "rows": rows,
        "notes": [
            f"median of {runs} runs after {warmup} warm-up runs, same process, same inputs; "
            "single = one InferenceSession of the unpartitioned model, with onnxruntime's default "
            "options (timed alone) and with the options the executor's units use "
            "(allow_spinning off; timed in turn with the fused run); ratio = fused / the faster "
            "of the two; fused = clusterkit Executor (every unit an onnxruntime session, default "
            "threads, values fixed by static shapes folded)",
            "'every op' selector: acc=ops:<every op type of the model>; 'partial': the same minus "
            f"{', '.join(HOST_ONLY)} (those run on the host); default constraints (value inputs "
            "such as a Reshape's computed shape force cuts)",
            f"target: ratio <= 1.2 with every op supported; worst here {worst_all:.3f}",
        ],
    }


if __name__ == "__main__":  # pragma: no cover
    result = run(quick="--quick" in sys.argv)
    print(result["title"])
    print(" | ".join(result["columns"]))
    for row in result["rows"]:
        print(" | ".join(str(x) for x in row))
    for note in result["notes"]:
        print("- " + note)
