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

__all__ = ["SyntheticDAG", "SyntheticGraphError", "random_dag", "long_edge_dag", "to_node_link",
           "save_node_link", "LONG_EDGE_SUPPORTED", "LONG_EDGE_UNSUPPORTED"]

UNSUPPORTED = "Unsupported"
DEFAULT_OP_TYPES = ("Conv", "Relu", "Add", "MatMul", "Mul")
#: the 16 supported and 4 unsupported op types of :func:`long_edge_dag`
LONG_EDGE_SUPPORTED = tuple(f"S{k}" for k in range(16))
LONG_EDGE_UNSUPPORTED = tuple(f"U{k}" for k in range(4))
LOCAL_WINDOW = 50  # a "local" edge goes to one of the next LOCAL_WINDOW ids
_MAX_ROUNDS = 16


class SyntheticGraphError(GraphError, ValueError):
    """A random graph was asked for with an impossible option (it is also a ValueError)."""


@dataclass(frozen=True, eq=False)
class SyntheticDAG:
    """A DAG on nodes ``0 .. n-1`` with edges ``src[i] -> dst[i]``.

    Edges are distinct, sorted by ``(src, dst)``, and ``src < dst`` unless the DAG
    was made with shuffled ids (:func:`long_edge_dag`); arrays are int64 and read-only.
    ``ops[i]`` is node ``i``'s op type and ``nbytes[i]``
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


def long_edge_dag(n: int, seed: int = 0, *, step_p: float = 1 / 8, long_fraction: float = 0.05,
                  unsupported_fraction: float = 0.2, shuffle: bool = True) -> SyntheticDAG:
    """A DAG with long edges and ids in a hidden random order, like an fx graph of a real model.

    In a hidden topological order each node gets ``1 + Poisson(1)`` successors: with
    probability ``1 - long_fraction`` a ``Geometric(step_p)`` step later, otherwise uniform
    over all later nodes (steps past the end are dropped, duplicates merged). A fraction
    ``unsupported_fraction`` of the nodes carry one of the four ops
    :data:`LONG_EDGE_UNSUPPORTED`, the rest one of the sixteen :data:`LONG_EDGE_SUPPORTED`.
    With ``shuffle`` the ids are a random permutation of the hidden order. Output sizes are
    multiples of 1 KiB from 1 KiB to 1 MiB. Same arguments, same graph.
    """
    if n < 0:
        raise SyntheticGraphError(f"long_edge_dag: option n must be >= 0, got {n}")
    if not 0.0 < step_p <= 1.0:
        raise SyntheticGraphError(f"long_edge_dag: option step_p must be in (0, 1], got {step_p}")
    for key, value in (("long_fraction", long_fraction),
                       ("unsupported_fraction", unsupported_fraction)):
        if not 0.0 <= value <= 1.0:
            raise SyntheticGraphError(f"long_edge_dag: option {key} must be in [0, 1], got "
                                      f"{value}")
    rng = np.random.default_rng(seed)
    count = 1 + rng.poisson(1.0, size=n)
    src = np.repeat(np.arange(n, dtype=np.int64), count)
    span = n - 1 - src
    far = rng.random(src.size) < long_fraction
    step = np.where(far, rng.integers(1, np.maximum(span, 1) + 1, dtype=np.int64),
                    rng.geometric(step_p, size=src.size).astype(np.int64))
    keep = step <= span
    src, dst = src[keep], src[keep] + step[keep]
    is_unsupported = rng.random(n) < unsupported_fraction
    ops = np.where(is_unsupported,
                   np.asarray(LONG_EDGE_UNSUPPORTED, dtype=object)[rng.integers(0, 4, size=n)],
                   np.asarray(LONG_EDGE_SUPPORTED, dtype=object)[rng.integers(0, 16, size=n)])
    nbytes = rng.integers(1, 1025, size=n, dtype=np.int64) * 1024
    if shuffle:
        ids = rng.permutation(n).astype(np.int64)  # hidden position -> id
        src, dst = ids[src], ids[dst]
        order = np.empty(n, dtype=np.int64)
        order[ids] = np.arange(n, dtype=np.int64)  # id -> hidden position
        ops, nbytes = ops[order], nbytes[order]
    keys = np.unique(src * max(n, 1) + dst)
    src, dst = np.divmod(keys, max(n, 1))
    for arr in (src, dst, nbytes):
        arr.setflags(write=False)
    return SyntheticDAG(n=n, src=src, dst=dst, ops=list(ops), nbytes=nbytes)


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
