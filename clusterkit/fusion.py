"""Fuse the clusters of a partition into single nodes, and turn node sets into ONNX models.

:func:`fuse` replaces every offloaded cluster by the node its property's
``create_subgraph_node`` makes (by default :meth:`SubgraphNode.default`), wired to the cluster's
boundary tensors. The result is a :class:`FusedGraph`: an ordinary :class:`Graph` (it can be
partitioned and fused again) that also remembers, per node, the nodes of the *original* graph it
stands for (``members``) and the fused node it is (``fused``).

A set of original nodes is described by a :class:`~clusterkit.graph.subgraph.Subgraph` of the
original graph (:func:`flatten` gives it for any node set of a fused graph). :func:`subgraph_model`
builds a standalone ``ModelProto`` for it: the non-constant boundary inputs it needs become graph
inputs (types and shapes from the parent's tensors), the constants it reads come along as
initializers or as the constant-producing nodes (which onnxruntime folds once at session creation),
its boundary outputs become graph outputs; the opset imports, IR version and model-local functions
of the source model are kept. A :class:`StaticInfo` (values fixed by static input shapes) turns more
boundary inputs into constants.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Iterable, Sequence

import numpy as np

from clusterkit._deprecated import keyword_only_after
from clusterkit.errors import ExecutionError, GraphError, SelectorError
from clusterkit.graph.core import Graph, Node, Tensor
from clusterkit.graph.subgraph import Subgraph, SubgraphNode
from clusterkit.result.model import Partition
from clusterkit.selection.protocol import SubgraphProperty, call_create_subgraph_node


class FusedGraph(Graph):
    """A graph whose offloaded clusters became single nodes.

    Extra attributes (set by :func:`fuse`):

    - ``root``: the original graph (the one read from the model file);
    - ``parent``: the graph that was partitioned (``root`` or another fused graph);
    - ``members[v]``: sorted ``root`` node indices node ``v`` stands for;
    - ``fused[v]``: the :class:`SubgraphNode` node ``v`` is, or ``None`` for an ordinary node
      (fused nodes of ``parent`` that were not fused again keep theirs);
    - ``properties``: device name → property, for every device a fused node runs on;
    - ``partition``: the partition that was fused; ``rejected``: clusters whose property's
      ``create_subgraph_node`` returned ``None`` (their nodes stay ordinary nodes).
    """

    root: Graph
    parent: Graph
    members: list[list[int]]
    fused: list[SubgraphNode | None]
    properties: dict[str, SubgraphProperty]
    partition: Partition
    rejected: list[dict[str, Any]]

    def fused_nodes(self) -> list[int]:
        """Indices of the fused nodes, in topological order."""
        return [v for v, f in enumerate(self.fused) if f is not None]

    def device_of(self, v: int) -> str | None:
        """Device of fused node ``v`` (``None`` for an ordinary node)."""
        f = self.fused[v]
        return None if f is None else f.subgraph.device


def root_of(graph: Graph) -> Graph:
    """The original graph behind ``graph`` (itself unless it is a :class:`FusedGraph`)."""
    return graph.root if isinstance(graph, FusedGraph) else graph


def members_of(graph: Graph, nodes: Iterable[int]) -> list[int]:
    """Sorted original-graph node indices standing behind ``nodes`` of ``graph``."""
    if isinstance(graph, FusedGraph):
        out: set[int] = set()
        for v in nodes:
            out.update(graph.members[int(v)])
        return sorted(out)
    return sorted({int(v) for v in nodes})


def flatten(subgraph: Subgraph) -> Subgraph:
    """The same node set as a subgraph of the original graph (fused nodes expanded)."""
    graph = subgraph.graph
    if not isinstance(graph, FusedGraph):
        return subgraph
    return Subgraph.from_nodes(graph.root, members_of(graph, subgraph.nodes), subgraph.device,
                               subgraph.cluster_id)


# ---------------------------------------------------------------------- fuse
@keyword_only_after(1)
def fuse(partition: Partition, validate: bool = True) -> FusedGraph:
    """Replace every offloaded cluster of ``partition`` by one node made by its device
    property's ``create_subgraph_node``; fallback nodes stay as they are.

    A property that returns ``None`` rejects its cluster: the nodes stay ordinary (fallback)
    nodes and the cluster is listed in ``FusedGraph.rejected``. A property that raises, or returns
    something other than a :class:`SubgraphNode`, is a :class:`SelectorError` naming it and the
    cluster. The partition is validated first (an invalid partition cannot be fused into a DAG)."""
    if validate:
        partition.validate()
    graph = partition.graph
    props = {p.device: p for p in partition.problem.properties}
    made, rejected = _make_subgraph_nodes(partition, props)
    entries = _fused_entries(partition, made)
    info = {id(node): (mem, f) for node, mem, f in entries}
    fg = FusedGraph.build([e[0] for e in entries], _fused_tensors(graph, entries),
                          list(graph.inputs), list(graph.outputs), name=f"{graph.name}_fused",
                          model=None, source=graph.source)
    root = root_of(graph)
    _root_constness(fg, root)
    fg.root = root
    fg.parent = graph
    fg.members = [info[id(nd)][0] for nd in fg.nodes]
    fg.fused = [info[id(nd)][1] for nd in fg.nodes]
    fg.properties = dict(graph.properties) if isinstance(graph, FusedGraph) else {}
    fg.properties.update(props)
    fg.partition = partition
    fg.rejected = rejected
    return fg


#: a node of the fused graph, the root nodes it stands for, and the fused node it is (or None)
_Entry = tuple[Node, list[int], "SubgraphNode | None"]


def _make_subgraph_nodes(partition: Partition, props: dict[str, SubgraphProperty]
                         ) -> tuple[dict[int, tuple[Subgraph, SubgraphNode]], list[dict[str, Any]]]:
    """Ask each offloaded cluster's property for its node, in cluster order: the made nodes by
    cluster position, and the clusters whose property returned ``None``."""
    graph = partition.graph
    made: dict[int, tuple[Subgraph, SubgraphNode]] = {}
    rejected: list[dict[str, Any]] = []
    for k, c in enumerate(partition.clusters):
        if c.device == partition.problem.fallback:
            continue
        prop = props.get(c.device)
        if prop is None:
            raise SelectorError(f"cluster {c.id} is on device {c.device!r}, which has no property"
                                " in the problem")
        sub = Subgraph.from_nodes(graph, c.nodes, c.device, c.id)
        sn = call_create_subgraph_node(
            prop, sub, f"cluster {c.id} (device {c.device!r}, {len(c.nodes)} nodes, first node "
            f"{graph.nodes[c.nodes[0]].name!r})")
        if sn is None:
            rejected.append({"cluster": c.id, "device": c.device, "nodes": len(c.nodes),
                             "reason": f"{prop!r}.create_subgraph_node returned None"})
            continue
        if not isinstance(sn, SubgraphNode):
            raise SelectorError(f"property {prop!r}.create_subgraph_node returned "
                                f"{type(sn).__name__} for cluster {c.id}; expected a SubgraphNode"
                                " or None")
        made[k] = (sub, sn)
    return made, rejected


def _fused_entries(partition: Partition, made: dict[int, tuple[Subgraph, SubgraphNode]]
                   ) -> list[_Entry]:
    """The nodes of the fused graph in the parent's order: a copy of every node outside the
    fused clusters, and each fused cluster's node where its first node was."""
    graph = partition.graph
    assign = partition.assignment()
    first_of = {c.nodes[0]: k for k, c in enumerate(partition.clusters) if c.nodes}
    reserved = {graph.nodes[v].name for k, c in enumerate(partition.clusters)
                if k not in made for v in c.nodes}
    used_names: set[str] = set()
    entries: list[_Entry] = []
    for v in range(graph.n):
        k = int(assign[v])
        if k not in made:
            entries.append(_copy_entry(graph, v))
            used_names.add(entries[-1][0].name)
            continue
        if first_of.get(v) != k:
            continue
        sub, sn = made[k]
        name = _unique(sn.name, used_names | reserved)
        used_names.add(name)
        node = Node(index=-1, name=name, op_type=sn.op_type, domain=sn.domain,
                    attrs=dict(sn.attrs), inputs=list(sub.inputs) + list(sub.constants),
                    outputs=list(sub.outputs), source_index=-1, affinity=sub.device)
        entries.append((node, members_of(graph, sub.nodes), sn))
    return entries


