"""unique_sorted is np.unique and stable_argsort is a stable int64 argsort, for the queue checker's arrays."""

import numpy as np

from checkers.queue.intsort import stable_argsort, unique_sorted


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


def test_stable_argsort_is_numpys_stable_argsort_at_every_width() -> None:
    rng = np.random.default_rng(11)
    for bound in (1, 2, 256, 257, 1 << 16, (1 << 16) + 1, 1 << 40):
        for n in (0, 1, 5, 5000):
            a = rng.integers(0, bound, n, dtype=np.int64)
            assert np.array_equal(stable_argsort(a, bound), np.argsort(a, kind="stable"))


def test_stable_argsort_without_a_bound_takes_any_ints() -> None:
    rng = np.random.default_rng(12)
    for lo, hi in ((0, 20), (0, 70000), (-5, 20), (-(1 << 62), 1 << 62)):
        a = rng.integers(lo, hi, 3000, dtype=np.int64)
        assert np.array_equal(stable_argsort(a), np.argsort(a, kind="stable"))
    assert stable_argsort(np.zeros(0, np.int64)).tolist() == []
