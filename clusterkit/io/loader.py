"""Load a model from a path, choosing the reader by file content and extension."""

from __future__ import annotations

import os

import networkx as nx

from clusterkit.errors import ModelLoadError
from clusterkit.graph.core import Graph
from clusterkit.io.networkx import from_networkx, load_node_link
from clusterkit.io.onnx import load_onnx


def load_graph(model: "str | os.PathLike | Graph | nx.DiGraph | object") -> Graph:
    """A Graph from an ``.onnx`` path, a node-link ``.json`` path, a ModelProto, a networkx
    DiGraph, or a Graph (returned as is)."""
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
            return load_onnx(path)
        raise ModelLoadError(f"cannot read model {path!r}: expected an .onnx file or a "
                             "node-link .json graph")
    import onnx

    if isinstance(model, onnx.ModelProto):
        return load_onnx(model)
    raise ModelLoadError(f"cannot load a model from a {type(model).__name__}")
