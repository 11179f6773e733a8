"""unique_sorted is np.unique for the integer arrays the queue checker dedups."""

import numpy as np

from checkers.queue.uniq import unique_sorted


def test_unique_sorted_is_numpys_unique_on_random_int_arrays() -> None:
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 3, 10, 1000):
        for hi in (1, 5, 1 << 40):
            a = rng.integers(-hi, hi, n, dtype=np.int64)
            got = unique_sorted(a)
            assert got.dtype == np.int64
            assert np.array_equal(got, np.unique(a))


def test_unique_sorted_leaves_its_argument_unsorted() -> None:
    a = np.array([3, 1, 3, 2], np.int64)
    assert unique_sorted(a).tolist() == [1, 2, 3]
    assert a.tolist() == [3, 1, 3, 2]
