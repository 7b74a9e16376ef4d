"""Indented JSON text, the same as ``json.dumps(obj, indent=1)``, in time and memory linear in
its size with a small constant.

With an indent the standard library encodes in Python, one call per value. Here a list of
strings or of integers (a cluster's nodes, names, op types) is one ``join`` of C-encoded items,
and a list of dicts sharing their keys (a table's rows) is encoded column by column, each row one
``%`` of a template. :func:`indented_json_chunks` hands the text out in pieces (long lists in
blocks), so a writer never holds more than one block besides the document. A value this module
does not know (a subclass, a non-string key) is left to ``json.dumps``, whose text for a nested
value is the same as inside its parent once each newline takes the parent's indent (JSON strings
hold no raw newline).
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Any, Callable, Iterator

#: ``json.dumps``'s own string encoder (``ensure_ascii``), in C
encode_str = json.encoder.encode_basestring_ascii
#: list items encoded per piece by :func:`indented_json_chunks`
BLOCK = 8192
#: lists this short are handed out item by item (each may be a large table)
FEW = 16


class Blocks:
    """A list given as its length and a function that makes its items a block at a time:
    :func:`indented_json_chunks` encodes it as that list without holding all its items.
    ``texts``, when given, makes the same blocks already encoded: called with the indent of
    the items (a newline and spaces), it hands out lists of their texts, each the text
    :func:`item_texts` makes of the items of one block of ``blocks``."""

    __slots__ = ("length", "blocks", "texts")

    def __init__(self, length: int, blocks: Callable[[], Iterator[list]],
                 texts: Callable[[str], Iterator[list[str]]] | None = None):
        self.length, self.blocks, self.texts = length, blocks, texts


def indented_json(obj: Any) -> str:
    """``json.dumps(obj, indent=1)``."""
    try:
        return "".join(indented_json_chunks(obj))
    except RecursionError:  # a reference cycle: json.dumps says so
        return json.dumps(obj, indent=1)


def indented_json_chunks(obj: Any, nl: str = "\n") -> Iterator[str]:
    """The text of :func:`indented_json` in pieces; ``nl``: a newline and the indent ``obj``
    is at."""
    kind = type(obj)
    if kind is dict and obj and all(type(k) is str for k in obj):
        inner, sep = nl + " ", "{"
        for key, value in obj.items():
            yield sep + inner + encode_str(key) + ": "
            yield from indented_json_chunks(value, inner)
            sep = ","
        yield nl + "}"
    elif (kind is list or kind is tuple) and len(obj) > BLOCK:
        inner, sep = nl + " ", "[" + nl + " "
        for start in range(0, len(obj), BLOCK):
            yield sep + ("," + inner).join(item_texts(obj[start:start + BLOCK], inner))
            sep = "," + inner
        yield nl + "]"
    elif kind is Blocks:
        inner, sep = nl + " ", "[" + nl + " "
        for texts in (obj.texts(inner) if obj.texts is not None else
                      (item_texts(block, inner) for block in obj.blocks())):
            if texts:
                yield sep + ("," + inner).join(texts)
                sep = "," + inner
        yield nl + "]" if sep != "[" + nl + " " else "[]"
    elif (kind is list or kind is tuple) and obj and len(obj) <= FEW:  # items may be large
        inner, sep = nl + " ", "[" + nl + " "
        for value in obj:
            yield sep
            yield from indented_json_chunks(value, inner)
            sep = "," + inner
        yield nl + "]"
    else:
        yield _text(obj, nl)


def _text(value: Any, nl: str) -> str:
    """The text of ``value`` at the indent of newline ``nl`` (a newline and spaces)."""
    kind = type(value)
    if kind is dict:
        if not value:
            return "{}"
        if any(type(k) is not str for k in value):
            return _fallback(value, nl)
        inner = nl + " "
        return "{" + inner + ("," + inner).join(
            encode_str(k) + ": " + _text(v, inner) for k, v in value.items()) + nl + "}"
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        inner = nl + " "
        return "[" + inner + ("," + inner).join(item_texts(value, inner)) + nl + "]"
    return _scalar(value, nl)


def item_texts(values: list | tuple, nl: str) -> list[str]:
    """The text of each item of the list ``values`` at the indent of newline ``nl`` (a newline
    and spaces), as the list's text holds it: strings or integers are encoded by one ``map``,
    rows of a table column by column (:func:`_records`)."""
    kinds = set(map(type, values))
    if kinds == {str}:
        return list(map(encode_str, values))
    if kinds == {int}:
        return list(map(int.__repr__, values))
    if kinds == {list}:  # lists of strings or of integers (a cluster's nodes, names): one pass
        items = set(map(type, chain.from_iterable(values)))
        encode = encode_str if items == {str} else int.__repr__ if items == {int} else None
        if encode is not None:
            inner = nl + " "
            sep, head, tail = "," + inner, "[" + inner, nl + "]"
            return [head + sep.join(map(encode, v)) + tail if v else "[]" for v in values]
    if kinds == {dict} and values[0] and len(set(map(tuple, values))) == 1 and \
            all(type(k) is str for k in values[0]):
        return _records(values, nl)
    return [_text(v, nl) for v in values]


def _records(rows: list | tuple, nl: str) -> list[str]:
    """The text of dicts that share their string keys in one order, column by column."""
    keys = list(rows[0])
    inner = nl + " "
    template = "{" + inner + ("," + inner).join(
        encode_str(k).replace("%", "%%") + ": %s" for k in keys) + nl + "}"
    columns = [item_texts([row[k] for row in rows], inner) for k in keys]
    return [template % row for row in zip(*columns)]


def _scalar(value: Any, nl: str) -> str:
    kind = type(value)
    if kind is str:
        return encode_str(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    return _fallback(value, nl)


def _fallback(value: Any, nl: str) -> str:
    """``json.dumps`` of a value at the indent of ``nl`` (it encodes the value or refuses it)."""
    return json.dumps(value, indent=1).replace("\n", nl)
