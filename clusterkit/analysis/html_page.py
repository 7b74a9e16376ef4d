"""One self-contained HTML page about one partition, to open in a browser or attach to a bug.

The page has four sections, each an element with an ``id``: ``summary`` (model, selector,
strategy, metrics, the devices), ``compare`` (the strategies side by side on the same model),
``partition`` (the picture of the clusters as inline SVG, or a note and the DOT text when it
cannot be drawn) and ``fallback`` (every fallen-back node with its reason), plus ``splits`` (why
adjacent supported nodes are apart) when given. Nothing is fetched: the style is inline, there is
no script, and every string that comes from the model (node names, op types, the selector, error
messages) goes through :func:`html.escape`; the SVG comes from Graphviz, which escapes its text,
with its comments dropped.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from clusterkit.analysis.compare import Comparison, row_errors, table_cells
from clusterkit.analysis.report import (
    DEVICE_COLUMNS,
    FALLBACK_COLUMNS,
    REASON_COLUMNS,
    device_rows,
    fallback_rows,
    folded_line,
    get_placement,
    reason_rows,
    reasons_line,
)
from clusterkit.errors import RenderError
from clusterkit.result.dot import device_colors, dot_to_svg, partition_dot
from clusterkit.result.model import Partition

#: the ``id`` of every section the page always has, in page order
SECTIONS = ("summary", "compare", "partition", "fallback")

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { padding: 0.2em 0.7em; border-bottom: 1px solid #e4e4e4; text-align: left;
         vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.picture { overflow: auto; max-height: 80vh; border: 1px solid #ddd; padding: 0.5em; }
.note { color: #7a4b00; } pre { background: #f7f7f7; padding: 0.5em; overflow: auto; }
code { font-size: 0.95em; }
.swatch { display: inline-block; width: 1em; height: 1em; margin: 0 0.3em 0 1em;
          border: 1px solid #888; vertical-align: middle; }
"""


@dataclass(frozen=True)
class Picture:
    """The partition's picture: ``svg`` (an ``<svg>`` element) when drawn, else ``None`` and a
    ``note`` saying why; ``dot`` is always its DOT text."""

    dot: str
    svg: str | None = None
    note: str | None = None


def draw_partition(partition: Partition, max_nodes: int | None = 2000) -> Picture:
    """The picture of ``partition`` (:func:`~clusterkit.result.dot.partition_dot`) drawn as
    SVG by Graphviz; not drawn (a note says why) when Graphviz is missing or fails, or when the
    graph has more than ``max_nodes`` nodes (None: no limit), as ``dot`` lays out large graphs
    slowly."""
    dot = partition_dot(partition)
    n = partition.graph.n
    if max_nodes is not None and n > max_nodes:
        return Picture(dot, note=f"the graph has {n} nodes, more than the limit of {max_nodes} "
                       "for drawing it (clusterkit report --svg-max-nodes)")
    try:
        return Picture(dot, svg=inline_svg(dot_to_svg(dot)))
    except RenderError as exc:
        return Picture(dot, note=str(exc))


def inline_svg(document: str) -> str:
    """The ``<svg>`` element of an SVG document, without the XML declaration, the doctype and
    the comments, ready to sit inside HTML, and as wide as the page's box (Graphviz's fixed
    size in points, kept in its ``viewBox``, would open a wide graph on blank canvas, its nodes
    off to the side)."""
    body = re.sub(r"<!--.*?-->", "", document, flags=re.S)
    start = body.find("<svg")
    if start < 0:
        raise RenderError("cannot draw SVG: Graphviz returned no <svg> element")
    element = body[start:].strip()
    head_end = element.find(">")
    head = re.sub(r'\s(width|height)="[^"]*"', "", element[:head_end])
    return head.replace("<svg", '<svg width="100%"', 1) + element[head_end:]


