"""One pass over a queue history that keeps no operation.

Everything the queue verdict needs from the whole history is a fold over
the operations in order: the per-key projection (into columns,
:mod:`checkers.queue.columns`), the operation counts, the final reads'
coverage and Jepsen's side outputs (realtime lag, consume counts, info
causes). :class:`QueueScan` feeds each operation to all of them, so a
history read from a file (:func:`scan_jsonl`) is parsed line by line and
each line's operation dropped at once: a 1M-operation history is checked in
a few hundred megabytes rather than the gigabytes its objects would take,
with the same results as checking the list of operations
(``check_history`` accepts either).
"""

from __future__ import annotations

import gc
import io
import os
from array import array
from collections import Counter
from itertools import accumulate, repeat
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import orjson

from checkers.final_reads import FinalReads
from checkers.history.op import HistoryError, Op

from .columns import _ABSENT, Col, Interned, KeyColumns
from .observe import ConsumeCounts, InfoTxnCauses, RealtimeLag
from .processing import Processing
from .project import Projection, Projector


class OpStats:
    """Operations by type and by function, and the history's duration."""

    def __init__(self) -> None:
        self.n = 0
        self.by_type: dict[str, int] = {}
        self.by_f: dict[str, dict[str, int]] = {}
        self.t_min: int | None = None
        self.t_max: int | None = None

    def feed(self, op: Op) -> None:
        self.n += 1
        t = op.type
        self.by_type[t] = self.by_type.get(t, 0) + 1
        if t != "invoke":
            d = self.by_f.get(op.f)
            if d is None:
                d = self.by_f[op.f] = {}
            d[t] = d.get(t, 0) + 1
        tm = op.time
        if self.t_min is None or tm < self.t_min:
            self.t_min = tm
        if self.t_max is None or tm > self.t_max:
            self.t_max = tm

    def result(self) -> dict[str, Any]:
        span = (self.t_max - self.t_min) / 1e9 if self.n else 0.0  # type: ignore[operator]
        return {"ops": self.n, "by_type": self.by_type, "by_f": self.by_f, "duration_s": span}


class ClientStats:
    """What a run's report shows beside the verdict (``harness.checking``):
    client completions by function and type, acknowledged-or-not sends by
    the acks their completion carried, and the nemesis' operations."""

    def __init__(self) -> None:
        self.by_f_type: dict[str, int] = {}
        self.sends_by_acks: dict[str, int] = {}
        self.nemesis = 0

    def feed(self, op: Op) -> None:
        if op.process == "nemesis":
            self.nemesis += 1
            return
        if op.type == "invoke":
            return
        k = f"{op.f}:{op.type}"
        self.by_f_type[k] = self.by_f_type.get(k, 0) + 1
        if op.f == "send":
            a = f"acks={op.extra.get('acks', '?')}:{op.type}"
            self.sends_by_acks[a] = self.sends_by_acks.get(a, 0) + 1

    def result(self, stats: "OpStats") -> dict[str, Any]:
        return {
            "ops": stats.by_type.get("invoke", 0),
            "history_length": stats.n,
            "by_f_type": dict(sorted(self.by_f_type.items())),
            "sends_by_acks": dict(sorted(self.sends_by_acks.items())),
            "nemesis_ops": self.nemesis // 2,
        }


def op_stats(ops: Iterable[Op]) -> dict[str, Any]:
    s = OpStats()
    for op in ops:
        s.feed(op)
    return s.result()


class MalformedOp(HistoryError):
    """An operation that was read but whose value the checker cannot use
    (raised while scanning, where checking a list raises it from
    ``check_history``)."""


