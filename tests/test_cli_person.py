"""The command line a person meets: one-line argument errors with the right usage hint, headline
figures that mean one thing for every selector, grouped explanations and fallback reasons, and
Ctrl-C in a sweep that keeps what finished."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from clusterkit.analysis.report import get_placement
from clusterkit.cli import main
from clusterkit.errors import SelectorError
from clusterkit.selection.specs import parse_selectors
from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag, save_node_link
from support.models import BUNDLED_MODELS

RESNET = str(BUNDLED_MODELS / "resnet18.onnx")
CLI = [sys.executable, "-m", "clusterkit"]


def _out(capsys, args: list[str], code: int = 0) -> str:
    assert main(args) == code
    return capsys.readouterr().out


@pytest.mark.parametrize("args, prog, words", [
    (["report", RESNET, "--selector", "coreml"], "clusterkit report", "-o/--output"),
    (["partition", RESNET, "--selector", "coreml", "--min-offload", "90"],
     "clusterkit partition", "between 0 and 1, got '90'"),
    (["partition", RESNET, "--selector", "coreml", "--bogus"], "clusterkit partition",
     "unrecognized arguments: --bogus"),
    (["compare", RESNET, "--selector", "coreml", "--jobs", "x"], "clusterkit compare",
     "invalid int value"),
    (["partition", RESNET], "clusterkit partition", "required: --selector"),
    ([], "clusterkit", "required: COMMAND"),
])
def test_an_argument_error_is_one_line_with_its_commands_usage_hint(args, prog, words, capsys):
    assert main(args) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and not captured.out, captured.err
    assert lines[0].startswith("clusterkit: error: ") and words in lines[0]
    assert lines[0].endswith(f"(see '{prog} -h')")


def test_the_console_script_gives_the_same_one_line():
    proc = subprocess.run(CLI + ["partition", RESNET, "--selector", "coreml", "--bogus"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("command, required", [("partition", False), ("compare", True),
                                               ("report", True), ("run", False)])
def test_usage_shows_selector_as_required(command, required, capsys):
    with pytest.raises(SystemExit):
        main([command, "-h"])
    usage = " ".join(capsys.readouterr().out.split("\n\n")[0].split())
    assert ("[--selector SPEC]" not in usage) == required and "--selector SPEC" in usage


@pytest.mark.parametrize("specs", [["gpu=ops:Relu", "gpu=ops:Conv"], ["ops:Relu", "ops:Conv"],
                                   ["ops:Relu", "acc2=ops:Add", "ops:Conv"],
                                   ["npu=coreml", "npu=nnapi[feature_level=2]"]])
def test_the_duplicate_device_hint_suggests_a_spec_that_works(specs):
    with pytest.raises(SelectorError) as info:
        parse_selectors(specs)
    hint = str(info.value).rsplit("e.g. ", 1)[1]
    fixed = [hint if s == specs[-1] else s for s in specs]
    props = parse_selectors(fixed)  # the suggestion itself parses, with distinct devices
    assert len({p.device for p in props}) == len(specs)
    assert hint.split("=", 1)[1] == specs[-1].split("=", 1)[-1]


def _headline(text: str) -> dict[str, int]:
    m = re.search(r"strategy \S+, (\d+) partitions?, largest \d+ nodes, (\d+)/(\d+) compute "
                  r"nodes offloaded(?:, (\d+) folded)?, .*\(compute nodes: (.*)\), [\d.]+s$",
                  text.splitlines()[0])
    assert m, text.splitlines()[0]
    devs = dict(item.rsplit(" ", 1) for item in m.group(5).split(", "))
    return {"partitions": int(m.group(1)), "offloaded": int(m.group(2)),
            "compute": int(m.group(3)), "folded": int(m.group(4) or 0),
            "devices": {d: int(k) for d, k in devs.items()}}


def test_headline_figures_mean_the_same_for_every_selector(capsys):
    """tensorrt puts resnet18's 32 folded nodes in its cluster, coreml leaves them on the
    fallback: the headline counts compute nodes for both, and keeps that breakdown with
    ``--optimize basic`` (where nothing is folded)."""
    trt = _headline(_out(capsys, ["partition", RESNET, "--selector", "tensorrt"]))
    cml = _headline(_out(capsys, ["partition", RESNET, "--selector", "coreml"]))
    opt = _headline(_out(capsys, ["partition", RESNET, "--selector", "coreml", "--optimize",
                                  "basic"]))
    assert trt["compute"] == cml["compute"] == opt["compute"] == 49
    assert trt["folded"] == cml["folded"] == 32 and opt["folded"] == 0
    assert trt["offloaded"] == trt["devices"]["tensorrt"] == 49
    assert cml["offloaded"] == opt["offloaded"] == cml["devices"]["coreml"] == 48
    for h in (trt, cml, opt):
        assert sum(h["devices"].values()) == h["compute"]


def test_one_partition_is_singular(capsys):
    text = _out(capsys, ["partition", RESNET, "--selector", "tensorrt"])
    assert ", 1 partition, " in text.splitlines()[0]


def test_the_gate_line_is_singular_too(capsys):
    assert main(["partition", RESNET, "--selector", "tensorrt", "--max-partitions", "0"]) == 3
    err = capsys.readouterr().err
    assert err.strip().endswith("--max-partitions 0: 1 partition")


def test_cut_tensors_of_unknown_size_are_said(capsys):
    """t5_small with xnnpack cuts 36 tensors whose size shape inference does not know (only
    through symbolic dimensions): the summary must not claim ``cut_bytes 0``, and says the cut
    with those dimensions at 1 instead of the count."""
    import clusterkit as ck

    path = str(BUNDLED_MODELS / "t5_small.onnx")
    m = ck.partition(path, "xnnpack").metrics()
    assert m["cut_tensors_unknown_size"] > 0
    assert m["cut_tensors_estimated"] == m["cut_tensors_unknown_size"]
    assert m["cut_bytes_estimated"] > m["cut_bytes"]
    line = _out(capsys, ["partition", path, "--selector", "xnnpack"]).splitlines()[0]
    assert (f"cut_bytes ≥ {m['cut_bytes']:,}, about {m['cut_bytes_estimated']:,} with symbolic "
            "dimensions at 1 (compute nodes") in line
    assert "cut tensors of unknown size" not in _out(capsys, ["partition", RESNET, "--selector",
                                                              "coreml"])


def test_fallback_reasons_are_grouped_by_reason_and_op_type(capsys):
    """The CLI's reason table is the HTML page's: one row per reason, its nodes by op type."""
    import clusterkit as ck

    path = str(BUNDLED_MODELS / "bert_base.onnx")
    rep = get_placement(ck.partition(path, "nnapi"))
    text = _out(capsys, ["partition", path, "--selector", "nnapi"])
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if re.match(r"reason\s+nodes\s+op types$",
                                                              line))
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[head + 1:head + 1 +
                                                                 len(rep["reasons"])]]
    assert [r[0] for r in rows] == list(rep["reasons"])
    for reason, count, ops in rows:
        assert int(count) == rep["reasons"][reason]
        want = rep["reasons_by_op"][reason]
        assert ops == ", ".join(f"{op} {k}" for op, k in want.items())
        assert sum(want.values()) == int(count)
    assert "nnapi: nnapi:" not in text and "nnapi takes other Gather nodes but refused this " \
        "one: nnapi:" not in text


def test_explain_is_grouped_by_reason_and_limited(capsys):
    path = str(BUNDLED_MODELS / "vit_b_16.onnx")
    full = _out(capsys, ["partition", path, "--selector", "tensorrt", "--explain",
                         "--explain-limit", "100000"])
    short = _out(capsys, ["partition", path, "--selector", "tensorrt", "--explain",
                          "--explain-limit", "4"])
    total = int(re.search(r"^(\d+) adjacent supported node pairs split, by reason:$", full,
                          re.M).group(1))
    groups = re.findall(r"^  ([^ .].*): (\d+)$", full, re.M)
    assert len(groups) >= 2 and sum(int(n) for _, n in groups) == total > 4
    pairs = [line for line in short.splitlines() if line.startswith("    ")]
    assert len(pairs) == max(4, len(groups)) < total
    assert re.findall(r"^  ([^ .].*): (\d+)$", short, re.M) == groups
    assert f"... {total - len(pairs)} more pairs (--explain-limit 4" in short
    assert len([line for line in full.splitlines() if line.startswith("    ")]) == total


def test_run_and_partition_report_the_same_partitions(capsys):
    """shufflenet with tensorrt: 14 partitions, which the executor runs as one step (each fused
    node follows the previous one on the same device); run says both, and how."""
    path = str(BUNDLED_MODELS / "shufflenet_v2_x1_0.onnx")
    parts = _headline(_out(capsys, ["partition", path, "--selector", "tensorrt"]))["partitions"]
    text = _out(capsys, ["run", path, "--selector", "tensorrt"])
    assert _headline(text)["partitions"] == parts > 1
    m = re.search(r"^(\d+) steps? \((\d+) subgraphs? for the (\d+) partitions?(?:: (\d+) merged "
                  r"with the one before them)?(?:,? ?(\d+) not needed at run time)?\)", text, re.M)
    assert m, text
    subs, named, merged, dropped = (int(m.group(k) or 0) for k in (2, 3, 4, 5))
    assert named == parts and subs + merged + dropped == parts and merged > 0


def _sweep_dir(tmp_path):
    """A fast model ``a`` and a slow one ``b``: a 20,000-node DAG of Relu and Gather whose
    CP-SAT solve runs for its whole time limit, so a Ctrl-C always falls while ``b`` runs."""
    folder = tmp_path / "models"
    folder.mkdir()
    os.symlink(BUNDLED_MODELS / "squeezenet1_1.onnx", folder / "a.onnx")
    dag = long_edge_dag(20_000, seed=0)
    ops = np.where(np.isin(dag.ops, LONG_EDGE_SUPPORTED), "Relu", "Gather").tolist()
    save_node_link(dataclasses.replace(dag, ops=ops), folder / "b.json")
    return folder


@pytest.mark.parametrize("executor", [["--jobs", "1"], ["--jobs", "2"],
                                      ["--dask", "--dask-workers", "2"]], ids=["1", "2", "dask"])
def test_ctrl_c_in_compare_keeps_the_finished_models(executor, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while the second
    model runs: the first model's table, one line on stderr, the row kept in --jsonl, exit
    130, and no process left behind."""
    if "--dask" in executor:
        pytest.importorskip("distributed")
    jsonl = tmp_path / "rows.jsonl"
    proc = subprocess.Popen(CLI + ["compare", str(_sweep_dir(tmp_path)), "--selector",
                                   "ops:Conv,Relu", "--strategies", "singleton,cpsat",
                                   "--time-limit", "100", "--jsonl", str(jsonl),
                                   "--no-progress", *executor],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while not (jsonl.exists() and jsonl.read_text().endswith("\n")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.splitlines() == [f"clusterkit: interrupted: 1 of 2 models finished, kept in "
                                f"{jsonl}"], err
    assert out.startswith("a (100 nodes)") and "singleton" in out and "b (" not in out
    assert [json.loads(line)["model"] for line in jsonl.read_text().splitlines()] == ["a"]
    assert _group_ends(proc.pid, 10), "a child of the sweep outlived it"


def _group_ends(group: int, seconds: float) -> bool:
    """Does every process of the process group ``group`` end within ``seconds``?"""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("model, selectors, strategy, limits", [
    ("resnet18", ["npu=ops:Conv,Relu", "gpu=ops:Add,MaxPool,Relu"], "singleton", {}),
    ("resnet18", ["ops:Conv,Relu,Add,MaxPool"], "cycles", {"max_size": 3}),
    ("squeezenet1_1", ["ops:Conv,Relu,Concat,MaxPool"], "longest-path",
     {"max_const_bytes": 300_000}),
    ("bert_base", ["nnapi"], "cycles", {}),
    ("swin_t", ["tensorrt"], "auto", {}),
])
def test_every_split_reason_has_a_kind(model, selectors, strategy, limits):
    """The groups of ``--explain`` come from the reasons' own texts: every line the explainer
    writes on real partitions (size limits, devices, value inputs, cycles, ...) has its kind."""
    import clusterkit as ck
    from clusterkit.analysis.explain import explain, reason_kind

    cons = ck.Constraints.default(**limits)
    part = ck.partition(str(BUNDLED_MODELS / f"{model}.onnx"), selectors, strategy=strategy,
                        constraints=cons)
    kinds = {line: reason_kind(line) for line in explain(part)}
    assert kinds and "other" not in kinds.values(), [k for k, v in kinds.items() if v == "other"]
