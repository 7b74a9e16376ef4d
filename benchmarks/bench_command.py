"""The whole ``clusterkit partition`` command, as a user runs it: import time, the command on
llama_48l_dynamic and on the long-edge synthetic DAG (node-link JSON) at 1e5 and 1e6 nodes.

Each figure is a fresh interpreter (``python -m clusterkit partition ...``): wall seconds and
its peak resident memory (``wait4``). A second run of the same command in ``--child`` mode
splits it into stages (read, compile, strategy, report, JSON) with the peak memory after each.
Bytecode is cached (``PYTHONPYCACHEPREFIX``, warmed once) as in an installed package. The
baseline loads the same input file in a fresh interpreter (``json.load``, ``onnx.load``): the
ratio to it is what a loaded machine changes less than raw seconds.

    python benchmarks/bench_command.py            # all rows (1e6: about a minute per strategy)
    python benchmarks/bench_command.py --quick    # import, llama and 1e5 only
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LLAMA = REPO / "tests" / "data" / "models" / "llama_48l_dynamic.onnx"
SIZES_QUICK, SIZES = (100_000,), (100_000, 1_000_000)
STRATEGIES = ("cycles", "longest-path", "auto")
COLUMNS = ["case", "command", "seconds", "cpu s", "peak MB", "load cpu s", "cpu ratio",
           "read cpu s", "compile cpu s", "strategy cpu s", "report cpu s", "json cpu s",
           "target"]
HEAVY = ("ortools", "onnxruntime", "torch", "networkx", "scipy", "onnx", "rich", "pandas")


def _env(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def _wait4(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str, float]:
    """Wall seconds, peak resident MB (``os.wait4``: this very child), stdout and CPU seconds
    (user + system) of ``cmd``."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=str(REPO))
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed: {err.read().strip()[-500:]}")
        return seconds, usage.ru_maxrss / 1024, out.read(), usage.ru_utime + usage.ru_stime