def report_page(partition: Partition, *, model: str, comparison: Comparison | None = None,
                picture: Picture | None = None, splits: Sequence[str] | None = None) -> str:
    """The HTML page of ``partition`` (of the model labelled ``model``) with the
    ``comparison`` of strategies on the same model, the ``picture`` (default: drawn by
    :func:`draw_partition`) and the ``splits`` lines (:func:`clusterkit.analysis.explain.explain`)
    when given."""
    picture = draw_partition(partition) if picture is None else picture
    rep = get_placement(partition)
    parts = [_summary(partition, model, rep), _compare(comparison),
             _picture(picture, device_colors(partition)), _fallback(rep)]
    if splits is not None:
        parts.append(_splits(splits))
    title = f"clusterkit report: {model}"
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>{_e(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
        f"<h1>{_e(title)}</h1>", *parts, "</body>", "</html>"]) + "\n"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(columns: Sequence[tuple[str, bool]], rows: Iterable[Sequence[Any]],
           css_id: str | None = None) -> str:
    """An HTML table; every cell escaped, numeric columns right-aligned."""
    head = "".join(f"<th>{_e(h)}</th>" for h, _ in columns)
    body = ["<tr>" + "".join(f'<td class="num">{_e(c)}</td>' if num else f"<td>{_e(c)}</td>"
                             for c, (_, num) in zip(row, columns)) + "</tr>" for row in rows]
    ident = f' id="{_e(css_id)}"' if css_id else ""
    return (f"<table{ident}><thead><tr>{head}</tr></thead><tbody>" + "\n".join(body)
            + "</tbody></table>")


def _number(value: Any) -> str:
    """``12,882,080`` for whole numbers, four significant digits for others."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"


def _section(ident: str, heading: str, *body: str) -> str:
    return "\n".join([f'<section id="{ident}">', f"<h2>{_e(heading)}</h2>", *body,
                      "</section>"])


def _summary(partition: Partition, model: str, rep: Mapping[str, Any]) -> str:
    facts = [("model", model), ("nodes", partition.graph.n),
             ("selector", partition.selector or "-"), ("strategy", partition.strategy),
             ("fallback", partition.fallback), ("seconds", f"{partition.seconds:.3f}")]
    metrics = [(k, _number(v)) for k, v in partition.metrics().items()]
    folded = folded_line(rep)
    return _section(
        "summary", "Summary",
        _table([("field", False), ("value", False)], facts, "facts"),
        f"<p>{_e(partition.summary())}</p>",
        "<h3>Metrics</h3>", _table([("metric", False), ("value", True)], metrics, "metrics"),
        "<h3>Devices</h3>", _table(DEVICE_COLUMNS, device_rows(rep, None), "devices"),
        f"<p>{_e(folded)}</p>" if folded else "")


def _compare(comparison: Comparison | None) -> str:
    if comparison is None:
        return _section("compare", "Strategies compared",
                        '<p class="note">No comparison was run.</p>')
    header, cells = table_cells(comparison)
    numeric = [h not in ("strategy", "status") for h in header]
    errors = row_errors(comparison)
    return _section(
        "compare", "Strategies compared",
        f"<p>{_e(comparison.model)} ({comparison.nodes} nodes), selector "
        f"<code>{_e(comparison.selector)}</code></p>",
        _table(list(zip(header, numeric)), cells, "compare-table"),
        ("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in errors) + "</ul>") if errors
        else "")


def _picture(picture: Picture, colors: Mapping[str, str]) -> str:
    if picture.svg is not None:
        legend = " ".join(f'<span class="swatch" style="background:{_e(color)}"></span>'
                          f"{_e(dev)}" for dev, color in colors.items())
        return _section("partition", "Partition", f'<p id="legend">{legend}</p>',
                        f'<div class="picture">{picture.svg}</div>')
    return _section("partition", "Partition", f'<p class="note">{_e(picture.note)}</p>',
                    f"<pre>{_e(picture.dot)}</pre>")


def _fallback(rep: Mapping[str, Any]) -> str:
    body = [f"<p>{_e(reasons_line(rep))}</p>"]
    if rep["fallen_back"]:
        body += [_table(REASON_COLUMNS, reason_rows(rep), "reasons"),
                 _table(FALLBACK_COLUMNS, fallback_rows(rep["fallen_back"]), "fallen-back")]
    return _section("fallback", "Fallback reasons", *body)


def _splits(lines: Sequence[str]) -> str:
    items = "".join(f"<li>{_e(line)}</li>" for line in lines)
    return _section("splits", "Why adjacent supported nodes are apart",
                    f"<p>{len(lines)} pairs shown</p>", f"<ul>{items}</ul>")
