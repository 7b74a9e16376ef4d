"""``graph.algorithms.distinct``: the distinct values, ascending, against Python's set."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterkit.graph.algorithms import distinct


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.integers(-(2**62), 2**62), max_size=60), st.integers(0, 3))
def test_distinct_is_the_sorted_set(values: list[int], repeat: int) -> None:
    arr = np.asarray(values * (repeat + 1), dtype=np.int64)
    got = distinct(arr)
    assert got.dtype == np.int64
    assert got.tolist() == sorted(set(values))
