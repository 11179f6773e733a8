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
    row_polls = [pc[pc_row == row] for row in range(len(poll_procs))]
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
    reads = {int(g_code[g_order[h]]): g_order[h:e] for h, e in zip(heads, np.r_[heads[1:], len(g_order)])}
    best, final = _worst_pairs(lag, b, ev, names, poll_procs, row_polls, keys_of, joined, reads,
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
                 row_polls: list[np.ndarray], keys_of: list[list[int]], joined: list[dict[int, int]],
                 reads: dict[int, np.ndarray], r_co: tuple[np.ndarray, np.ndarray],
                 nk: int) -> tuple[tuple | None, list[tuple[Any, str, int]]]:
    """Per (process, key): its pairs are the process's polls from the one
    the key joined at; the lag at each, and the first largest. Returns
    ``(lag, -poll, -rank, key)`` of the worst (or None) and each process's
    final position in each key it read."""
    expired, positions = lag.expired, lag.positions
    r_c, r_o = r_co
    best: tuple | None = None
    final: list[tuple[Any, str, int]] = []
    for row, p in enumerate(poll_procs):
        polls_p = row_polls[row]
        for rank, k in enumerate(keys_of[row]):
            c0 = joined[row][k]
            tail = polls_p[np.searchsorted(polls_p, c0):] if c0 >= 0 else polls_p
            if not len(tail):
                continue
            P = np.full(len(tail), -1, np.int64)
            if c0 < 0:
                P[0] = positions[p][names[k]]
            mine = reads.get(row * nk + k)
            if mine is not None:
                at = np.searchsorted(tail, r_c[mine])  # the polls that read it (one read of a key per poll)
                P[at] = np.maximum(r_o[mine], P[at])
                P = np.maximum.accumulate(P)
                final.append((p, names[k], int(P[-1])))
            else:
                P = np.maximum.accumulate(P)
            kc = ev.by_key.get(k)
            if kc is None:
                L = np.full(len(tail), ev.len_before[k], np.int64)
            else:
                at = np.searchsorted(kc[0], tail, side="right") - 1
                L = np.where(at >= 0, kc[1][np.maximum(at, 0)], ev.len_before[k])
            dt = np.zeros(len(tail), np.int64)
            seen = P + 1 < L
            if seen.any():
                since = np.frombuffer(expired[names[k]].data, np.int64)[P[seen] + 1]
                dt[seen] = np.maximum(b.itime[tail[seen]] - since, 0)
            j = int(np.argmax(dt))
            cand = (int(dt[j]), -int(tail[j]), -rank, k)
            if best is None or cand > best:
                best = cand
    return best, final
