"""CLI gates (--require-full, --max-partitions, --min-offload) on partition, compare and run:
pass → the command's usual status; fail → one line naming the gate and the figure, the outputs
written anyway, exit status 3; a bad gate value is an error (2)."""

from __future__ import annotations

import json

import pytest

from clusterkit.cli import main as cli_main
from support.models import BUNDLED_MODELS

RESNET50 = str(BUNDLED_MODELS / "resnet50.onnx")
RESNET18 = str(BUNDLED_MODELS / "resnet18.onnx")


def _figures(doc: dict) -> tuple[int, int, int]:
    """(partitions, compute nodes offloaded, compute nodes) counted from a partition JSON."""
    folded = set(doc["folded"])
    acc = [c for c in doc["clusters"] if c["device"] != doc["fallback"]]
    n = sum(len(c["nodes"]) for c in doc["clusters"])
    offloaded = sum(1 for c in acc for v in c["nodes"] if v not in folded)
    return len(acc), offloaded, n - len(folded)


def _partition(tmp_path, capsys, *flags, selectors=("coreml",)):
    out = tmp_path / "p.json"
    if out.exists():
        out.unlink()
    argv = ["-q", "partition", RESNET50, "--json", str(out)]   # -q: only the gates' lines
    for s in selectors:
        argv += ["--selector", s]
    code = cli_main(argv + list(flags))
    err = capsys.readouterr().err
    return code, err, json.loads(out.read_text())     # written whatever the gates say


def test_partition_gates_pass_and_fail(tmp_path, capsys):
    code, err, doc = _partition(tmp_path, capsys)
    assert code == 0 and err == ""
    parts, off, compute = _figures(doc)
    assert (parts, off, compute) == (2, 121, 122)
    share = off / compute
    # --require-full: one compute node (Flatten) stays on the host
    code, err, _ = _partition(tmp_path, capsys, "--require-full")
    assert code == 3
    assert err.strip() == (f"clusterkit: gate failed: --require-full: {compute - off} compute "
                           "nodes on the fallback")
    code, err, doc2 = _partition(tmp_path, capsys, "--require-full",
                                 selectors=("coreml", "gpu=ops:Flatten"))
    assert code == 0 and err == "" and _figures(doc2)[1] == _figures(doc2)[2]
    # --max-partitions
    assert _partition(tmp_path, capsys, "--max-partitions", str(parts))[:2] == (0, "")
    code, err, _ = _partition(tmp_path, capsys, "--max-partitions", str(parts - 1))
    assert code == 3
    assert err.strip() == (f"clusterkit: gate failed: --max-partitions {parts - 1}: {parts} "
                           "partitions")
    # --min-offload: the share of compute (non-folded) nodes, 121/122
    assert _partition(tmp_path, capsys, "--min-offload", "0.99")[:2] == (0, "")
    code, err, _ = _partition(tmp_path, capsys, "--min-offload", "0.995")
    assert code == 3
    assert err.strip() == (f"clusterkit: gate failed: --min-offload 0.995: {share:.2f} of "
                           "compute nodes offloaded")
    # every failed gate has its line
    code, err, _ = _partition(tmp_path, capsys, "--require-full", "--max-partitions", "0",
                              "--min-offload", "1")
    assert code == 3 and len(err.strip().splitlines()) == 3


@pytest.mark.parametrize("flag,value", [("--min-offload", "1.5"), ("--min-offload", "x"),
                                        ("--max-partitions", "-1")])
def test_bad_gate_values_are_errors(flag, value, capsys):
    assert cli_main(["partition", RESNET50, "--selector", "coreml", flag, value]) == 2
    err = capsys.readouterr().err
    assert flag in err and err.count("\n") == 1


def test_compare_gates_name_the_failing_rows(tmp_path, capsys):
    out = tmp_path / "c.json"
    argv = ["-q", "compare", RESNET50, "--selector", "coreml", "--strategies",
            "cycles,singleton", "--json", str(out)]
    assert cli_main(argv + ["--min-offload", "0.9"]) == 0
    assert capsys.readouterr().err == ""
    out.unlink()
    assert cli_main(argv + ["--max-partitions", "2"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    rows = {r["strategy"]: r for r in json.loads(out.read_text())["rows"]}
    singleton = rows["singleton"]["partitions"]
    assert singleton > 2 and rows["cycles"]["partitions"] == 2
    assert err == [f"clusterkit: gate failed: --max-partitions 2: resnet50 singleton: "
                   f"{singleton} partitions"]


def test_run_gates(tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = ["run", RESNET18, "--selector", "coreml", "--json", str(out)]
    assert cli_main(argv + ["--max-partitions", "2"]) == 0
    assert capsys.readouterr().err == f"wrote {out}\n"  # a message: stderr, no gate line
    out.unlink()
    assert cli_main(argv + ["--require-full"]) == 3
    assert capsys.readouterr().err.strip().splitlines() == [
        f"wrote {out}", "clusterkit: gate failed: --require-full: 1 compute nodes on the fallback"]
    assert json.loads(out.read_text())["model"] == "resnet18"    # written anyway