def _copy_entry(graph: Graph, v: int) -> _Entry:
    """Node ``v`` of ``graph`` copied into the fused graph (a fused node of a fused parent
    keeps its members and its :class:`SubgraphNode`)."""
    node = graph.nodes[v]
    new = dataclasses.replace(node, index=-1, source_index=-1, attrs=dict(node.attrs),
                              inputs=list(node.inputs), outputs=list(node.outputs),
                              implicit_inputs=list(node.implicit_inputs))
    if isinstance(graph, FusedGraph):
        return new, list(graph.members[v]), graph.fused[v]
    return new, [v], None


def _fused_tensors(graph: Graph, entries: list[_Entry]) -> dict[str, Tensor]:
    """Copies of the tensors the fused graph's nodes and boundary use (Graph.build rewires
    producers and consumers)."""
    names: list[str] = []
    seen: set[str] = set()
    for node, _, _ in entries:
        for t in node.all_inputs() + [o for o in node.outputs if o]:
            if t not in seen:
                seen.add(t)
                names.append(t)
    for t in list(graph.inputs) + list(graph.outputs):
        if t not in seen:
            seen.add(t)
            names.append(t)
    tensors: dict[str, Tensor] = {}
    for t in names:
        src = graph.tensors.get(t)
        if src is None:
            raise GraphError(f"internal: tensor {t!r} of the fused graph is unknown")
        tensors[t] = dataclasses.replace(src, consumers=[], producer=None)
    return tensors


