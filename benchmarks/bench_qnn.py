"""The QNN HTP (emulated, soc_model 60, fp16) through clusterkit's route and onnxruntime's own
(issue #31 item 5).

Every bundled model and every onnx light model (``--quick``: three small ones), its graph after
onnxruntime's basic optimizations (``--optimize basic``), seeded random weights in place of the
weight stubs (seed 0: the stubs overflow fp16), random inputs (seed 0):

- clusterkit's route (``clusterkit run MODEL --selector qnn --strategy auto --optimize basic
  --backend qnn=ep --random-weights --check``, through run_cmd's own functions): partitions,
  clusters the HTP compiled whole / split / fell back, total compile seconds of the steps, mean
  run seconds, and ``--check`` at the backends' tolerance (fp16: rtol 2e-2, atol 5e-2) with the
  largest absolute and relative (to the output's largest value) error;
- onnxruntime's own route on the same optimized model with the same weights and inputs: one
  session with the QNN EP registered the plain way (``register_execution_provider_library``),
  CPU fallback allowed as by default, default session options: its QNN partitions (from
  ``session.record_ep_graph_assignment_info``), whether the session is created (the compile,
  in seconds), runs, and matches the CPU provider at the same tolerance; and its own EPContext
  export (``ep.context_enable=1``, embed mode 0): written, loads again, and that session's
  outputs match;
- clusterkit's compiled export (``clusterkit export MODEL --selector qnn --compile --verify``)
  when that command exists, else "n/a (not built)".

Each route of each model runs in its own interpreter (``--child``) with a timeout
(``CLUSTERKIT_BENCH_QNN_TIMEOUT`` seconds, default 600): a native crash or a hang of the HTP
emulation is a "crash"/"timeout" cell, with what the child had finished by then (it saves its
facts after every stage). Models run smallest file first.

    python benchmarks/bench_qnn.py [--quick]
    python benchmarks/bench_qnn.py --child ck|ort|export MODEL OUT.json
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _models import bundled_models, light_models

REPO = Path(__file__).resolve().parent.parent
QUICK = ("squeezenet1_1", "resnet18", "light_squeezenet")
SEED = 0
REPEAT = 2  # timed runs of clusterkit's route (after the one --check compares)
SLOW_RUN = 10.0  # seconds: a slower first run is the only one (the emulated HTP on vgg19)
TIMEOUT = float(os.environ.get("CLUSTERKIT_BENCH_QNN_TIMEOUT", "600"))
#: seconds for the whole section (unset: no limit); a model not started in time is "not run"
BUDGET = float(os.environ.get("CLUSTERKIT_BENCH_QNN_BUDGET", "0")) or None
#: models run at once (each its routes one after the other): one takes the list from its cheap
#: end, the other from its expensive end
JOBS = int(os.environ.get("CLUSTERKIT_BENCH_QNN_JOBS", "1"))
#: small files of heavy compute on the emulated HTP (dense convolutions), run last
HEAVY = ("light_vgg19", "light_zfnet512", "light_bvlc_alexnet")
EP = "QNNExecutionProvider"
COLUMNS = ["model", "ck partitions", "ck compiled / split / fell back", "ck compile s",
           "ck run s", "ck check (fp16)", "ck max abs", "ck max rel", "ort QNN partitions",
           "ort compiles", "ort runs", "ort matches", "ort max abs", "ort compile s",
           "ort EPContext written / loads / matches", "ck compiled export loads and matches",
           "wall s"]


# ---------------------------------------------------------------------- children
def _save(out: str, data: dict) -> None:
    from clusterkit.io.files import write_atomic

    write_atomic(out, json.dumps(data, indent=1, default=str) + "\n")


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _args(model: str, extra: list[str]):
    """``clusterkit run MODEL ...`` parsed by clusterkit's own parser."""
    from clusterkit.cli import build_parser, parse_args

    return parse_args(build_parser(), ["run", model, "--selector", "qnn", "--strategy", "auto",
                                       "--optimize", "basic", "--backend", "qnn=ep",
                                       "--random-weights", str(SEED), "--check", *extra])


