"""The realtime-lag fold (:class:`checkers.queue.observe.RealtimeLag`) of a
batch of fast completions at once.

Feeding a 1M-operation history one completion at a time, the lag fold is a
Python loop over every (poll, key the process has a position in) pair. The
same state comes out of a handful of array operations, because what the
fold reads at a poll is known from the batch alone:

* a key's ``expired`` entries only ever grow, each new entry taking the
  completion time of the event that first revealed its offset: per key, the
  running highest offset says how many entries each event adds;
* at poll ``c``, for a key ``k`` of its process ``p``, the fold reads
  ``P``, the highest offset ``p`` read of ``k`` up to ``c`` (or its position
  before the batch), and whether ``k``'s expired column was already longer
  than ``P + 1`` at ``c``, and if so entry ``P + 1``, which never changes
  once written: both found by binary search over the batch's events;
* the worst lag is the first pair, in the order the fold visits them (polls
  in order, a process's keys in the order it first read them), whose lag is
  the largest, taken if it beats the worst so far: ``argmax``.

:func:`lag_one_by_one` is the fold itself, completion by completion, for
what the arrays do not hold (a time or position past 64 bits, a column
already turned into a list): :func:`lag_in_bulk` declines those batches.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from .columns import Col
from .intsort import stable_argsort
from .lines import POLL_META, Batch
from .observe import RealtimeLag


def lag_one_by_one(lag: RealtimeLag, b: Batch, emax: np.ndarray, ev_first: np.ndarray) -> None:
    """:meth:`RealtimeLag.feed` of the batch's completions, one at a time
    (``emax``: each event's highest offset, -1 for an empty read;
    ``ev_first[c]``: completion ``c``'s first event)."""
    expired, positions = lag.expired, lag.positions
    names, ekey, emax_l, first = b.keys, b.ev_key.tolist(), emax.tolist(), ev_first.tolist()
    for c, (tm, proc, t_inv, m) in enumerate(zip(b.tm.tolist(), b.proc.tolist(), b.itime.tolist(),
                                                 b.meta.tolist())):
        if m != POLL_META:
            _reveal(expired, names[ekey[first[c]]], emax_l[first[c]], tm)
            continue
        pos = positions.get(proc)
        if pos is None:
            pos = positions[proc] = {}
        for e in range(first[c], first[c + 1]):
            o = emax_l[e]
            if o >= 0:
                k = names[ekey[e]]
                _reveal(expired, k, o, tm)
                pos[k] = max(pos.get(k, -1), o)
        worst = lag.worst
        for k, o in pos.items():
            exp = expired.get(k)
            if exp is not None and o + 1 < len(exp.data):
                since = exp.data[o + 1]
                dt = max(0, t_inv - since) if since is not None else 0
            else:
                dt = 0
            if worst is None or dt > worst["lag"]:
                worst = lag.worst = {"time": t_inv, "process": proc, "key": k, "lag": dt}


def _reveal(expired: dict[str, Col], k: str, o: int, tm: int) -> None:
    """Offsets up to ``o`` of ``k`` are known to exist from time ``tm`` on."""
    exp = expired.get(k)
    if exp is None:
        exp = expired[k] = Col()
    ed = exp.data
    if len(ed) == o:  # the next offset (the time is a 64-bit int: Col.fill's append)
        ed.append(tm)
    elif len(ed) < o:
        exp.fill(o + 1 - len(ed), tm)


def _all_ints(lag: RealtimeLag, b: Batch, procs: list[Any]) -> bool:
    """Whether every column and position the batch touches is 64-bit ints."""
    expired, positions = lag.expired, lag.positions
    names = set(b.keys)
    for p in procs:
        pos = positions.get(p)
        if pos:
            if any(type(o) is not int for o in pos.values()):
                return False
            names.update(pos)
    return all(type(c.data) is array for c in (expired.get(n) for n in names) if c is not None)


def lag_in_bulk(lag: RealtimeLag, b: Batch, emax: np.ndarray) -> bool:
    """:func:`lag_one_by_one`'s effect, with numpy (see the module doc);
    False, with nothing changed, for a batch it leaves to that."""
    polls = b.meta == POLL_META
    pc = np.flatnonzero(polls)
    poll_procs = list(dict.fromkeys(b.proc[pc].tolist()))
    if not _all_ints(lag, b, poll_procs):
        return False
    positions = lag.positions
    # keys by number: the batch's, then any other a polling process has a position in
    names = list(b.keys)
    number = {n: i for i, n in enumerate(names)}
    for p in poll_procs:
        for n in positions.get(p, ()):
            if n not in number:
                number[n] = len(names)
                names.append(n)
    ev = _Reveals(lag, b, emax, names)
    if not len(pc):
        return True
    for p in poll_procs:
        if p not in positions:
            positions[p] = {}
    pe = polls[ev.c]
    r_c, r_k, r_o = ev.c[pe], ev.k[pe], ev.o[pe]   # reads that reveal offsets, in history order
    r_row = _rows(b.proc[r_c], poll_procs)
    pc_row = _rows(b.proc[pc], poll_procs)
    polls = _RowPolls(pc, pc_row, len(poll_procs), len(b.tm))
    nk = len(names)
    g_code = r_row * nk + r_k
    # by (process, key), each group's reads in history order (r_c never goes down)
    g_order = stable_argsort(g_code, len(poll_procs) * nk)
    heads = np.flatnonzero(np.r_[True, g_code[g_order][1:] != g_code[g_order][:-1]]) if len(g_order) \
        else np.zeros(0, np.int64)
    keys_of: list[list[int]] = [[number[n] for n in positions[p]] for p in poll_procs]
    joined: list[dict[int, int]] = [dict.fromkeys(ks_, -1) for ks_ in keys_of]  # key -> poll it joined at
    firsts = np.sort(g_order[heads])  # each (process, key)'s first read, in history order
    for row, k, c in zip(r_row[firsts].tolist(), r_k[firsts].tolist(), r_c[firsts].tolist()):
        if k not in joined[row]:
            joined[row][k] = c
            keys_of[row].append(k)
    best, final = _worst_pairs(lag, b, ev, names, poll_procs, polls, keys_of, joined, g_code,
                               (r_c, r_o), nk)
    if best is not None:
        worst = lag.worst
        if worst is None or best[0] > worst["lag"]:
            c = -best[1]
            lag.worst = {"time": int(b.itime[c]), "process": b.proc[c].item(), "key": names[best[3]],
                         "lag": best[0]}
    # the positions after the batch (a new key joins its process's in the order first read)
    for p, name, o in final:
        positions[p][name] = o
    return True


def _rows(procs: np.ndarray, poll_procs: list[Any]) -> np.ndarray:
    """Each of ``procs``' row: its index in ``poll_procs`` (distinct ints, every one of ``procs`` among them)."""
    pp = np.array(poll_procs, np.int64)
    if len(pp) and int(pp.min()) >= 0 and int(pp.max()) < _LUT_MAX:
        # process numbers from 0 (a simulated seed's): one table lookup a
        # completion, where a binary search each cost ~0.5 ms a seed
        lut = np.zeros(int(pp.max()) + 1, np.intp)
        lut[pp] = np.arange(len(pp))
        return lut[procs]
    by = np.argsort(pp)
    return by[np.searchsorted(pp[by], procs)]


#: below this, a batch's process numbers index a table (:func:`_rows`)
_LUT_MAX = 1 << 16


class _Reveals:
    """The batch's revealing events (an offset >= 0): each extends its
    key's expired column, which this does, in the order the batch first
    reveals the keys; ``c``/``k``/``o`` their completion, key number and
    offset, ``len_before`` each key's column length before the batch,
    ``by_key`` each key's events' completions and its length after each."""

    def __init__(self, lag: RealtimeLag, b: Batch, emax: np.ndarray, names: list[str]) -> None:
        expired = lag.expired
        ev = np.flatnonzero(emax >= 0)
        self.c, self.k, self.o = b.ev_c[ev], b.ev_key[ev], emax[ev]
        len_after = np.empty(len(ev), np.int64)   # the key's expired length after the event
        self.len_before = np.zeros(len(names), np.int64)
        for kid, n in enumerate(names):
            c = expired.get(n)
            if c is not None:
                self.len_before[kid] = len(c.data)
        order = stable_argsort(self.k, len(names))  # key numbers: sorted by radix
        ks = self.k[order]
        starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]) if len(ks) else np.zeros(0, np.int64)
        ends = np.r_[starts[1:], len(ks)].astype(np.int64)
        groups = []
        for g in np.argsort(order[starts], kind="stable"):  # keys in the order the batch first reveals them
            sel = order[starts[g]:ends[g]]
            kid = int(ks[starts[g]])
            col = expired.get(names[kid])
            if col is None:
                col = expired[names[kid]] = Col()
            l0 = int(self.len_before[kid])
            run = np.maximum(np.maximum.accumulate(self.o[sel]), l0 - 1)
            grow = np.diff(run, prepend=l0 - 1)
            col.data.frombytes(np.repeat(b.tm[self.c[sel]], grow).tobytes())
            len_after[sel] = run + 1
            groups.append((kid, sel))
        self.by_key = {kid: (self.c[sel], len_after[sel]) for kid, sel in groups}