def _root_constness(fg: Graph, root: Graph) -> None:
    """Constness is a property of a tensor's value: take it from the original graph. (Marking
    the fused graph on its own could call a fused node constant because every input of its cluster
    is, although a node inside reads outer-scope tensors or is random.)"""
    changed = False
    for name, ten in fg.tensors.items():
        want = root.tensors[name].is_constant
        if ten.is_constant != want:
            ten.is_constant = want
            changed = True
    for node in fg.nodes:
        outs = [o for o in node.outputs if o]
        want = bool(outs) and all(fg.tensors[o].is_constant for o in outs)
        if node.is_constant != want:
            node.is_constant = want
            changed = True
    if changed:
        fg._build_edges()


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    k = 1
    while f"{name}_{k}" in taken:
        k += 1
    return f"{name}_{k}"


# ---------------------------------------------------------------------- ONNX views
_INITS: "weakref.WeakKeyDictionary[Graph, dict[str, Any]]" = weakref.WeakKeyDictionary()


def source_model(graph: Graph):
    """The ONNX ModelProto behind ``graph`` (its original graph's); raises
    :class:`ExecutionError` for a graph that did not come from ONNX."""
    import onnx

    root = root_of(graph)
    model = root.model
    if not isinstance(model, onnx.ModelProto):
        raise ExecutionError(f"graph {root.name!r} was not read from an ONNX model: only ONNX "
                             "graphs can be compiled, run or exported")
    return model


def initializer_map(graph: Graph) -> dict[str, Any]:
    """Initializer name → TensorProto (or SparseTensorProto) of the original model."""
    root = root_of(graph)
    cached = _INITS.get(root)
    if cached is None:
        g = source_model(root).graph
        cached = {t.name: t for t in g.initializer}
        for sp in g.sparse_initializer:
            cached[sp.values.name] = sp
        _INITS[root] = cached
    return cached


_VINFO: "weakref.WeakKeyDictionary[Graph, dict[str, Any]]" = weakref.WeakKeyDictionary()


