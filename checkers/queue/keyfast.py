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
from typing import Any

import numpy as np

from checkers.durability import _bucket

from .columns import _ABSENT, KeyColumns
from .keycheck import WEAK_ACKS


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
    order = np.argsort(group, kind="stable")
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
        b = np.unique(b)
    at = np.minimum(np.searchsorted(b, a), len(b) - 1)
    return bool((b[at] == a).any())


def check_clean_key(key: str, cols: KeyColumns, want_rw: bool = True) -> dict[str, Any] | None:
    """:func:`checkers.queue.keycheck.check_key`'s result for a key of the
    plain shape the module doc describes (its columns, no assigns in the
    history), or None for any other key."""
    op, proc, tm = _i64(cols.op), _i64(cols.proc), _i64(cols.time)
    offs, vals = _i64(cols.offs), _i64(cols.vals)
    if op is None or proc is None or tm is None or offs is None or vals is None:
        return None
    n_ev = len(cols)
    if n_ev == 0 or any(cols.type):
        return None  # an event that did not complete ok
    kind = np.frombuffer(bytes(cols.kind), dtype=np.uint8)
    is_w = kind == 0
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
    ext_t = cols.ext.table
    if any(x is not None and x is not False and x is not True and x != _ABSENT for x in ext_t):
        return None
    # sends: one record each, values distinct
    s_ix = start[w_ev]
    s_off, s_val = offs[s_ix], vals[s_ix]
    by_val = np.argsort(s_val, kind="stable")
    s_sorted = s_val[by_val]
    if bool((s_sorted[1:] == s_sorted[:-1]).any()):
        return None
    # polls' records, in event order
    ev_of_pair = np.repeat(np.arange(n_ev), cnt)
    r_pairs = np.flatnonzero(~is_w[ev_of_pair]) if len(ev_of_pair) else np.zeros(0, np.int64)
    r_off, r_val, r_event = offs[r_pairs], vals[r_pairs], ev_of_pair[r_pairs]
    # the version order: one value per offset, one offset per value
    all_off, all_val = np.concatenate([r_off, s_off]), np.concatenate([r_val, s_val])
    pairs = np.lexsort((all_val, all_off))
    all_off, all_val = all_off[pairs], all_val[pairs]
    new = np.r_[True, (all_off[1:] != all_off[:-1]) | (all_val[1:] != all_val[:-1])] if len(pairs) \
        else np.zeros(0, bool)
    log_off, log_val = all_off[new], all_val[new]  # the distinct pairs by offset: the dense order
    if bool((log_off[1:] == log_off[:-1]).any()):
        return None
    v = np.sort(log_val)
    if bool((v[1:] == v[:-1]).any()):
        return None
    uniq, first_at = np.unique(r_val, return_index=True)  # each polled value, where first polled
    if len(s_val) and not _within(s_sorted, uniq):
        return None  # a sent value no poll returned: lost-write or unseen
    final_c = [c for c, x in enumerate(meta_t) if x is not None and not isinstance(x, str) and x]
    if final_c:
        is_final = np.zeros(len(meta_t), dtype=bool)
        is_final[final_c] = True
        r_final = is_final[meta_c[r_ev]]
    else:
        r_final = np.zeros(len(r_ev), dtype=bool)
    if r_final.any():
        final_ev = np.zeros(n_ev, dtype=bool)
        final_ev[r_ev[r_final]] = True
        if len(s_val) and not _within(s_sorted, np.unique(r_val[final_ev[r_event]])):
            return None  # the durability rule: a final read missed an acknowledged value
    # positions: each record at its offset's dense index
    r_pos = np.searchsorted(log_off, r_off)
    s_pos = np.searchsorted(log_off, s_off)
    same_poll = r_event[1:] == r_event[:-1]
    if bool((np.diff(r_pos)[same_poll] != 1).any()):
        return None  # a gap or a step back inside one poll
    r_cnt = cnt[r_ev]
    has = r_cnt > 0
    r_first = np.zeros(len(r_ev), np.int64)
    r_last = np.zeros(len(r_ev), np.int64)
    r_hi = np.full(len(r_ev), -1, np.int64)
    if len(r_pos):
        seg = np.concatenate([np.zeros(1, np.int64), np.cumsum(r_cnt)[:-1]])[has]
        r_first[has] = r_pos[seg]
        r_last[has] = r_pos[seg + r_cnt[has] - 1]
        r_hi[has] = np.maximum.reduceat(r_pos, seg)
    nonfinal = ~r_final
    if not _steps_up(proc[r_ev][nonfinal], r_first[nonfinal], r_last[nonfinal], has[nonfinal], exact=True):
        return None
    if not _steps_up(proc[w_ev], s_pos, s_pos, np.ones(len(w_ev), dtype=bool), exact=False):
        return None
    # edges: the writer of each index of the log (-1: no send in this key)
    n_log = len(log_val)
    writer = np.full(n_log, -1, np.int64)
    if len(s_val):
        at = np.searchsorted(s_sorted, log_val)
        at_c = np.minimum(at, len(s_val) - 1)
        hit = (at < len(s_val)) & (s_sorted[at_c] == log_val)
        writer[hit] = op[w_ev][by_val][at_c][hit]
    wk = writer[writer >= 0]
    step = wk[1:] != wk[:-1]
    ww = _flat(wk[:-1][step], wk[1:][step])
    r_op = op[r_ev]
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
    # durability: each send's delay until the first poll that returned it
    durability: dict[Any, dict[str, Any]] = {}
    if len(w_ev):
        seen_t = tm[r_event[first_at]]
        tv = seen_t[np.searchsorted(uniq, s_val)]
        b = _bucket()
        b["sent"] = b["acked"] = len(w_ev)
        b["delays_ns"] = np.maximum(0, tv - tm[w_ev]).tolist()
        durability[acks] = b
    return {
        "key": key,
        "acked": {str(acks): len(w_ev)} if len(w_ev) else {},
        "pid": os.getpid(),
        "counts": {},
        "examples": {},
        "edges": {"ww": ww, "wr": wr, "rw": rw},
        "committed_info": [],
        "durability": durability,
        "stats": {"sends": len(w_ev), "polls": len(r_ev), "log_length": n_log,
                  "max_offset": int(log_off[-1]) if n_log else None},
    }