def _worst_pairs(lag: RealtimeLag, b: Batch, ev: _Reveals, names: list[str], poll_procs: list[Any],
                 polls: "_RowPolls", keys_of: list[list[int]], joined: list[dict[int, int]],
                 g_code: np.ndarray, r_co: tuple[np.ndarray, np.ndarray],
                 nk: int) -> tuple[tuple | None, list[tuple[Any, str, int]]]:
    """Per (process, key): its pairs are the process's polls from the one
    the key joined at; the lag at each, and the first largest. Returns
    ``(lag, -poll, -rank, key)`` of the worst (or None) and each process's
    final position in each key it read (``g_code``: each read's process
    row times ``nk`` plus its key number).

    Every (process, key)'s polls are laid end to end in one array, in the
    order the fold visits them, and each step is one array operation over
    all of them (a segmented running maximum for the positions): a
    simulated seed's 32 processes and 3 keys made 96 rounds of a dozen
    calls on arrays of a few hundred polls each, ~4.5 ms of its checkers."""
    positions = lag.positions
    r_c, r_o = r_co
    rows: list[int] = []
    ranks: list[int] = []
    keys: list[int] = []
    c0s: list[int] = []
    start: list[int] = []
    for row, p in enumerate(poll_procs):
        pos = positions[p]
        for rank, k in enumerate(keys_of[row]):
            c0 = joined[row][k]
            rows.append(row)
            ranks.append(rank)
            keys.append(k)
            c0s.append(c0)
            start.append(pos[names[k]] if c0 < 0 else -1)
    if not rows:
        return None, []
    n_pairs = len(rows)
    # each pair's polls from the one the key joined at (all of them when
    # the process had a position before the batch), pair by pair
    c0 = np.array(c0s, np.int64)
    row_of = np.array(rows, np.int64)
    skip = np.where(c0 >= 0, polls.place[np.maximum(c0, 0)], 0)  # the process's polls before it
    size = polls.count[row_of] - skip
    pair = np.repeat(np.arange(n_pairs), size)
    at0 = np.cumsum(size) - size  # each pair's first element
    tail = polls.nth(row_of[pair], skip[pair] + np.arange(len(pair)) - at0[pair])
    if not len(tail):
        return None, []
    first = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
    last = np.r_[first[1:], len(tail)] - 1
    P = np.full(len(tail), -1, np.int64)
    P[first] = np.array(start, np.int64)[pair[first]]
    # each read's element: its poll's place among its pair's (one read of a key per poll)
    pair_of = np.full(len(poll_procs) * nk, -1, np.int64)
    pair_of[row_of * nk + np.array(keys, np.int64)] = np.arange(n_pairs)
    read_pair = pair_of[g_code]
    at = at0[read_pair] + polls.place[r_c] - skip[read_pair]
    P[at] = np.maximum(r_o, P[at])
    P = _running_max(P, pair)
    read = np.zeros(n_pairs, bool)
    read[read_pair] = True
    final = [(poll_procs[rows[g]], names[keys[g]], int(x))
             for g, x in zip(pair[last].tolist(), P[last].tolist()) if read[g]]
    key = np.array(keys, np.int64)[pair]
    dt = _lags(lag, b, ev, names, tail, key, P, nk)
    # the worst: the largest lag, then the earliest poll, then the process's
    # first-read key (the fold's order of visit, and a later pair only
    # taking a strictly worse one), then the highest key number
    worst = int(dt.max())
    cand = np.flatnonzero(dt == worst)
    cand = cand[tail[cand] == tail[cand].min()]
    rank = np.array(ranks, np.int64)[pair[cand]]
    cand = cand[rank == rank.min()]
    g = int(pair[cand[np.argmax(key[cand])]])
    return (worst, -int(tail[cand[0]]), -ranks[g], keys[g]), final


