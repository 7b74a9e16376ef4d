"""clusterkit's split compiled by the real OpenVINO HETERO plugin, and checked against it.

:func:`hetero_core` gives an ``openvino.Core`` knowing every device of the split: a device name
OpenVINO does not know is the CPU plugin registered a second time under that name
(``core.register_plugin(<openvino/libs/libopenvino_intel_cpu_plugin.so>, NAME)``), a stand-in
for the accelerator; on a machine with the real device the same IR compiles with
``HETERO:NPU,CPU`` or ``HETERO:GPU,CPU``. Every device computes in float32
(``INFERENCE_PRECISION_HINT``: the CPU plugin's default is bf16 where the CPU has it).

:func:`check_hetero` compiles the IR with its affinities (:func:`~clusterkit.export.openvino_ir.
load_hetero`), reads ``HETERO_NUMBER_OF_SUBMODELS`` and each submodel's device (the compiled
model's exported header lists them), reads each submodel's ops from HETERO's per-subgraph
performance counters (``subgraphK: <op>``), and compares them with clusterkit's clusters: each
offloaded cluster must be one submodel of its device holding its ops and no other cluster's;
the fallback's ops make as many submodels as they have connected groups. Where HETERO's own
subgraph collector merges or splits differently, the verdict names the cluster and says why.
"""

from __future__ import annotations

import io
import os
import re
import time
import xml.etree.ElementTree as ET
from typing import Any, Mapping, Sequence

import numpy as np

from clusterkit.errors import BackendError
from clusterkit.export.openvino_ir import affinity_path, load_hetero, openvino
from clusterkit.graph.algorithms import UnionFind

_SUBGRAPH = re.compile(r"^subgraph(\d+): (.*)$")


def cpu_plugin_library() -> str:
    """The CPU plugin's library inside the ``openvino`` package."""
    ov = openvino()
    return os.path.join(os.path.dirname(ov.__file__), "libs", "libopenvino_intel_cpu_plugin.so")


def ov_device_names(devices: Sequence[str], known: Sequence[str]) -> dict[str, str]:
    """Each device of the split → the OpenVINO device that compiles it: itself when OpenVINO
    knows it (in any case: ``cpu`` is ``CPU``), else the CPU plugin's stand-in, named after
    it (the device itself when its name holds ``CPU``, else ``<name>CPU``: OpenVINO loads a
    plugin library only under a name holding the plugin's own)."""
    upper = {d.upper(): d for d in known}
    return {d: d if d in known else upper.get(d.upper()) or (d if "CPU" in d else f"{d}CPU")
            for d in dict.fromkeys(devices)}


def hetero_core(devices: Sequence[str], fp32: bool = True) -> tuple[Any, dict[str, str]]:
    """An ``openvino.Core`` with every device of ``devices`` and the OpenVINO name of each
    (:func:`ov_device_names`); the ones OpenVINO did not know are the CPU plugin's stand-ins
    (see the module docstring)."""
    ov = openvino()
    core = ov.Core()
    known = list(core.available_devices)
    names = ov_device_names(devices, known)
    for name in names.values():
        if name in known:
            continue
        try:
            core.register_plugin(cpu_plugin_library(), name)
        except Exception as exc:
            raise BackendError(f"OpenVINO cannot register the CPU plugin as device {name!r}: "
                               f"{' '.join(str(exc).split())[:300]}") from None
        known.append(name)
    if fp32:
        for name in dict.fromkeys(names.values()):
            core.set_property(name, {"INFERENCE_PRECISION_HINT": "f32"})
    return core, names


def ov_known() -> list[str]:
    """The devices a fresh ``openvino.Core`` knows."""
    return list(openvino().Core().available_devices)


def submodel_devices(compiled: Any) -> list[str]:
    """Each HETERO submodel's device, in order, from the exported model's header."""
    blob = io.BytesIO()
    compiled.export_model(blob)
    data = blob.getvalue()
    end = data.find(b"</hetero>")
    if not data.startswith(b"<?xml") or end < 0:
        raise BackendError("the HETERO compiled model's export has no <hetero> header")
    root = ET.fromstring(data[:end + len(b"</hetero>")])
    return [e.get("device", "") for e in root.iter("compiled_submodel")]


