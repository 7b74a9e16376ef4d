"""Throughput placement of an ONNX model on a platform file: the cost model against loads worked
out by hand, the converter against the paper's format, the memory limits against a live-set
computation written here, the profiler, and the one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from clusterkit.cli import main as cli
from clusterkit.constraints.platform import model_instance, read_platform
from clusterkit.engines.cpsat.throughput import solve_throughput
from clusterkit.engines.throughput import heuristic_placement
from clusterkit.errors import MemoryShortfallError
from clusterkit.io.placement_instance import read_instance
from support.models import BUNDLED_MODELS

SQUEEZENET = BUNDLED_MODELS / "squeezenet1_1.onnx"
F32 = 4


def write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


def platform(tmp_path: Path, acc: dict | None = None, cpu: dict | None = None,
             name: str = "platform.json") -> Path:
    base = {"count": 2, "selector": "ops:Conv,Relu,MaxPool,Concat", "flops": 2e12,
            "memory_bandwidth": 1e11, "link": {"bandwidth": 1e10, "latency": 1e-5}}
    return write(tmp_path / name, {"accelerators": [{**base, **(acc or {})}],
                                   "cpu": {"count": 1, "flops": 1e11,
                                           "memory_bandwidth": 2e10, **(cpu or {})}})


# ---------------------------------------------------------------- the cost model, by hand
def tiny_model(path: Path) -> Path:
    """X[1,3,8,8] -> Conv(W[4,3,3,3]) -> Y[1,4,6,6] -> Relu -> R -> MatMul(M[6,5]) -> Z."""
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    m = numpy_helper.from_array(np.ones((6, 5), np.float32), "M")
    nodes = [helper.make_node("Conv", ["X", "W"], ["Y"], name="conv"),
             helper.make_node("Relu", ["Y"], ["R"], name="relu"),
             helper.make_node("MatMul", ["R", "M"], ["Z"], name="mm")]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("Z", TensorProto.FLOAT, [1, 4, 6, 5])], [w, m])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_latencies_weights_and_edge_costs_are_the_roofline_worked_out_by_hand(tmp_path):
    model = tiny_model(tmp_path / "tiny.onnx")
    acc = {"flops": 1e9, "memory_bandwidth": 1e8, "overhead": 1e-6, "selector": "ops:Conv,MatMul",
           "link": {"bandwidth": 1e7, "latency": 2e-6}, "count": 1}
    plat = platform(tmp_path, acc, {"flops": 1e8, "memory_bandwidth": 1e9, "overhead": 0.0})
    inst = model_instance(model, plat)
    # FLOPs: conv 2 * out(1*4*6*6) * (3*3*3); relu one per output; matmul 2 * out(120) * k(6)
    flops = {"conv": 2 * 144 * 27, "relu": 144, "mm": 2 * 120 * 6}
    # bytes read and written, constants included
    nbytes = {"conv": (192 + 108 + 144) * F32, "relu": (144 + 144) * F32,
              "mm": (144 + 30 + 120) * F32}
    assert inst.names == ["conv", "relu", "mm"]
    assert inst.op_types == ["Conv", "Relu", "MatMul"]
    for k, name in enumerate(inst.names):
        acc_t = 1e-6 + max(flops[name] / 1e9, nbytes[name] / 1e8)
        cpu_t = max(flops[name] / 1e8, nbytes[name] / 1e9)
        assert inst.acc_latency[k] == pytest.approx(acc_t, rel=1e-12)
        assert inst.cpu_latency[k] == pytest.approx(cpu_t, rel=1e-12)
    assert inst.supported.tolist() == [True, False, True]
    assert inst.size.tolist() == [108 * F32, 0, 30 * F32]  # the weights each node reads
    pairs = sorted(zip(inst.edge_src.tolist(), inst.edge_dst.tolist()))
    assert pairs == [(0, 1), (1, 2)]
    assert inst.out_cost[:2] == pytest.approx([2e-6 + 144 * F32 / 1e7] * 2, rel=1e-12)
    assert inst.out_cost[2] == 0.0  # the graph output has no consumer node


# ---------------------------------------------------------------- the paper's format
def test_placement_instance_reads_back_as_the_same_problem(tmp_path, capsys):
    plat = platform(tmp_path, {"weights_memory": 2e6, "activations_memory": 3e6})
    out = tmp_path / "sq.json"
    assert cli(["placement-instance", str(SQUEEZENET), "--platform", str(plat), "-o",
                str(out)]) == 0
    back, built = read_instance(out), model_instance(SQUEEZENET, read_platform(plat))
    for field in ("ids", "cpu_latency", "acc_latency", "size", "supported", "color",
                  "out_cost", "edge_src", "edge_dst", "tensor_size"):
        assert np.array_equal(getattr(back, field), getattr(built, field)), field
    assert (back.names, back.op_types) == (built.names, built.op_types)
    assert (back.accelerators, back.cpus, back.memory_limit, back.activation_limit) == \
        (2, 1, 2e6, 3e6)
    assert all(np.array_equal(a, b) for a, b in zip(back.tensor_nodes, built.tensor_nodes))
    assert cli(["placement-instance", str(SQUEEZENET), "--platform", str(plat), "-o",
                str(tmp_path / "missing" / "x.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def paper_loads(doc: dict, split: dict) -> dict[str, float]:
    """The paper evaluator's loads, from the documents alone: an accelerator pays its nodes'
    fpgaLatency and, once per node, the node's cost when it sends to or receives from another
    device; a CPU pays its nodes' cpuLatency."""
    where = {}
    for kind, devs in (("fpga", split["fpgas"]), ("cpu", split["cpus"])):
        for d, dev in enumerate(devs):
            where.update({i: f"{kind}{d}" for i in dev["nodes"]})
    node = {nd["id"]: nd for nd in doc["nodes"]}
    loads = {d: 0.0 for d in set(where.values())}
    for i, d in where.items():
        loads[d] += node[i]["fpgaLatency"] if d.startswith("fpga") else node[i]["cpuLatency"]
    paid: set[tuple[int, str]] = set()
    for e in doc["edges"]:
        a, b = where[e["sourceId"]], where[e["destId"]]
        if a != b:
            for d, key in ((a, (e["sourceId"], a)), (b, (e["sourceId"], b))):
                if d.startswith("fpga") and key not in paid:
                    paid.add(key)
                    loads[d] += e["cost"]
    return loads


