"""Partition JSON (the docs/design.md format): its one writer and its one reader.

``{"model", "strategy", "selector", "fallback", "clusters": [{"id", "device", "nodes"}],
"metrics", "seconds", "folded", "placement"}`` plus any extra keys a strategy recorded; ``nodes``
are source indices (for an ONNX model, indices into its ``graph.node``). The writer also records
the model's ``fingerprint`` (:func:`model_fingerprint`) and each cluster's node ``names`` and
``op_types`` (in ``nodes`` order), so a plan can tell a different model from the one it was made
for. A partition of the graph onnxruntime optimized also says so: ``optimize`` (the level) and
``model_file`` (that model, written beside the JSON: :func:`optimized_model_path`). The
reader checks the document's shape and hands back plain data, so this module needs no partition
class (the writer reads a :class:`~clusterkit.result.cluster.PartitionLike`):
:class:`~clusterkit.result.model.Partition`, plans and exported models all read through it.
"""

from __future__ import annotations

import hashlib
import json
import os
from itertools import chain
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import numpy as np

from clusterkit.errors import PartitionError
from clusterkit.graph.algorithms import gc_paused, pair_order
from clusterkit.io.json_text import BLOCK, Blocks, encode_str, indented_json_chunks, item_texts

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph
    from clusterkit.result.cluster import PartitionLike


