"""Export the compiled model: every offloaded cluster replaced by its EP's compiled form.

An :class:`~clusterkit.runtime.executor.Executor` whose devices run on the ``ep`` backend with
``context_dir`` set has each of its device steps compiled by the EP into an EPContext model (one
``com.microsoft:EPContext`` node holding, or naming, the EP's context binary). The exported
model is the schedule of those steps: the EPContext node of every device step (an offloaded
cluster, or a piece of one the compiler refused whole), the host steps' nodes as plain ONNX,
the constants they read, and the values fixed before the run that they read as initializers.
Loading it needs onnxruntime and the plugin EP only.

onnxruntime loads one model holding several EPContext nodes of one EP when each has its own
context: each node ``main_context=1`` with its own binary (``embed_mode=0``, the files beside
the model) or with its binary inside (``embed_mode=1``). Each cluster is compiled in a session
of its own, so each node has a context of its own; the one-binary form shared by several nodes
(``main_context=0`` nodes naming another node's graph), which onnxruntime itself writes for a
model the EP splits, is not made. (onnxruntime's own embedded export of a model the QNN EP splits
into several partitions cannot be loaded again: onnxruntime#31977; clusterkit's is made per
cluster and loads.)
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from clusterkit.errors import ExecutionError
from clusterkit.export.onnx_model import PARTITION_KEY, flat_plan
from clusterkit.fusion import initializer_map, source_model
from clusterkit.io.files import write_all

#: metadata key: which EPContext node compiled which cluster (see :func:`compiled_model`)
CONTEXTS_KEY = "clusterkit.contexts"
#: the EPContext attribute holding the context (a file name relative to the model, or bytes)
CACHE_ATTR = "ep_cache_context"


def compiled_model(executor: Any, stem: str, model_name: str | None = None
                   ) -> tuple[Any, list[tuple[str, bytes]]]:
    """The deployable model of ``executor``'s schedule (see the module docstring) and the
    context binaries to write beside it, as ``(file name, bytes)``; the binaries are named
    ``<stem>_ctx<k>.bin`` in the order of the device steps. The EPContext nodes come in the
    schedule's (topological) order; the metadata ``clusterkit.contexts`` maps each to its
    cluster of the partition JSON (stored too, as by :func:`export_fused`), in the JSON's
    order."""
    from onnx import helper

    root = executor.root
    model = source_model(root)
    binaries: list[tuple[str, bytes]] = []
    nodes: list[Any] = []
    value_infos: list[Any] = []
    rows: list[dict[str, Any]] = []
    for u in executor.steps:
        context = u.compiled.context if u.compiled is not None else None
        if context is not None:
            ctx_nodes, infos, files = _context_nodes(context, u.name, stem, len(binaries))
            nodes.extend(ctx_nodes)
            value_infos.extend(infos)
            binaries.extend(files)
            rows.extend(_context_row(u, nd.name) for nd in ctx_nodes)
        elif u.kind != "constants":
            nodes.extend(root.nodes[v].proto for v in u.subgraph.nodes)
    fixed = _fixed_values(executor, nodes)
    nodes = _constant_nodes(root, nodes) + nodes
    graph = _graph(model, root, nodes, fixed, value_infos)
    out = helper.make_model(graph, opset_imports=_opsets(model, nodes),
                            producer_name="clusterkit")
    out.ir_version = max(int(model.ir_version), 8)
    out.metadata_props.extend(p for p in model.metadata_props
                              if p.key not in (PARTITION_KEY, CONTEXTS_KEY))
    plan = flat_plan(executor.graph, model_name)
    out.metadata_props.add(key=PARTITION_KEY, value=json.dumps(plan))
    out.metadata_props.add(key=CONTEXTS_KEY, value=json.dumps(_in_json_order(executor, rows)))
    return out, binaries


def _context_row(u: Any, node: str) -> dict[str, Any]:
    """Which cluster of the partition JSON (its ``id``) the EPContext node ``node`` of step
    ``u`` compiled; ``piece``: the piece's number when the EP refused the cluster whole and it
    was carved (step ``NAME.pieceK``)."""
    piece = u.name.rpartition(".piece")[2] if ".piece" in u.name else None
    return {"node": node, "cluster": u.subgraph.cluster_id, "device": u.device,
            "piece": None if piece is None else int(piece)}


def _in_json_order(executor: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` in the partition JSON's order of clusters, pieces in order."""
    order = {c.id: k for k, c in enumerate(executor.graph.partition.clusters)}
    return sorted(rows, key=lambda r: (order.get(r["cluster"], -1), r["piece"] or 0))


