"""Sorting and deduplicating the queue checker's integer arrays the fast way.

* ``np.unique(a)`` (numpy 2.3 and later, no ``return_*`` flag) asks
  ``np.ma.is_masked`` first, and ``np.ma`` is imported on first use: 0.1 s
  that a ``kraftwerk check`` paid in its own process and again in the
  process it forks for half the keys, for arrays a sort deduplicates in
  microseconds (:func:`unique_sorted`).
* A stable argsort of int64 is a merge sort; of 8- or 16-bit ints a radix
  sort, about 8x faster on a batch's key numbers (:func:`stable_argsort`).
"""

from __future__ import annotations

import numpy as np


def unique_sorted(a: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-d integer array, ascending (``np.unique``'s result)."""
    s = np.sort(a)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def stable_argsort(a: np.ndarray, bound: int | None = None) -> np.ndarray:
    """``np.argsort(a, kind="stable")`` of ints all in ``[0, bound)``,
    sorted as 8- or 16-bit ints when ``bound`` allows (None: found from
    the values, which may then be any ints)."""
    if bound is None:
        bound = int(a.max()) + 1 if len(a) and int(a.min()) >= 0 else 1 << 63
    if bound <= 1 << 8:
        a = a.astype(np.uint8)
    elif bound <= 1 << 16:
        a = a.astype(np.uint16)
    return np.argsort(a, kind="stable")
