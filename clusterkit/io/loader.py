"""Load a model from a path, choosing the reader by file content and extension."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Mapping

from clusterkit._deprecated import keyword_only_after
from clusterkit.errors import ModelLoadError
from clusterkit.graph.core import Graph
from clusterkit.io.networkx import from_networkx
from clusterkit.io.node_link import node_link_of_document, read_json_document
from clusterkit.io.placement_instance import instance_from_dict, instance_graph, is_instance
from clusterkit.modes import OPTIMIZE_LEVELS, OptimizeLevel, check_choice

if TYPE_CHECKING:
    import networkx as nx


@keyword_only_after(1)
def load_graph(model: "str | os.PathLike | Graph | nx.DiGraph | object",
               dims: Mapping[str, int] | None = None, optimize: OptimizeLevel = "none"
               ) -> Graph:
    """A Graph from an ``.onnx`` path, a node-link or placement-instance ``.json`` path, a
    ModelProto, a networkx DiGraph, or a Graph (returned as is). ``dims`` fixes symbolic dims of
    an ONNX model's inputs (see :func:`~clusterkit.io.onnx.load_onnx`); other inputs have none to
    fix. ``optimize``
    (``"none"`` or ``"basic"``) reads instead the graph onnxruntime's optimizations of that level
    make of an ONNX model, dims fixed first (see :func:`~clusterkit.io.optimize.optimize_model`).
    """
    check_choice("optimize", optimize, OPTIMIZE_LEVELS, ModelLoadError)
    if (dims or optimize != "none") and not _is_onnx(model):
        what = "dims fix symbolic dims of" if dims else "optimize rewrites"
        raise ModelLoadError(f"{what} an ONNX model, and {_kind(model)} is not one")
    if optimize != "none":
        return _load_optimized(model, dims, optimize)
    if isinstance(model, Graph):
        return model
    if _is_networkx(model):
        return from_networkx(model)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        ext = os.path.splitext(path)[1].lower()
        if ext == ".json":
            data = read_json_document(path)  # parsed once, whichever it is
            if is_instance(data):  # told apart from node-link JSON by its keys
                name = os.path.splitext(os.path.basename(path))[0]
                return instance_graph(instance_from_dict(data, name, path), source=path)
            return node_link_of_document(data, path)
        if ext == ".onnx" or not ext:
            from clusterkit.io.onnx import load_onnx  # imports onnx: paid on use

            return load_onnx(path, dims=dims)
        raise ModelLoadError(f"cannot read model {path!r}: expected an .onnx file or a "
                             "node-link .json graph")
    import onnx

    from clusterkit.io.onnx import load_onnx

    if isinstance(model, onnx.ModelProto):
        return load_onnx(model, dims=dims)
    raise ModelLoadError(f"cannot load a model from a {type(model).__name__}")


def _load_optimized(model: Any, dims: Mapping[str, int] | None,
                    level: OptimizeLevel) -> Graph:
    """The Graph of the model onnxruntime's ``level`` optimizations make, named as ``model``."""
    from clusterkit.io.onnx import load_onnx
    from clusterkit.io.optimize import optimize_model

    proto = optimize_model(model, level, dims=dims)
    if isinstance(model, (str, os.PathLike)):
        proto.graph.name = os.path.splitext(os.path.basename(os.fspath(model)))[0]
    return load_onnx(proto)


def _is_networkx(model: object) -> bool:
    """True for a networkx DiGraph (networkx is not imported to tell: without it loaded, no
    object can be one)."""
    nx = sys.modules.get("networkx")
    return nx is not None and isinstance(model, nx.DiGraph)


def _is_onnx(model: object) -> bool:
    if isinstance(model, (str, os.PathLike)):
        return os.path.splitext(os.fspath(model))[1].lower() in (".onnx", "")
    return type(model).__name__ == "ModelProto"


def _kind(model: object) -> str:
    if isinstance(model, (str, os.PathLike)):
        return f"{os.fspath(model)!r}"
    return f"a {type(model).__name__}"
