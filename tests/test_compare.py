"""compare: rows per strategy on real models, sweeps through executors, the CLI, the demo."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from clusterkit import make_problem, run_strategy
from clusterkit.cli import main
from clusterkit.analysis.compare import compare, compare_many, default_strategies, format_table

from support.models import LIGHT_MODELS, BUNDLED_MODELS

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
