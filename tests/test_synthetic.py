"""Tests for clusterkit.testing.synthetic."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from clusterkit.testing.synthetic import (
    LONG_EDGE_SUPPORTED,
    LONG_EDGE_UNSUPPORTED,
    SyntheticDAG,
    SyntheticGraphError,
    long_edge_dag,
    random_dag,
    save_node_link,
    to_node_link,
)


def test_same_seed_same_graph_other_seed_other_graph():
    a, b, c = random_dag(5000, seed=7), random_dag(5000, seed=7), random_dag(5000, seed=8)
    assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
    assert a.ops == b.ops and np.array_equal(a.nbytes, b.nbytes)
    assert not (np.array_equal(a.src, c.src) and np.array_equal(a.dst, c.dst))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 10, 1000])
def test_edges_are_distinct_sorted_and_forward(n):
    dag = random_dag(n, mean_out_degree=3.0, seed=1)
    assert dag.n == n and len(dag.ops) == n and dag.nbytes.shape == (n,)
    assert dag.src.dtype == np.int64 and dag.dst.dtype == np.int64 and dag.nbytes.dtype == np.int64
    assert np.all(dag.src < dag.dst)
    assert np.all((dag.src >= 0) & (dag.dst < max(n, 1)))
    keys = dag.src * max(n, 1) + dag.dst
    assert np.all(np.diff(keys) > 0)  # sorted by (src, dst), no duplicates
    assert dag.num_edges == min(3 * n, n * (n - 1) // 2)


def test_arrays_are_read_only():
    dag = random_dag(10)
    with pytest.raises(ValueError):
        dag.src[0] = 5
    assert isinstance(dag, SyntheticDAG)


@pytest.mark.parametrize("mean", [0.0, 1.0, 2.0, 4.5])
def test_mean_out_degree(mean):
    dag = random_dag(20000, mean_out_degree=mean, seed=2)
    assert dag.num_edges / dag.n == pytest.approx(mean, rel=0.02, abs=1e-9)


@pytest.mark.parametrize("locality", [0.0, 0.5, 0.9, 1.0])
def test_locality(locality):
    dag = random_dag(20000, locality=locality, seed=3)
    short = float(np.mean(dag.dst - dag.src <= 50))
    far_short = 50 / 20000 * (1 + np.log(20000 / 50))  # P(uniform later target within 50 ids)
    assert short == pytest.approx(locality + (1 - locality) * far_short, abs=0.03)


@pytest.mark.parametrize("fraction", [0.0, 0.2, 0.5, 1.0])
def test_unsupported_fraction(fraction):
    dag = random_dag(10000, unsupported_fraction=fraction, seed=4, op_types=("A", "B"))
    ops = np.array(dag.ops)
    assert np.mean(ops == "Unsupported") == pytest.approx(fraction, abs=0.001)
    assert set(ops) <= {"A", "B", "Unsupported"}
    if fraction < 1:
        assert {"A", "B"} <= set(ops)


def test_nbytes_are_kib_multiples_up_to_a_mib():
    dag = random_dag(10000, seed=5)
    assert np.all(dag.nbytes % 1024 == 0)
    assert dag.nbytes.min() >= 1024 and dag.nbytes.max() <= 1 << 20
    assert len(np.unique(dag.nbytes)) > 500


def test_bad_arguments():
    for kwargs in ({"n": -1}, {"n": 5, "mean_out_degree": -1}, {"n": 5, "locality": 1.5},
                   {"n": 5, "unsupported_fraction": -0.1}, {"n": 5, "op_types": ()}):
        with pytest.raises(ValueError):
            random_dag(**kwargs)


def test_node_link_round_trip(tmp_path):
    dag = random_dag(300, seed=6)
    data = to_node_link(dag)
    assert data["directed"] is True and data["multigraph"] is False and data["graph"] == {}
    g = nx.node_link_graph(data, edges="edges")
    assert isinstance(g, nx.DiGraph)
    assert sorted(g.nodes) == list(range(dag.n))
    assert all(g.nodes[i] == {"op": dag.ops[i], "bytes": dag.nbytes[i]} for i in range(dag.n))
    assert sorted(g.edges) == list(zip(dag.src.tolist(), dag.dst.tolist()))
    assert all(g.edges[u, v]["bytes"] == dag.nbytes[u] for u, v in g.edges)
    assert nx.is_directed_acyclic_graph(g)
    # networkx writes the same structure back
    assert nx.node_link_data(g, edges="edges") == data

    path = tmp_path / "dag.json"
    save_node_link(dag, path)
    loaded = json.loads(path.read_text())
    assert loaded == data
    g2 = nx.node_link_graph(loaded, edges="edges")
    assert nx.utils.graphs_equal(g, g2)


# --- long_edge_dag: the hidden-order, long-edge kind ---------------------------------------


def test_long_edge_dag_is_deterministic_and_seeded():
    a, b, c = long_edge_dag(500, seed=3), long_edge_dag(500, seed=3), long_edge_dag(500, seed=4)
    assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst) and a.ops == b.ops
    assert not (np.array_equal(a.src, c.src) and np.array_equal(a.dst, c.dst))


def test_long_edge_dag_is_acyclic_with_hidden_order():
    dag = long_edge_dag(2000, seed=1)
    g = nx.DiGraph(list(zip(dag.src.tolist(), dag.dst.tolist())))
    assert nx.is_directed_acyclic_graph(g)
    keys = dag.src * dag.n + dag.dst
    assert np.all(np.diff(keys) > 0)  # distinct and sorted
    backward = float(np.mean(dag.src > dag.dst))
    assert 0.3 < backward < 0.7  # ids are shuffled: about half the edges point "backwards"
    plain = long_edge_dag(2000, seed=1, shuffle=False)
    assert np.all(plain.src < plain.dst)


def test_long_edge_dag_degrees_steps_and_ops():
    n = 20000
    dag = long_edge_dag(n, seed=2, shuffle=False)
    out = np.bincount(dag.src, minlength=n)
    # 1 + Poisson(1) successors, minus the few merged or falling off the end
    assert 1.8 < out[: n - 100].mean() <= 2.0
    step = dag.dst - dag.src
    assert 0.85 < float(np.mean(step <= 40)) < 0.98  # Geometric(1/8) steps stay short
    assert float(np.mean(step > n // 10)) > 0.02  # the 5% long edges span the graph
    ops = np.asarray(dag.ops)
    unsupported = np.isin(ops, LONG_EDGE_UNSUPPORTED)
    assert abs(unsupported.mean() - 0.2) < 0.02
    assert set(ops[~unsupported]) == set(LONG_EDGE_SUPPORTED)
    assert set(ops[unsupported]) == set(LONG_EDGE_UNSUPPORTED)


def test_long_edge_dag_shuffle_keeps_the_graph():
    plain, shuffled = long_edge_dag(300, seed=5, shuffle=False), long_edge_dag(300, seed=5)
    a = nx.DiGraph(list(zip(plain.src.tolist(), plain.dst.tolist())))
    b = nx.DiGraph(list(zip(shuffled.src.tolist(), shuffled.dst.tolist())))
    assert sorted(d for _, d in a.out_degree()) == sorted(d for _, d in b.out_degree())
    assert sorted(plain.ops) == sorted(shuffled.ops)
    assert sorted(plain.nbytes.tolist()) == sorted(shuffled.nbytes.tolist())


@pytest.mark.parametrize("kwargs", [{"n": -1}, {"n": 5, "step_p": 0.0},
                                    {"n": 5, "long_fraction": 1.5},
                                    {"n": 5, "unsupported_fraction": -0.1}])
def test_long_edge_dag_bad_arguments(kwargs):
    with pytest.raises(SyntheticGraphError):
        long_edge_dag(**kwargs)