def child_ck(model: str, out: str) -> None:
    """clusterkit's route: what ``clusterkit run ... --check`` does, stage by stage."""
    from clusterkit.cli.run_cmd import check_outputs, parse_pairs, partition_from_args
    from clusterkit.fusion import fuse
    from clusterkit.runtime.executor import Executor, random_inputs

    args = _args(model, ["--repeat", str(REPEAT)])
    data: dict[str, Any] = {"stage": "partition"}
    _save(out, data)
    part = partition_from_args(args)
    data.update(partitions=part.metrics()["partitions"], stage="compile")
    _save(out, data)
    fused = fuse(part)
    start = time.perf_counter()
    try:
        executor = Executor(fused, backends=parse_pairs(args.backend, "--backend"))
    except Exception as exc:
        data.update(error=f"executor: {_line(exc)}")
        _save(out, data)
        return
    verdicts = [c["verdict"] for c in executor.clusters]
    data.update(executor_seconds=time.perf_counter() - start,
                compile_seconds=sum(u.compile_seconds for u in executor.steps),
                verdicts=[verdicts.count(v) for v in ("compiled", "split", "fell back")],
                reasons=[f"{c['cluster']} ({c['nodes']} nodes) {c['verdict']}: {c['reason']}"
                         for c in executor.clusters if c["verdict"] != "compiled"],
                steps_on={u.runs_on: sum(1 for v in executor.steps if v.runs_on == u.runs_on)
                          for u in executor.steps},
                stage="run")
    _save(out, data)
    feeds = random_inputs(fused, seed=SEED)
    try:
        start = time.perf_counter()
        outputs = executor.run(feeds)  # the first run: the one --check compares
        first = time.perf_counter() - start
        runs = REPEAT if first < SLOW_RUN else 0
        start = time.perf_counter()
        for _ in range(runs):
            executor.run(feeds)
    except Exception as exc:
        data.update(error=f"run: {_line(exc)}")
        _save(out, data)
        return
    mean = (time.perf_counter() - start) / runs if runs else first
    data.update(mean_run_seconds=mean, runs=max(1, runs), stage="check")
    _save(out, data)
    report: dict[str, Any] = {"runs": max(1, runs), "mean_run_seconds": mean}
    check_outputs(args, fused, executor, feeds, outputs, {}, report)
    data.update({k: report[k] for k in ("outputs_match", "max_abs_diff", "max_rel_diff", "rtol",
                                        "atol")}, stage="done")
    data["bad_outputs"] = [o["name"] for o in report["outputs"] if not o["match"]]
    _save(out, data)


def _qnn_options() -> dict[str, str]:
    import onnxruntime_qnn

    return {"backend_path": onnxruntime_qnn.get_qnn_htp_path(), "soc_model": "60",
            "enable_htp_fp16_precision": "1"}


def _session(model: Any, device: Any, entries: dict[str, str]):
    import onnxruntime as ort

    so = ort.SessionOptions()
    for key, value in entries.items():
        so.add_session_config_entry(key, value)
    so.add_provider_for_devices([device], _qnn_options())
    data = model.SerializeToString() if not isinstance(model, str) else model
    return ort.InferenceSession(data, so)


