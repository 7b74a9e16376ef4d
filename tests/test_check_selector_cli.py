"""``from clusterkit.testing import check_selector`` and ``clusterkit check-selector``: every
conformance rule one line, pass/FAIL/n/a, exit 0 / 1 / 2."""

from __future__ import annotations

from pathlib import Path

import pytest

import clusterkit as ck
from clusterkit.cli import main
from clusterkit.testing import RULES, ConformanceError, check_selector, rule_results

ROOT = Path(__file__).resolve().parents[1]
RESNET18 = str(ROOT / "tests" / "data" / "models" / "resnet18.onnx")
GOOD = str(ROOT / "examples" / "new_accelerator.py")
LEAKY = str(ROOT / "examples" / "leaky_selector.py")


def test_check_selector_is_importable_from_clusterkit_testing():
    report = check_selector(ck.parse_selector(GOOD), [RESNET18])
    assert report.graphs == ["resnet18"] and "reset" in report.rules
    with pytest.raises(ConformanceError) as err:
        check_selector(ck.parse_selector(LEAKY), [RESNET18])
    assert err.value.rules == ["reset", "explain"]


def test_rule_results_judge_every_rule_without_raising():
    _, results = rule_results(ck.parse_selector(LEAKY), [RESNET18])
    assert [r.rule for r in results] == list(RULES)
    status = {r.rule: r.status for r in results}
    assert status["reset"] == status["explain"] == "fail"
    assert all(s == "pass" for rule, s in status.items() if rule not in ("reset", "explain"))
    explain = next(r for r in results if r.rule == "explain")
    assert explain.failures[0] == ("resnet18: explain('/conv1/Conv') = None but select says "
                                   "False")


def test_cli_exit_0_when_every_rule_passes(capsys):
    assert main(["check-selector", GOOD, "--model", RESNET18]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[1:-1]] == [
        ["n/a", rule] if rule == "explain" else ["pass", rule] for rule in RULES]
    assert lines[1 + RULES.index("explain")].endswith("not judged: the selector has no "
                                                      "explain(node)")
    assert lines[-1] == "9 checks: 8 pass, 0 fail, 1 n/a"


def test_cli_exit_1_with_the_failures_under_their_rule(capsys):
    assert main(["check-selector", LEAKY, "--model", RESNET18]) == 1
    out = capsys.readouterr().out
    assert "FAIL  reset" in out and "FAIL  explain" in out
    assert "      resnet18: after reset, growth from node '/layer1/layer1.0/conv1/Conv'" in out
    assert out.splitlines()[-1] == "9 checks: 7 pass, 2 fail, 0 n/a"


def test_cli_exit_2_on_an_error(capsys, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no chip')\n")
    assert main(["check-selector", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "failed to import: RuntimeError('no chip')" in err
