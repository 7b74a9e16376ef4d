"""Bad input gives one line, never a traceback: a table of cases through the real command line.

Each case runs ``clusterkit`` in-process (``clusterkit.cli.main``) and asserts the exit code, that
standard error is exactly one line ``clusterkit: error: ...``, and that the line names what is
wrong. An uncaught exception fails the test by itself. Files that would make a reader hang
(``/dev/zero``) run in a subprocess with a time-out.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from clusterkit.cli import main

BUNDLED = Path(__file__).resolve().parent / "data" / "models"
RESNET = BUNDLED / "resnet18.onnx"


def node_link(nodes, edges) -> str:
    return json.dumps({"directed": True, "multigraph": False, "graph": {},
                       "nodes": nodes, "edges": edges})


def chain(n: int = 3) -> str:
    return node_link([{"id": f"n{i}", "op": "Relu"} for i in range(n)],
                     [{"source": f"n{i}", "target": f"n{i + 1}"} for i in range(n - 1)])


def duplicate_names_model() -> bytes:
    """Two Relu nodes both named ``twin``, then an Add."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="twin"),
             helper.make_node("Relu", ["a"], ["b"], name="twin"),
             helper.make_node("Add", ["a", "b"], ["y"], name="sum")]
    graph = helper.make_graph(nodes, "dup", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


NO_SELECTOR_METHOD = textwrap.dedent("""
    from clusterkit.selection.protocol import SubgraphProperty

    class Broken(SubgraphProperty):
        create_subgraph_selector = None

    PROPERTY = Broken()
""")

#: id → (files to write: name → text/bytes, argv with {name} placeholders, words the line names)
CASES = {
    "missing model": ({}, ["partition", "{tmp}/nosuch.onnx", "--selector", "ops:Relu"],
                      ["nosuch.onnx"]),
    "empty onnx": ({"m.onnx": b""}, ["partition", "{m.onnx}", "--selector", "ops:Relu"],
                   ["m.onnx"]),
    "truncated onnx": ({"m.onnx": RESNET.read_bytes()[:300]},
                       ["partition", "{m.onnx}", "--selector", "ops:Relu"], ["m.onnx"]),
    "not onnx": ({"m.onnx": b"hello, I am text\n"},
                 ["partition", "{m.onnx}", "--selector", "ops:Relu"], ["m.onnx"]),
    "not json": ({"g.json": "{nodes: ["}, ["partition", "{g.json}", "--selector", "ops:Relu"],
                 ["g.json"]),
    "unknown suffix": ({"m.txt": "x"}, ["partition", "{m.txt}", "--selector", "ops:Relu"],
                       ["m.txt"]),
    "cyclic graph": ({"g.json": node_link(
        [{"id": "a", "op": "Relu"}, {"id": "b", "op": "Relu"}],
        [{"source": "a", "target": "b"}, {"source": "b", "target": "a"}])},
        ["partition", "{g.json}", "--selector", "ops:Relu"], ["cycle"]),
    "duplicate node id": ({"g.json": node_link(
        [{"id": "a", "op": "Relu"}, {"id": "b", "op": "Relu"}, {"id": "a", "op": "Relu"}],
        [{"source": "a", "target": "b"}])},
        ["partition", "{g.json}", "--selector", "ops:Relu"], ["duplicate", "'a'"]),
    "nodes not a list": ({"g.json": json.dumps({"directed": True, "nodes": "abc", "edges": []})},
                         ["partition", "{g.json}", "--selector", "ops:Relu"], ["nodes"]),
    "edge to unknown node": ({"g.json": node_link(
        [{"id": "a", "op": "Relu"}], [{"source": "a", "target": "zz"}])},
        ["partition", "{g.json}", "--selector", "ops:Relu"], ["zz"]),
    "bytes NaN": ({"g.json": chain(2).replace('"target": "n1"}', '"target": "n1", "bytes": NaN}')},
                  ["partition", "{g.json}", "--selector", "ops:Relu"], ["bytes"]),
    "bytes Infinity": ({"g.json": chain(2).replace('"target": "n1"}',
                                                   '"target": "n1", "bytes": Infinity}')},
                       ["partition", "{g.json}", "--selector", "ops:Relu"], ["bytes"]),
    "bytes beyond int64": ({"g.json": chain(2).replace('"target": "n1"}',
                                                       f'"target": "n1", "bytes": {2**70}}}')},
                           ["partition", "{g.json}", "--selector", "ops:Relu"], ["bytes"]),
    "zero nodes": ({"g.json": node_link([], [])},
                   ["partition", "{g.json}", "--selector", "ops:Relu"], ["no nodes"]),
    "no selector": ({"g.json": chain()}, ["partition", "{g.json}"], ["--selector"]),
    "unknown strategy": ({"g.json": chain()},
                         ["partition", "{g.json}", "--selector", "ops:Relu", "--strategy",
                          "nosuch"], ["nosuch"]),
    "unknown selector": ({"g.json": chain()}, ["partition", "{g.json}", "--selector", "nosuch"],
                         ["nosuch"]),
    "unknown option": ({"g.json": chain()},
                       ["partition", "{g.json}", "--selector", "ops:Relu", "--strategy",
                        "cycles", "--option", "nosuch=1"], ["nosuch"]),
    "selector without create_subgraph_selector": (
        {"g.json": chain(), "sel.py": NO_SELECTOR_METHOD},
        ["partition", "{g.json}", "--selector", "{sel.py}"], ["create_subgraph_selector"]),
    "negative max-const-bytes": ({"g.json": chain()},
                                 ["partition", "{g.json}", "--selector", "ops:Relu",
                                  "--max-const-bytes", "-1"], ["max", "const", "-1"]),
    "zero max-size": ({"g.json": chain()},
                      ["partition", "{g.json}", "--selector", "ops:Relu", "--max-size", "0"],
                      ["max", "size"]),
    "negative value-input position": ({"g.json": chain()},
                                      ["partition", "{g.json}", "--selector", "ops:Relu",
                                       "--value-inputs", "Reshape:-1"], ["Reshape", "-1"]),
    "unknown node in --never": ({"g.json": chain()},
                                ["partition", "{g.json}", "--selector", "ops:Relu", "--never",
                                 "n0,ghost"], ["ghost"]),
    "together groups depending on each other": ({"g.json": node_link(
        [{"id": v, "op": "Relu"} for v in ["a1", "x", "b1", "b2", "y", "a2"]],
        [{"source": s, "target": t} for s, t in [("a1", "x"), ("x", "b1"), ("b2", "y"),
                                                  ("y", "a2")]])},
        ["partition", "{g.json}", "--selector", "ops:Relu", "--together", "a1,a2",
         "--together", "b1,b2"], ["a1", "b1", "depend"]),
    "ambiguous node name": ({"dup.onnx": duplicate_names_model()},
                            ["partition", "{dup.onnx}", "--selector", "ops:Relu,Add", "--never",
                             "twin,sum"], ["twin", "0", "1"]),
    "compare missing model": ({}, ["compare", "{tmp}/nosuch.onnx", "--selector", "ops:Relu"],
                              ["nosuch.onnx"]),
    "run missing model": ({}, ["run", "{tmp}/nosuch.onnx", "--selector", "ops:Relu"],
                          ["nosuch.onnx"]),
    "export missing model": ({}, ["export", "{tmp}/nosuch.onnx", "--selector", "ops:Relu", "-o",
                                  "{tmp}/out.onnx"], ["nosuch.onnx"]),
    "plan not json": ({"plan.json": "not json"},
                      ["run", str(RESNET), "--plan", "{plan.json}"], ["plan.json"]),
}


def _materialize(tmp_path: Path, files: dict, argv: list[str]) -> list[str]:
    for name, content in files.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    out = []
    for arg in argv:
        arg = arg.replace("{tmp}", str(tmp_path))
        for name in files:
            arg = arg.replace("{" + name + "}", str(tmp_path / name))
        out.append(arg)
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_and_exit_2(case, tmp_path, capsys):
    files, argv, words = CASES[case]
    code = main(_materialize(tmp_path, files, argv))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith("clusterkit: error: "), err
    for word in words:
        assert word.lower() in lines[0].lower(), (word, lines[0])


def test_a_device_file_as_model_is_refused_without_reading_it():
    """``/dev/zero`` would be read forever: it must be refused as not a regular file."""
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this system")
    proc = subprocess.run([sys.executable, "-m", "clusterkit", "partition", "/dev/zero",
                           "--selector", "ops:Relu"], capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("clusterkit: error: ") and "/dev/zero" in lines[0]


def test_a_usage_error_is_one_line_exit_2(capsys):
    """A missing MODEL argument is argparse's usage error as one line (exit 2) with the
    subcommand's usage hint, not a traceback."""
    assert main(["partition"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(see 'clusterkit partition -h')" in err


def test_an_ambiguous_name_is_picked_by_its_graph_node_index(tmp_path):
    """``#K`` names the node at ``graph.node`` index K: the never pair then holds for it."""
    import clusterkit as ck

    path = tmp_path / "dup.onnx"
    path.write_bytes(duplicate_names_model())
    for twin in (0, 1):
        cons = ck.Constraints.default(never_together=[(f"#{twin}", "sum")])
        part = ck.partition(str(path), "ops:Relu,Add", strategy="cycles", constraints=cons)
        graph = part.graph
        at = {int(graph.index_to_source[v]): c.id for c in part.clusters for v in c.nodes}
        assert at[twin] != at[2], "the chosen twin shares a cluster with 'sum'"
    free = ck.partition(str(path), "ops:Relu,Add", strategy="cycles")
    assert len(free.clusters) == 1, "without the pair all three nodes share one cluster"


def test_output_into_a_closed_pipe_ends_quietly():
    """``clusterkit ... | head -1``: no BrokenPipeError traceback when the reader goes away."""
    proc = subprocess.Popen([sys.executable, "-m", "clusterkit", "partition",
                             str(BUNDLED / "bert_base.onnx"), "--selector", "nnapi"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line is printed
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
