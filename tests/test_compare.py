"""compare: rows per strategy on real models, sweeps through executors, the CLI, the demo."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from clusterkit import make_problem, run_strategy
from clusterkit.analysis.compare import compare, compare_many, default_strategies, format_table
from clusterkit.cli import main
from support.models import BUNDLED_MODELS, LIGHT_MODELS

SELECTOR = "ops:Conv,Relu,Add,MaxPool,BatchNormalization,GlobalAveragePool,Flatten,Gemm"
FAST = {"cpsat": {"time_limit": 10}}


def test_compare_rows_match_each_strategy_run_alone():
    path = BUNDLED_MODELS / "resnet18.onnx"
    strategies = default_strategies()
    result = compare(path, [SELECTOR], strategies, options=FAST)
    assert [r.strategy for r in result.rows] == strategies
    problem = make_problem(path, [SELECTOR])
    for row in result.rows:
        assert row.error is None, row.error
        alone = run_strategy(problem, row.strategy, **FAST.get(row.strategy, {}))
        m = alone.metrics()
        if row.strategy != "cpsat":  # cpsat may find different optima within its time limit
            assert row.cut_bytes == m["cut_bytes"] and row.partitions == m["partitions"]
        assert 0 <= row.offloaded_nodes <= 1
    text = format_table(result)
    assert all(s in text for s in strategies)


def test_failed_strategy_is_reported_not_dropped():
    result = compare(BUNDLED_MODELS / "squeezenet1_1.onnx", [SELECTOR], ["singleton", "nosuch"])
    assert [r.strategy for r in result.rows] == ["singleton", "nosuch"]
    bad = result.rows[1]
    assert bad.status == "error" and "unknown strategy 'nosuch'" in bad.error
    assert "nosuch: error" in format_table(result)


def test_sweep_through_an_executor_matches_the_serial_sweep():
    paths = [str(p) for p in LIGHT_MODELS[:3]]
    serial = compare_many(paths, [SELECTOR], ["singleton"])
    with ThreadPoolExecutor(max_workers=2) as pool:
        parallel = compare_many(paths, [SELECTOR], ["singleton"], executor=pool)
    assert [r["model"] for r in parallel] == [p.stem for p in LIGHT_MODELS[:3]]
    for a, b in zip(serial, parallel):
        for ra, rb in zip(a["rows"], b["rows"]):
            ra.pop("seconds"), rb.pop("seconds")
            assert ra == rb


def test_cli_compare_model_and_folder(tmp_path, capsys):
    out = tmp_path / "c.json"
    (tmp_path / "dots").mkdir()
    assert main(["compare", str(BUNDLED_MODELS / "squeezenet1_1.onnx"), "--selector", SELECTOR,
                 "--strategies", "singleton", "--json", str(out), "--dot",
                 str(tmp_path / "dots")]) == 0
    data = json.loads(out.read_text())
    assert data["rows"][0]["strategy"] == "singleton"
    assert (tmp_path / "dots" / "squeezenet1_1_singleton.dot").exists()
    folder = tmp_path / "models"
    folder.mkdir()
    for p in LIGHT_MODELS[:2]:
        (folder / p.name).write_bytes(p.read_bytes())
    out2 = tmp_path / "sweep.json"
    assert main(["compare", str(folder), "--selector", SELECTOR, "--strategies", "singleton",
                 "--jobs", "2", "--json", str(out2), "--no-progress"]) == 0
    sweep = json.loads(out2.read_text())
    assert sorted(m["model"] for m in sweep["models"]) == sorted(p.stem for p in LIGHT_MODELS[:2])
    assert main(["compare", str(folder), "--selector", SELECTOR, "--strategies", "zzz"]) == 2
    assert "unknown strategy 'zzz'" in capsys.readouterr().err


def test_demo_compares_every_strategy_and_writes_reports(tmp_path, capsys):
    from clusterkit.cli.demo import main as demo

    assert demo(["--out", str(tmp_path), "--time-limit", "20"]) == 0
    out = capsys.readouterr().out
    for strategy in default_strategies():
        assert strategy in out
    report = json.loads((tmp_path / "light_inception_v2_compare.json").read_text())
    assert [r["strategy"] for r in report["rows"]] == default_strategies()
    assert all(r["error"] is None for r in report["rows"])
    assert (tmp_path / "light_inception_v2_cycles.json").exists()
    assert str(tmp_path) in out
    page = (tmp_path / "light_inception_v2_report.html").read_text()
    for section in ("summary", "compare", "partition", "fallback"):
        assert f'id="{section}"' in page


# ---------------------------------------------------------------------- selector forms, failures
SQUEEZE = BUNDLED_MODELS / "squeezenet1_1.onnx"
MOBILE = BUNDLED_MODELS / "mobilenet_v2.onnx"


def _rows(result):
    data = result if isinstance(result, dict) else result.to_json()
    return [{k: v for k, v in r.items() if k != "seconds"} for r in data["rows"]]


def test_compare_accepts_the_selector_forms_partition_accepts():
    from clusterkit import OpsProperty

    ops = SELECTOR[len("ops:"):].split(",")
    expected = _rows(compare(SQUEEZE, [SELECTOR], ["singleton", "cycles"]))
    for sels in (OpsProperty(ops), [OpsProperty(ops)], SELECTOR):
        assert _rows(compare(SQUEEZE, sels, ["singleton", "cycles"])) == expected, sels
    two = compare(SQUEEZE, [OpsProperty(["Conv"], device="npu"), "gpu=ops:Relu"], ["singleton"])
    assert two.rows[0].error is None and two.selector.endswith("gpu=ops:Relu")


@pytest.fixture
def test_strategies():
    """Strategies that fail on purpose: ``zz_boom`` raises, ``zz_sleep`` sleeps a minute,
    ``zz_exit`` kills its process on the model with ``DIE_ON`` nodes and otherwise runs
    ``singleton``."""
    import os
    import time

    from clusterkit import get_strategy, register_strategy
    from clusterkit.engines import STRATEGIES

    singleton = get_strategy("singleton")
    die_on = make_problem(MOBILE, [SELECTOR]).n
    assert die_on != make_problem(SQUEEZE, [SELECTOR]).n

    def zz_exit(problem):
        if problem.n == die_on:
            os._exit(3)
        return singleton(problem)

    def zz_boom(problem):
        raise RuntimeError("boom")

    def zz_sleep(problem):
        time.sleep(60)

    for func in (zz_exit, zz_boom, zz_sleep):
        register_strategy(func.__name__, func)
    yield
    for name in ("zz_exit", "zz_boom", "zz_sleep"):
        STRATEGIES.unregister(name)


def _folder(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / SQUEEZE.name).write_bytes(SQUEEZE.read_bytes())
    (folder / "corrupt.onnx").write_bytes(b"this is not an onnx model")
    return folder


def test_a_strategy_raising_any_exception_is_an_error_row(test_strategies):
    result = compare(SQUEEZE, [SELECTOR], ["zz_boom", "singleton"])
    assert result.rows[0].error == "RuntimeError: boom"
    assert result.rows[1].error is None and result.rows[1].partitions > 0


def test_a_worker_that_dies_costs_only_its_model(test_strategies):
    paths = [str(SQUEEZE), str(MOBILE)]
    results = compare_many(paths, [SELECTOR], ["zz_exit"], isolate=True)
    assert [r["model"] for r in results] == ["squeezenet1_1", "mobilenet_v2"]
    assert results[0]["rows"][0]["error"] is None and results[0]["rows"][0]["partitions"] > 0
    assert results[1]["rows"][0]["strategy"] == "-"
    assert "died (exit code 3)" in results[1]["rows"][0]["error"]


def test_a_broken_process_pool_keeps_the_finished_rows(test_strategies):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if multiprocessing.get_start_method() != "fork":
        pytest.skip("the pool's workers must inherit the test strategies")
    with ProcessPoolExecutor(max_workers=1) as pool:
        results = compare_many([str(SQUEEZE), str(MOBILE)], [SELECTOR], ["zz_exit"],
                               executor=pool)
    assert results[0]["rows"][0]["error"] is None and results[0]["rows"][0]["partitions"] > 0
    assert "BrokenProcessPool" in results[1]["rows"][0]["error"]


def test_a_model_past_its_timeout_is_an_error_row(test_strategies):
    import time

    start = time.perf_counter()
    results = compare_many([str(SQUEEZE)], [SELECTOR], ["zz_sleep"], timeout=2)
    assert time.perf_counter() - start < 30
    assert "timed out after 2 s" in results[0]["rows"][0]["error"]


def test_jsonl_streams_each_model_and_a_resumed_run_skips_them(tmp_path, test_strategies):
    folder = _folder(tmp_path)
    paths = sorted(str(p) for p in folder.iterdir())
    log = tmp_path / "sweep.jsonl"
    first = compare_many(paths, [SELECTOR], ["singleton"], jsonl=str(log))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(line["path"] for line in lines) == paths
    assert {line["model"]: line["rows"][0]["strategy"] for line in lines} == {
        "corrupt": "-", "squeezenet1_1": "singleton"}
    # resumed: nothing runs again (zz_boom would turn any row it reached into an error)
    again = compare_many(paths, [SELECTOR], ["zz_boom"], jsonl=str(log))
    assert again == first and len(log.read_text().splitlines()) == 2
    # an interrupted write leaves a partial line: it is ignored and its model runs again
    log.write_text(log.read_text().splitlines()[0] + "\n" + '{"path": "' + paths[1][:5])
    third = compare_many(paths, [SELECTOR], ["singleton"], jsonl=str(log))
    assert _rows(third[1]) == _rows(first[1])
    records = log.read_text().splitlines()
    assert len(records) == 3 and json.loads(records[2])["path"] == paths[1]


def test_cli_compare_folder_with_a_failing_model_exits_2(tmp_path, capsys):
    folder = _folder(tmp_path)
    out = tmp_path / "sweep.json"
    log = tmp_path / "sweep.jsonl"
    assert main(["compare", str(folder), "--selector", SELECTOR, "--strategies", "singleton",
                 "--json", str(out), "--jsonl", str(log), "--no-progress"]) == 2
    assert "1 of 2 models failed: corrupt" in capsys.readouterr().err
    models = {m["model"]: m for m in json.loads(out.read_text())["models"]}
    assert models["squeezenet1_1"]["rows"][0]["error"] is None
    assert models["squeezenet1_1"]["rows"][0]["partitions"] > 0
    assert models["corrupt"]["rows"][0]["status"] == "error"
    assert len(log.read_text().splitlines()) == 2



def _noisy_double(x):
    print("a call's own output must not mix with its result")
    return 2 * x



def _isolated_in_this_process():
    import multiprocessing
    import os
    import time

    from clusterkit.analysis.isolated import run_isolated
    from clusterkit.errors import ExecutionError

    errors = []
    for func, args, timeout in ((os._exit, (3,), None), (time.sleep, (60,), 1)):
        try:
            run_isolated(func, args, timeout=timeout, label=func.__name__)
        except ExecutionError as exc:
            errors.append(str(exc))
    return multiprocessing.current_process().daemon, run_isolated(_noisy_double, (21,)), errors


def test_isolated_runs_in_a_daemonic_process_go_through_a_fresh_interpreter():
    """A daemonic process (a Dask worker started as usual) may not start multiprocessing
    children: a result (the call's prints kept apart), a crash and a timeout all come back."""
    import multiprocessing
    import time

    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        daemon, value, errors = pool.apply(_isolated_in_this_process)
    assert daemon and value == 42
    assert errors == ["_exit: its worker process died (exit code 3)",
                      "sleep timed out after 1 s"]
    assert time.perf_counter() - start < 30
