"""Tables for people: a rich table on a terminal, plain aligned columns otherwise.

On a terminal (:attr:`rich.console.Console.is_terminal`) a table has a bold header and a rule
under it and fits the window. Written to a file or a pipe it is plain text with no escape codes
and no line wrapping: a header row, then one row per line, columns two spaces apart, numbers
right-aligned; the same rows always give the same text. Every cell is shown as it is (a node
named ``[bold]`` stays ``[bold]``: no markup, no emoji codes).
"""

from __future__ import annotations

import io
import sys
from typing import IO, Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

#: a column: its header and whether it holds numbers (right-aligned)
Column = tuple[str, bool]

#: width of the plain text: wide enough that no cell is ever wrapped
_PLAIN_WIDTH = 1 << 20


def rich_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], *,
               title: str | None = None, terminal: bool = True) -> Table:
    """The :class:`rich.table.Table` of ``rows`` (cells as text, never markup)."""
    table = Table(box=box.SIMPLE_HEAD if terminal else None, show_edge=False, pad_edge=False,
                  header_style="bold" if terminal else "", show_header=True,
                  title=Text(title, justify="left") if title and terminal else None,
                  title_justify="left")
    for header, numeric in columns:
        table.add_column(Text(header), justify="right" if numeric else "left",
                         no_wrap=not terminal, overflow="fold")
    for row in rows:
        table.add_row(*(Text(str(cell)) for cell in row))
    return table


def table_text(columns: Sequence[Column], rows: Sequence[Sequence[str]], *,
               title: str | None = None) -> str:
    """The plain text of a table (no escape codes, no wrapping, no trailing spaces); ``title``
    is its first line."""
    buf = io.StringIO()
    console = Console(file=buf, width=_PLAIN_WIDTH, color_system=None, force_terminal=False,
                      force_jupyter=False, highlight=False, emoji=False, markup=False,
                      legacy_windows=False)
    console.print(rich_table(columns, rows, terminal=False))
    lines = [line.rstrip() for line in buf.getvalue().splitlines()]
    return "\n".join(([title] if title else []) + lines)


def print_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], *,
                title: str | None = None, file: IO[str] | None = None) -> None:
    """Print a table to ``file`` (default: the current stdout): rich on a terminal, else
    :func:`table_text`."""
    file = sys.stdout if file is None else file
    console = Console(file=file, highlight=False, emoji=False, markup=False)
    if console.is_terminal:
        console.print(rich_table(columns, rows, title=title, terminal=True))
    else:
        print(table_text(columns, rows, title=title), file=file)

