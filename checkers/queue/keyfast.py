"""The per-key checks of a clean key, from its columns, in numpy.

:func:`checkers.queue.keycheck.check_key` reads a key's events as tuples and
builds its index in dicts, one Python step per record: most of a 1M-op
check's time goes there for keys in which nothing is wrong. Most keys of a
healthy run are of one plain shape, and for those the whole answer follows
from a few array operations:

* every event completed ``ok``; every send sent one record, all with the
  same acks level, not a weak one (acks=1/0 records are placed only once
  read, :mod:`.keycheck`); no operation both sends to and polls the key;
  no assign or subscribe in the history;
* no offset holds two values and no value sits at two offsets
  (inconsistent-offsets, duplicate), and every sent value was polled
  (lost-write, unseen), by a final read too when there was one (the
  durability rule);
* every poll continues where the process's previous non-final poll of the
  key stopped, with no gap inside it (poll-skip and its relatives), and
  every process's sends go up the log (nonmonotonic-send).

:func:`check_clean_key` tests exactly these conditions and then returns
what :func:`check_key` returns for such a key — no anomaly, its ww/wr/rw
edges, acknowledged sends, durability partial and statistics. On any other
key it returns None and the caller runs :func:`check_key`.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from checkers.durability import _bucket

from .columns import _ABSENT, KeyColumns
from .keycheck import WEAK_ACKS
from .intsort import stable_argsort, unique_sorted


#: a key's offsets are read into a table by offset (:func:`_distinct_pairs`)
#: when they span less than this many times their number (plus 1024)
TABLE_SPAN = 4


def _i64(col: Any) -> np.ndarray | None:
    d = col.data
    if type(d) is not array:
        return None
    return np.frombuffer(d, dtype=np.int64) if len(d) else np.zeros(0, np.int64)


def _flat(a: np.ndarray, b: np.ndarray) -> array:
    """Pairs ``(a[i], b[i])`` as one flat ``array('q')``."""
    out = np.empty(2 * len(a), dtype=np.int64)
    out[0::2] = a
    out[1::2] = b
    r = array("q")
    r.frombytes(out.tobytes())
    return r


def _steps_up(group: np.ndarray, first: np.ndarray, last: np.ndarray, has: np.ndarray,
              exact: bool) -> bool:
    """Along each group's items (in order), whenever two consecutive items
    both have records, the next one starts right after (``exact``) or
    anywhere after (not ``exact``) where the previous one ended."""
    if len(group) < 2:
        return True
    order = stable_argsort(group)  # process numbers: by radix when they are small
    g, f, la, h = group[order], first[order], last[order], has[order]
    both = (g[1:] == g[:-1]) & h[1:] & h[:-1]
    step = f[1:][both] - la[:-1][both]
    return bool((step == 1).all()) if exact else bool((step >= 1).all())


def _within(sorted_a: np.ndarray, sorted_unique_b: np.ndarray) -> bool:
    """Every element of ``sorted_a`` is in ``sorted_unique_b``."""
    if not len(sorted_unique_b):
        return not len(sorted_a)
    at = np.minimum(np.searchsorted(sorted_unique_b, sorted_a), len(sorted_unique_b) - 1)
    return bool((sorted_unique_b[at] == sorted_a).all())


def _meet(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` and ``b`` share an element (op indices: in order already, as
    a history's are, so no sort is needed then)."""
    if not (a[1:] > a[:-1]).all():
        a = np.sort(a)
    if not (b[1:] > b[:-1]).all():
        b = unique_sorted(b)
    at = np.minimum(np.searchsorted(b, a), len(b) - 1)
    return bool((b[at] == a).any())


@dataclass
class _Plain:
    """A key of the plain shape, as arrays: events (op, process, time,
    write or not, first record, record count), the sends' and polls' event
    numbers, each event's meta code and the meta table, the acks level of
    its sends, and the records (offsets, values)."""

    op: np.ndarray
    proc: np.ndarray
    tm: np.ndarray
    is_w: np.ndarray
    start: np.ndarray
    cnt: np.ndarray
    w_ev: np.ndarray
    r_ev: np.ndarray
    meta_c: np.ndarray
    meta_t: list
    acks: Any
    offs: np.ndarray
    vals: np.ndarray
    #: each event's process, told apart from itself across an assign that
    #: dropped the key (the process then starts afresh): a group number
    session: np.ndarray