def value_info_map(graph: Graph) -> dict[str, Any]:
    """Tensor name → ValueInfoProto of the original model's ``graph.value_info`` (the types and
    shapes its exporter recorded; onnxruntime loads a model much faster with them)."""
    root = root_of(graph)
    cached = _VINFO.get(root)
    if cached is None:
        cached = {vi.name: vi for vi in source_model(root).graph.value_info}
        _VINFO[root] = cached
    return cached


@dataclasses.dataclass
class StaticInfo:
    """What is known before any run when the graph inputs have static shapes: ``values`` are
    tensors (not constants) whose values the shapes fix, such as a Reshape's computed target
    shape or a mask built from shapes (name → TensorProto); ``value_infos`` are types and shapes
    sharper than the parent graph's (name → ValueInfoProto). A whole-model onnxruntime session
    folds the same values; see
    :func:`clusterkit.runtime.backends.onnxruntime_backend.static_info`."""

    values: dict[str, Any]
    value_infos: dict[str, Any]


def runtime_inputs(sub: Subgraph, static: StaticInfo | None = None) -> list[str]:
    """Boundary inputs that must be fed at run time: the non-constant ones, except those whose
    values ``static`` knows."""
    if static is None:
        return list(sub.inputs)
    return [t for t in sub.inputs if t not in static.values]


def runtime_outputs(sub: Subgraph, static: StaticInfo | None = None) -> list[str]:
    """Outputs another step must receive at run time: graph outputs, and the boundary outputs
    that are neither constant nor known to ``static`` (whoever reads those has them already)."""
    g = sub.graph
    known = static.values if static is not None else {}
    return [t for t in sub.outputs if g.tensors[t].is_output
            or not (g.tensors[t].is_constant or t in known)]


def value_info(tensor: Tensor, dtype: str | None = None):
    """A ValueInfoProto for ``tensor`` (type from its dtype or ``dtype``; shape when known)."""
    from onnx import helper

    dt = dtype or tensor.dtype
    if dt is None:
        return helper.make_empty_tensor_value_info(tensor.name)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    shape = None
    if tensor.shape is not None:
        shape = [d if isinstance(d, (int, str)) else None for d in tensor.shape]
    return helper.make_tensor_value_info(tensor.name, elem, shape)


def _needs(sub: Subgraph, outs: Sequence[str], static: StaticInfo | None,
           name: str | None) -> tuple[list[int], list[str], list[str], list[str]]:
    """Walk back from ``outs`` to runtime inputs, known values and initializers: the nodes
    needed (sorted), the runtime inputs reached (in boundary order), the initializers and the
    known values read (sorted)."""
    root = sub.graph
    inits = initializer_map(root)
    known = static.values if static is not None else {}
    feedable = set(runtime_inputs(sub, static))
    chosen: set[int] = set()
    fed: set[str] = set()
    init_names: list[str] = []
    known_names: list[str] = []
    seen: set[str] = set()
    stack = list(outs)
    while stack:
        t = stack.pop()
        if t in seen or not t:
            continue
        seen.add(t)
        if t in feedable:
            fed.add(t)
            continue
        if t in known:
            known_names.append(t)
            continue
        ten = root.tensors[t]
        if ten.producer is None:
            if ten.is_initializer and t in inits:
                init_names.append(t)
                continue
            raise ExecutionError(f"subgraph {name or sub.device!r} reads tensor {t!r}, which is "
                                 "neither computed, fed nor known")
        if ten.producer not in chosen:
            chosen.add(ten.producer)
            stack.extend(root.nodes[ten.producer].all_inputs())
    feeds = [t for t in sub.inputs if t in fed]
    return sorted(chosen), feeds, sorted(init_names), sorted(known_names)


def required_inputs(sub: Subgraph, outputs: Sequence[str] | None = None,
                    static: StaticInfo | None = None) -> list[str]:
    """The runtime inputs that computing ``outputs`` (default :func:`runtime_outputs`) of the
    subgraph really reads."""
    sub = flatten(sub)
    outs = list(runtime_outputs(sub, static) if outputs is None else outputs)
    return _needs(sub, outs, static, None)[1]