@pytest.mark.parametrize("strategy", ["auto", "cpsat"])
def test_a_real_models_split_scores_as_the_reported_max_load(tmp_path, capsys, strategy):
    plat = platform(tmp_path, {"weights_memory": 2e6})
    inst_file, split_file = tmp_path / "sq.json", tmp_path / "split.json"
    assert cli(["placement-instance", str(SQUEEZENET), "--platform", str(plat), "-o",
                str(inst_file)]) == 0
    assert cli(["partition", str(SQUEEZENET), "--platform", str(plat), "--objective",
                "throughput", "--strategy", strategy, "--split", str(split_file)]) == 0
    text = capsys.readouterr().out
    split = json.loads(split_file.read_text())
    loads = paper_loads(json.loads(inst_file.read_text()), split)
    assert max(loads.values()) == pytest.approx(split["clusterkit"]["max_load"], rel=1e-9)
    assert "PlacedOp" not in text and "unknown size" not in text
    assert "/features/features.0/Conv" in text or "Conv" in text


# ---------------------------------------------------------------- memory
def live_peak(doc: dict, nodes: set[int]) -> float:
    """Largest resident bytes at a node of ``nodes``: a tensor is resident from the first to
    the last node of ``nodes`` (file order) that touches it."""
    order = [nd["id"] for nd in doc["nodes"] if nd["id"] in nodes]
    best = 0.0
    for step in range(len(order)):
        total = 0.0
        for t in doc.get("tensors", []):
            at = [k for k, j in enumerate(order) if j in t["nodes"]]
            if at and min(at) <= step <= max(at):
                total += t["size"]
        best = max(best, total)
    return best