def import_row(env: dict[str, str], runs: int) -> list:
    """``python -X importtime -c "import clusterkit"``: the median total over ``runs``."""
    cmd = [sys.executable, "-X", "importtime", "-c", "import clusterkit"]
    totals, base = [], []
    for _ in range(runs):
        err = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stderr
        totals.append(int(err.strip().splitlines()[-1].split("|")[1]) / 1e6)
        err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import numpy"],
                             capture_output=True, text=True, env=env, check=True).stderr
        base.append(int(err.strip().splitlines()[-1].split("|")[1]) / 1e6)
    cpu = sorted(_wait4([sys.executable, "-c", "import clusterkit"], env)[3]
                 for _ in range(runs))[runs // 2]
    loaded = subprocess.run([sys.executable, "-c", "import clusterkit, sys; print(' '.join("
                             "sorted({m.split('.')[0] for m in sys.modules})))"],
                            capture_output=True, text=True, env=env, check=True).stdout.split()
    heavy = sorted(set(loaded) & set(HEAVY)) or "none"
    sec, numpy_sec = sorted(totals)[runs // 2], sorted(base)[runs // 2]
    return ["import clusterkit", 'python -X importtime -c "import clusterkit"', sec, cpu, "",
            "", f"{sec / numpy_sec:.2f}x import numpy ({numpy_sec:.3f} s)", "", "", "", "", "",
            f"< 0.3 s; heavy modules loaded: {heavy}"]


#: the baseline: a fresh interpreter that only loads the input file
_LOAD = {".json": "import json, sys; json.load(open(sys.argv[1], 'rb'))",
         ".onnx": "import onnx, sys; onnx.load(sys.argv[1])"}


def command_row(case: str, model: Path, selector: str, strategy: str | None,
                env: dict[str, str], target: str) -> list:
    """One whole ``partition`` command, then the same in stages (``--child``)."""
    flags = ["--selector", selector] + (["--strategy", strategy] if strategy else [])
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.json")
        cmd = [sys.executable, "-m", "clusterkit", "partition", str(model), *flags,
               "--json", out, "-q"]
        seconds, peak, _, cpu = _wait4(cmd, env)
        base = _wait4([sys.executable, "-c", _LOAD[model.suffix], str(model)], env)[3]
        text = _wait4([sys.executable, __file__, "--child", str(model), *flags, "--json", out],
                      env)[2]
    st = json.loads(text.strip().splitlines()[-1])
    shown = ["clusterkit partition", os.path.relpath(model, REPO) if model.is_relative_to(REPO)
             else model.name, *(["--selector", "'" + selector + "'"] if len(selector) < 20
                                else ["--selector", "'npu=ops:S0,...,S15'"]),
             *(["--strategy", strategy] if strategy else []), "--json OUT"]
    return [case, " ".join(shown), seconds, cpu, peak, base, f"{cpu / base:.1f}x",
            *(f"{st[k]:.2f} ({st[k + '_mb']:.0f} MB)" for k in
              ("read", "compile", "strategy", "report", "json")), target]


def child(argv: list[str]) -> None:
    """The command's stages in this process; prints their seconds and peak MB as JSON."""
    from clusterkit.api import run_strategy
    from clusterkit.cli import build_parser
    from clusterkit.cli.common import problem_from_args, strategy_options
    from clusterkit.cli.partition_cmd import print_placement
    from clusterkit.io.files import write_all
    from clusterkit.io.loader import load_graph
    from clusterkit.result.json_format import partition_json_chunks

    args = build_parser().parse_args(["partition", *argv])
    times: dict[str, float] = {}

    def stage(name, fn):
        start = time.process_time()
        value = fn()
        times[name] = time.process_time() - start
        times[name + "_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return value

    gc.disable()  # as the command does (partition_cmd.main): no collection while reading
    try:  # and compiling, then the graph's objects frozen out of every later collection
        graph = stage("read", lambda: load_graph(args.model))
        args.model = graph  # compile alone: load_graph hands a Graph back as it is
        problem = stage("compile", lambda: problem_from_args(args))
    finally:
        gc.freeze()
        gc.enable()
    result = stage("strategy", lambda: run_strategy(
        problem, args.strategy, selector=" ".join(args.selector), **strategy_options(args)))
    with contextlib.redirect_stdout(io.StringIO()):
        stage("report", lambda: (print(result.summary()), print_placement(result)))
    stage("json", lambda: write_all([(args.json, partition_json_chunks(result, "model"))]))
    print(json.dumps(times))


def _synthetic(folder: str, n: int) -> Path:
    from clusterkit.testing.synthetic import long_edge_dag, save_node_link

    path = Path(folder) / f"long_edge_{n}.json"
    save_node_link(long_edge_dag(n, seed=0), path)
    return path


def run(quick: bool = False) -> dict:
    from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED

    selector = "npu=ops:" + ",".join(LONG_EDGE_SUPPORTED)
    rows = []
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as data:
        env = _env(cache)
        _wait4([sys.executable, "-m", "clusterkit", "partition", str(LLAMA), "--selector",
                "tensorrt", "-qq"], env)  # warms the bytecode cache
        rows.append(import_row(env, 5 if quick else 9))
        rows.append(command_row("llama_48l_dynamic (11,298 nodes)", LLAMA, "tensorrt", None,
                                env, "<= 1 s"))
        for n in SIZES_QUICK if quick else SIZES:
            path = _synthetic(data, n)
            for strategy in STRATEGIES:
                target = "<= 30 s, <= 2048 MB" if n == 1_000_000 else ""
                rows.append(command_row(f"long_edge_dag({n:,}, seed=0)", path, selector,
                                        strategy, env, target))
            path.unlink()
    return {"title": "The whole partition command: import, read, compile, strategy, report, "
                     "JSON", "columns": COLUMNS, "rows": rows, "notes": [
        "seconds, cpu s and peak MB: the command in a fresh interpreter (wall clock; wait4's "
        "user + system time and ru_maxrss; for the import row, the median import time and the "
        "CPU of a whole python -c 'import clusterkit'); stage columns: the same command split "
        "into stages in one more fresh interpreter, CPU seconds each, with the peak memory "
        "reached by its end",
        "load cpu s: the baseline, the CPU seconds of a fresh interpreter that only loads the "
        "same input file (json.load of the node-link JSON, onnx.load of the ONNX model); cpu "
        "ratio: the command's CPU seconds over it (CPU, not wall: the machine is shared)",
        "synthetic graphs: clusterkit.testing.synthetic.long_edge_dag(n, seed=0) (20% of the "
        "nodes unsupported, 5% long edges, ids shuffled) written with save_node_link; "
        "selector npu=ops:S0,...,S15",
        "bytecode cached (PYTHONPYCACHEPREFIX in a temporary folder, warmed by one run), as "
        "for an installed package; the machine is shared, so read ranges across runs"]}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
    else:
        for row in run(quick="--quick" in sys.argv)["rows"]:
            print(" | ".join(map(str, row)), flush=True)
