"""Edge arrays are checked once (``graph.algorithms.edge_arrays``) for both bulk builders: a
synthetic Graph (``graph_from_arrays``) and a GraphCycles (``from_edges``); each fault gets a
one-line error naming the edge and node at fault."""

import numpy as np
import pytest

from clusterkit.errors import CycleError, GraphError
from clusterkit.graph.fast import graph_from_arrays
from clusterkit.graph.graphcycles import GraphCycles


def _arrays(n, src, dst):
    return graph_from_arrays(n, src, dst, ["Relu"] * max(n, 0), [4] * max(n, 0))


BUILDERS = [_arrays, GraphCycles.from_edges]


@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize("n, src, dst, error, words", [
    (-1, [], [], GraphError, "must be >= 0, got -1"),
    (3, [0, 1], [1], GraphError, "2 edge sources but 1 edge targets"),
    (3, [0, 5], [1, 2], GraphError, "edge 1: source 5 is not a node (the graph has 3 nodes"),
    (3, [0, 1], [1, -2], GraphError, "edge 1: target -2 is not a node"),
    (3, [0, 2], [1, 2], CycleError, "edge 1 is a self-loop on node 2"),
])
def test_faults_are_named(build, n, src, dst, error, words):
    with pytest.raises(error) as info:
        build(n, np.asarray(src), np.asarray(dst))
    message = str(info.value)
    assert words in message and "\n" not in message


@pytest.mark.parametrize("build", BUILDERS)
def test_a_float_node_count_is_refused(build):
    with pytest.raises(TypeError):
        build(2.0, [0], [1])


def test_both_builders_read_the_same_edges():
    """Duplicates merged, every edge kept: the graph's successor lists and the GraphCycles'
    successor sets agree with the distinct input pairs."""
    rng = np.random.default_rng(3)
    n = 40
    a, b = rng.integers(0, n, size=(2, 200))
    keep = a != b
    src, dst = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
    want = sorted(set(zip(src.tolist(), dst.tolist())))
    g = _arrays(n, src, dst)
    got_graph = sorted((u, w) for u in range(n) for w in g.succ_lists[u])
    gc = GraphCycles.from_edges(n, src, dst)
    got_gc = sorted((u, w) for u in range(n) for w in gc.successors(u))
    assert got_graph == want == got_gc