def child_ort(model: str, out: str) -> None:
    """onnxruntime's own route on the optimized model with clusterkit's random weights."""
    import onnxruntime as ort
    import onnxruntime_qnn

    from clusterkit.io.loader import load_graph
    from clusterkit.io.optimize import optimize_model
    from clusterkit.io.weights import random_weights
    from clusterkit.runtime.executor import compare_outputs, random_inputs, run_model

    data: dict[str, Any] = {"stage": "prepare"}
    _save(out, data)
    weighted = random_weights(optimize_model(model, "none"), SEED)
    optimized = optimize_model(weighted, "basic")
    feeds = random_inputs(load_graph(weighted, optimize="basic"), seed=SEED)
    expected = run_model(weighted, feeds)  # the CPU provider, unpartitioned (as --check)
    ort.register_execution_provider_library(EP, onnxruntime_qnn.get_library_path())
    device = next(d for d in ort.get_ep_devices() if d.ep_name == EP)
    data["stage"] = "compile"
    _save(out, data)
    start = time.perf_counter()
    try:
        sess = _session(optimized, device, {"session.record_ep_graph_assignment_info": "1"})
    except Exception as exc:
        data.update(compiles=False, error=f"session: {_line(exc)}",
                    compile_seconds=time.perf_counter() - start)
        _save(out, data)
    else:
        subs = sess.get_provider_graph_assignment_info()
        data.update(compiles=True, compile_seconds=time.perf_counter() - start,
                    partitions=sum(1 for s in subs if s.ep_name == EP),
                    qnn_nodes=sum(len(s.get_nodes()) for s in subs if s.ep_name == EP),
                    other_nodes=sum(len(s.get_nodes()) for s in subs if s.ep_name != EP),
                    stage="run")
        _save(out, data)
        try:
            names = [o.name for o in sess.get_outputs()]
            start = time.perf_counter()
            got = dict(zip(names, sess.run(names, feeds)))
            data["run_seconds"] = time.perf_counter() - start
        except Exception as exc:
            data.update(runs=False, error=f"run: {_line(exc)}")
            _save(out, data)
        else:
            cmp = compare_outputs(expected, got, rtol=2e-2, atol=2e-2)
            data.update(runs=True, outputs_match=cmp["outputs_match"],
                        max_abs_diff=cmp["max_abs_diff"], max_rel_diff=cmp["max_rel_diff"],
                        bad_outputs=[o["name"] for o in cmp["outputs"] if not o["match"]])
        del sess
    data["stage"] = "epcontext"
    _save(out, data)
    ctx: dict[str, Any] = {}
    data["ctx"] = ctx
    with tempfile.TemporaryDirectory(prefix="bench_qnn_ctx_") as tmp:
        path = os.path.join(tmp, Path(model).stem + "_ctx.onnx")
        try:
            _session(optimized, device, {"ep.context_enable": "1", "ep.context_file_path": path,
                                         "ep.context_embed_mode": "0"})
        except Exception as exc:
            ctx["error"] = f"export: {_line(exc)}"
        ctx["written"] = os.path.exists(path)
        _save(out, data)
        if not ctx["written"]:
            return
        try:
            sess = _session(path, device, {})
        except Exception as exc:
            ctx.update(loads=False, error=f"load: {_line(exc)}")
            _save(out, data)
            return
        ctx["loads"] = True
        _save(out, data)
        if data.get("run_seconds", 0.0) >= SLOW_RUN:  # a slow model: loading is the question
            ctx["runs"] = "skipped"
            data["stage"] = "done"
            _save(out, data)
            return
        try:
            names = [o.name for o in sess.get_outputs()]
            got = dict(zip(names, sess.run(names, feeds)))
        except Exception as exc:
            ctx.update(runs=False, error=f"run: {_line(exc)}")
        else:
            cmp = compare_outputs(expected, got, rtol=2e-2, atol=2e-2)
            ctx.update(runs=True, outputs_match=cmp["outputs_match"],
                       max_abs_diff=cmp["max_abs_diff"])
        data["stage"] = "done"
        _save(out, data)


def export_available() -> bool:
    """Whether ``clusterkit export`` has ``--compile`` (the lead's compiled export)."""
    out = subprocess.run([sys.executable, "-m", "clusterkit", "export", "-h"],
                         capture_output=True, text=True, cwd=str(REPO), env=_env(), timeout=120)
    return "--compile" in out.stdout


def child_export(model: str, out: str) -> None:
    """``clusterkit export MODEL --selector qnn --compile -o OUT.onnx --verify`` (the command
    itself, in this interpreter): its exit status and the verify line it prints."""
    import contextlib
    import io

    from clusterkit.cli import main

    data: dict[str, Any] = {"stage": "export"}
    _save(out, data)
    with tempfile.TemporaryDirectory(prefix="bench_qnn_export_") as tmp:
        text = io.StringIO()
        with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
            code = main(["export", model, "--selector", "qnn", "--strategy", "auto",
                         "--optimize", "basic", "--random-weights", str(SEED), "--compile",
                         "-o", os.path.join(tmp, Path(model).stem + "_ck.onnx"), "--verify"])
    lines = text.getvalue().splitlines()
    data.update(code=code, verify=[s for s in lines if s.startswith("loaded with")][-1:],
                tail=lines[-3:], stage="done")
    _save(out, data)


CHILDREN = {"ck": child_ck, "ort": child_ort, "export": child_export}