@pytest.mark.parametrize("strategy", ["auto", "cpsat"])
def test_weights_and_activations_stay_within_each_accelerator(tmp_path, strategy):
    inst_file = tmp_path / "sq.json"
    plat = platform(tmp_path, {"weights_memory": 1.6e6, "activations_memory": 2.5e6})
    assert cli(["placement-instance", str(SQUEEZENET), "--platform", str(plat), "-o",
                str(inst_file)]) == 0
    doc = json.loads(inst_file.read_text())
    inst = read_instance(inst_file)
    unlimited = model_instance(SQUEEZENET, platform(tmp_path, name="free.json"))
    free = heuristic_placement(unlimited).device
    assert live_peak(doc, set(inst.ids[free == 0].tolist())) > 2.5e6  # the limit binds
    device = (heuristic_placement(inst).device if strategy == "auto"
              else solve_throughput(inst, time_limit=20, workers=2).device)
    size = {nd["id"]: nd["size"] for nd in doc["nodes"]}
    for d in range(inst.accelerators):
        on = set(inst.ids[device == d].tolist())
        assert sum(size[i] for i in on) <= 1.6e6
        assert live_peak(doc, on) <= 2.5e6


def test_no_cpu_and_too_little_memory_is_one_line_naming_device_and_excess(tmp_path, capsys):
    plat = platform(tmp_path, {"weights_memory": 1e5, "selector": "ops:Conv,Relu,MaxPool,"
                               "Concat,GlobalAveragePool,Flatten"}, {"count": 0})
    inst = model_instance(SQUEEZENET, plat)
    worst = int(np.argmax(inst.size))
    with pytest.raises(MemoryShortfallError):
        heuristic_placement_checked(inst)
    assert cli(["partition", str(SQUEEZENET), "--platform", str(plat)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "fpga0..fpga1" in err and inst.names[worst] in err
    assert f"{inst.size[worst] - 1e5:.0f} over" in err


def heuristic_placement_checked(inst):
    from clusterkit.engines.activations import check_memory

    check_memory(inst)
    return heuristic_placement(inst)


# ---------------------------------------------------------------- profile, errors
def test_profile_times_every_node_of_a_bundled_model(tmp_path, capsys):
    out = tmp_path / "times.json"
    assert cli(["profile", str(SQUEEZENET), "-o", str(out), "--runs", "2"]) == 0
    times = json.loads(out.read_text())["nodes"]
    names = {nd.name for nd in onnx.load(str(SQUEEZENET), load_external_data=False).graph.node}
    assert set(times) == names and all(t > 0 for t in times.values())
    plat = platform(tmp_path, {"latencies": "times.json", "latency_scale": 0.5},
                    {"latencies": "times.json"})
    inst = model_instance(SQUEEZENET, plat)
    for k, name in enumerate(inst.names):
        assert inst.cpu_latency[k] == times[name]
        assert inst.acc_latency[k] == pytest.approx(0.5 * times[name])


@pytest.mark.parametrize("acc, field", [
    ({"flops": "fast"}, "accelerators[0].flops"),
    ({"weights_memory": -1}, "accelerators[0].weights_memory"),
    ({"link": {"bandwidth": 0}}, "accelerators[0].link.bandwidth"),
    ({"selector": "mine.py"}, "accelerators[0].selector"),
    ({"colour": 1}, "accelerators[0].'colour'"),
])
def test_a_bad_platform_field_is_one_line_naming_it(tmp_path, capsys, acc, field):
    plat = platform(tmp_path, acc)
    assert cli(["partition", str(SQUEEZENET), "--platform", str(plat)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and field in err


def test_several_accelerator_kinds_are_refused_in_one_line(tmp_path, capsys):
    kind = {"count": 1, "selector": "ops:Conv"}
    plat = write(tmp_path / "two.json", {"accelerators": [kind, kind]})
    assert cli(["placement-instance", str(SQUEEZENET), "--platform", str(plat), "-o",
                str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "2 kinds" in err
