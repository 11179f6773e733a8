"""Sorted distinct values of an integer array, without ``np.unique``.

``np.unique(a)`` (numpy 2.3 and later, no ``return_*`` flag) asks
``np.ma.is_masked`` first, and ``np.ma`` is imported on first use: 0.1 s
that a ``kraftwerk check`` paid in its own process and again in the process
it forks for half the keys, for arrays a sort deduplicates in microseconds.
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