def check_clean_key(key: str, cols: KeyColumns, want_rw: bool = True,
                    assigns: Sequence[tuple] = ()) -> dict[str, Any] | None:
    """:func:`checkers.queue.keycheck.check_key`'s result for a key of the
    plain shape the module doc describes (its columns and the history's
    assigns and subscribes, :attr:`checkers.queue.project.Projector.assigns`),
    or None for any other key."""
    k = _plain(cols, key, assigns)
    if k is None:
        return None
    w_ev, r_ev = k.w_ev, k.r_ev
    # sends: one record each, values distinct
    s_ix = k.start[w_ev]
    s_off, s_val = k.offs[s_ix], k.vals[s_ix]
    by_val = np.argsort(s_val, kind="stable")
    s_sorted = s_val[by_val]
    if bool((s_sorted[1:] == s_sorted[:-1]).any()):
        return None
    # polls' records, in event order: taken by a mask of the pairs (a
    # boolean take), each one's event the poll's repeated (the pairs lie
    # in event order), where gathering the ~240k reads of a seed's key by
    # their indices took half as long again
    r_mask = np.repeat(~k.is_w, k.cnt)
    r_off, r_val = k.offs[r_mask], k.vals[r_mask]
    r_event = np.repeat(k.r_ev, k.cnt[k.r_ev])
    log = _dense_log(r_off, r_val, s_off, s_val)
    if log is None:
        return None
    log_off, log_val = log
    r_pos = _positions(log_off, r_off)  # each read's place in the log
    uniq, first_at = _first_reads(r_pos, log_val)  # each polled value, where first polled
    if len(s_val) and not _within(s_sorted, uniq):
        return None  # a sent value no poll returned: lost-write or unseen
    r_final = _final_polls(k)
    if r_final.any():
        final_ev = np.zeros(len(k.op), dtype=bool)
        final_ev[r_ev[r_final]] = True
        if len(s_val) and not _within(s_sorted, unique_sorted(r_val[final_ev[r_event]])):
            return None  # the durability rule: a final read missed an acknowledged value
    r_hi = _contiguous_polls(k, r_final, r_pos, r_event, _positions(log_off, s_off))
    if r_hi is None:
        return None
    # edges: the writer of each index of the log (-1: no send in this key)
    writer = np.full(len(log_val), -1, np.int64)
    if len(s_val):
        at = np.searchsorted(s_sorted, log_val)
        at_c = np.minimum(at, len(s_val) - 1)
        hit = (at < len(s_val)) & (s_sorted[at_c] == log_val)
        writer[hit] = k.op[w_ev][by_val][at_c][hit]
    # durability: each send's delay until the first poll that returned it
    durability: dict[Any, dict[str, Any]] = {}
    if len(w_ev):
        seen_t = k.tm[r_event[first_at]]
        tv = seen_t[np.searchsorted(uniq, s_val)]
        b = _bucket()
        b["sent"] = b["acked"] = len(w_ev)
        b["delays_ns"] = np.maximum(0, tv - k.tm[w_ev]).tolist()
        durability[k.acks] = b
    n_log = len(log_val)
    return {
        "key": key,
        "acked": {str(k.acks): len(w_ev)} if len(w_ev) else {},
        "pid": os.getpid(),
        "counts": {},
        "examples": {},
        "edges": _edges(writer, k.op[r_ev], r_hi, want_rw),
        "committed_info": [],
        "durability": durability,
        "stats": {"sends": len(w_ev), "polls": len(r_ev), "log_length": n_log,
                  "max_offset": int(log_off[-1]) if n_log else None},
    }


