"""Load a model from a path, choosing the reader by file content and extension."""

from __future__ import annotations

import os
from typing import Mapping

import networkx as nx

from clusterkit.errors import ModelLoadError
from clusterkit.graph.core import Graph
from clusterkit.io.networkx import from_networkx, load_node_link
from clusterkit.io.onnx import load_onnx


def load_graph(model: "str | os.PathLike | Graph | nx.DiGraph | object",
               dims: Mapping[str, int] | None = None) -> Graph:
    """A Graph from an ``.onnx`` path, a node-link ``.json`` path, a ModelProto, a networkx
    DiGraph, or a Graph (returned as is). ``dims`` fixes symbolic dims of an ONNX model's inputs
    (see :func:`~clusterkit.io.onnx.load_onnx`); other inputs have none to fix."""
    if dims and not _is_onnx(model):
        raise ModelLoadError(f"dims fix symbolic dims of an ONNX model, and {_kind(model)} is "
                             "not one")
    if isinstance(model, Graph):
        return model
    if isinstance(model, nx.DiGraph):
        return from_networkx(model)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        ext = os.path.splitext(path)[1].lower()
        if ext == ".json":
            return load_node_link(path)
        if ext == ".onnx" or not ext:
            return load_onnx(path, dims=dims)
        raise ModelLoadError(f"cannot read model {path!r}: expected an .onnx file or a "
                             "node-link .json graph")
    import onnx

    if isinstance(model, onnx.ModelProto):
        return load_onnx(model, dims=dims)
    raise ModelLoadError(f"cannot load a model from a {type(model).__name__}")


def _is_onnx(model: object) -> bool:
    if isinstance(model, (str, os.PathLike)):
        return os.path.splitext(os.fspath(model))[1].lower() in (".onnx", "")
    return type(model).__name__ == "ModelProto"


def _kind(model: object) -> str:
    if isinstance(model, (str, os.PathLike)):
        return f"{os.fspath(model)!r}"
    return f"a {type(model).__name__}"
