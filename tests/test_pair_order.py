"""``graph.algorithms.pair_order``: the order of ``np.lexsort`` by two keys, checked against a
plain Python sort of the positions (ties kept in position order)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterkit.graph.algorithms import pair_order


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(1, 12).flatmap(lambda bound: st.tuples(
    st.just(bound), st.lists(st.tuples(st.integers(0, bound - 1), st.integers(0, bound - 1)),
                             max_size=60))))
def test_pair_order_sorts_by_major_then_minor_stably(case) -> None:
    bound, pairs = case
    major = np.asarray([p[0] for p in pairs], dtype=np.int64)
    minor = np.asarray([p[1] for p in pairs], dtype=np.int64)
    got = pair_order(major, minor, bound)
    assert got.tolist() == sorted(range(len(pairs)), key=lambda e: pairs[e])


def test_pair_order_beyond_the_int64_key_is_lexsort() -> None:
    """Values too large for ``major * bound + minor``: the same order, by lexsort."""
    bound = 2 ** 40
    major = np.asarray([bound - 1, 3, bound - 1, 3], dtype=np.int64)
    minor = np.asarray([5, bound - 2, 4, bound - 2], dtype=np.int64)
    assert pair_order(major, minor, bound).tolist() == [1, 3, 2, 0]