def _plain(cols: KeyColumns, key: str, assigns: Sequence[tuple] = ()) -> _Plain | None:
    """The key's columns as arrays if it has the plain shape: every event
    ok, one record per send at one acks level that is not weak, no op both
    sending and polling it, no extra marks, and its events in op order
    when the history has assigns; else None."""
    op, proc, tm = _i64(cols.op), _i64(cols.proc), _i64(cols.time)
    offs, vals = _i64(cols.offs), _i64(cols.vals)
    if op is None or proc is None or tm is None or offs is None or vals is None:
        return None
    if len(cols) == 0 or any(cols.type):
        return None  # an event that did not complete ok
    is_w = np.frombuffer(bytes(cols.kind), dtype=np.uint8) == 0
    end = np.frombuffer(cols.pair_end, dtype=np.int64)
    start = np.concatenate([np.zeros(1, np.int64), end[:-1]])
    cnt = end - start
    w_ev = np.flatnonzero(is_w)
    r_ev = np.flatnonzero(~is_w)
    if len(w_ev) and bool((cnt[w_ev] != 1).any()):
        return None
    meta_t = cols.meta.table
    meta_c = np.frombuffer(cols.meta.codes, dtype=np.uint8 if cols.meta.codes.typecode == "B" else np.uint32)
    w_meta = meta_c[w_ev]
    if len(w_ev) and w_meta.min() != w_meta.max():
        return None  # two acks levels
    acks = meta_t[int(w_meta[0])] if len(w_ev) else None
    if acks in WEAK_ACKS:
        return None
    if len(w_ev) and len(r_ev) and _meet(op[w_ev], op[r_ev]):
        return None  # an operation both sent to and polled the key
    if any(x is not None and x is not False and x is not True and x != _ABSENT for x in cols.ext.table):
        return None
    session = _sessions(op, proc, key, assigns)
    if session is None:
        return None
    return _Plain(op, proc, tm, is_w, start, cnt, w_ev, r_ev, meta_c, meta_t, acks, offs, vals, session)


def _sessions(op: np.ndarray, proc: np.ndarray, key: str, assigns: Sequence[tuple]) -> np.ndarray | None:
    """Each event's session: a number of its process, told apart from
    itself after every assign or subscribe of that process that leaves
    ``key`` out (one number per process and epoch): ``check_key`` sees the
    assigns merged among the events by op index (an event before an assign
    of the same index) and forgets the process's last poll and send of the
    key at each. None when that order is not the columns' (ops out of
    order) or a dropping assign's process is not an int (whose equality
    with the events' processes is Python's, not numpy's)."""
    if not assigns:
        return proc
    if len(op) > 1 and not bool((op[1:] >= op[:-1]).all()):
        return None  # merge_assigns sorts the events by op: another order than the columns'
    drops: dict[int, list[int]] = {}
    for idx, p, _t, ks in assigns:
        if key in ks:
            continue
        if type(p) is not int or type(idx) is not int:
            return None
        drops.setdefault(p, []).append(idx)
    if not drops:
        return proc
    epoch = np.zeros(len(op), np.int64)
    for p, idxs in drops.items():
        mine = np.flatnonzero(proc == p)
        if len(mine):
            epoch[mine] = np.searchsorted(np.sort(np.array(idxs, np.int64)), op[mine], side="left")
    # only which events share a session matters (:func:`_steps_up` groups
    # by it), so any one-to-one number of (process, epoch) will do: with
    # processes numbered from 0 (a simulated seed's), one product, where
    # numbering the distinct pairs in order took a sort of every event
    # (an epoch is at most the process's number of drops)
    if len(proc) and int(proc.min()) >= 0:
        width = int(proc.max()) + 1
        if (sum(map(len, drops.values())) + 1) * width < 1 << 62:
            return proc + epoch * width
    pairs = np.lexsort((epoch, proc))
    p_s, e_s = proc[pairs], epoch[pairs]
    new = np.r_[True, (p_s[1:] != p_s[:-1]) | (e_s[1:] != e_s[:-1])] if len(pairs) else np.zeros(0, bool)
    session = np.empty(len(op), np.int64)
    session[pairs] = np.cumsum(new) - 1
    return session


