"""The realtime-lag fold of a batch in bulk is the fold fed one completion
at a time (:mod:`checkers.queue.lagbulk`).

Random batches over a random state from before them: times out of order,
positions reset to -1 by an assign, keys a process has a position in that
the batch never names, reads of nothing, equal lags (the first must win).
"""

from __future__ import annotations

import copy
import random
from array import array

import numpy as np
import pytest

from checkers.queue.columns import Col
from checkers.queue.lagbulk import lag_in_bulk, lag_one_by_one
from checkers.queue.lines import POLL_META, Batch
from checkers.queue.observe import RealtimeLag

NAMES = [f"t-{i}" for i in range(7)]


def _state(rng: random.Random) -> RealtimeLag:
    lag = RealtimeLag()
    for n in rng.sample(NAMES, rng.randint(0, len(NAMES))):
        lag.expired[n] = Col(array("q", sorted(rng.randrange(50) for _ in range(rng.randint(0, 6)))))
    for p in range(rng.randint(0, 4)):
        lag.positions[p] = {n: rng.randint(-1, 6) for n in rng.sample(NAMES, rng.randint(0, 4))}
    if rng.random() < 0.5:
        lag.worst = {"time": 0, "process": 0, "key": NAMES[0], "lag": rng.randrange(30)}
    return lag


def _batch(rng: random.Random) -> Batch:
    keys = rng.sample(NAMES, rng.randint(1, len(NAMES)))
    tm, proc, itime, meta = [], [], [], []
    ev_c, ev_key, ev_n, off = [], [], [], []
    for c in range(rng.randint(1, 40)):
        t = rng.randrange(100)  # not in order: the fold must not assume it
        tm.append(t)
        itime.append(t - rng.randrange(20))
        proc.append(rng.randrange(5))
        if rng.random() < 0.4:
            meta.append(1)
            ev_c.append(c)
            ev_key.append(rng.randrange(len(keys)))
            ev_n.append(1)
            off.append(rng.randrange(12))
            continue
        meta.append(POLL_META)
        for k in rng.sample(range(len(keys)), rng.randint(0, min(3, len(keys)))):
            n = rng.randint(0, 3)
            ev_c.append(c)
            ev_key.append(k)
            ev_n.append(n)
            off.extend(rng.randrange(12) for _ in range(n))

    def a(xs: list[int], t: type = np.int64) -> np.ndarray:
        return np.array(xs, t)

    return Batch(a([]), 0, a(list(range(len(tm)))), a(proc), a(itime), a(tm), a(meta, np.uint8),
                 a([0] * len(tm), np.uint8), a(ev_c), a(ev_key), a(ev_n), a(off), a(off), keys)


def _emax(b: Batch) -> np.ndarray:
    starts = np.concatenate(([0], np.cumsum(b.ev_n)))
    emax = np.full(len(b.ev_c), -1, np.int64)
    nonempty = b.ev_n > 0
    if nonempty.any():
        emax[nonempty] = np.maximum.reduceat(b.off, starts[:-1][nonempty])
    return emax


def _held(lag: RealtimeLag) -> tuple:
    return ([(k, list(c)) for k, c in lag.expired.items()],
            [(p, list(pos.items())) for p, pos in lag.positions.items()], lag.worst)


@pytest.mark.parametrize("seed", range(300))
def test_the_lag_of_a_batch_in_bulk_is_the_lag_fed_one_completion_at_a_time(seed):
    rng = random.Random(seed)
    lag = _state(rng)
    b = _batch(rng)
    bulk, one = lag, copy.deepcopy(lag)
    assert lag_in_bulk(bulk, b, _emax(b))
    lag_one_by_one(one, b, _emax(b), np.searchsorted(b.ev_c, np.arange(len(b.tm) + 1)))
    assert _held(bulk) == _held(one)


def test_a_batch_past_64_bit_columns_is_left_to_the_one_by_one_fold():
    """A key whose expired column became a list (a time past 64 bits read
    from an unusual line) is declined, with nothing changed."""
    rng = random.Random(1)
    b = _batch(rng)
    lag = RealtimeLag()
    lag.expired[b.keys[0]] = Col([1 << 70])
    before = _held(lag)
    assert not lag_in_bulk(lag, b, _emax(b))
    assert _held(lag) == before


@pytest.mark.parametrize("big", [False, True])
def test_the_running_maximum_restarts_at_each_group(big):
    """The positions' running maximum over every (process, key)'s polls at
    once (checkers/queue/lagbulk.py, ``_running_max``) is each group's own,
    also for values too far apart to lift each group above the last (then
    ranked first)."""
    from checkers.queue.lagbulk import _running_max

    rng = random.Random(7)
    scale = 1 << 62 if big else 10
    for _ in range(50):
        sizes = [rng.randint(1, 6) for _ in range(rng.randint(1, 8))]
        group = np.repeat(np.arange(len(sizes)) * 2, sizes)  # numbers with gaps, non-decreasing
        x = np.array([rng.randint(-1, scale) for _ in range(len(group))], np.int64)
        want = []
        for g in np.unique(group):
            want.extend(np.maximum.accumulate(x[group == g]).tolist())
        assert _running_max(x, group).tolist() == want


@pytest.mark.parametrize("queries", [3, 400])
def test_the_last_reveal_at_or_before_each_poll_is_the_binary_searchs(queries):
    """Each poll's last reveal of its key at or before it
    (checkers/queue/lagbulk.py, ``_last_at_or_before``) is the binary
    search's answer, read off a table over the batch when the polls are
    many for its span (400 of 1000 completions) and searched when few."""
    from checkers.queue.lagbulk import _last_at_or_before

    rng = random.Random(queries)
    for _ in range(30):
        cs = np.array(sorted(rng.sample(range(1000), rng.randint(0, 60))), np.int64)
        t = np.array([rng.randrange(1000) for _ in range(queries)], np.int64)
        assert _last_at_or_before(cs, t, 1000).tolist() == (np.searchsorted(cs, t, side="right") - 1).tolist()