def make_partition_json(model: str, strategy: str, selector: str, fallback: str,
                        clusters: list[dict[str, Any]], metrics: dict[str, Any],
                        seconds: float, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A partition JSON document from its fields; ``extra`` keys never replace a field."""
    out = {"model": model, "strategy": strategy, "selector": selector, "fallback": fallback,
           "clusters": clusters, "metrics": metrics, "seconds": float(seconds)}
    for key, value in (extra or {}).items():
        out.setdefault(key, value)
    return out


def partition_json(partition: "PartitionLike", model: str | None = None) -> dict[str, Any]:
    """The partition JSON of ``partition`` (``model`` defaults to the graph's name), with
    ``folded``: the sorted source indices of the folded nodes (constants and static shape
    values, which stay in their clusters but are never fallbacks), ``placement``: the placement
    report (``partition.placement()``, the same block for every strategy), the model's
    ``fingerprint`` and each cluster's node ``names`` and ``op_types``."""
    return _document(partition, model, lazy=False)


def _document(partition: "PartitionLike", model: str | None, lazy: bool) -> dict[str, Any]:
    """:func:`partition_json`; with ``lazy`` its clusters are a :class:`Blocks`, their text
    made as it is written."""
    graph = partition.graph
    src = graph.index_to_source
    columns = _ClusterColumns(partition, *source_columns(graph))
    fingerprint = columns.fingerprint
    blocks = Blocks(len(partition.clusters), columns.blocks, columns.texts)
    clusters: Any = blocks if lazy else list(chain.from_iterable(blocks.blocks()))
    extra = {"fingerprint": fingerprint, **partition.info, "placement": partition.placement()}
    extra.setdefault("folded", sorted(src[graph.folded].tolist()))
    return make_partition_json(model if model is not None else graph.name,
                               partition.strategy, partition.selector, partition.fallback,
                               clusters, partition.metrics(), partition.seconds, extra)


class _ClusterColumns:
    """Every cluster's source indices, each cluster's sorted, in cluster order (``idx``), where
    each cluster starts in them (``bounds``, one more: the end), computed over all clusters
    at once, and the nodes' names and op types in source order (:func:`source_columns`),
    taken a block of clusters at a time; plain strings are also kept as JSON text."""

    def __init__(self, partition: "PartitionLike", names: list[str], ops: list[str]):
        self.partition = partition
        clusters = partition.clusters
        sizes = [len(c.nodes) for c in clusters]
        flat = np.fromiter(chain.from_iterable(c.nodes for c in clusters), np.int64,
                           sum(sizes))
        member = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        idx = partition.graph.index_to_source[flat]
        self.idx = idx[pair_order(member, idx)]
        self.bounds = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).tolist()
        self.names = np.fromiter(names, dtype=object, count=len(names))
        self.ops = np.fromiter(ops, dtype=object, count=len(ops))
        #: the names' and op types' JSON text, when all are strings (else None)
        self.name_text = self.op_text = None
        if all(type(x) is str for x in names) and all(type(x) is str for x in ops):
            texts = {op: encode_str(op) for op in set(ops)}
            name_t, op_t = list(map(encode_str, names)), list(map(texts.__getitem__, ops))
            #: :func:`model_fingerprint` of the nodes
            self.fingerprint = _fingerprint(name_t, op_t, encoded=True)
            self.name_text = np.fromiter(name_t, dtype=object, count=len(names))
            self.op_text = np.fromiter(op_t, dtype=object, count=len(ops))
        else:
            self.fingerprint = _fingerprint(names, ops)

    def blocks(self) -> Iterator[list[dict[str, Any]]]:
        """The clusters' JSON dicts, :data:`BLOCK` at a time."""
        for start in range(0, len(self.partition.clusters), BLOCK):
            yield self.block(start)

    def block(self, start: int) -> list[dict[str, Any]]:
        """The JSON dicts of the :data:`BLOCK` clusters from ``start``."""
        clusters = self.partition.clusters[start:start + BLOCK]
        at = self.bounds[start:start + len(clusters) + 1]
        take = self.idx[at[0]:at[-1]]
        idx, names, ops = take.tolist(), self.names[take].tolist(), self.ops[take].tolist()
        at = [a - at[0] for a in at]
        with gc_paused():  # new dicts and lists, none garbage: a collection would free none
            return [{"id": c.id, "device": c.device, "nodes": idx[a:b], "names": names[a:b],
                     "op_types": ops[a:b]}
                    for c, a, b in zip(clusters, at, at[1:])]

    def texts(self, nl: str) -> Iterator[list[str]]:
        """The texts of :meth:`blocks`' dicts at the indent of newline ``nl``, made without
        the dicts: each column's items taken as text by one ``map`` or ``take`` per block, a
        cluster's three lists then one ``join`` each into one template. A block the template
        cannot hold (an id that is not an int, a device, name or op type that is not a str, an
        empty cluster) is encoded from its dicts."""
        inner = nl + " "
        sep, lists = "," + inner + " ", []
        for key in ("nodes", "names", "op_types"):
            lists.append(encode_str(key) + ": [" + inner + " %s" + inner + "]")
        template = "{" + inner + ("," + inner).join(
            [encode_str("id") + ": %s", encode_str("device") + ": %s", *lists]) + nl + "}"
        clusters = self.partition.clusters
        for start in range(0, len(clusters), BLOCK):
            block = clusters[start:start + BLOCK]
            at = self.bounds[start:start + len(block) + 1]
            ids, devices = [c.id for c in block], [c.device for c in block]
            if self.name_text is None or self.op_text is None or \
                    set(map(type, ids)) != {int} or set(map(type, devices)) != {str} or \
                    any(a == b for a, b in zip(at, at[1:])):
                yield item_texts(self.block(start), nl)
                continue
            take = self.idx[at[0]:at[-1]]
            node_t = list(map(int.__repr__, take.tolist()))
            name_t, op_t = self.name_text[take].tolist(), self.op_text[take].tolist()
            dev_t = {d: encode_str(d) for d in set(devices)}
            at = [a - at[0] for a in at]
            yield [template % (i, dev_t[d], sep.join(node_t[a:b]), sep.join(name_t[a:b]),
                               sep.join(op_t[a:b]))
                   for i, d, a, b in zip(ids, devices, at, at[1:])]


def source_columns(graph: "Graph") -> tuple[list[str], list[str]]:
    """The names and the op types of :func:`source_nodes`, as two lists."""
    nodes = list(map(graph.nodes.__getitem__, graph.source_to_index.tolist()))
    names = [nd.name for nd in nodes]
    if not any(nd.domain for nd in nodes):
        return names, [nd.op_type for nd in nodes]
    return names, [f"{nd.domain}:{nd.op_type}" if nd.domain else nd.op_type for nd in nodes]


def source_nodes(graph: "Graph") -> list[tuple[str, str]]:
    """``(name, op type)`` of every node of ``graph`` in source order (for an ONNX model, its
    ``graph.node`` order); the op type is ``domain:type`` outside the default domain."""
    return list(zip(*source_columns(graph)))


def model_fingerprint(nodes: Iterable[tuple[str, str]]) -> str:
    """``"sha256:<hex>"`` of the ``(name, op type)`` pairs in order (see :func:`source_nodes`):
    two models share it exactly when their node lists name the same nodes and ops."""
    pairs = list(nodes)
    return _fingerprint([p[0] for p in pairs], [p[1] for p in pairs])


def _fingerprint(names: Sequence, ops: Sequence, encoded: bool = False) -> str:
    """:func:`model_fingerprint` of the pairs ``zip(names, ops)``; ``encoded``: both are
    their strings' JSON text already."""
    # the text of json.dumps(separators=(",", ":")) of the pairs as lists, hashed in blocks
    digest = hashlib.sha256()
    for start in range(0, len(names), BLOCK):
        name_t: Iterable[str] = names[start:start + BLOCK]
        op_t: Iterable[str] = ops[start:start + BLOCK]
        if not encoded:
            name_t, op_t = map(encode_str, map(str, name_t)), map(encode_str, map(str, op_t))
        text = ",".join(map("[{},{}]".format, name_t, op_t))
        digest.update(("[" if not start else ",").encode() + text.encode("utf-8"))
    digest.update(b"]" if names else b"[]")
    return "sha256:" + digest.hexdigest()


def optimized_model_path(json_path: str | os.PathLike) -> str:
    """Where the optimized model a partition JSON's indices refer to is written: beside it,
    ``.json`` replaced by ``.optimized.onnx`` (appended when the name has no ``.json``); the
    JSON names it in its ``model_file`` key, with ``optimize`` the level that made it."""
    path = os.fspath(json_path)
    stem = path[:-len(".json")] if path.lower().endswith(".json") else path
    return stem + ".optimized.onnx"


def partition_json_text(partition: "PartitionLike", model: str | None = None) -> str:
    """:func:`partition_json` as the text the command line writes."""
    return "".join(partition_json_chunks(partition, model))


def partition_json_chunks(partition: "PartitionLike", model: str | None = None
                          ) -> Iterator[str]:
    """:func:`partition_json_text` in pieces, for a writer that streams them: the document is
    made in full first (any error comes before the first piece), only its text is lazy."""
    with gc_paused():  # the clusters' lists: collections would free none of them
        doc = _document(partition, model, lazy=True)
    yield from indented_json_chunks(doc)
    yield "\n"


def read_partition_json(source: str | os.PathLike | dict, label: str | None = None
                        ) -> dict[str, Any]:
    """Read a partition JSON file (or take its loaded dict) and check its shape; ``label`` names
    it in messages (default: ``partition JSON 'PATH'``, or ``partition JSON`` for a dict)."""
    if isinstance(source, dict):
        return check_partition_json(source, label or "partition JSON")
    path = os.fspath(source)
    label = label or f"partition JSON {path!r}"
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise PartitionError(f"{label}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PartitionError(f"{label} is not a readable JSON file: {exc}") from exc
    return parse_partition_json(text, label)


def parse_partition_json(text: str | bytes, label: str = "partition JSON") -> dict[str, Any]:
    """Parse partition JSON text and check its shape."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PartitionError(f"{label} is not a readable JSON file: {exc}") from exc
    return check_partition_json(data, label)


def check_partition_json(data: Any, label: str = "partition JSON") -> dict[str, Any]:
    """``data`` when it has a ``clusters`` list of ``{"device", "nodes": [int, ...]}``;
    otherwise a :class:`PartitionError` saying what is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("clusters"), list):
        raise PartitionError(f"{label} is not a partition JSON (no 'clusters' list)")
    for c in data["clusters"]:
        if not isinstance(c, dict) or "device" not in c or not isinstance(c.get("nodes"), list):
            raise PartitionError(f"{label}: every cluster needs a 'device' and a 'nodes' list, got"
                                 f" {str(c)[:80]}")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in c["nodes"]):
            raise PartitionError(f"{label}: cluster {c.get('id')} has non-integer node indices")
    return data


def cluster_nodes(data: dict[str, Any], n: int, where: str) -> list[tuple[str, list[int]]]:
    """``(device, source node indices)`` per cluster of a checked document, every index below
    ``n``; ``where`` prefixes the message naming an index out of range."""
    out = []
    for c in data["clusters"]:
        for v in c["nodes"]:
            if not 0 <= v < n:
                raise PartitionError(f"{where}: cluster {c.get('id')} names node index {v}, but "
                                     f"the model has {n} nodes")
        out.append((str(c["device"]), list(c["nodes"])))
    return out