def _lags(lag: RealtimeLag, b: Batch, ev: _Reveals, names: list[str], tail: np.ndarray, key: np.ndarray,
          P: np.ndarray, nk: int) -> np.ndarray:
    """The lag at each (poll ``tail``, key ``key``, position ``P``): from
    the time the offset after the position was revealed, if its key's
    expired column was that long by the poll, else none; a key at a time."""
    dt = np.zeros(len(tail), np.int64)
    by_key = stable_argsort(key, nk)
    ks = key[by_key]
    heads = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    for h, e in zip(heads.tolist(), np.r_[heads[1:], len(ks)].tolist()):
        k = int(ks[h])
        mine = by_key[h:e]
        t = tail[mine]
        kc = ev.by_key.get(k)
        if kc is None:
            L = np.full(len(t), ev.len_before[k], np.int64)
        else:
            j = _last_at_or_before(kc[0], t, len(b.tm))
            L = np.where(j >= 0, kc[1][np.maximum(j, 0)], ev.len_before[k])
        Pk = P[mine]
        seen = Pk + 1 < L
        if seen.any():
            since = np.frombuffer(lag.expired[names[k]].data, np.int64)[Pk[seen] + 1]
            dt[mine[seen]] = np.maximum(b.itime[t[seen]] - since, 0)
    return dt


