"""clusterkit's partition as OpenVINO HETERO affinities: the model as OpenVINO IR and a map from
every op of that IR to its device.

OpenVINO's ONNX front end renames ONNX nodes, fuses some and decomposes others (a ``Conv`` with
a bias becomes a ``Convolution`` and an ``Add`` with its shape computations), so an op is mapped
to an ONNX node through the tensors it produces, not by name:

1. an op whose outputs carry the name of an ONNX node's output tensor takes that node's device
   and cluster (an op carrying the outputs of nodes on two devices cannot be given one affinity:
   the partition cannot be expressed, :class:`BackendError`);
2. the ops the front end adds (decompositions, converts, constants, weights) and the ops that
   compute constants only (the ``ConstantOfShape`` weight stubs: constants are free in
   clusterkit, computed where they are read) take the place of their first consumer that has
   one, in topological order: the node they came from; a ``Parameter`` takes its first reader's;
3. what is still without a place (a ``Result``, an op nobody reads) takes its first producer's;
4. an op that maps to nothing even so (an isolated op, never in a real model) goes to the
   fallback device; :attr:`Affinities.unmapped` lists them.

``op.get_rt_info()["affinity"]`` is not kept by ``openvino.save_model``, so the map travels
beside the IR (``OUT.affinity.json``); :func:`load_hetero` sets it again and compiles with
``HETERO:<devices>``.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from clusterkit._deprecated import keyword_only_after
from clusterkit.errors import BackendError
from clusterkit.fusion import root_of, source_model
from clusterkit.io.files import write_atomic

#: the extra that installs OpenVINO's runtime
EXTRA = "clusterkit[openvino-runtime]"
#: a place: (device, cluster position in the partition, or -1 for a fallback node)
Place = tuple[str, int]


def openvino() -> Any:
    """The ``openvino`` module, or a one-line :class:`BackendError` naming the extra."""
    try:
        import openvino as ov
    except ImportError:
        raise BackendError(f"OpenVINO's runtime is not installed: pip install '{EXTRA}'") from None
    return ov


def affinity_path(xml: str | os.PathLike) -> str:
    """``OUT.affinity.json`` beside ``OUT.xml``."""
    stem, _ = os.path.splitext(os.fspath(xml))
    return stem + ".affinity.json"


@dataclass
class Affinities:
    """Every op's device (by friendly name), the partition cluster it belongs to (-1: a
    fallback node), and the ops that mapped to nothing (given the fallback)."""

    device: dict[str, str] = field(default_factory=dict)
    cluster: dict[str, int] = field(default_factory=dict)
    unmapped: list[str] = field(default_factory=list)


def tensor_places(partition: Any) -> dict[str, Place]:
    """Each ONNX tensor made by a node → the place of that node."""
    root = root_of(partition.problem.graph)
    out: dict[str, Place] = {}
    for k, c in enumerate(partition.clusters):
        key = k if c.device != partition.fallback else -1
        for v in c.nodes:
            for t in root.nodes[v].outputs:
                if t:
                    out[t] = (c.device, key)
    return out


def _constant_ops(ops: Sequence[Any]) -> set[str]:
    """Friendly names of the ops computed from constants alone (no ``Parameter`` upstream)."""
    const: set[str] = set()
    for op in ops:
        if op.get_type_name() == "Parameter":
            continue
        srcs = [i.get_source_output().get_node().get_friendly_name() for i in op.inputs()]
        if all(s in const for s in srcs) and op.get_type_name() != "Result":
            const.add(op.get_friendly_name())
    return const


def _own_places(ops: Sequence[Any], places: Mapping[str, Place]) -> dict[str, Place]:
    """Rule 1: ops producing a named ONNX tensor (constants excepted)."""
    const = _constant_ops(ops)
    own: dict[str, Place] = {}
    for op in ops:
        name = op.get_friendly_name()
        if name in const:
            continue
        found = sorted({places[t] for o in op.outputs() for t in o.get_names() if t in places})
        if len({d for d, _ in found}) > 1:
            raise BackendError(f"the partition cannot be expressed as HETERO affinities: "
                               f"OpenVINO's op {name!r} computes tensors of devices "
                               f"{' and '.join(sorted({d for d, _ in found}))}")
        if found:
            own[name] = found[0]
    return own


def op_affinities(model: Any, partition: Any) -> Affinities:
    """The affinity of every op of ``model`` (an ``openvino.Model`` read from the partitioned
    ONNX model), by the rules of the module docstring."""
    ops = list(model.get_ordered_ops())
    names = [op.get_friendly_name() for op in ops]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise BackendError(f"the partition cannot be expressed as HETERO affinities: two ops "
                           f"of the OpenVINO model are named {dup!r}")
    place = _own_places(ops, tensor_places(partition))
    readers: dict[str, list[str]] = {n: [] for n in names}
    for op in ops:
        for i in op.inputs():
            readers[i.get_source_output().get_node().get_friendly_name()].append(
                op.get_friendly_name())
    for name in reversed(names):  # rule 2: the first placed reader
        if name not in place:
            got = [place[r] for r in readers[name] if r in place]
            if got:
                place[name] = got[0]
    for op, name in zip(ops, names):  # rule 3: the first placed producer
        if name not in place:
            srcs = [i.get_source_output().get_node().get_friendly_name() for i in op.inputs()]
            got = [place[s] for s in srcs if s in place]
            if got:
                place[name] = got[0]
    out = Affinities()
    for name in names:
        dev, key = place.get(name, (partition.fallback, -1))
        if name not in place:
            out.unmapped.append(name)
        out.device[name], out.cluster[name] = dev, key
    return out


def read_onnx(model: Any) -> Any:
    """An ``openvino.Model`` read by OpenVINO's ONNX front end from a ModelProto."""
    ov = openvino()
    with tempfile.TemporaryDirectory(prefix="clusterkit_ov_") as folder:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as fh:
            fh.write(model.SerializeToString())
        try:
            return ov.Core().read_model(path)
        except Exception as exc:
            text = " ".join(str(exc).split())[:500]
            raise BackendError(f"OpenVINO's ONNX front end cannot read the model: {text}") from None


