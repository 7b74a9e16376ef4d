"""Export a fused graph as an ONNX model in which every fused cluster is a model-local function.

Each fused node becomes a call to a ``FunctionProto`` named after the node, in the domain
``clusterkit.<device>`` (one domain per device, version 1); the function's body is the cluster's
original nodes, its inputs the cluster's boundary inputs followed by the constants it reads
(functions cannot see the graph's initializers), its outputs every tensor read outside the cluster
and the graph outputs it computes. Ordinary nodes are copied as they are. onnxruntime inlines the
functions, so the exported model runs anywhere the source model does.

The opset imports of the source model are kept (and given to every function); its IR version is
kept unless it is below 8, the first IR version with model-local functions, in which case it
becomes 8 (initializers are then no longer listed among the graph inputs, so they stay constants).
The partition JSON is stored in the model's metadata under ``clusterkit.partition``. A model
whose source kept its weights in external data is written the same way (see :func:`save_model`).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any

from clusterkit._deprecated import keyword_only_after
from clusterkit.errors import ExecutionError, WriteError
from clusterkit.fusion import FusedGraph, fuse, initializer_map, source_model, value_info_map
from clusterkit.graph.subgraph import Subgraph
from clusterkit.io.files import (
    check_output,
    replace_file,
    sync_file,
    write_atomic,
    write_error,
)
from clusterkit.io.onnx import had_external_data
from clusterkit.result.json_format import make_partition_json, parse_partition_json
from clusterkit.result.model import Partition

#: the first IR version that allows model-local functions
FUNCTION_IR_VERSION = 8
#: onnx refuses models with more local functions than this
MAX_LOCAL_FUNCTIONS = 10000
#: the largest model written as one protobuf; larger ones get external data
MAX_MODEL_BYTES = 2 ** 31
#: metadata key holding the partition JSON
PARTITION_KEY = "clusterkit.partition"


def device_domain(device: str) -> str:
    """The function domain of a device: ``clusterkit.<device>``."""
    return f"clusterkit.{device}"


@keyword_only_after(2)
def export_fused(graph: FusedGraph, path: str | os.PathLike | None = None,
                 model_name: str | None = None, check: bool = True):
    """The ONNX ModelProto of a fused graph (written to ``path`` when given, atomically: see
    :func:`save_model`). With ``check``, the onnx checker runs on it.

    onnx rejects models with more than :data:`MAX_LOCAL_FUNCTIONS` local functions; past that
    (a singleton partition of a very large graph), clusters with identical bodies share one
    function (see :func:`share_functions`)."""
    import onnx
    from onnx import helper

    if not isinstance(graph, FusedGraph):
        raise ExecutionError("export_fused needs a fused graph (clusterkit.fusion.fuse)")
    model = source_model(graph.root)
    vinfo = value_info_map(graph.root)
    opsets = list(model.opset_import)
    nodes, functions, domains = _calls(graph, vinfo, opsets)
    g = _outer_graph(graph, model, nodes, vinfo)
    out = helper.make_model(g, opset_imports=opsets + [helper.make_opsetid(d, 1)
                                                        for d in domains],
                            producer_name="clusterkit", functions=list(model.functions) +
                            functions)
    out.ir_version = max(int(model.ir_version), FUNCTION_IR_VERSION)
    for prop in model.metadata_props:
        if prop.key != PARTITION_KEY:
            out.metadata_props.add(key=prop.key, value=prop.value)
    plan = flat_plan(graph, model_name)
    out.metadata_props.add(key=PARTITION_KEY, value=json.dumps(plan))
    if len(out.functions) > MAX_LOCAL_FUNCTIONS:
        share_functions(out)
    if check:
        onnx.checker.check_model(out)
    if path is not None:
        save_model(out, path, external_data=wants_external_data(graph))
    return out


def _calls(graph: FusedGraph, vinfo: dict, opsets: list) -> tuple[list, list, list[str]]:
    """The outer graph's nodes (ordinary nodes copied, a function call per fused node), the
    functions and their domains (in first-use order)."""
    from onnx import helper

    root = graph.root
    nodes: list[Any] = []
    functions = []
    domains: list[str] = []
    fn_names: set[tuple[str, str]] = set()
    for v, node in enumerate(graph.nodes):
        f = graph.fused[v]
        members = graph.members[v]
        if f is None:
            nodes.extend(root.nodes[m].proto for m in members)
            continue
        device = f.subgraph.device
        domain = device_domain(device)
        if domain not in domains:
            domains.append(domain)
        sub = Subgraph.from_nodes(root, members, device, f.subgraph.cluster_id)
        fn_name = _function_name(node.name, domain, fn_names)
        inputs = list(sub.inputs) + list(sub.constants)
        fn = helper.make_function(domain, fn_name, inputs, list(sub.outputs),
                                  [root.nodes[m].proto for m in sub.nodes], opsets)
        if vinfo:
            fn.value_info.extend(vinfo[t] for t in inputs + list(sub.outputs) if t in vinfo)
            fn.value_info.extend(vinfo[t] for m in sub.nodes for t in root.nodes[m].outputs
                                 if t in vinfo and t not in sub.outputs)
        functions.append(fn)
        nodes.append(helper.make_node(fn_name, inputs, list(sub.outputs), name=node.name,
                                      domain=domain))
    return nodes, functions, domains


def _outer_graph(graph: FusedGraph, model, nodes: list, vinfo: dict):
    """The exported GraphProto around ``nodes``: the source's inputs (initializers left out),
    outputs, the initializers something still reads, and the value infos of the nodes'
    outputs."""
    from onnx import helper

    root = graph.root
    used: set[str] = set(root.outputs)
    for nd in nodes:
        used.update(nd.input)
    for m in range(root.n):  # outer-scope reads of If/Loop bodies
        used.update(root.nodes[m].implicit_inputs)
    src = model.graph
    dense = [t for t in src.initializer if t.name in used]
    sparse = [t for t in src.sparse_initializer if t.values.name in used]
    init_names = set(initializer_map(root))
    g = helper.make_graph(nodes, src.name or graph.name, [i for i in src.input
                                                         if i.name not in init_names],
                          list(src.output), initializer=dense, sparse_initializer=sparse or None,
                          doc_string=src.doc_string or None)
    listed = {i.name for i in g.input} | {o.name for o in g.output}
    g.value_info.extend(vinfo[t] for nd in nodes for t in nd.output
                        if t in vinfo and t not in listed)
    return g


def model_bytes(model, path: str | os.PathLike | None = None, external_data: bool = False
                ) -> bytes | str | None:
    """The serialized model in the format ``onnx.save`` picks for ``path``'s extension (binary
    protobuf by default), or ``None`` when it is written with external data (see
    :func:`save_model`): asked for with ``external_data``, or too large for one protobuf
    (2 GB)."""
    from onnx import serialization

    if external_data or model.ByteSize() >= MAX_MODEL_BYTES:
        return None
    ext = os.path.splitext(os.fspath(path))[1] if path is not None else ""
    fmt = serialization.registry.get_format_from_file_extension(ext) or "protobuf"
    return serialization.registry.get(fmt).serialize_proto(model)


def save_model(model, path: str | os.PathLike, external_data: bool = False) -> None:
    """Write an ONNX model atomically. A model written with external data (``external_data``,
    or one too large for one protobuf) keeps its tensors in ``<file name>.data`` beside it;
    both files are written in a temporary folder beside the target and renamed into place once
    complete. The model is not modified. Raises :class:`~clusterkit.errors.WriteError` naming
    the path."""
    data = model_bytes(model, path, external_data)
    if data is not None:
        write_atomic(path, data)
        return
    _save_with_external_data(model, os.fspath(path))


def wants_external_data(graph: FusedGraph) -> bool:
    """Whether the export of ``graph`` keeps its weights in external data, as its source did."""
    return had_external_data(graph.root)


def _save_with_external_data(model, path: str) -> None:
    import onnx

    folder, name = os.path.split(os.path.abspath(path))
    try:
        check_output(path)
        with tempfile.TemporaryDirectory(prefix=f".{name}.", dir=folder) as tmp:
            copy = onnx.ModelProto()
            copy.CopyFrom(model)  # saving with external data rewrites the tensors it moves
            onnx.save_model(copy, os.path.join(tmp, name), save_as_external_data=True,
                            location=name + ".data")
            written = sorted(os.listdir(tmp), key=lambda f: f == name)  # the model last
            for f in written:
                sync_file(os.path.join(tmp, f))
            for f in written:
                replace_file(os.path.join(tmp, f), os.path.join(folder, f))
    except WriteError:
        raise
    except (OSError, ValueError) as exc:
        raise write_error(path, exc) from exc


@keyword_only_after(2)
def export_partition(partition: Partition, path: str | os.PathLike | None = None,
                     model_name: str | None = None, check: bool = True):
    """Fuse ``partition`` and export it (see :func:`export_fused`)."""
    return export_fused(fuse(partition), path, model_name=model_name, check=check)


def flat_plan(graph: FusedGraph, model_name: str | None = None) -> dict:
    """The partition JSON of ``graph`` over the *original* model's nodes (``nodes`` index its
    ``graph.node``): the fused partition's own JSON when it partitioned the original graph; for a
    graph fused twice, one cluster per fused node plus fallback singletons (no metrics)."""
    part = graph.partition
    if graph.parent is graph.root:
        return part.to_json(model=model_name)
    src = graph.root.index_to_source
    fallback = part.problem.fallback
    clusters: list[dict[str, Any]] = []
    for v, f in enumerate(graph.fused):
        groups = ([(f.subgraph.device, graph.members[v])] if f is not None
                  else [(fallback, [m]) for m in graph.members[v]])
        for device, nodes in groups:
            clusters.append({"id": len(clusters), "device": device,
                             "nodes": sorted(src[nodes].tolist())})
    clusters.sort(key=lambda c: c["nodes"][0])
    for k, c in enumerate(clusters):
        c["id"] = k
    return make_partition_json(model_name if model_name is not None else graph.root.name,
                               part.strategy, part.selector, fallback, clusters, {},
                               part.seconds)


def partition_json_of(model) -> dict | None:
    """The partition JSON stored in an exported model, or ``None``."""
    for prop in model.metadata_props:
        if prop.key == PARTITION_KEY:
            return parse_partition_json(prop.value, f"the model's {PARTITION_KEY} metadata")
    return None


def share_functions(model) -> int:
    """Let calls whose functions have identical bodies (up to tensor names) share one function;
    functions holding subgraph attributes (If/Loop bodies name outer tensors) are left alone.
    Returns the number of functions removed."""
    from onnx import AttributeProto

    clusterkit_domains = {op.domain for op in model.opset_import
                          if op.domain.startswith("clusterkit.")}
    by_key: dict[tuple[str, bytes], Any] = {}
    rename: dict[tuple[str, str], str] = {}
    kept = []
    for fn in model.functions:
        if fn.domain not in clusterkit_domains or any(
                a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)
                for nd in fn.node for a in nd.attribute):
            kept.append(fn)
            continue
        canon = _canonical(fn)
        key = (fn.domain, canon.SerializeToString(deterministic=True))
        if key in by_key:
            rename[(fn.domain, fn.name)] = by_key[key].name
            continue
        canon.name = fn.name
        by_key[key] = canon
        kept.append(canon)
    removed = len(model.functions) - len(kept)
    del model.functions[:]
    model.functions.extend(kept)
    for nd in model.graph.node:
        new = rename.get((nd.domain, nd.op_type))
        if new is not None:
            nd.op_type = new
    return removed


def _canonical(fn: Any) -> Any:
    """A copy of ``fn`` with tensors renamed x0.. (inputs), y0.. (outputs), t0.. (inner),
    without node names or value_info."""
    import onnx

    names: dict[str, str] = {"": ""}
    for i, t in enumerate(fn.input):
        names[t] = f"x{i}"
    for i, t in enumerate(fn.output):
        names.setdefault(t, f"y{i}")
    out = onnx.FunctionProto()
    out.CopyFrom(fn)
    del out.value_info[:]
    out.name = ""
    for nd in out.node:
        nd.name = ""
        for k, t in enumerate(nd.input):
            nd.input[k] = names.setdefault(t, f"t{len(names)}")
        for k, t in enumerate(nd.output):
            nd.output[k] = names.setdefault(t, f"t{len(names)}")
    out.input[:] = [names[t] for t in fn.input]
    out.output[:] = [names[t] for t in fn.output]
    return out


def _function_name(name: str, domain: str, taken: set[tuple[str, str]]) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "subgraph"
    if base[0].isdigit():
        base = "f_" + base
    out, k = base, 1
    while (domain, out) in taken:
        out = f"{base}_{k}"
        k += 1
    taken.add((domain, out))
    return out