def _context_nodes(path: str, name: str, stem: str, first: int):
    """The EPContext nodes of the EP context model at ``path`` (renamed after the step), the
    value infos of their inputs and outputs, and their binaries (renamed for ``stem``)."""
    import onnx

    ctx = onnx.load(path, load_external_data=False)
    folder = os.path.dirname(path)
    nodes: list[Any] = []
    files: list[tuple[str, bytes]] = []
    for k, node in enumerate(ctx.graph.node):
        if node.op_type != "EPContext":
            raise ExecutionError(f"the EP context model of step {name!r} holds a "
                                 f"{node.op_type} node: the EP did not take the step whole")
        node.name = name if len(ctx.graph.node) == 1 else f"{name}.{k}"
        for attr in node.attribute:
            if attr.name == CACHE_ATTR and _embed_mode(node) == 0:
                target = f"{stem}_ctx{first + len(files)}.bin"
                with open(os.path.join(folder, attr.s.decode()), "rb") as fh:
                    files.append((target, fh.read()))
                attr.s = target.encode()
        nodes.append(node)
    infos = list(ctx.graph.input) + list(ctx.graph.output)
    return nodes, infos, files


def _embed_mode(node) -> int:
    from onnx import helper

    for attr in node.attribute:
        if attr.name == "embed_mode":
            return int(helper.get_attribute_value(attr))
    return 1


def _fixed_values(executor: Any, nodes: list) -> list[Any]:
    """Initializers for the values fixed before the run (static values, constant graph
    outputs) that the kept nodes or the graph outputs read and nothing kept computes."""
    from onnx import numpy_helper

    produced = {t for nd in nodes for t in nd.output}
    read = {t for nd in nodes for t in nd.input} | set(executor.graph.outputs)
    known = executor.static.values if executor.static is not None else {}
    out = [known[t] for t in sorted(read - produced) if t in known]
    for u in executor.steps:
        if u.kind == "constants" and u.compiled is not None:
            values = u.compiled.run_values([])
            to_numpy = u.compiled.value_kind.to_numpy
            out += [numpy_helper.from_array(np.asarray(to_numpy(v)), t)
                    for t, v in zip(u.outputs, values)]
    return out


def _constant_nodes(root: Any, nodes: list) -> list[Any]:
    """The constant nodes (weight stubs and what is computed from constants) the kept nodes
    read, in graph order, closed under what they read."""
    wanted = {t for nd in nodes for t in nd.input}
    picked: set[int] = set()
    for v in range(root.n - 1, -1, -1):
        nd = root.nodes[v]
        if nd.is_constant and any(o in wanted for o in nd.outputs):
            picked.add(v)
            wanted.update(nd.all_inputs())
    return [root.nodes[v].proto for v in sorted(picked)]


def _graph(model: Any, root: Any, nodes: list, fixed: list, value_infos: list) -> Any:
    """The exported GraphProto: the source's inputs and outputs, the initializers the nodes
    read, the fixed values, and the value infos of the EPContext nodes' tensors."""
    from onnx import helper

    read = {t for nd in nodes for t in nd.input} | set(root.outputs)
    inits = initializer_map(root)
    src = model.graph
    dense = [t for t in src.initializer if t.name in read]
    names = {t.name for t in dense} | {t.name for t in fixed}
    listed = {i.name for i in src.input} | {o.name for o in src.output}
    infos = {vi.name: vi for vi in value_infos if vi.name not in listed}
    return helper.make_graph(nodes, src.name or "main", [i for i in src.input if i.name not in
                                                        inits and i.name not in names],
                             list(src.output), initializer=dense + fixed,
                             value_info=list(infos.values()))


