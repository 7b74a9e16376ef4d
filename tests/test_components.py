"""Shared numpy graph algorithms against scipy's and a plain depth-first oracle."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from clusterkit.graph.algorithms import is_acyclic, weak_components


def _graph(seed: int) -> tuple[int, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 120))
    m = int(rng.integers(0, 2 * n))
    return n, rng.integers(0, n, m), rng.integers(0, n, m)


@pytest.mark.parametrize("seed", range(40))
def test_weak_components_number_as_scipy_does(seed):
    n, a, b = _graph(seed)
    mat = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n)).tocsr()
    _, want = connected_components(mat, directed=False)
    assert weak_components(n, a, b).tolist() == want.tolist()


def _has_cycle(n: int, a: np.ndarray, b: np.ndarray) -> bool:
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(a.tolist(), b.tolist()):
        succ[u].append(v)
    state = [0] * n  # 0 new, 1 on the stack, 2 done

    def visit(u: int) -> bool:
        state[u] = 1
        for v in succ[u]:
            if state[v] == 1 or (state[v] == 0 and visit(v)):
                return True
        state[u] = 2
        return False

    return any(state[u] == 0 and visit(u) for u in range(n))


@pytest.mark.parametrize("seed", range(40))
def test_is_acyclic_agrees_with_depth_first_search(seed):
    n, a, b = _graph(seed)
    if seed % 2:  # mostly forward edges: acyclic ones too
        a, b = np.minimum(a, b), np.maximum(a, b)
        keep = a != b
        a, b = a[keep], b[keep]
    assert is_acyclic(n, a, b) == (not _has_cycle(n, a, b))