# ---------------------------------------------------------------------- parent
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def spawn(kind: str, model: Path, tmp: str, deadline: float | None = None
          ) -> tuple[str, dict, float]:
    """Run ``--child KIND MODEL`` in its own process group: its status ("ok", "timeout",
    "crash (SIGNAME)", "error (exit N): last stderr line"), the facts it saved, wall seconds."""
    out = os.path.join(tmp, f"{model.stem}.{kind}.json")
    log = os.path.join(tmp, f"{model.stem}.{kind}.log")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(model), out]
    start = time.perf_counter()
    timeout = TIMEOUT if deadline is None else min(TIMEOUT, deadline - start)
    if timeout < 30:
        return "not run (section budget spent)", {}, 0.0
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=_env(),
                                cwd=str(REPO), start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    seconds = time.perf_counter() - start
    try:
        with open(out, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = {}
    if code is None:
        status = f"timeout ({timeout:.0f} s, in {data.get('stage', 'start')})"
    elif code < 0:
        status = f"crash ({signal.Signals(-code).name}, in {data.get('stage', 'start')})"
    elif code > 0:
        with open(log, encoding="utf-8", errors="replace") as f:
            lines = [s for s in f.read().splitlines() if s.strip()]
        status = f"error (exit {code}): {lines[-1][:200] if lines else ''}"
    else:
        status = "ok"
    return status, data, seconds


def _num(data: dict, key: str, digits: int = 3) -> Any:
    value = data.get(key)
    return round(value, digits) if isinstance(value, float) else ("" if value is None else value)


def _yes(value: Any) -> str:
    return "" if value is None else ("yes" if value else "no")


def _md(cell: Any) -> Any:
    """A table cell: no bare ``|`` (it would end the cell), onnxruntime's long exception
    module path dropped."""
    if not isinstance(cell, str):
        return cell
    return cell.replace("onnxruntime.capi.onnxruntime_pybind11_state.", "").replace("|", "/")


def ck_cells(status: str, d: dict) -> list:
    missing = status if status != "ok" else d.get("error", "")
    cells = [d.get("partitions", missing)]
    if "verdicts" in d:
        cells += [" / ".join(map(str, d["verdicts"])), _num(d, "compile_seconds")]
    else:
        cells += [missing, missing]
    cells.append(_num(d, "mean_run_seconds") if "mean_run_seconds" in d else missing)
    if "outputs_match" in d:
        cells += ["pass" if d["outputs_match"] else "FAIL", f"{d['max_abs_diff']:.3g}",
                  f"{d['max_rel_diff']:.3g}"]
    else:
        cells += [missing, "", ""]
    return cells


def ort_cells(status: str, d: dict) -> list:
    missing = status if status != "ok" else ""
    if "compiles" not in d:
        return [missing, missing, "", "", "", "", missing]
    if not d["compiles"]:
        return ["", f"no: {d.get('error', '')}", "", "", "", _num(d, "compile_seconds"),
                _ctx_cell(status, d)]
    runs = d.get("runs")
    match = d.get("outputs_match")
    return [d["partitions"], "yes",
            _yes(runs) if runs is not None else missing,
            ("pass" if match else "FAIL") if match is not None else "",
            f"{d['max_abs_diff']:.3g}" if "max_abs_diff" in d else "",
            _num(d, "compile_seconds"), _ctx_cell(status, d)]


def _ctx_cell(status: str, d: dict) -> str:
    ctx = d.get("ctx")
    if ctx is None or "written" not in ctx:
        return status if status != "ok" else ""
    parts = [_yes(ctx["written"])]
    if ctx["written"]:
        parts.append(_yes(ctx.get("loads")) if "loads" in ctx else status)
    if ctx.get("loads"):
        match = ctx.get("outputs_match")
        parts.append(("pass" if match else "FAIL") if match is not None else
                     "not run (slow)" if ctx.get("runs") == "skipped" else
                     ("run failed" if ctx.get("runs") is False else status))
    text = " / ".join(p for p in parts if p)
    return text + (f" ({ctx['error']})" if ctx.get("error") else "")


def export_cell(status: str, d: dict) -> str:
    """``loads / pass (max |diff|)`` from the verify line of ``clusterkit export --verify``."""
    if status != "ok":
        return status
    line = " ".join(d.get("verify", []))
    diff = line.rpartition("max |diff| = ")[2].split(" ")[0]
    if "outputs match" in line:
        return f"yes / pass ({diff})"
    if "DO NOT match" in line:
        return f"yes / FAIL ({diff})"
    errors = [t for t in d.get("tail", []) if "error" in t.lower()]
    return f"no (exit {d.get('code')}): {(errors or d.get('tail', ['']))[-1]}"[:300]


def _models(quick: bool) -> list[Path]:
    paths = bundled_models() + light_models()
    if quick:
        paths = [p for p in paths if p.stem in QUICK]
    return sorted(paths, key=lambda p: (p.stem in HEAVY, p.stat().st_size, p.stem))


def _model_row(path: Path, tmp: str, export: bool, deadline: float | None
               ) -> tuple[list, list[str]]:
    """The table row of one model and its notes (each route in its own interpreter)."""
    print(f"  {path.stem} ...", file=sys.stderr, flush=True)
    notes: list[str] = []
    ck_status, ck, ck_s = spawn("ck", path, tmp, deadline)
    ort_status, ort_d, ort_s = spawn("ort", path, tmp, deadline)
    wall = ck_s + ort_s
    if export:
        ex_status, ex, ex_s = spawn("export", path, tmp, deadline)
        ex_text, wall = export_cell(ex_status, ex), wall + ex_s
        if not ex_text.startswith("yes / pass"):
            notes.append(f"{path.stem}, clusterkit export --compile: {ex_text}")
    else:
        ex_text = "n/a (not built)"
    row = [_md(c) for c in [path.stem] + ck_cells(ck_status, ck) + ort_cells(ort_status, ort_d)
           + [ex_text, round(wall, 1)]]
    print(f"  {path.stem}: {row[1:]}", file=sys.stderr, flush=True)
    for reason in ck.get("reasons", [])[:3]:
        notes.append(f"{path.stem}, clusterkit: {reason}"[:400])
    if len(ck.get("reasons", [])) > 3:
        notes.append(f"{path.stem}, clusterkit: and {len(ck['reasons']) - 3} more "
                     "clusters split or fell back")
    if ck.get("runs") == 1:
        notes.append(f"{path.stem}, clusterkit: ck run s is the checked run alone (slower "
                     f"than {SLOW_RUN:g} s)")
    for name, status, d in (("clusterkit", ck_status, ck), ("onnxruntime", ort_status, ort_d)):
        if status != "ok":
            notes.append(f"{path.stem}, {name}'s route: {status}")
        elif d.get("error"):
            notes.append(f"{path.stem}, {name}'s route: {d['error']}")
        if d.get("bad_outputs"):
            notes.append(f"{path.stem}, {name}'s route: outputs out of tolerance: "
                         + ", ".join(d["bad_outputs"][:5]))
    if ort_d.get("ctx", {}).get("error"):
        notes.append(f"{path.stem}, onnxruntime's EPContext: {ort_d['ctx']['error']}")
    return row, notes


def run(quick: bool = False) -> dict:
    import threading

    total = time.perf_counter()
    deadline = None if BUDGET is None else total + BUDGET
    rows: dict[str, list] = {}
    found: dict[str, list[str]] = {}
    export = export_available()
    todo = _models(quick)
    lock = threading.Lock()

    def worker(cheap_first: bool) -> None:
        while True:
            with lock:
                if not todo:
                    return
                path = todo.pop(0 if cheap_first else -1)
            try:
                row, notes = _model_row(path, tmp, export, deadline)
            except Exception as exc:  # a fault of the bench itself: said in the row
                row = [path.stem, f"bench error: {_line(exc)}"] + [""] * (len(COLUMNS) - 2)
                notes = []
            with lock:
                rows[path.stem], found[path.stem] = row, notes

    with tempfile.TemporaryDirectory(prefix="bench_qnn_") as tmp:
        threads = [threading.Thread(target=worker, args=(k % 2 == 0,))
                   for k in range(max(1, JOBS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    notes = [n for k in sorted(found) for n in found[k]]
    notes += [
        "graph: --optimize basic; weights: clusterkit.io.weights.random_weights seed 0; inputs: "
        "random_inputs seed 0; QNN HTP (emulated) soc_model 60, enable_htp_fp16_precision 1",
        "ck: clusterkit run --selector qnn --strategy auto --backend qnn=ep --check "
        f"(run_cmd's functions); ck run s: mean of {REPEAT} runs after the checked one (the "
        f"checked one alone when slower than {SLOW_RUN:g} s); "
        "ck compile s: the steps' compile seconds summed",
        "ort: one session, QNN EP registered with register_execution_provider_library, "
        "default session options, CPU fallback allowed; compile s: session creation; "
        "compared with the CPU provider on the unoptimized model at rtol = atol = 2e-2",
        "ort EPContext: ep.context_enable=1, embed mode 0: written / a new QNN session of the "
        f"context model loads / its outputs match (not run when the model's run took over "
        f"{SLOW_RUN:g} s)",
        "ck compiled export: clusterkit export MODEL --selector qnn --strategy auto --optimize "
        "basic --random-weights 0 --compile -o OUT.onnx --verify (the compiled model run in a "
        "fresh Python with onnxruntime and QNN alone): loads / its check",
        f"each route of each model in its own interpreter, timeout {TIMEOUT:.0f} s"
        + (f", section budget {BUDGET:.0f} s" if BUDGET else "")
        + f", {max(1, JOBS)} model(s) at once; wall s: the routes' interpreters",
        f"total {time.perf_counter() - total:.1f} s"]
    return {"title": "QNN HTP: clusterkit's route against onnxruntime's own",
            "columns": COLUMNS, "rows": [rows[k] for k in sorted(rows)], "notes": notes}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        CHILDREN[sys.argv[2]](sys.argv[3], sys.argv[4])
    else:
        print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
