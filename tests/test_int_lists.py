"""graph.algorithms.int_lists: the lists ``tolist`` gives, with one int object per value."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from clusterkit.graph.algorithms import int_lists

ARRAYS = st.lists(st.lists(st.integers(-5, 40), max_size=30), min_size=1, max_size=4)


@given(ARRAYS)
def test_int_lists_equal_tolist_and_share_their_ints(values: list[list[int]]) -> None:
    arrays = [np.asarray(v, dtype=np.int64) for v in values]
    got = int_lists(*arrays)
    assert got == [v for v in values]  # the same numbers, in order
    assert all(type(x) is int for lst in got for x in lst)
    flat = [x for lst in values for x in lst]
    if flat and max(flat) - min(flat) + 1 <= len(flat):  # dense enough: every value shared
        objects: dict[int, int] = {}
        for x in (x for lst in got for x in lst):
            assert objects.setdefault(x, id(x)) == id(x)


def test_large_values_are_shared_once_per_value() -> None:
    base = np.arange(1000, 3000, dtype=np.int64)
    one, two = int_lists(base, base[::-1])
    assert one == base.tolist() and two == base[::-1].tolist()
    assert all(a is b for a, b in zip(one, reversed(two)))  # 1000.. are not cached small ints


def test_sparse_values_fall_back_to_tolist() -> None:
    got = int_lists(np.array([0, 10**12]), np.array([], dtype=np.int64))
    assert got == [[0, 10**12], []]
    assert int_lists() == [] and int_lists(np.array([], dtype=np.int64)) == [[]]
