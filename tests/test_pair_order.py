"""``graph.algorithms.pair_order``: the order of ``np.lexsort`` by two keys, checked against a
plain Python sort of the positions (ties kept in position order)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterkit.graph.algorithms import pair_order

BIG = 2 ** 62


@settings(max_examples=300, deadline=None, database=None)
@given(st.sampled_from([(0, 12), (-5, 5), (0, BIG), (-BIG, BIG)]).flatmap(
    lambda span: st.lists(st.tuples(st.integers(*span), st.integers(*span)), max_size=60)))
def test_pair_order_sorts_by_major_then_minor_stably(pairs: list[tuple[int, int]]) -> None:
    """Small values (the int64 key), negative ones and ones whose key would overflow (lexsort):
    the same order, ties in position order."""
    major = np.asarray([p[0] for p in pairs], dtype=np.int64)
    minor = np.asarray([p[1] for p in pairs], dtype=np.int64)
    got = pair_order(major, minor)
    assert got.tolist() == sorted(range(len(pairs)), key=lambda e: pairs[e])


def test_pair_order_of_repeated_pairs_keeps_their_positions() -> None:
    major = np.asarray([2, 0, 2, 0, 2], dtype=np.int64)
    minor = np.asarray([1, 7, 1, 7, 0], dtype=np.int64)
    assert pair_order(major, minor).tolist() == [1, 3, 4, 0, 2]
