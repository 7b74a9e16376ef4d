"""GraphViz dumps in the style of OpenVINO HETERO's ``KEY_HETERO_DUMP_GRAPH_DOT``.

- ``<model>_affinity.dot`` — every node coloured by its affinity (the device it asked for; for
  strategies other than ``hetero``, the device it was placed on), labelled ``op``, ``name`` and
  ``affinity``; nodes whose placement differs from their affinity carry ``placed on ...`` and a
  dashed border.
- ``<model>_subgraphs.dot`` — every accelerator cluster as a box (``device #id (n nodes)``),
  fallback nodes outside any box; edges that cross clusters are bold.

Both are plain DOT (``dot -Tsvg``, ``xdot``).
"""

from __future__ import annotations

import os

from clusterkit.io.networkx import dot_quote
from clusterkit.result import Partition

PALETTE = ["#8dd3c7", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#bebada",
           "#ffffb3", "#ccebc5", "#bc80bd"]
FALLBACK_COLOR = "#d9d9d9"


def device_colors(partition: Partition) -> dict[str, str]:
    """A fill colour per device (priority order), grey for the fallback."""
    colors = {d: PALETTE[i % len(PALETTE)] for i, d in enumerate(partition.problem.devices)}
    colors[partition.fallback] = FALLBACK_COLOR
    return colors


def affinities(partition: Partition) -> list[str]:
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


def affinity_dot(partition: Partition) -> str:
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
                     f"fillcolor={dot_quote(colors.get(aff[v], '#ffffff'))}{extra}];")
    for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist()):
        lines.append(f"  n{u} -> n{v};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def subgraphs_dot(partition: Partition) -> str:
    """DOT of the clusters (one box per accelerator cluster)."""
    g = partition.graph
    colors = device_colors(partition)
    a = partition.assignment()
    lines = [f"digraph {dot_quote(g.name + '_subgraphs')} {{", "  compound=true;",
             "  node [shape=box, style=filled];"]
    lines.extend(_legend(colors))
    for c in partition.clusters:
        color = colors.get(c.device, "#ffffff")
        body = [f"n{v} [label={dot_quote(g.nodes[v].op_type + chr(10) + g.nodes[v].name)}, "
                f"fillcolor={dot_quote(color)}];" for v in c.nodes]
        if c.device == partition.fallback:
            lines.extend("  " + b for b in body)
            continue
        lines.append(f"  subgraph cluster_{c.id} {{")
        lines.append(f"    label={dot_quote(f'{c.device} #{c.id} ({len(c.nodes)} nodes)')};")
        lines.append(f"    style=filled; color={dot_quote(color)}; fillcolor=\"#f7f7f7\";")
        lines.extend("    " + b for b in body)
        lines.append("  }")
    for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist()):
        style = "" if a[u] == a[v] else " [style=bold]"
        lines.append(f"  n{u} -> n{v}{style};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _legend(colors: dict[str, str]) -> list[str]:
    out = ["  subgraph cluster_legend {", "    label=\"devices\"; style=dashed;"]
    for i, (dev, color) in enumerate(colors.items()):
        out.append(f"    legend_{i} [label={dot_quote(dev)}, fillcolor={dot_quote(color)}];")
    out.append("  }")
    return out


def dump_dot(partition: Partition, directory: str | os.PathLike, model_name: str) -> list[str]:
    """Write ``<model>_affinity.dot`` and ``<model>_subgraphs.dot`` into ``directory``
    (created when missing); return their paths."""
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    out = []
    for suffix, text in (("affinity", affinity_dot(partition)),
                         ("subgraphs", subgraphs_dot(partition))):
        path = os.path.join(directory, f"{model_name}_{suffix}.dot")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        out.append(path)
    return out