def _dense_log(r_off: np.ndarray, r_val: np.ndarray, s_off: np.ndarray,
               s_val: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The version order: the distinct (offset, value) pairs polled or
    sent, by offset, when there is one value per offset and one offset per
    value; else None."""
    log = _reads_hold_sends(r_off, r_val, s_off, s_val)
    if log is not None:
        return log
    all_off, all_val = np.concatenate([r_off, s_off]), np.concatenate([r_val, s_val])
    log = _distinct_pairs(all_off, all_val)
    if log is None:
        pairs = np.lexsort((all_val, all_off))
        all_off, all_val = all_off[pairs], all_val[pairs]
        new = np.r_[True, (all_off[1:] != all_off[:-1]) | (all_val[1:] != all_val[:-1])] if len(pairs) \
            else np.zeros(0, bool)
        log = all_off[new], all_val[new]
    log_off, log_val = log
    if bool((log_off[1:] == log_off[:-1]).any()):
        return None
    v = np.sort(log_val)
    if bool((v[1:] == v[:-1]).any()):
        return None
    return log_off, log_val


def _reads_hold_sends(r_off: np.ndarray, r_val: np.ndarray, s_off: np.ndarray,
                      s_val: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_dense_log`'s answer when the reads alone have one value per
    offset and one offset per value, read into a table, and every send's
    pair is among them (a clean key's, where every sent record was
    polled): then the reads' distinct pairs are the sends' and reads'
    together, found with no copy of the reads joined to the sends (two
    arrays of a seed's ~240k reads a key). None: the caller looks at both."""
    if not len(r_off) or not len(s_off):
        return None
    table = _offset_table(r_off, r_val)
    if table is None:
        return None
    lo, t = table
    at = s_off - lo
    if bool(((at < 0) | (at >= len(t))).any()):
        return None
    got = t[at]
    if not bool(((got == s_val) & (got >= 0)).all()):  # -1: an offset no read holds
        return None
    present = np.flatnonzero(t >= 0)
    log_off, log_val = present + lo, t[present]
    v = np.sort(log_val)
    if bool((v[1:] == v[:-1]).any()):
        return None
    return log_off, log_val


def _offset_table(off: np.ndarray, val: np.ndarray) -> tuple[int, np.ndarray] | None:
    """``(lo, table)``: each offset's value at ``table[offset - lo]`` (-1:
    none), when the pairs are non-negative, every offset holds one value
    and the offsets span less than :data:`TABLE_SPAN` times their number
    (plus 1024); else None."""
    lo, hi, v_lo = int(off.min()), int(off.max()), int(val.min())
    if lo < 0 or v_lo < 0 or hi - lo >= TABLE_SPAN * len(off) + 1024:
        return None
    table = np.full(hi - lo + 1, -1, np.int64)
    at = off - lo if lo else off  # a log from offset 0: the offsets are the places
    table[at] = val
    if not bool((table[at] == val).all()):
        return None
    return lo, table


def _distinct_pairs(off: np.ndarray, val: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct (offset, value) pairs by offset, then value: when every
    offset holds one value (a clean key) and the offsets span a range not
    far past their number, by writing each value at its offset in a table
    and reading it back (no sort: each of a seed's ~240k reads of a key is
    one of its ~7k records); else as one sort of ``offset * (highest value
    + 1) + value`` (a lexsort of the two columns takes several times as
    long). None when a pair is negative or that number would pass 63 bits."""
    if not len(off):
        return off, val
    t = _offset_table(off, val)
    if t is not None:  # one value per offset: the table holds every pair
        lo, table = t
        present = np.flatnonzero(table >= 0)
        return present + lo, table[present]
    lo, hi, v_lo = int(off.min()), int(off.max()), int(val.min())
    width = int(val.max()) + 1
    if lo < 0 or v_lo < 0 or hi >= ((1 << 63) - 1) // width - 1:
        return None
    c = np.sort(off * width + val)
    c = c[np.r_[True, c[1:] != c[:-1]]]
    return c // width, c % width


def _first_reads(r_pos: np.ndarray, log_val: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(r_val, return_index=True)`` of the reads' values, from
    their places ``r_pos`` in the dense log (one value per offset and one
    offset per value, so ``r_val == log_val[r_pos]`` and a value's reads
    are its place's): each place's first read is the least read number at
    it (``np.minimum.at`` into a table of the log's places: no sort of the
    reads, of which a seed has ~250k a key for its ~7k records), then only
    the distinct places' values sorted."""
    n = len(r_pos)
    if not n:
        return log_val[:0].copy(), np.zeros(0, np.intp)
    first = np.full(len(log_val), n, np.intp)
    np.minimum.at(first, r_pos, np.arange(n, dtype=np.intp))
    places = np.flatnonzero(first < n)  # the polled places
    vals = log_val[places]
    by_val = np.argsort(vals)  # distinct values: no ties
    return vals[by_val], first[places][by_val]


def _positions(log_off: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """Where each of ``offs`` (every one in ``log_off``, sorted and
    distinct) is in ``log_off``: by subtraction when the log's offsets
    have no gap (the usual log), else by binary search."""
    if len(log_off) and int(log_off[-1]) - int(log_off[0]) == len(log_off) - 1:
        base = int(log_off[0])
        return offs - base if base else offs  # from offset 0 (read only: no copy)
    return np.searchsorted(log_off, offs)


def _final_polls(k: _Plain) -> np.ndarray:
    """Which of the key's polls are final reads."""
    final_c = [c for c, x in enumerate(k.meta_t) if x is not None and not isinstance(x, str) and x]
    if not final_c:
        return np.zeros(len(k.r_ev), dtype=bool)
    is_final = np.zeros(len(k.meta_t), dtype=bool)
    is_final[final_c] = True
    return is_final[k.meta_c[k.r_ev]]


def _contiguous_polls(k: _Plain, r_final: np.ndarray, r_pos: np.ndarray, r_event: np.ndarray,
                      s_pos: np.ndarray) -> np.ndarray | None:
    """Each poll's highest dense index (-1 for an empty read), when every
    poll reads a contiguous run, each process's polls (final reads aside)
    go on where its last one ended and its sends go up; else None."""
    # a step other than +1 between two reads (an array of them, ~240k a
    # key in a seed) is only allowed where a poll ends and the next begins:
    # the events compared only at those steps
    step = np.flatnonzero(np.diff(r_pos) != 1)
    if len(step) and bool((r_event[step + 1] == r_event[step]).any()):
        return None  # a gap or a step back inside one poll
    r_ev = k.r_ev
    r_cnt = k.cnt[r_ev]
    has = r_cnt > 0
    r_first = np.zeros(len(r_ev), np.int64)
    r_last = np.zeros(len(r_ev), np.int64)
    r_hi = np.full(len(r_ev), -1, np.int64)
    if len(r_pos):
        seg = np.concatenate([np.zeros(1, np.int64), np.cumsum(r_cnt)[:-1]])[has]
        r_first[has] = r_pos[seg]
        r_last[has] = r_pos[seg + r_cnt[has] - 1]
        r_hi[has] = r_last[has]  # each poll's reads go up by one: its highest is its last
    nonfinal = ~r_final
    if not _steps_up(k.session[r_ev][nonfinal], r_first[nonfinal], r_last[nonfinal], has[nonfinal], exact=True):
        return None
    if not _steps_up(k.session[k.w_ev], s_pos, s_pos, np.ones(len(k.w_ev), dtype=bool), exact=False):
        return None
    return r_hi


def _edges(writer: np.ndarray, r_op: np.ndarray, r_hi: np.ndarray, want_rw: bool) -> dict[str, array]:
    """ww between the writers of consecutive log entries, wr from the
    writer of each poll's highest read to the poll, rw from the poll to
    the writer of the next entry (when asked), as flat pairs."""
    n_log = len(writer)
    wk = writer[writer >= 0]
    step = wk[1:] != wk[:-1]
    ww = _flat(wk[:-1][step], wk[1:][step])
    w_hi = np.where(r_hi >= 0, writer[np.maximum(r_hi, 0)] if n_log else -1, -1)
    keep = (r_hi >= 0) & (w_hi >= 0) & (w_hi != r_op)
    wr = _flat(w_hi[keep], r_op[keep])
    rw = array("q")
    if want_rw:
        nxt = r_hi + 1
        ok = (r_hi >= 0) & (nxt < n_log)
        w2 = np.where(ok, writer[np.minimum(nxt, max(n_log - 1, 0))] if n_log else -1, -1)
        keep = ok & (w2 >= 0) & (w2 != r_op)
        rw = _flat(r_op[keep], w2[keep])
    return {"ww": ww, "wr": wr, "rw": rw}