def _last_at_or_before(cs: np.ndarray, t: np.ndarray, width: int) -> np.ndarray:
    """For each of ``t``, the index of the last of ``cs`` (ascending and
    distinct, each below ``width``) at or before it, -1 for none:
    ``np.searchsorted(cs, t, side="right") - 1``. With many queries for
    the span (a seed's ~7k polls of a key among ~29k completions) a table
    over the span and one running maximum, where the binary searches of
    unsorted queries took ~0.3 ms a key."""
    if width > 8 * len(t):
        return np.searchsorted(cs, t, side="right") - 1
    table = np.full(width, -1, np.int64)
    table[cs] = np.arange(len(cs))
    return np.maximum.accumulate(table)[t]


class _RowPolls:
    """The batch's polls (completion numbers ``pc``, ascending) by process
    row (``pc_row``): each row's count, each poll's place among its row's
    (:attr:`place`, by completion number) and :meth:`nth`."""

    def __init__(self, pc: np.ndarray, pc_row: np.ndarray, rows: int, width: int) -> None:
        self.order = stable_argsort(pc_row, rows)  # by row, each row's in history order
        self.count = np.bincount(pc_row, minlength=rows)
        self.first = np.cumsum(self.count) - self.count
        self.pc = pc
        self.place = np.full(width, -1, np.int64)
        self.place[pc[self.order]] = np.arange(len(pc)) - np.repeat(self.first, self.count)

    def nth(self, row: np.ndarray, i: np.ndarray) -> np.ndarray:
        """The completion number of row ``row``'s ``i``-th poll (each)."""
        return self.pc[self.order[self.first[row] + i]]


def _running_max(x: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The running maximum of ``x`` within each run of equal ``group``
    numbers (non-decreasing): one running maximum over all, each group
    lifted above the ones before it (by its rank among ``x``'s values
    when the lift would pass 63 bits)."""
    if not len(x):
        return x
    lo, hi = int(x.min()), int(x.max())
    span = hi - lo + 1
    if span * (int(group[-1]) + 1) < 1 << 62:
        lift = group * span
        return np.maximum.accumulate((x - lo) + lift) - lift + lo
    u, rank = np.unique(x, return_inverse=True)
    lift = group * len(u)
    return u[np.maximum.accumulate(rank.ravel() + lift) - lift]