@keyword_only_after(2)
def export_openvino(partition: Any, xml: str | os.PathLike, model: Any = None) -> Affinities:
    """Write ``partition``'s model (``model``: that ONNX ModelProto, default the partitioned
    graph's source) as OpenVINO IR (``xml`` and its ``.bin``, full precision) and the affinity
    map (:func:`affinity_path`); returns the map."""
    ov = openvino()
    proto = model if model is not None else source_model(root_of(partition.problem.graph))
    ov_model = read_onnx(proto)
    aff = op_affinities(ov_model, partition)
    text = json.dumps(aff.device, indent=1) + "\n"
    try:
        ov.save_model(ov_model, os.fspath(xml), compress_to_fp16=False)
    except Exception as exc:
        raise BackendError(f"OpenVINO could not write {os.fspath(xml)!r}: {exc}") from None
    write_atomic(affinity_path(xml), text)
    return aff


def hetero_devices(affinity: Mapping[str, str], fallback: str) -> str:
    """``HETERO:<devices>``: the devices of the map in their first appearance, the fallback
    last (HETERO's priority order)."""
    devices = [d for d in dict.fromkeys(affinity.values()) if d != fallback]
    return "HETERO:" + ",".join(devices + [fallback])


def load_hetero(xml: str | os.PathLike, core: Any = None, device: str | None = None,
                config: Mapping[str, Any] | None = None, fallback: str | None = None,
                rename: Mapping[str, str] | None = None) -> Any:
    """Read the IR, set every op's ``affinity`` from ``OUT.affinity.json`` (each device
    renamed by ``rename``, when given) and compile it with ``device`` (default:
    :func:`hetero_devices`, ``fallback`` last); the compiled model."""
    ov = openvino()
    core = core or ov.Core()
    with open(affinity_path(xml), encoding="utf-8") as fh:
        affinity = {k: (rename or {}).get(v, v) for k, v in json.load(fh).items()}
    model = core.read_model(os.fspath(xml))
    for op in model.get_ops():
        name = op.get_friendly_name()
        if name not in affinity:
            raise BackendError(f"{affinity_path(xml)} gives no device to op {name!r} of "
                               f"{os.fspath(xml)}")
        op.get_rt_info()["affinity"] = affinity[name]
    if device is None:
        device = hetero_devices(affinity, fallback or list(affinity.values())[-1])
    return core.compile_model(model, device, dict(config or {}))