class QueueScan:
    """Every fold the queue checker needs, fed one operation at a time;
    :meth:`finish` once the history has ended."""

    def __init__(self) -> None:
        self.projector = Projector()
        self.stats = OpStats()
        self.finals = FinalReads()
        self.lag = RealtimeLag()
        self.consume = ConsumeCounts()
        self.causes = InfoTxnCauses()
        self.processing = Processing()
        self.clients = ClientStats()
        self._feeds = (self.projector.feed, self.stats.feed, self.finals.feed, self.lag.feed,
                       self.consume.feed, self.causes.feed, self.processing.feed, self.clients.feed)
        self.projection: Projection | None = None

    def feed(self, op: Op) -> None:
        for feed in self._feeds:
            feed(op)

    def finish(self) -> "QueueScan":
        if self.projection is None:
            self.projection = self.projector.finish()
        return self

    @classmethod
    def of(cls, ops: Iterable[Op]) -> "QueueScan":
        """Scan a history: a list of operations, or any iterable of them."""
        scan = cls()
        feeds = scan._feeds
        was = gc.isenabled()
        gc.disable()  # acyclic, short-lived objects: no collector passes
        try:
            for op in ops:
                try:
                    for feed in feeds:
                        feed(op)
                except HistoryError as e:
                    raise MalformedOp(str(e)) from None
        finally:
            if was:
                gc.enable()
        return scan.finish()


def scan_jsonl(path: str | os.PathLike[str], warnings: list[str] | None = None) -> QueueScan:
    """Scan a JSONL history line by line (the errors and warnings of
    :func:`checkers.history.jsonl.read_jsonl`, word for word).

    The lines most of a history is made of (an invocation of a send or a
    poll, their ``ok`` completions with 64-bit integer offsets and values)
    are read into flat batches and folded a batch at a time
    (:class:`_LineFeeder`), with the same effect as feeding their
    operations; every other line becomes an :class:`Op` and is fed to
    each fold as :meth:`QueueScan.of` does."""
    scan = QueueScan()
    was = gc.isenabled()
    gc.disable()  # acyclic, short-lived objects: no collector passes
    try:
        _LineFeeder(scan).run(Path(path), warnings)
    finally:
        if was:
            gc.enable()
    return scan.finish()


_I64 = 1 << 63
_INT = {int}
_LIST = {list}
_TWO = {2}
_OK, _INVOKE, _SEND, _POLL = "ok", "invoke", "send", "poll"


