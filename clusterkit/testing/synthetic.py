"""Seeded random DAGs that look like operator graphs, for tests and benchmarks.

Nodes are numbered in topological order (every edge has ``src < dst``).  Each
node produces one output tensor of ``nbytes[i]`` bytes; a fraction of the
nodes get op type ``"Unsupported"``.  Everything is vectorized with numpy:
a million nodes and two million edges take a fraction of a second.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from clusterkit.errors import GraphError
from clusterkit.io.files import write_atomic

__all__ = ["SyntheticDAG", "SyntheticGraphError", "random_dag", "to_node_link",
           "save_node_link"]

UNSUPPORTED = "Unsupported"
DEFAULT_OP_TYPES = ("Conv", "Relu", "Add", "MatMul", "Mul")
LOCAL_WINDOW = 50  # a "local" edge goes to one of the next LOCAL_WINDOW ids
_MAX_ROUNDS = 16


class SyntheticGraphError(GraphError, ValueError):
    """A random graph was asked for with an impossible option (it is also a ValueError)."""


@dataclass(frozen=True, eq=False)
class SyntheticDAG:
    """A DAG on nodes ``0 .. n-1`` with edges ``src[i] -> dst[i]``.

    Edges are distinct, ``src < dst``, sorted by ``(src, dst)``; arrays are
    int64 and read-only.  ``ops[i]`` is node ``i``'s op type and ``nbytes[i]``
    the size of its single output tensor.
    """

    n: int
    src: np.ndarray
    dst: np.ndarray
    ops: list[str]
    nbytes: np.ndarray

    @property
    def num_edges(self) -> int:
        """Number of edges."""
        return int(self.src.size)


def random_dag(
    n: int,
    mean_out_degree: float = 2.0,
    locality: float = 0.9,
    unsupported_fraction: float = 0.2,
    seed: int = 0,
    op_types: tuple[str, ...] = DEFAULT_OP_TYPES,
) -> SyntheticDAG:
    """Generate a random DAG with about ``n * mean_out_degree`` distinct edges.

    Each edge picks its source uniformly among nodes that have a later node;
    with probability ``locality`` its target is one of the next
    ``LOCAL_WINDOW`` ids, otherwise it is uniform over all later ids.
    Exactly ``round(unsupported_fraction * n)`` nodes get op ``"Unsupported"``,
    the rest a uniform choice from ``op_types``.  Output sizes are uniform
    multiples of 1 KiB from 1 KiB to 1 MiB.  Same arguments, same graph.
    """
    if n < 0:
        raise SyntheticGraphError(f"random_dag: option n must be >= 0, got {n}")
    if mean_out_degree < 0:
        raise SyntheticGraphError(f"random_dag: option mean_out_degree must be >= 0, got "
                                  f"{mean_out_degree}")
    if not 0.0 <= locality <= 1.0:
        raise SyntheticGraphError(f"random_dag: option locality must be in [0, 1], got "
                                  f"{locality}")
    if not 0.0 <= unsupported_fraction <= 1.0:
        raise SyntheticGraphError(f"random_dag: option unsupported_fraction must be in [0, 1], "
                                  f"got {unsupported_fraction}")
    if not op_types:
        raise SyntheticGraphError("random_dag: option op_types must not be empty")

    rng = np.random.default_rng(seed)
    keys = _edge_keys(rng, n, mean_out_degree, locality)
    src, dst = np.divmod(keys, n) if n else (keys, keys.copy())

    op_arr = np.asarray(list(op_types), dtype=object)[rng.integers(0, len(op_types), size=n)]
    n_unsupported = min(n, int(round(unsupported_fraction * n)))
    op_arr[rng.choice(n, size=n_unsupported, replace=False)] = UNSUPPORTED
    nbytes = rng.integers(1, 1025, size=n, dtype=np.int64) * 1024

    for arr in (src, dst, nbytes):
        arr.setflags(write=False)
    return SyntheticDAG(n=n, src=src, dst=dst, ops=op_arr.tolist(), nbytes=nbytes)


def _edge_keys(
    rng: np.random.Generator, n: int, mean_out_degree: float, locality: float
) -> np.ndarray:
    """Sorted distinct keys ``src * n + dst`` of the random edges."""
    target = min(int(round(mean_out_degree * n)), n * (n - 1) // 2)
    keys = np.empty(0, dtype=np.int64)  # distinct, in order of first generation
    for _ in range(_MAX_ROUNDS):
        deficit = target - keys.size
        if deficit <= 0:
            break
        count = deficit + deficit // 16 + 8  # oversample a little to absorb duplicates
        src = rng.integers(0, n - 1, size=count, dtype=np.int64)
        span = n - 1 - src  # number of later ids, >= 1
        local = rng.integers(1, LOCAL_WINDOW + 1, size=count, dtype=np.int64)
        uniform = rng.integers(1, span + 1, dtype=np.int64)
        use_local = (rng.random(count) < locality) & (local <= span)
        cand = src * n + src + np.where(use_local, local, uniform)
        keys = np.concatenate([keys, cand])
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        distinct = np.ones(ordered.size, dtype=bool)
        distinct[1:] = ordered[1:] != ordered[:-1]
        first = order[distinct]
        keys = keys[np.sort(first)]
    keys = keys[:target]  # the first `target` distinct candidates: an unbiased subset
    keys.sort()
    return keys


def to_node_link(dag: SyntheticDAG) -> dict:
    """The DAG as networkx node-link data (``nx.node_link_graph(data, edges="edges")``).

    Nodes carry ``op`` and ``bytes`` (the size of their output, so that sinks keep
    theirs); edges carry ``bytes``, the size of the source's output.
    """
    nbytes = dag.nbytes.tolist()
    return {
        "directed": True,
        "multigraph": False,
        "graph": {},
        "nodes": [
            {"id": i, "op": op, "bytes": b} for i, (op, b) in enumerate(zip(dag.ops, nbytes))
        ],
        "edges": [
            {"source": u, "target": v, "bytes": nbytes[u]}
            for u, v in zip(dag.src.tolist(), dag.dst.tolist())
        ],
    }


def save_node_link(dag: SyntheticDAG, path: str | os.PathLike) -> None:
    """Write :func:`to_node_link` of ``dag`` as JSON to ``path``."""
    write_atomic(path, json.dumps(to_node_link(dag)))