def submodel_ops(profiling: Sequence[Any]) -> dict[int, list[str]]:
    """Each submodel's op names, from HETERO's per-subgraph performance counters."""
    out: dict[int, list[str]] = {}
    for info in profiling:
        m = _SUBGRAPH.match(info.node_name)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def _components(names: set[str], model: Any) -> int:
    """How many connected groups the ops ``names`` of ``model`` make (edges among them)."""
    index = {n: k for k, n in enumerate(sorted(names))}
    sets = UnionFind(len(index))
    for op in model.get_ordered_ops():
        b = index.get(op.get_friendly_name())
        for i in op.inputs():
            a = index.get(i.get_source_output().get_node().get_friendly_name())
            if a is not None and b is not None:
                sets.union(a, b)
    return len({sets.find(k) for k in range(len(index))})


def _last_line(exc: Exception) -> str:
    """The last non-empty line of an OpenVINO exception (its own message; the lines before it
    are the C++ file positions it passed through)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1][:400] if lines else type(exc).__name__


def run_compiled(compiled: Any, feeds: Mapping[str, np.ndarray],
                 names: Sequence[str]) -> tuple[dict[str, np.ndarray], Any]:
    """One inference of an OpenVINO compiled model: the outputs ``names`` (ONNX tensor names)
    and the request (for its performance counters)."""
    request = compiled.create_infer_request()
    ports = {n: p for p in compiled.outputs for n in p.get_names()}
    missing = [n for n in names if n not in ports]
    if missing:
        raise BackendError(f"the OpenVINO model has no output {missing[0]!r}")
    ins = {n: np.ascontiguousarray(feeds[n]) for n in feeds}
    request.infer(ins)
    return {n: np.asarray(request.get_tensor(ports[n]).data).copy() for n in names}, request


_WHY = ("HETERO's collector walks the ops in order and joins each to the subgraph of an input "
        "of the same device where no cycle results; it does not take the largest subgraph "
        "first as clusterkit (and HETERO's automatic mode) does")


def _cluster_verdict(k: int, where: dict[int, list[str]], holds: dict[int, set[int]],
                     partition: Any) -> tuple[str, str]:
    """(verdict, why) for one offloaded cluster: the submodels holding its ops (``where``:
    submodel → its op names there)."""
    if not where:
        return "absent", "none of its ops is in a submodel (all folded as constants)"
    if len(where) > 1:
        parts = "; ".join(f"submodel {s}: {', '.join(names[:4])}"
                          f"{', ...' if len(names) > 4 else ''}" for s, names in where.items())
        return "split", f"its ops are in {len(where)} submodels ({parts}): {_WHY}"
    (s,) = where
    others = sorted(c for c in holds[s] if c != k)
    if others:
        ids = ", ".join(str(partition.clusters[c].id) if c >= 0 else "fallback" for c in others)
        return "merged", f"submodel {s} also holds ops of cluster(s) {ids}: {_WHY}"
    return "equal", ""


def compare_submodels(partition: Any, affinity: Any, devices: list[str],
                      ops: dict[int, list[str]], model: Any) -> dict[str, Any]:
    """clusterkit's clusters against HETERO's submodels (see the module docstring)."""
    holds = {k: {affinity.cluster[n] for n in ops.get(k, []) if n in affinity.cluster}
             for k in range(len(devices))}
    wrong = sorted({n for k, names in ops.items() for n in names
                    if n in affinity.device and affinity.device[n] != devices[k]})
    rows = []
    for k, c in enumerate(partition.clusters):
        if c.device == partition.fallback:
            continue
        where = {s: [n for n in ops.get(s, []) if affinity.cluster.get(n) == k]
                 for s in range(len(devices)) if k in holds[s]}
        verdict, why = _cluster_verdict(k, where, holds, partition)
        rows.append({"cluster": c.id, "device": c.device, "nodes": len(c.nodes),
                     "submodels": list(where), "verdict": verdict, "why": why})
    host = {op.get_friendly_name() for op in model.get_ordered_ops()  # as HETERO joins them:
            if affinity.device.get(op.get_friendly_name()) == partition.fallback  # constants
            and op.get_type_name() not in ("Parameter", "Constant")}  # and inputs cut
    fb_sub = sum(1 for d in devices if d == partition.fallback)
    per_device = {d: {"clusters": sum(1 for r in rows if r["device"] == d),
                      "submodels": devices.count(d)}
                  for d in dict.fromkeys([*partition.problem.devices, partition.fallback])}
    per_device[partition.fallback]["clusters"] = _components(host, model) if host else 0
    same = (not wrong and all(r["verdict"] in ("equal", "absent") for r in rows)
            and all(v["clusters"] == v["submodels"] for v in per_device.values()))
    return {"submodels": len(devices), "submodel_devices": devices, "per_device": per_device,
            "clusters": rows, "fallback_submodels": fb_sub, "wrong_device_ops": wrong,
            "same_split": same}


def check_hetero(partition: Any, xml: str, feeds: Mapping[str, np.ndarray],
                 expected: Mapping[str, np.ndarray], rtol: float = 1e-4,
                 atol: float = 1e-5) -> dict[str, Any]:
    """Compile the IR ``xml`` (written by :func:`~clusterkit.export.openvino_ir.export_openvino`
    for ``partition``) with the real HETERO plugin, run it on ``feeds``, and compare its
    submodels with the clusters and its outputs with ``expected`` (``outputs_match``), and with
    the same IR compiled unsplit on the fallback's device (``split_keeps_outputs``: whether the
    split changes OpenVINO's outputs, apart from the kernel differences between OpenVINO and
    whoever computed ``expected``)."""
    import json

    from clusterkit.export.openvino_ir import hetero_devices, op_affinities
    from clusterkit.runtime.executor import compare_outputs

    with open(affinity_path(xml), encoding="utf-8") as fh:
        order = hetero_devices(json.load(fh), partition.fallback).split(":", 1)[1].split(",")
    core, names = hetero_core(order)
    device = "HETERO:" + ",".join(names[d] for d in order)
    stand_ins = {d: n for d, n in names.items() if n not in ov_known()}
    start = time.perf_counter()
    try:
        compiled = load_hetero(xml, core, device, {"PERF_COUNT": True}, rename=names)
    except BackendError:
        raise
    except Exception as exc:
        raise BackendError(f"HETERO cannot compile {xml}: {' '.join(str(exc).split())[:400]}"
                           ) from None
    seconds = time.perf_counter() - start
    try:
        actual, request = run_compiled(compiled, feeds, list(expected))
    except BackendError:
        raise
    except Exception as exc:  # OpenVINO's own failure to wire or run its submodels
        number = compiled.get_property("HETERO_NUMBER_OF_SUBMODELS")
        raise BackendError(f"HETERO compiled {xml} into {number} submodels but cannot run it: "
                           f"{_last_line(exc)}") from None
    model = core.read_model(xml)
    back = {n: d for d, n in names.items()}
    report = compare_submodels(partition, op_affinities(model, partition),
                               [back.get(d, d) for d in submodel_devices(compiled)],
                               submodel_ops(request.get_profiling_info()), model)
    number = int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS"))
    if number != report["submodels"]:
        raise BackendError(f"HETERO_NUMBER_OF_SUBMODELS is {number} but the exported header "
                           f"lists {report['submodels']} submodels")
    cmp = compare_outputs(expected, actual, rtol=rtol, atol=atol)
    unsplit = compare_outputs(
        run_compiled(core.compile_model(model, names[order[-1]], {"INFERENCE_PRECISION_HINT":
                                                                 "f32"}), feeds,
                     list(expected))[0], actual, rtol=rtol, atol=atol)
    report.update(device=device, stand_ins=stand_ins, compile_seconds=seconds,
                  max_abs_diff=cmp["max_abs_diff"], max_rel_diff=cmp["max_rel_diff"],
                  outputs_match=cmp["outputs_match"], unsplit_device=names[order[-1]],
                  unsplit_max_abs_diff=unsplit["max_abs_diff"],
                  split_keeps_outputs=unsplit["outputs_match"], rtol=rtol, atol=atol)
    return report


# ---------------------------------------------------------------------- the guide's DOT dumps
#: an op of HETERO's dumps (written with ``OPENVINO_HETERO_VISUALIZE=1``): its label's first
#: line is the op's friendly name; ``subgraph=K`` in the subgraph dump; then ``device=D``
_HETERO_OP = re.compile(r'label="(?P<name>[^"\\]*)\\n[^"]*?(?:\\nsubgraph=(?P<sub>\d+))?'
                        r'\\ndevice=(?P<device>[^"\\]*)" fillcolor=(?P<colour>[^ \]]+)')
#: a node of clusterkit's ``--dump-dot`` files: ``n<index>`` and its colour
_CK_NODE = re.compile(r'\bn(?P<index>\d+) \[label="[^"]*", fillcolor="(?P<colour>[^"]+)"\]')
#: a cluster block of clusterkit's ``<model>_subgraphs.dot``
_CK_CLUSTER = re.compile(r'subgraph cluster_(?P<id>\d+) \{(?P<body>[^}]*)\}', re.S)


def hetero_dots(xml: str, devices: Sequence[str], folder: str) -> dict[str, str]:
    """HETERO's two dumps for the IR ``xml`` compiled on ``devices`` (its affinities set):
    ``{"affinity": text, "subgraphs": text}``, the guide's ``hetero_affinity_*.dot`` (a colour
    per device) and ``hetero_subgraphs_*.dot`` (a colour per submodel). Compiled in a fresh
    process whose working folder is ``folder``, with ``OPENVINO_HETERO_VISUALIZE=1`` (OpenVINO
    reads it when it compiles and writes into the working folder)."""
    import glob
    import subprocess
    import sys

    script = ("import sys; from clusterkit.runtime.hetero_check import compile_split; "
              "compile_split(sys.argv[1], sys.argv[2].split(','))")
    run = subprocess.run([sys.executable, "-c", script, os.path.abspath(xml), ",".join(devices)],
                         cwd=folder, env={**os.environ, "OPENVINO_HETERO_VISUALIZE": "1"},
                         capture_output=True, text=True, check=False)
    out = {}
    for kind in ("affinity", "subgraphs"):
        found = sorted(glob.glob(os.path.join(folder, f"hetero_{kind}_*.dot")))
        if run.returncode != 0 or not found:
            last = (run.stderr.strip().splitlines() or ["no dump written"])[-1]
            raise BackendError(f"HETERO wrote no {kind} dump for {xml}: {last}")
        with open(found[0], encoding="utf-8") as fh:
            out[kind] = fh.read()
    return out


def compile_split(xml: str, order: Sequence[str]) -> Any:
    """The IR ``xml`` compiled by HETERO on the devices ``order`` (stand-ins registered)."""
    core, names = hetero_core(order)
    return load_hetero(xml, core, "HETERO:" + ",".join(names[d] for d in order), {},
                       rename=names)


def compare_dot_dumps(partition: Any, xml: str, hetero: Mapping[str, str],
                      clusterkit: Mapping[str, str]) -> dict[str, Any]:
    """HETERO's dumps (:func:`hetero_dots`) against clusterkit's ``--dump-dot`` files of the
    same partition (``{"affinity": text, "subgraphs": text}``): the clusters HETERO's subgraph
    dump draws (each op's ``subgraph=K``, through the affinity map) compared as
    :func:`compare_submodels` compares the compiled submodels; whether clusterkit's subgraph
    dump draws exactly the partition's clusters; and each affinity dump's colours by device
    (one colour per device in each, HETERO's palette and clusterkit's differing)."""
    from clusterkit.export.openvino_ir import op_affinities

    ops: dict[int, list[str]] = {}
    sub_device: dict[int, str] = {}
    for m in _HETERO_OP.finditer(hetero["subgraphs"]):
        ops.setdefault(int(m["sub"]), []).append(m["name"])
        sub_device[int(m["sub"])] = m["device"]
    model = openvino().Core().read_model(xml)
    every = list(dict.fromkeys([*partition.problem.devices, partition.fallback]))
    back = {v: d for d, v in ov_device_names(every, ov_known()).items()}
    order = sorted(ops)
    report = compare_submodels(partition, op_affinities(model, partition),
                               [back.get(sub_device[k], sub_device[k]) for k in order],
                               {i: ops[k] for i, k in enumerate(order)}, model)
    drawn = {int(m["id"]): sorted(int(n["index"]) for n in _CK_NODE.finditer(m["body"]))
             for m in _CK_CLUSTER.finditer(clusterkit["subgraphs"])}
    offloaded = {c.id: sorted(int(partition.graph.nodes[v].source_index) for v in c.nodes)
                 for c in partition.clusters if c.device != partition.fallback}
    colours = {"hetero": _colours((back.get(m["device"], m["device"]), m["colour"])
                                  for m in _HETERO_OP.finditer(hetero["affinity"])),
               "clusterkit": _colours(_ck_devices(partition, clusterkit["affinity"]))}
    report.update(clusterkit_draws_the_clusters=drawn == offloaded, colours=colours,
                  one_colour_per_device=all(len(c) == 1 for dump in colours.values()
                                            for c in dump.values()))
    return report


def _ck_devices(partition: Any, text: str) -> list[tuple[str, str]]:
    """(device, colour) of each node clusterkit's affinity dump draws."""
    device = {int(partition.graph.nodes[v].source_index): c.device
              for c in partition.clusters for v in c.nodes}
    return [(device[int(m["index"])], m["colour"]) for m in _CK_NODE.finditer(text)
            if int(m["index"]) in device]


def _colours(pairs: Any) -> dict[str, list[str]]:
    """Device → the distinct colours it is drawn in."""
    out: dict[str, set[str]] = {}
    for device, colour in pairs:
        out.setdefault(device, set()).add(colour)
    return {d: sorted(c) for d, c in out.items()}