class _LineFeeder:
    """The fast lines of a JSONL history (see :func:`scan_jsonl`), read
    into a batch of flat lists (an invocation's fields kept until its
    completion; a completion's op index, process, times, acks; each key's
    offsets and values) and handed to the folds a batch at a time
    (:meth:`_flush`): the operation counts and the op table in bulk, each
    key's events grouped with numpy and appended to its columns in bulk,
    the realtime lag and consume counts in one loop in history order.

    Every other line goes through :meth:`QueueScan.feed` as an :class:`Op`,
    after the batch so far has been flushed and the fast invocation its
    process has open (if any) has become a pending operation (the others
    do at the end): each fold then sees the same operations in the same
    order as :meth:`QueueScan.of` would have fed it."""

    def __init__(self, scan: QueueScan, batch: int = 1 << 16, small: int = 256) -> None:
        self.scan = scan
        self.batch = batch   # completions per batch at most
        self.small = small   # fewer events than this: appended one at a time, not grouped with numpy
        self.open: dict[int, tuple] = {}   # process -> (index, time, f, value, extra), fast invocations
        self.kid: dict[str, int] = {}      # key -> its number here
        self.kname: list[str] = []
        self.inv_times: list[int] = []     # the batch's invocations' times
        self.inv_before = 0                # how many of them came before its first completion
        # the batch's completions, in order (meta: the acks code of a send, _POLL_META for a poll)
        self.c_ix: list[int] = []
        self.c_proc: list[int] = []
        self.c_itime: list[int] = []
        self.c_tm: list[int] = []
        self.c_meta = bytearray()
        self.raw_acks: list[Any] = []      # each send's ``acks`` as its completion spells it
        self.lagq: list[Any] = []          # a send's (key, offset), a poll's [(key, offsets, values)]
        # the batch's per-key events: their completion, key number, number of pairs; the pairs
        self.e_c: list[int] = []
        self.e_kid: list[int] = []
        self.e_np: list[int] = []
        self.p_off: list[int] = []
        self.p_val: list[int] = []

    def _slow(self, op: Op) -> None:
        """Feed one operation to every fold: the batch flushed first, and
        the fast invocation its process has open made a pending operation
        (the folds look up no other process's open invocation before
        :meth:`QueueScan.finish`)."""
        self._flush()
        try:
            inv = self.open.pop(op.process, None)
        except TypeError:  # unhashable: the folds refuse it as they did
            inv = None
        if inv is not None:
            self._pend(op.process, inv)
        try:
            self.scan.feed(op)
        except HistoryError as e:
            raise MalformedOp(str(e)) from None

    def run(self, p: Path, warnings: list[str] | None) -> None:
        self._run(p, warnings)
        self._flush(close=True)

    def _run(self, p: Path, warnings: list[str] | None) -> None:
        from checkers.history.jsonl import _TORN, _json_fallback, _op_from_json

        pending = self.scan.projector.pending
        open_ = self.open
        kids, kname = self.kid, self.kname
        inv_times, c_ix, c_proc, c_itime, c_tm, c_meta = (self.inv_times, self.c_ix, self.c_proc,
                                                          self.c_itime, self.c_tm, self.c_meta)
        raw_acks, lagq = self.raw_acks, self.lagq
        e_c, e_kid, e_np, p_off, p_val = self.e_c, self.e_kid, self.e_np, self.p_off, self.p_val
        batch = self.batch
        loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError
        acks_code = _ACKS_CODE
        n_ops = 0
        i = 0
        with open(p, "rb") as f:
            for raw in f:
                d: Any = None
                if b"\r" not in raw:
                    try:
                        d = loads(raw)
                    except JSONDecodeError:
                        pass
                if d is None or type(d) is not dict:
                    # as iter_jsonl reads text: invalid UTF-8 replaced, any
                    # of \r, \n, \r\n ends a line, json decides what orjson refuses
                    s = raw.decode("utf-8", "replace")
                    parts = io.StringIO(s, newline=None).readlines() if "\r" in s else [s]
                    for j, line in enumerate(parts):
                        i += 1
                        try:
                            d = loads(line)
                        except JSONDecodeError:
                            if not line.strip():
                                continue
                            last = j == len(parts) - 1 and not f.peek(1)
                            d = _json_fallback(line, p, i, last=last, warnings=warnings)
                            if d is _TORN:
                                return
                        if not isinstance(d, dict):
                            raise HistoryError(f"{p}:{i}: expected a JSON object")
                        op = _op_from_json(d, p, i)
                        if op.index < 0:
                            op.index = n_ops
                        n_ops += 1
                        self._slow(op)
                    continue
                i += 1
                n_ops += 1
                ix = d.get("index")
                tm = d.get("time")
                proc = d.get("process")
                t = d.get("type")
                fn = d.get("f")
                nd = len(d)
                if type(ix) is int and type(tm) is int and type(proc) is int and (ix | tm | proc) >= 0 \
                        and (ix | tm | proc) < _I64 and "value" in d:
                    if t == _INVOKE:
                        if (fn == _SEND or fn == _POLL) and proc not in open_ and proc not in pending:
                            if nd == 6:
                                extra: Any = _NO_EXTRA
                            elif nd == 7 and "acks" in d:
                                extra = {"acks": d["acks"]}
                            else:
                                extra = None
                            if extra is not None:
                                open_[proc] = (ix, tm, fn, d["value"], extra)
                                inv_times.append(tm)
                                continue
                    elif t == _OK and (nd == 6 or (nd == 7 and fn == _SEND and "acks" in d)):
                        inv = open_.pop(proc, None)
                        if inv is not None:
                            value = d["value"]
                            mop = value[0] if type(value) is list and len(value) == 1 else None
                            if type(mop) is not list:
                                pass
                            elif fn == _SEND:
                                x = mop[2] if len(mop) == 3 and mop[0] == _SEND and type(mop[1]) is str else None
                                if type(x) is list and len(x) == 2:
                                    off, v = x
                                    if type(off) is int and type(v) is int and (off | v) >= 0 \
                                            and (off | v) < _I64:
                                        acks = d.get("acks")
                                        if acks is None:
                                            acks = inv[4].get("acks")
                                        code = acks_code.get(acks, 255) if type(acks) is str or acks is None \
                                            else 255
                                        if code != 255:
                                            k = mop[1]
                                            kid = kids.get(k)
                                            if kid is None:
                                                kid = kids[k] = len(kname)
                                                kname.append(k)
                                            if not c_tm:
                                                self.inv_before = len(inv_times)
                                            e_c.append(len(c_tm))
                                            c_ix.append(ix)
                                            c_proc.append(proc)
                                            c_itime.append(inv[1])
                                            c_tm.append(tm)
                                            c_meta.append(code)
                                            raw_acks.append(d.get("acks", "?"))
                                            lagq.append((k, off))
                                            e_kid.append(kid)
                                            e_np.append(1)
                                            p_off.append(off)
                                            p_val.append(v)
                                            if len(c_tm) >= batch:
                                                self._flush()
                                            continue
                            elif fn == _POLL and len(mop) == 2 and mop[0] == _POLL and type(mop[1]) is dict:
                                reads = _poll_reads(mop[1]) if mop[1] else _NO_READS
                                if reads is not None:
                                    if not c_tm:
                                        self.inv_before = len(inv_times)
                                    c = len(c_tm)
                                    for k, os_, vs in reads:
                                        kid = kids.get(k)
                                        if kid is None:
                                            kid = kids[k] = len(kname)
                                            kname.append(k)
                                        e_c.append(c)
                                        e_kid.append(kid)
                                        e_np.append(len(os_))
                                        p_off.extend(os_)
                                        p_val.extend(vs)
                                    c_ix.append(ix)
                                    c_proc.append(proc)
                                    c_itime.append(inv[1])
                                    c_tm.append(tm)
                                    c_meta.append(_POLL_META)
                                    lagq.append(reads)
                                    if len(c_tm) >= batch:
                                        self._flush()
                                    continue
                            open_[proc] = inv  # not a fast line after all
                op = _op_from_json(d, p, i)
                if op.index < 0:
                    op.index = n_ops - 1
                self._slow(op)

    # -- the batch handed to the folds ------------------------------------

    def _flush(self, close: bool = False) -> None:
        """Hand the batch to the folds; with ``close`` (at the end), the
        fast invocations still open become pending operations (as feeding
        them would have left them)."""
        if self.c_tm or self.inv_times:
            self._flush_counts()
            if self.c_tm:
                self._flush_table()
                self._flush_keys()
                self._flush_observers()
            for x in (self.inv_times, self.c_ix, self.c_proc, self.c_itime, self.c_tm, self.c_meta,
                      self.raw_acks, self.lagq, self.e_c, self.e_kid, self.e_np, self.p_off, self.p_val):
                del x[:]
        if close:
            for proc, inv in self.open.items():
                self._pend(proc, inv)
            self.open.clear()

    def _pend(self, proc: Any, inv: tuple) -> None:
        """What feeding fast invocation ``inv`` left in the folds: the
        projection's pending op, the lag and consume folds' invocation time."""
        ix, tm, fn, value, extra = inv
        scan = self.scan
        scan.projector.pending[proc] = Op(_INVOKE, fn, value, proc, tm, ix, None,
                                          dict(extra) if extra is _NO_EXTRA else extra)
        scan.lag.completions.invoked[proc] = tm
        scan.consume.completions.invoked[proc] = tm

    def _flush_counts(self) -> None:
        """OpStats, Projector.counts, ClientStats: new dict keys in the
        order the batch first shows them."""
        scan = self.scan
        st = scan.stats
        ni, nc = len(self.inv_times), len(self.c_tm)
        st.n += ni + nc
        by_type = st.by_type
        invoke_first = ni and (not nc or self.inv_before > 0)
        for t, n in ((_INVOKE, ni), (_OK, nc)) if invoke_first else ((_OK, nc), (_INVOKE, ni)):
            if n:
                by_type[t] = by_type.get(t, 0) + n
        lo = min(min(self.inv_times, default=_I64), min(self.c_tm, default=_I64))
        hi = max(max(self.inv_times, default=-1), max(self.c_tm, default=-1))
        if st.t_min is None or lo < st.t_min:
            st.t_min = lo
        if st.t_max is None or hi > st.t_max:
            st.t_max = hi
        counts = scan.projector.counts
        counts["ops"] += ni + nc
        counts[_INVOKE] += ni
        counts[_OK] += nc
        if not nc:
            return
        meta = self.c_meta
        n_poll = meta.count(_POLL_META)
        fs = ((_SEND, nc - n_poll), (_POLL, n_poll))
        if meta[0] == _POLL_META:  # the batch's first completion is a poll's
            fs = fs[::-1]
        by_f, cs = st.by_f, scan.clients.by_f_type
        for fn, n in fs:
            if not n:
                continue
            c = by_f.get(fn)
            if c is None:
                c = by_f[fn] = {}
            c[_OK] = c.get(_OK, 0) + n
            k = _F_OK[fn]
            cs[k] = cs.get(k, 0) + n
        sa = scan.clients.sends_by_acks
        raws = self.raw_acks
        for raw, n in (Counter(raws).items() if len(raws) > 32 else zip(raws, repeat(1))):
            a = _ACKS_OK.get(raw) if type(raw) is str else None
            if a is None:
                a = f"acks={raw}:ok"
            sa[a] = sa.get(a, 0) + n

    def _flush_table(self) -> None:
        """The op table: one row per completion."""
        table = self.scan.projector.table
        cols = (table.index.data, table.process.data, table.invoke_time.data, table.complete_time.data)
        if len(self.c_tm) >= 16 and all(type(c) is array for c in cols):
            for c, xs in zip(cols, (self.c_ix, self.c_proc, self.c_itime, self.c_tm)):
                c.extend(xs)
            _intern_bulk(table.type, np.zeros(len(self.c_tm), np.uint8), (_OK,))
        else:
            for row in zip(self.c_ix, self.c_proc, self.c_itime, self.c_tm):
                table.add(row[0], row[1], _OK, row[2], row[3])

    def _key(self, kid: int) -> KeyColumns:
        cols = self.scan.projector.columns
        k = self.kname[kid]
        c = cols.get(k)
        if c is None:
            c = cols[k] = KeyColumns()
        return c

    def _add_events(self, evs: Iterable[int], starts: list[int]) -> None:
        """Append events one at a time (a small batch, or a key whose
        columns are no longer all arrays)."""
        e_c, e_kid, e_np, p_off, p_val = self.e_c, self.e_kid, self.e_np, self.p_off, self.p_val
        c_ix, c_proc, c_tm, c_meta = self.c_ix, self.c_proc, self.c_tm, self.c_meta
        for j in evs:
            c = e_c[j]
            a = starts[j]
            b = a + e_np[j]
            m = c_meta[c]
            self._key(e_kid[j]).add_ok(c_ix[c], c_proc[c], 1 if m == _POLL_META else 0, p_off[a:b], p_val[a:b],
                                       c_tm[c], _META[m])

    def _flush_keys(self) -> None:
        """Each key's events appended to its columns, in history order;
        keys new to the projection created in the order they first appear."""
        n = len(self.e_c)
        if not n:
            return
        if n < self.small:
            self._add_events(range(n), list(accumulate(self.e_np, initial=0)))
            return
        starts: list[int] = []  # each event's first pair, for a key appended one event at a time
        E_c = np.array(self.e_c, np.int64)
        E_k = np.array(self.e_kid, np.int64)
        E_n = np.array(self.e_np, np.int64)
        C_ix, C_proc, C_tm = (np.array(x, np.int64) for x in (self.c_ix, self.c_proc, self.c_tm))
        C_meta = np.frombuffer(bytes(self.c_meta), np.uint8)
        P_off, P_val = np.array(self.p_off, np.int64), np.array(self.p_val, np.int64)
        order = np.argsort(E_k, kind="stable")
        ks = E_k[order]
        first = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
        last = np.r_[first[1:], n]
        pk = np.repeat(E_k, E_n)
        porder = np.argsort(pk, kind="stable")
        pks = pk[porder]
        P_off, P_val = P_off[porder], P_val[porder]
        for g in np.argsort(order[first], kind="stable"):  # keys in order of first appearance
            a, b = int(first[g]), int(last[g])
            sel = order[a:b]
            kid = int(ks[a])
            cols = self._key(kid)
            od, vd = cols.offs.data, cols.vals.data
            if not all(type(x) is array for x in (cols.op.data, cols.proc.data, cols.time.data, od, vd)) \
                    or cols.meta.codes.typecode != "B" or cols.ext.codes.typecode != "B":
                if not starts:
                    starts = list(accumulate(self.e_np, initial=0))
                self._add_events(sel.tolist(), starts)
                continue
            csel = E_c[sel]
            m = C_meta[csel]
            cols.op.data.frombytes(C_ix[csel].tobytes())
            cols.proc.data.frombytes(C_proc[csel].tobytes())
            cols.time.data.frombytes(C_tm[csel].tobytes())
            cols.type.extend(bytes(b - a))
            poll = m == _POLL_META
            cols.kind.extend(poll.astype(np.uint8).tobytes())
            _intern_bulk(cols.meta, m, _META)
            _intern_bulk(cols.ext, poll.astype(np.uint8), _EXT)
            pa, pb = np.searchsorted(pks, [kid, kid + 1])
            base = len(od)
            od.frombytes(P_off[pa:pb].tobytes())
            vd.frombytes(P_val[pa:pb].tobytes())
            cols.pair_end.frombytes((base + np.cumsum(E_n[sel])).tobytes())

    def _flush_observers(self) -> None:
        """RealtimeLag and ConsumeCounts, one completion at a time in
        history order (what their ``feed`` does with these operations)."""
        scan = self.scan
        lag = scan.lag
        expired, positions = lag.expired, lag.positions
        subscribed = scan.consume.subscribed
        cc = scan.consume.counts
        for tm, proc, t_inv, m, q in zip(self.c_tm, self.c_proc, self.c_itime, self.c_meta, self.lagq):
            if m != _POLL_META:
                k, off = q
                exp = expired.get(k)
                if exp is None:
                    exp = expired[k] = Col()
                ed = exp.data
                if len(ed) == off:  # the next offset (the time is a 64-bit int: Col.fill's append)
                    ed.append(tm)
                elif len(ed) < off:
                    exp.fill(off + 1 - len(ed), tm)
                continue
            pos = positions.get(proc)
            if pos is None:
                pos = positions[proc] = {}
            for k, os_, _vs in q:
                if os_:
                    o = max(os_)
                    exp = expired.get(k)
                    if exp is None:
                        exp = expired[k] = Col()
                    ed = exp.data
                    if len(ed) == o:
                        ed.append(tm)
                    elif len(ed) < o:
                        exp.fill(o + 1 - len(ed), tm)
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
            if proc in subscribed:
                for k, _os, vs in q:
                    for v in vs:
                        cc[(proc, k, v)] = cc.get((proc, k, v), 0) + 1