def subgraph_model(sub: Subgraph, outputs: Sequence[str] | None = None,
                   input_dtypes: dict[str, str] | None = None, name: str | None = None,
                   shapes: bool = True, static: StaticInfo | None = None):
    """A standalone ModelProto computing ``outputs`` (default: :func:`runtime_outputs`) of the
    subgraph (flattened first) from the runtime inputs they need (:func:`required_inputs`).

    The model holds the nodes the outputs need: the subgraph's own, plus the nodes that compute
    the constants it reads from outside (e.g. the ``ConstantOfShape`` weight stubs: onnxruntime
    folds them once, at session creation), with the source model's initializers. Outer-scope
    tensors that If/Loop bodies read are boundary inputs like any other. Values ``static`` knows
    become initializers (and its shapes are declared). ``input_dtypes`` supplies types the parent
    graph does not know; ``shapes=False`` declares inputs without shapes."""
    import onnx
    from onnx import helper

    sub = flatten(sub)
    root = sub.graph
    model = source_model(root)
    inits = initializer_map(root)
    known = static.values if static is not None else {}
    outs = list(runtime_outputs(sub, static) if outputs is None else outputs)
    order, feeds, init_names, known_names = _needs(sub, outs, static, name)
    nodes = []
    for v in order:
        nd = root.nodes[v]
        if nd.proto is None:
            raise ExecutionError(f"node {nd.name!r} ({nd.op_type}) has no ONNX proto")
        nodes.append(nd.proto)
    sharper = static.value_infos if static is not None else {}
    inputs = _input_infos(sub, feeds, input_dtypes or {}, sharper if shapes else None, name)
    produced = {o for v in order for o in root.nodes[v].outputs if o}
    for t in outs:
        if t not in produced and t not in feeds:
            raise ExecutionError(f"subgraph {name or sub.device!r} cannot output tensor {t!r}: none"
                                 " of its nodes computes it")
    output_vis = [sharper.get(t) or value_info(root.tensors[t]) for t in outs]
    dense = [inits[t] for t in init_names if isinstance(inits[t], onnx.TensorProto)]
    dense += [known[t] for t in known_names]
    sparse = [inits[t] for t in init_names if not isinstance(inits[t], onnx.TensorProto)]
    graph = helper.make_graph(nodes, name or f"{sub.device}_subgraph_{sub.cluster_id}", inputs,
                              output_vis, initializer=dense, sparse_initializer=sparse or None)
    if model.ir_version < 4:  # before IR 4 every initializer had to be a graph input too
        graph.input.extend(value_info(root.tensors[t]) for t in init_names
                           if isinstance(inits[t], onnx.TensorProto))
        graph.input.extend(value_info(root.tensors[t]) for t in known_names)
    vinfo = value_info_map(root)
    if vinfo or sharper:
        visible = set(feeds) | set(outs)
        graph.value_info.extend(sharper.get(t) or vinfo[t] for v in order
                                for t in root.nodes[v].outputs
                                if (t in sharper or t in vinfo) and t not in visible)
    out = helper.make_model(graph, opset_imports=list(model.opset_import),
                            producer_name="clusterkit")
    out.ir_version = model.ir_version
    out.functions.extend(model.functions)
    return out


def _input_infos(sub: Subgraph, feeds: Sequence[str], dtypes: dict[str, str],
                 sharper: dict | None, name: str | None) -> list:
    """The ValueInfos of a subgraph model's inputs: the sharper ones ``static`` knows unless a
    type is supplied in ``dtypes``; ``sharper=None`` declares them without shapes."""
    root = sub.graph
    inputs = []
    for t in feeds:
        ten = root.tensors[t]
        if sharper is None:
            ten = dataclasses.replace(ten, shape=None)
        vi = sharper[t] if sharper is not None and t in sharper and t not in dtypes \
            else value_info(ten, dtypes.get(t))
        if not vi.type.HasField("tensor_type"):
            raise ExecutionError(f"boundary input {t!r} of subgraph {name or sub.device!r} has no "
                                 "known type")
        inputs.append(vi)
    return inputs
