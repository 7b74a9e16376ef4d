"""What the command line says is true: messages on stderr (``wrote FILE`` for every command,
silenced by ``-q``), no third-party banner, ``--explain`` lists every pair it has room for, byte
figures with thousands separators, a selector called by its name, the summary's seconds with
the selectors' time, and a report picture that opens on the graph."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import clusterkit as ck
from clusterkit.cli import main
from clusterkit.cli.partition_cmd import explain_shares
from support.models import BUNDLED_MODELS

RESNET18 = str(BUNDLED_MODELS / "resnet18.onnx")
SQUEEZE = str(BUNDLED_MODELS / "squeezenet1_1.onnx")
VIT = str(BUNDLED_MODELS / "vit_b_16.onnx")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.parametrize("command", [
    ["export", RESNET18, "--selector", "ops:Conv,Relu", "-o", "{t}/x.onnx", "--json",
     "{t}/x.json"],
    ["run", RESNET18, "--selector", "ops:Conv,Relu", "--strategy", "singleton", "--json",
     "{t}/r.json"],
], ids=["export", "run"])
def test_wrote_goes_to_stderr_and_q_silences_it(capsys, tmp_path, command):
    argv = [a.format(t=tmp_path) for a in command]
    code, out, err = _run(capsys, *argv)
    assert code == 0 and "wrote" not in out
    written = [a for a in argv if a.startswith(str(tmp_path))]
    assert [line.split(":")[0].split()[1] for line in err.splitlines()] == written
    assert all(line.startswith("wrote ") for line in err.splitlines())
    code, out, err = _run(capsys, "-q", *argv)
    assert code == 0 and err == "" and "wrote" not in out


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """The command in a fresh Python: native code's output reaches the real file descriptors."""
    return subprocess.run([sys.executable, "-m", "clusterkit", *argv], capture_output=True,
                          text=True, timeout=900, env=dict(os.environ, COLUMNS="200"))


@pytest.mark.parametrize("argv", [
    ["partition", RESNET18, "--selector", "qnn", "--optimize", "basic"],
    ["partition", RESNET18, "--selector", "ep:QNNExecutionProvider"],
    ["verify", RESNET18, "--selector", "qnn", "--no-compile"],
], ids=["qnn", "ep-qnn", "verify"])
def test_no_qnn_banner_without_v(argv):
    pytest.importorskip("onnxruntime_qnn", reason="needs clusterkit[qnn]")
    proc = _cli(*argv)
    assert proc.returncode in (0, 1), proc.stderr
    assert "LIBNATIVE" not in proc.stdout + proc.stderr
    assert proc.stderr == "", proc.stderr


def test_explain_shares_give_what_a_small_reason_leaves_to_the_others():
    assert explain_shares([3, 19], 30) == [3, 19]  # 22 pairs, limit 30: every one
    assert explain_shares([3, 19], 10) == [3, 7]
    assert explain_shares([1, 1, 1], 2) == [1, 1, 1]  # at least one per reason
    assert explain_shares([5, 5], 0) == [0, 0]
    assert sum(explain_shares([2, 9, 40], 30)) == 30


def test_explain_lists_every_pair_when_they_fit_the_limit(capsys):
    full = _run(capsys, "partition", VIT, "--selector", "tensorrt", "--explain",
                "--explain-limit", "100000")[1]
    total = int(re.search(r"^(\d+) adjacent supported node pairs split", full, re.M).group(1))
    groups = [int(n) for n in re.findall(r"^  [^ .].*: (\d+)$", full, re.M)]
    assert len(set(groups)) > 1  # uneven reasons: an equal share alone would list fewer
    out = _run(capsys, "partition", VIT, "--selector", "tensorrt", "--explain",
               "--explain-limit", str(total))[1]
    assert len([line for line in out.splitlines() if line.startswith("    ")]) == total
    assert "more pairs" not in out


def test_byte_figures_have_thousands_separators(capsys):
    code, out, _ = _run(capsys, "partition", RESNET18, "--selector", "ops:Conv,Relu,Add",
                        "--strategy", "cycles", "--max-const-bytes", "1000000", "--explain",
                        "--explain-limit", "1000")
    assert code == 0
    figures = re.findall(r"(?:reads|holds) (\S+) bytes of constants, above \S+ (\S+)", out)
    assert figures, out
    for held, cap in figures:
        assert re.fullmatch(r"\d{1,3}(,\d{3})*", held) and cap.rstrip(")") == "1,000,000"


def test_verify_calls_a_selector_file_by_the_name_given(capsys, tmp_path):
    npu = tmp_path / "mynpu.py"
    npu.write_text("import clusterkit as ck\n\n\nclass MyNpu(ck.SubgraphProperty):\n"
                   "    def create_subgraph_selector(self):\n"
                   "        return ck.ContainOpSelector(['Conv'])\n")
    code, _, err = _run(capsys, "verify", RESNET18, "--selector", str(npu))
    assert code == 2 and err.count("\n") == 1
    assert f"selector {str(npu)!r} does not model" in err and "'property'" not in err


class SlowNpu(ck.SubgraphProperty):
    """Takes Conv and Relu, 5 ms per node it is asked about."""

    def create_subgraph_selector(self):
        class Slow(ck.SubgraphSelector):
            def select(self, node):
                time.sleep(0.005)
                return node.op_type in ("Conv", "Relu")

        return Slow()


def test_the_seconds_include_the_selectors_time():
    graph = ck.load_graph(RESNET18)
    start = time.perf_counter()
    problem = ck.make_problem(graph, [SlowNpu("slow")])
    asked = time.perf_counter() - start
    assert asked > 0.005 * graph.n
    part = ck.run_strategy(problem, "singleton")
    assert part.seconds >= problem.selector_seconds >= 0.9 * asked - 0.05
    assert part.summary().endswith(f"{part.seconds:.3f}s")


def test_the_report_picture_is_as_wide_as_its_box(capsys, tmp_path):
    from clusterkit.analysis.html_page import inline_svg

    svg = inline_svg('<?xml version="1.0"?>\n<!-- x -->\n<svg width="2129pt" height="3699pt"\n'
                     ' viewBox="0.00 0.00 2129.00 3699.00"><g/></svg>\n')
    assert svg == '<svg width="100%"\n viewBox="0.00 0.00 2129.00 3699.00"><g/></svg>'
    page = tmp_path / "r.html"
    assert main(["report", SQUEEZE, "--selector", "ops:Conv,Relu,MaxPool", "--strategies", "none",
                 "-o", str(page)]) == 0
    head = re.search(r"<svg[^>]*>", Path(page).read_text())
    if head is None:
        pytest.skip("Graphviz's dot is not installed: the report holds the DOT text")
    assert 'width="100%"' in head.group(0) and "pt\"" not in head.group(0)
    assert "viewBox=" in head.group(0)


def test_verify_json_says_wrote_on_stderr(tmp_path):
    pytest.importorskip("onnxruntime_qnn", reason="needs clusterkit[qnn]")
    path = tmp_path / "v.json"
    proc = _cli("verify", RESNET18, "--selector", "qnn", "--no-compile", "--json", str(path))
    assert proc.returncode in (0, 1) and path.exists()
    assert proc.stderr == f"wrote {path}\n" and "wrote" not in proc.stdout