def _poll_reads(m: dict) -> list[tuple[str, list[int], list[int]]] | None:
    """A fast poll's ``{key: [[offset, value], ...]}`` as ``(key, offsets,
    values)``, or None unless every offset and value is a 64-bit
    non-negative int."""
    reads = []
    for k, prs in m.items():
        if type(prs) is not list:
            return None
        if prs:
            if {*map(type, prs)} != _LIST or {*map(len, prs)} != _TWO:
                return None
            os_ = [q[0] for q in prs]
            vs = [q[1] for q in prs]
            if {*map(type, os_), *map(type, vs)} != _INT or min(min(os_), min(vs)) < 0 \
                    or max(max(os_), max(vs)) >= _I64:
                return None
            reads.append((k, os_, vs))
        else:
            reads.append((k, [], []))
    return reads


def _intern_bulk(col: Interned, gids: np.ndarray, values: tuple) -> None:
    """``col.append(values[g])`` for each ``g`` of ``gids``, in bulk."""
    if not len(gids):
        return
    u, first = np.unique(gids, return_index=True)
    lut = np.zeros(len(values), np.int64)
    for g in u[np.argsort(first)]:
        lut[g] = col.code(values[g])
    codes = lut[gids]
    col.codes.frombytes(codes.astype(np.uint8 if col.codes.typecode == "B" else np.uint32).tobytes())
    col._last, col._last_code = values[int(gids[-1])], int(codes[-1])


_NO_EXTRA: dict[str, Any] = {}
_NO_READS: list[Any] = []  # a poll that returned nothing (never appended to)
_F_OK = {_SEND: "send:ok", _POLL: "poll:ok"}
_ACKS_OK = {a: f"acks={a}:ok" for a in ("all", "1", "0", "-1", "?")}
#: a fast completion's meta: a send's acks (as the projection spells them), or a poll's final flag
_META = (None, "all", "1", "0", False)
_ACKS_CODE = {None: 0, "all": 1, "-1": 1, "1": 2, "0": 3}
_POLL_META = 4
_EXT = (None, _ABSENT)
