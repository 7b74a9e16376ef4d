"""Graphviz DOT pictures of a graph and of a partition, with one palette and one cluster writer.

- :func:`graph_dot` — the plain graph, one box per node (``op`` and ``name``).
- :func:`partition_dot` — every offloaded cluster as a box (``device #id (n nodes)``) filled with
  its device's colour, fallback nodes outside any box.
- :func:`affinity_dot` and :func:`subgraphs_dot` — the two dumps of OpenVINO HETERO's
  ``KEY_HETERO_DUMP_GRAPH_DOT``, written by :func:`dump_dot` as ``<model>_affinity.dot`` and
  ``<model>_subgraphs.dot``: nodes coloured by affinity (the device a node asked for; for
  strategies that keep no affinity, the device it was placed on) with ``placed on ...`` and a
  dashed border where placement differs, and the clusters with a device legend and bold edges
  where they cross clusters.

Everything is plain DOT (``dot -Tsvg``, ``xdot``); labels go through :func:`dot_quote`.
:func:`dot_to_svg` draws any of them as SVG with Graphviz (the ``graphviz`` package running
Graphviz's ``dot`` program), :func:`partition_svg` a partition's picture.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from clusterkit.errors import RenderError
from clusterkit.io.files import write_all

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph
    from clusterkit.result.model import Partition

PALETTE = ["#8dd3c7", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#bebada",
           "#ffffb3", "#ccebc5", "#bc80bd"]
FALLBACK_COLOR = "#d9d9d9"
UNKNOWN_COLOR = "#ffffff"


def dot_quote(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _node_label(graph: "Graph", v: int) -> str:
    node = graph.nodes[v]
    return dot_quote(node.op_type + "\n" + node.name)


def _edges(graph: "Graph", cut_of=None) -> list[str]:
    """One line per edge; ``cut_of`` (cluster per node) makes edges between clusters bold."""
    out = []
    for u, v in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
        bold = cut_of is not None and cut_of[u] != cut_of[v]
        out.append(f"  n{u} -> n{v}{' [style=bold]' if bold else ''};")
    return out


def graph_dot(graph: "Graph") -> str:
    """The plain graph in DOT."""
    lines = [f"digraph {dot_quote(graph.name)} {{", "  node [shape=box];"]
    lines.extend(f"  n{v} [label={_node_label(graph, v)}];" for v in range(graph.n))
    lines.extend(_edges(graph))
    lines.append("}")
    return "\n".join(lines) + "\n"


def device_colors(partition: "Partition") -> dict[str, str]:
    """A fill colour per device (priority order), grey for the fallback."""
    colors = {d: PALETTE[i % len(PALETTE)] for i, d in enumerate(partition.problem.devices)}
    colors[partition.fallback] = FALLBACK_COLOR
    return colors


def partition_dot(partition: "Partition", *, name: str | None = None, legend: bool = False,
                  bold_cuts: bool = False) -> str:
    """DOT with one box per offloaded cluster, coloured by device. ``name`` is the digraph's
    name (default: the graph's); ``legend`` adds a box of device colours; ``bold_cuts`` draws
    edges between clusters bold."""
    g = partition.graph
    colors = device_colors(partition)
    lines = [f"digraph {dot_quote(g.name if name is None else name)} {{", "  compound=true;",
             "  node [shape=box, style=filled];"]
    if legend:
        lines.extend(_legend(colors))
    for c in partition.clusters:
        color = colors.get(c.device, UNKNOWN_COLOR)
        body = [f"n{v} [label={_node_label(g, v)}, fillcolor={dot_quote(color)}];"
                for v in c.nodes]
        if c.device == partition.fallback:
            lines.extend("  " + b for b in body)
            continue
        lines.append(f"  subgraph cluster_{c.id} {{")
        lines.append(f"    label={dot_quote(f'{c.device} #{c.id} ({len(c.nodes)} nodes)')};")
        lines.append(f"    style=filled; color={dot_quote(color)}; fillcolor=\"#f7f7f7\";")
        lines.extend("    " + b for b in body)
        lines.append("  }")
    lines.extend(_edges(g, partition.assignment() if bold_cuts else None))
    lines.append("}")
    return "\n".join(lines) + "\n"


def affinities(partition: "Partition") -> list[str]:
    """The affinity of each node (topological index): the strategy's record when it kept one
    (``info["affinity"]["differs_from_placement"]``, keyed by source index), else the device
    the node was placed on."""
    placed = partition.device_of_nodes()
    info = partition.info.get("affinity")
    if isinstance(info, dict) and isinstance(info.get("differs_from_placement"), dict):
        s2i = partition.graph.source_to_index
        for src, dev in info["differs_from_placement"].items():
            placed[int(s2i[int(src)])] = str(dev)
    return placed


def affinity_dot(partition: "Partition") -> str:
    """DOT of the node → affinity annotation."""
    g = partition.graph
    colors = device_colors(partition)
    aff = affinities(partition)
    placed = partition.device_of_nodes()
    lines = [f"digraph {dot_quote(g.name + '_affinity')} {{",
             "  node [shape=box, style=filled];"]
    lines.extend(_legend(colors))
    for nd in g.nodes:
        v = nd.index
        label = f"{nd.op_type}\n{nd.name}\naffinity: {aff[v]}"
        extra = ""
        if placed[v] != aff[v]:
            label += f"\nplaced on {placed[v]}"
            extra = ', style="filled,dashed", penwidth=2'
        lines.append(f"  n{v} [label={dot_quote(label)}, "
                     f"fillcolor={dot_quote(colors.get(aff[v], UNKNOWN_COLOR))}{extra}];")
    lines.extend(_edges(g))
    lines.append("}")
    return "\n".join(lines) + "\n"


def subgraphs_dot(partition: "Partition") -> str:
    """DOT of the clusters with a device legend, edges between clusters bold."""
    return partition_dot(partition, name=partition.graph.name + "_subgraphs", legend=True,
                         bold_cuts=True)


def _legend(colors: dict[str, str]) -> list[str]:
    out = ["  subgraph cluster_legend {", "    label=\"devices\"; style=dashed;"]
    for i, (dev, color) in enumerate(colors.items()):
        out.append(f"    legend_{i} [label={dot_quote(dev)}, fillcolor={dot_quote(color)}];")
    out.append("  }")
    return out


def dump_files(partition: "Partition", directory: str | os.PathLike,
               model_name: str) -> list[tuple[str, str]]:
    """``(path, text)`` of ``<model>_affinity.dot`` and ``<model>_subgraphs.dot`` in
    ``directory``, not written yet."""
    directory = os.fspath(directory)
    return [(os.path.join(directory, f"{model_name}_affinity.dot"), affinity_dot(partition)),
            (os.path.join(directory, f"{model_name}_subgraphs.dot"), subgraphs_dot(partition))]


def dump_dot(partition: "Partition", directory: str | os.PathLike, model_name: str) -> list[str]:
    """Write :func:`dump_files` into ``directory`` (a folder that exists: none is created),
    atomically; return their paths."""
    files = dump_files(partition, directory, model_name)
    write_all(files)
    return [path for path, _ in files]


def dot_to_svg(text: str, *, engine: str = "dot") -> str:
    """The SVG document Graphviz draws from the DOT ``text``. Raises :class:`RenderError` when
    Graphviz's ``dot`` program is not installed or fails on the picture."""
    import graphviz

    try:
        return graphviz.Source(text, engine=engine).pipe(format="svg", encoding="utf-8",
                                                         quiet=True)
    except graphviz.ExecutableNotFound as exc:
        raise RenderError("cannot draw SVG: Graphviz's dot program is not installed (Debian "
                          "and Ubuntu: apt-get install graphviz)") from exc
    except graphviz.CalledProcessError as exc:
        said = exc.stderr or ""
        if isinstance(said, bytes):
            said = said.decode("utf-8", "replace")
        said = said.strip().splitlines()
        raise RenderError(f"cannot draw SVG: Graphviz's {engine} failed"
                          + (f": {said[-1]}" if said else f" with status {exc.returncode}")
                          ) from exc


def partition_svg(partition: "Partition") -> str:
    """The SVG of :func:`partition_dot` (see :func:`dot_to_svg`)."""
    return dot_to_svg(partition_dot(partition))