def _opsets(model: Any, nodes: list) -> list[Any]:
    from onnx import helper

    opsets = list(model.opset_import)
    have = {op.domain for op in opsets}
    for domain in sorted({nd.domain for nd in nodes} - have - {"", "ai.onnx"}):
        opsets.append(helper.make_opsetid(domain, 1))
    return opsets


def write_compiled(model: Any, binaries: list[tuple[str, bytes]], path: str) -> list[str]:
    """Write the compiled model to ``path`` and its context binaries beside it, as one atomic
    step (every file staged first, the model renamed into place last: an interruption leaves
    no half-written model or binary). Returns the binaries' paths."""
    folder = os.path.dirname(os.path.abspath(path))
    files = [(os.path.join(folder, name), data) for name, data in binaries]
    write_all(files + [(path, model.SerializeToString())])
    return [p for p, _ in files]


#: what ``--verify`` runs in a fresh interpreter: plain onnxruntime and the plugin EP, no
#: clusterkit (argv: a JSON file naming the model, the EP, its package and options, the inputs'
#: .npz and the outputs' .npz)
DEPLOY_SCRIPT = """
import importlib, json, sys
import numpy as np, onnxruntime as ort
cfg = json.load(open(sys.argv[1]))
module = importlib.import_module(cfg["module"])
ort.register_execution_provider_library(cfg["ep"], module.get_library_path())
devices = [d for d in ort.get_ep_devices() if d.ep_name == cfg["ep"]
           and (not cfg["device_type"] or d.device.type.name == cfg["device_type"])]
so = ort.SessionOptions()
so.log_severity_level = 3
so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
so.add_provider_for_devices(devices[:1], cfg["options"])
session = ort.InferenceSession(cfg["model"], so)
feeds = dict(np.load(cfg["inputs"]))
names = [o.name for o in session.get_outputs()]
np.savez(cfg["outputs"], **dict(zip(names, session.run(names, feeds))))
on_ep = sum(len(s.get_nodes()) for s in session.get_provider_graph_assignment_info()
            if s.ep_name == cfg["ep"])
json.dump({"on_ep": on_ep, "clusterkit_imported": "clusterkit" in sys.modules},
          open(cfg["outputs"] + ".json", "w"))
"""


def run_deployed(path: str, ep: str, options: dict[str, str], feeds: dict[str, np.ndarray],
                 timeout: float = 600.0) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Run the compiled model at ``path`` as a user would deploy it: a fresh Python with only
    onnxruntime and the plugin EP ``ep`` (its provider ``options``), no clusterkit. Returns the
    outputs and ``{"on_ep": nodes onnxruntime gave the EP, "clusterkit_imported": False}``."""
    import subprocess
    import sys
    import tempfile

    from clusterkit.io.ep_query import find_ep

    spec = find_ep(ep)
    with tempfile.TemporaryDirectory(prefix="clusterkit_deploy_") as tmp:
        inputs, result = os.path.join(tmp, "inputs.npz"), os.path.join(tmp, "outputs.npz")
        cfg = {"model": os.path.abspath(path), "ep": spec.name, "module": spec.module,
               "device_type": spec.device_type, "options": options, "inputs": inputs,
               "outputs": result}
        np.savez(inputs, **feeds)  # type: ignore[arg-type]
        with open(os.path.join(tmp, "cfg.json"), "w", encoding="utf-8") as fh:
            json.dump(cfg, fh)
        run = subprocess.run([sys.executable, "-c", DEPLOY_SCRIPT, fh.name],
                             capture_output=True, text=True, timeout=timeout, check=False)
        if run.returncode != 0:
            lines = [ln for ln in run.stderr.strip().splitlines() if ln.strip()]
            raise ExecutionError(f"onnxruntime could not run the compiled model {path!r}: "
                                 f"{lines[-1] if lines else f'exit {run.returncode}'}")
        with np.load(result) as data:
            outputs = {k: data[k] for k in data.files}
        with open(result + ".json", encoding="utf-8") as fh:
            facts = json.load(fh)
    return outputs, facts
