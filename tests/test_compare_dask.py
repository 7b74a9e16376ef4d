"""compare sweeps on a real Dask cluster (a LocalCluster of two worker processes): the rows of a
local run, error rows, per-model isolation and timeouts inside the workers, the CLI flags."""

from __future__ import annotations

import json
import socket
import textwrap

import pytest

from clusterkit.analysis.compare import compare_many
from clusterkit.cli import main
from clusterkit.errors import ExecutionError
from support.models import BUNDLED_MODELS

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")

SELECTOR = "ops:Conv,Relu,Add,MaxPool,BatchNormalization,GlobalAveragePool,Flatten,Gemm"
SQUEEZE, MOBILE, RESNET = (BUNDLED_MODELS / f"{m}.onnx"
                           for m in ("squeezenet1_1", "mobilenet_v2", "resnet18"))

#: a selector that takes the ops of SELECTOR, but kills its process on a graph with a Concat
#: (squeezenet1_1) and sleeps on one with a Clip (mobilenet_v2); resnet18 has neither
TRAP = textwrap.dedent(f"""
    import os
    import time

    from clusterkit.selection.protocol import ContainOpSelector, OpsProperty


    class Trap(ContainOpSelector):
        def supported_mask(self, graph):
            ops = set(graph.op_types)
            if "Concat" in ops:
                os._exit(3)
            if "Clip" in ops:
                time.sleep(120)
            return super().supported_mask(graph)


    class TrapProperty(OpsProperty):
        def create_subgraph_selector(self):
            return Trap(self.op_types)


    PROPERTY = TrapProperty({SELECTOR[4:].split(",")!r})
""")


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes, not daemonic (as ``--dask`` starts them): an isolated model's child
    comes from multiprocessing's forkserver."""
    with dask.config.set({"distributed.worker.daemon": False}), \
            distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                     dashboard_address=None, silence_logs=50,
                                     scheduler_kwargs={"dashboard_address": ":0"}) as local:
        yield local


@pytest.fixture(scope="module")
def executor(cluster):
    from clusterkit.analysis.dask_executor import dask_executor

    with dask_executor(cluster.scheduler_address) as ex:
        yield ex


def _models(tmp_path, *models):
    folder = tmp_path / "models"
    folder.mkdir()
    for path in models:
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "corrupt.onnx").write_bytes(b"this is not an onnx model")
    return folder


def _without_seconds(results):
    return [{**m, "rows": [{k: v for k, v in r.items() if k != "seconds"} for r in m["rows"]]}
            for m in results]


def test_a_dask_sweep_gives_the_rows_of_a_local_run(tmp_path, executor):
    folder = _models(tmp_path, SQUEEZE, MOBILE, RESNET)
    paths = sorted(str(p) for p in folder.iterdir())
    local = compare_many(paths, [SELECTOR], ["singleton", "cycles"])
    log = tmp_path / "sweep.jsonl"
    remote = compare_many(paths, [SELECTOR], ["singleton", "cycles"], executor=executor,
                          jsonl=str(log))
    assert _without_seconds(remote) == _without_seconds(local)
    assert [m["model"] for m in remote] == ["corrupt", "mobilenet_v2", "resnet18",
                                            "squeezenet1_1"]
    assert remote[0]["rows"][0]["status"] == "error"
    assert all(r["error"] is None and r["partitions"] > 0 for m in remote[1:] for r in m["rows"])
    streamed = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(s.pop("path") for s in streamed) == paths
    # resumed: nothing runs again (the unknown strategy would turn every row into an error)
    again = compare_many(paths, [SELECTOR], ["nosuch"], executor=executor, jsonl=str(log))
    assert again == remote and len(log.read_text().splitlines()) == len(paths)


def test_crashed_and_timed_out_models_in_dask_workers_are_error_rows(tmp_path, executor):
    trap = tmp_path / "trap.py"
    trap.write_text(TRAP)
    paths = [str(SQUEEZE), str(RESNET)]
    crashed = compare_many(paths, [str(trap)], ["singleton"], executor=executor, isolate=True)
    assert "its worker process died (exit code 3)" in crashed[0]["rows"][0]["error"]
    local = compare_many([str(RESNET)], [str(trap)], ["singleton"])
    assert _without_seconds(crashed[1:]) == _without_seconds(local)
    timed_out = compare_many([str(MOBILE)], [str(trap)], ["singleton"], executor=executor,
                             timeout=2)
    assert f"model {str(MOBILE)!r} timed out after 2 s" == timed_out[0]["rows"][0]["error"]


def test_cli_on_a_scheduler_and_on_its_own_cluster_writes_the_local_json(tmp_path, cluster,
                                                                         capsys):
    folder = _models(tmp_path, SQUEEZE)
    base = ["compare", str(folder), "--selector", SELECTOR, "--strategies", "singleton,cycles",
            "--no-progress", "--json"]
    runs = {"local": [], "scheduler": ["--scheduler", cluster.scheduler_address],
            "dask": ["--dask", "--dask-workers", "1"]}
    written = {}
    for name, flags in runs.items():
        out = tmp_path / f"{name}.json"
        assert main(base + [str(out)] + flags) == 2  # the corrupt model fails
        assert "1 of 2 models failed: corrupt" in capsys.readouterr().err
        written[name] = _without_seconds(json.loads(out.read_text())["models"])
    assert written["scheduler"] == written["local"] == written["dask"]


def _dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def test_cli_unreachable_scheduler_is_one_line_and_exit_2(tmp_path, capsys):
    folder = _models(tmp_path, SQUEEZE)
    address = _dead_address()
    assert main(["compare", str(folder), "--selector", SELECTOR, "--strategies", "singleton",
                 "--scheduler", address, "--scheduler-timeout", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"clusterkit: error: could not reach the Dask scheduler at "
                          f"{address!r} within 1 s")
    assert len(err.splitlines()) == 1
    assert main(["compare", str(folder), "--selector", SELECTOR, "--scheduler", "no-port"]) == 2
    assert capsys.readouterr().err.startswith(
        "clusterkit: error: bad Dask scheduler address 'no-port': ")


def test_missing_distributed_names_the_extra(tmp_path, monkeypatch, capsys):
    from clusterkit.analysis.dask_executor import dask_executor

    monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    with pytest.raises(ExecutionError, match=r"pip install 'clusterkit\[dask\]'"):
        with dask_executor():
            pass
    folder = _models(tmp_path, SQUEEZE)
    assert main(["compare", str(folder), "--selector", SELECTOR, "--dask"]) == 2
    err = capsys.readouterr().err
    assert "clusterkit[dask]" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("flags, message", [
    (["--jobs", "2", "--dask"], "choose one of --jobs and --dask"),
    (["--dask", "--scheduler", "tcp://127.0.0.1:1"], "choose one of --dask and --scheduler"),
    (["--dask-workers", "2"], "add --dask"),
    (["--dask", "--dask-workers", "0"], "at least 1"),
])
def test_cli_contradicting_executor_flags_exit_2(tmp_path, capsys, flags, message):
    folder = _models(tmp_path, SQUEEZE)
    assert main(["compare", str(folder), "--selector", SELECTOR] + flags) == 2
    assert message in capsys.readouterr().err


def test_cli_dask_needs_a_folder(capsys):
    assert main(["compare", str(SQUEEZE), "--selector", SELECTOR, "--dask"]) == 2
    assert "is not a folder" in capsys.readouterr().err
