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
    assert status["limits"] == "n/a"  # it declares none
    assert all(s == "pass" for rule, s in status.items()
               if rule not in ("reset", "explain", "limits"))
    explain = next(r for r in results if r.rule == "explain")
    assert explain.failures[0] == ("resnet18: explain('/conv1/Conv') = None but select says "
                                   "False")


def test_cli_exit_0_when_every_rule_passes(capsys):
    assert main(["check-selector", GOOD, "--model", RESNET18]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[1:-1]] == [
        ["n/a", rule] if rule in ("explain", "limits") else ["pass", rule] for rule in RULES]
    assert lines[1 + RULES.index("explain")].endswith("not judged: the selector has no "
                                                      "explain(node)")
    assert lines[1 + RULES.index("limits")].endswith("not judged: the property declares no "
                                                     "limits")
    assert lines[-1] == "11 checks: 9 pass, 0 fail, 2 n/a"


def test_cli_exit_1_with_the_failures_under_their_rule(capsys):
    assert main(["check-selector", LEAKY, "--model", RESNET18]) == 1
    out = capsys.readouterr().out
    assert "FAIL  reset" in out and "FAIL  explain" in out
    assert "      resnet18: after reset, growth from node '/layer1/layer1.0/conv1/Conv'" in out
    assert out.splitlines()[-1] == "11 checks: 8 pass, 2 fail, 1 n/a"


def test_cli_exit_2_on_an_error(capsys, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no chip')\n")
    assert main(["check-selector", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "failed to import: RuntimeError('no chip')" in err


def _selector_file(tmp_path, body: str):
    path = tmp_path / "npu.py"
    path.write_text("import clusterkit as ck\n\n\n" + body)
    return str(path)


def test_cli_a_select_returning_none_is_no_pass_of_what_was_never_called(capsys, tmp_path):
    spec = _selector_file(tmp_path, (
        "class NoneSel(ck.SubgraphSelector):\n    def select(self, node):\n        return None\n"
        "\n\nclass NoneNpu(ck.SubgraphProperty):\n    def create_subgraph_selector(self):\n"
        "        return NoneSel()\n"))
    assert main(["check-selector", spec, "--model", RESNET18]) == 1
    lines = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()
             if line[:4] in ("pass", "FAIL", "n/a ")}
    assert lines["bool"].startswith("FAIL")
    for rule in ("filter-subset", "subgraph-node"):
        assert lines[rule].startswith("n/a") and "not judged: never called (" in lines[rule]


def test_cli_a_raising_create_subgraph_node_fails(capsys, tmp_path):
    spec = _selector_file(tmp_path, (
        "class RaiseNpu(ck.SubgraphProperty):\n    def create_subgraph_selector(self):\n"
        "        return ck.ContainOpSelector(['Conv', 'Relu'])\n\n"
        "    def create_subgraph_node(self, subgraph):\n        raise ValueError('no compiler')\n"))
    assert main(["check-selector", spec, "--model", RESNET18]) == 1
    out = capsys.readouterr().out
    assert "FAIL  subgraph-node" in out and "FAIL  raises" in out
    assert "create_subgraph_node raised ValueError('no compiler') on the" in out
    assert main(["partition", RESNET18, "--selector", spec]) == 2  # what the FAIL foretells
