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
import os
import pickle
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from checkers.availability.factpass import FactPass
from checkers.final_reads import FinalReads
from checkers.forked import Forked, can_fork
from checkers.history.op import HistoryError, Op

from .columns import _ABSENT, Interned, KeyColumns
from .intsort import stable_argsort
from .lagbulk import lag_in_bulk, lag_one_by_one
from .lines import META, POLL_META, RAW_ACKS, Batch, LineReader, Slow, slow_ops
from .observe import ConsumeCounts, InfoTxnCauses, RealtimeLag
from .opbatch import OpBatches
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
    """What a run's report shows beside the verdict (``harness.lifecycle.checking``):
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


def scan_ops(ops: Iterable[Op], batch: int = 1 << 16, small: int = 256, facts: FactPass | None = None,
             nemesis: list[Op] | None = None) -> QueueScan:
    """Scan a list of operations (or any iterable of them) as
    :meth:`QueueScan.of` does, with the same folds as a result, the common
    operations read into batches of flat columns
    (:class:`checkers.queue.opbatch.OpBatches`) and folded a batch at a
    time as :func:`scan_jsonl` folds a file's common lines: a simulated
    seed's history, whose polls' records are most of what its checkers
    read, is checked this way. ``facts`` (the availability checker's pass)
    is fed every operation on the same walk: a simulated seed's checkers
    walk its operations once. ``nemesis``, if given, gets the nemesis's
    operations appended in history order (each is read one at a time,
    never into a batch): what :func:`nemesis.replay.schedule_of` reads of
    a history, with no second walk over every operation to pick them out."""
    scan = QueueScan()
    feeder = _Feeder(scan, None, None, batch, small)
    feeder.nemesis = nemesis
    was = gc.isenabled()
    gc.disable()  # acyclic, short-lived objects: no collector passes
    try:
        OpBatches(feeder.item, batch, open_=feeder.open, facts=facts).run(ops)
        feeder.close()
    finally:
        if was:
            gc.enable()
    return scan.finish()


def scan_jsonl(path: str | os.PathLike[str], warnings: list[str] | None = None,
               readers: int | None = None) -> QueueScan:
    """Scan a JSONL history line by line (the errors and warnings of
    :func:`checkers.history.jsonl.read_jsonl`, word for word).

    The lines most of a history is made of are read into batches of flat
    columns (:mod:`checkers.queue.lines`) and folded a batch at a time
    (:class:`_Feeder`), with the same effect as feeding their operations;
    every other line becomes an :class:`Op` and is fed to each fold as
    :meth:`QueueScan.of` does. A big history is read by ``readers``
    processes at once (default: :func:`readers_for`), each a range of its
    lines, folded in file order (:func:`_read_ranges`)."""
    scan = QueueScan()
    p = Path(path)
    was = gc.isenabled()
    gc.disable()  # acyclic, short-lived objects: no collector passes
    try:
        _read_ranges(_Feeder(scan, p, warnings), readers_for(p) if readers is None else readers)
    finally:
        if was:
            gc.enable()
    return scan.finish()


#: completions per batch of a file's lines: each batch costs a loop over its
#: keys (and, for the realtime lag, over each polling process's keys), so
#: fewer, larger batches cost less (on the 1M-op bench history 2^17 folds
#: about 0.02 s faster than 2^16; the batch's arrays are a few MB)
FILE_BATCH = 1 << 17
#: below this a history is read by one process: a second costs more than it saves
PARALLEL_MIN_BYTES = 32 << 20
#: the share of the lines the folding process reads itself: it also folds
#: every batch, the other range's as they come, so the reader of the rest
#: gets more (on the 1M-op bench history both then use about the same CPU)
OWN_SHARE = 0.3


def readers_for(path: Path) -> int:
    """Two readers for a big history where a second process helps
    (:func:`checkers.forked.can_fork`), else one."""
    try:
        size = path.stat().st_size
    except OSError:
        return 1  # the reading says why
    return 2 if size >= PARALLEL_MIN_BYTES and can_fork() else 1


def _cuts(path: Path, readers: int, own: float = OWN_SHARE) -> list[int]:
    """Where each reader's range of lines starts (a line's first byte):
    the first at 0 with ``own`` of the file, the others sharing the rest."""
    size = path.stat().st_size
    cuts = [0]
    with open(path, "rb") as f:
        for r in range(1, readers):
            f.seek(max(cuts[-1], int(size * (own + (1 - own) * (r - 1) / (readers - 1)))))
            f.readline()
            at = f.tell()
            if cuts[-1] < at < size:
                cuts.append(at)
    return cuts


def _read_ranges(feeder: "_Feeder", readers: int, cuts: list[int] | None = None) -> None:
    """Fold the history's lines in file order, reading the ranges after
    the first in forked processes while this one reads and folds the
    first, then folding each later range's items as its reader writes
    them. A later range is read with a process's first line never a fast
    invocation, so it reads as it would after the ranges before it
    whatever they left open (:attr:`checkers.queue.lines.LineReader.first_slow`);
    if its reader fails, this process reads on from after the last item
    it folded. ``cuts``: where the ranges start, if not where
    :func:`_cuts` puts them."""
    path = feeder.path
    if cuts is None:
        cuts = _cuts(path, readers) if readers > 1 else [0]
    ranges = list(zip(cuts, [*cuts[1:], None]))
    elsewhere = [_RangeReader(path, a, b, feeder.batch) for a, b in ranges[1:]]
    try:
        r = LineReader(path, feeder.item, 0, ranges[0][1], feeder.batch, open_=feeder.open).run()
        i, n_ops, stopped = r.i, r.n_ops, r.stopped
        for (a, b), other in zip(ranges[1:], elsewhere):
            if stopped:
                break
            i, n_ops, stopped = _fold_range(feeder, other, a, b, i, n_ops)
    finally:
        for other in elsewhere:
            other.close()
    feeder.close()


def _fold_range(feeder: "_Feeder", other: "_RangeReader", a: int, b: int | None, i: int,
                n_ops: int) -> tuple[int, int, bool]:
    """Fold range ``[a, b)`` from its reader's items as they come (``i``
    lines and ``n_ops`` operations before it); read the rest here if the
    reader stops short. Returns the counts after it and whether a bad line
    stopped the reading."""
    at, ri, rn, opened = a, 0, 0, {}
    for x, at_, ri_, rn_, opened_ in other.records():
        if type(x) is _Done:
            feeder.open.update(x.open_)
            return i + x.i, n_ops + x.n_ops, x.stopped
        feeder.item(x, i, n_ops)
        at, ri, rn, opened = at_, ri_, rn_, opened_
    feeder.open.update(opened)  # the fast invocations the range had open there
    r = LineReader(feeder.path, feeder.item, at, b, feeder.batch, open_=feeder.open,
                   pending=set(feeder.scan.projector.pending), i=i + ri, n_ops=n_ops + rn).run()
    return r.i, r.n_ops, r.stopped


@dataclass
class _Done:
    """What a range's reader ends with (see :class:`LineReader`)."""

    open_: dict[Any, tuple]
    i: int
    n_ops: int
    stopped: bool


class _RangeReader:
    """One range of lines read in a forked process (:class:`checkers.forked.Forked`)
    into records written one after another as it goes: an item with where
    reading would go on after it and the fast invocations open there, then
    a :class:`_Done`."""

    def __init__(self, path: Path, start: int, end: int | None, batch: int) -> None:
        self.forked = Forked(_read_range, path, start, end, batch)

    def records(self) -> Iterator[tuple[Any, int, int, int, dict]]:
        """``(item, at, i, n_ops, open)`` as they are written (``open``: the
        fast invocations the range has open after the item), the reader's
        :class:`_Done` last; they stop short if the reader failed."""
        fd = self.forked.file.fileno()
        pos = 0
        while True:
            got = _record_at(fd, pos)
            if got is None:
                if self.forked.running():
                    time.sleep(0.001)
                    continue
                got = _record_at(fd, pos)  # written just before it ended
                if got is None:
                    return
            rec, pos = got
            yield rec
            if type(rec[0]) is _Done:
                return

    def close(self) -> None:
        self.forked.close()


def _record_at(fd: int, pos: int) -> tuple[Any, int] | None:
    """The record written at ``pos`` of the file and where the next one
    starts, or None while it is not all there. Read by position: the
    writer shares the file's offset."""
    size = os.fstat(fd).st_size
    if size < pos + 8:
        return None
    n = int.from_bytes(os.pread(fd, 8, pos), "little")
    if size < pos + 8 + n:
        return None
    data = b"".join(_pread_all(fd, n, pos + 8))
    return pickle.loads(data), pos + 8 + n


def _pread_all(fd: int, n: int, pos: int) -> Iterator[bytes]:
    while n > 0:
        chunk = os.pread(fd, n, pos)
        if not chunk:
            raise EOFError("history part cut short")
        yield chunk
        n -= len(chunk)
        pos += len(chunk)


def _read_range(out: Any, path: Path, start: int, end: int | None, batch: int) -> None:
    """In the forked process: read ``[start, end)`` into records on ``out``."""
    dumps = pickle.dumps

    def write(rec: tuple) -> None:
        data = dumps(rec, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(len(data).to_bytes(8, "little"))
        out.write(data)
        out.flush()

    reader: LineReader

    def emit(x: Any) -> None:
        if type(x) is Slow:
            x.ops = None  # numbered within the range: the folds read it again
        write((x, reader.at, reader.i, reader.n_ops, reader.open_))

    reader = LineReader(path, emit, start, end, batch, first_slow=True)
    reader.run()
    write((_Done(reader.open_, reader.i, reader.n_ops, reader.stopped), reader.at, reader.i, reader.n_ops, {}))


class _Feeder:
    """Hands a :class:`~checkers.queue.lines.LineReader`'s items to the
    folds: a :class:`Batch` in bulk (:meth:`_flush`): the operation counts
    and the op table, each key's events grouped with numpy and appended to
    its columns, the realtime lag and consume counts in one loop in
    history order; a :class:`Slow` line's operations one at a time
    (:meth:`_slow`), as :meth:`QueueScan.feed` does, after the fast
    invocation its process has open (if any) has become a pending
    operation (the others do at the end, :meth:`close`): each fold then
    sees the same operations in the same order as :meth:`QueueScan.of`
    would have fed it."""

    def __init__(self, scan: QueueScan, path: Path | None, warnings: list[str] | None,
                 batch: int = FILE_BATCH, small: int = 256) -> None:
        self.scan = scan
        self.path = path
        self.warnings = warnings
        self.batch = batch   # completions per batch at most
        self.small = small   # fewer events than this: appended one at a time, not grouped with numpy
        self.open: dict[Any, tuple] = {}   # process -> (index, time, f, value, extra), fast invocations
        self.nemesis: list[Op] | None = None   # the nemesis's operations go here too, if a list

    def item(self, x: Any, i: int = 0, n_ops: int = 0) -> None:
        """Fold one item of a range read after ``i`` lines and ``n_ops``
        operations of the file."""
        if type(x) is Batch:
            self._flush(x)
            return
        ops = x.ops
        if ops is None or i or n_ops:
            ops = slow_ops(x.raw, self.path, x.i + i, x.n_ops + n_ops, x.last, self.warnings)[0]
        self.open.update(x.opened)
        nemesis = self.nemesis
        for op in ops:
            self._slow(op)
            if nemesis is not None and op.process == "nemesis":
                nemesis.append(op)

    def _slow(self, op: Op) -> None:
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

    def close(self) -> None:
        """The fast invocations still open become pending operations (as
        feeding them would have left them)."""
        for proc, inv in self.open.items():
            self._pend(proc, inv)
        self.open.clear()

    def _pend(self, proc: Any, inv: tuple) -> None:
        """What feeding fast invocation ``inv`` left in the folds: the
        projection's pending op, the lag and consume folds' invocation time."""
        ix, tm, fn, value, extra = inv
        scan = self.scan
        scan.projector.pending[proc] = Op(_INVOKE, fn, value, proc, tm, ix, None, dict(extra))
        scan.lag.completions.invoked[proc] = tm
        scan.consume.completions.invoked[proc] = tm

    # -- a batch handed to the folds ----------------------------------------

    def _flush(self, b: Batch) -> None:
        self._flush_counts(b)
        if len(b.tm):
            self._flush_table(b)
            self._flush_keys(b)
            self._flush_observers(b)

    def _flush_counts(self, b: Batch) -> None:
        """OpStats, Projector.counts, ClientStats: new dict keys in the
        order the batch first shows them."""
        scan = self.scan
        st = scan.stats
        ni, nc = len(b.inv_times), len(b.tm)
        st.n += ni + nc
        by_type = st.by_type
        invoke_first = ni and (not nc or b.inv_before > 0)
        for t, n in ((_INVOKE, ni), (_OK, nc)) if invoke_first else ((_OK, nc), (_INVOKE, ni)):
            if n:
                by_type[t] = by_type.get(t, 0) + n
        times = [int(x.min()) for x in (b.inv_times, b.tm) if len(x)], [int(x.max()) for x in (b.inv_times, b.tm) if len(x)]
        lo, hi = min(times[0]), max(times[1])
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
        polls = b.meta == POLL_META
        n_poll = int(np.count_nonzero(polls))
        fs = ((_SEND, nc - n_poll), (_POLL, n_poll))
        if polls[0]:  # the batch's first completion is a poll's
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
        acks = b.acks[~polls]
        if len(acks):
            u, first, n = np.unique(acks, return_index=True, return_counts=True)
            for j in np.argsort(first, kind="stable"):
                raw = RAW_ACKS[int(u[j])]
                a = _ACKS_OK.get(raw) if type(raw) is str else None
                if a is None:
                    a = f"acks={raw}:ok"
                sa[a] = sa.get(a, 0) + int(n[j])

    def _flush_table(self, b: Batch) -> None:
        """The op table: one row per completion."""
        table = self.scan.projector.table
        cols = (table.index.data, table.process.data, table.invoke_time.data, table.complete_time.data)
        if all(type(c) is array for c in cols):
            for c, xs in zip(cols, (b.ix, b.proc, b.itime, b.tm)):
                c.frombytes(xs.tobytes())
            _intern_bulk(table.type, np.zeros(len(b.tm), np.uint8), (_OK,))
        else:
            for row in zip(b.ix.tolist(), b.proc.tolist(), b.itime.tolist(), b.tm.tolist()):
                table.add(row[0], row[1], _OK, row[2], row[3])

    def _key(self, name: str) -> KeyColumns:
        cols = self.scan.projector.columns
        c = cols.get(name)
        if c is None:
            c = cols[name] = KeyColumns()
        return c

    def _add_events(self, b: Batch, evs: Iterable[int], starts: list[int]) -> None:
        """Append events one at a time (a small batch, or a key whose
        columns are no longer all arrays)."""
        e_c, e_kid, e_np = b.ev_c.tolist(), b.ev_key.tolist(), b.ev_n.tolist()
        ix, proc, tm, meta = b.ix.tolist(), b.proc.tolist(), b.tm.tolist(), b.meta.tolist()
        off, val = event_pairs(b)
        offs, vals = off.tolist(), val.tolist()
        ext = b.ext.tolist() if b.ext is not None else None
        for j in evs:
            c = e_c[j]
            a = starts[j]
            e = a + e_np[j]
            m = meta[c]
            kind = 1 if m == POLL_META else 0
            self._key(b.keys[e_kid[j]]).add_ok(ix[c], proc[c], kind, offs[a:e], vals[a:e], tm[c], META[m],
                                               EXT[ext[c] if ext is not None else kind])

    def _flush_keys(self, b: Batch) -> None:
        """Each key's events appended to its columns, in history order;
        keys new to the projection created in the order they first appear.
        The batch's columns are put in key order once (:class:`_ByKey`), so
        each key appends contiguous slices of them."""
        n = len(b.ev_c)
        if not n:
            return
        if n < self.small:
            self._add_events(b, range(n), _pair_starts(b))
            return
        nk = len(b.keys)  # every key number is below it: sorted by radix
        order = stable_argsort(b.ev_key, nk)
        by_key = _ByKey(b, order)
        starts: list[int] | None = None
        for g in np.argsort(order[by_key.first], kind="stable").tolist():  # keys in order of first appearance
            cols = self._key(b.keys[by_key.kids[g]])
            od, vd = cols.offs.data, cols.vals.data
            if not all(type(x) is array for x in (cols.op.data, cols.proc.data, cols.time.data, od, vd)) \
                    or cols.meta.codes.typecode != "B" or cols.ext.codes.typecode != "B":
                if starts is None:
                    starts = _pair_starts(b)
                self._add_events(b, order[by_key.bounds[g]:by_key.bounds[g + 1]].tolist(), starts)
                continue
            by_key.append(cols, g)

    def _flush_observers(self, b: Batch) -> None:
        """RealtimeLag and ConsumeCounts: what their ``feed`` does with
        these operations in history order (the lag in bulk where it can
        be, :mod:`checkers.queue.lagbulk`)."""
        scan = self.scan
        pstart: np.ndarray | None = None  # each event's first pair (made when needed: a list's batch has emax)
        emax = b.emax  # each event's highest offset, -1 for an empty read
        if emax is None:
            pstart = np.concatenate(([0], np.cumsum(b.ev_n)))
            nonempty = b.ev_n > 0
            emax = np.full(len(b.ev_c), -1, np.int64)
            if nonempty.any():
                emax[nonempty] = np.maximum.reduceat(event_pairs(b)[0], pstart[:-1][nonempty])
        subscribed = scan.consume.subscribed
        # a small batch (under faults every failed send and nemesis record
        # ends one: ~25 completions each in a --nemesis all seed) costs the
        # arrays' fixed cost per (process, key), more than the fold's loop
        bulk = len(b.ev_c) >= self.small and lag_in_bulk(scan.lag, b, emax)
        if bulk and not subscribed:
            return
        ev_first = np.searchsorted(b.ev_c, np.arange(len(b.tm) + 1))  # each completion's first event
        if not bulk:
            lag_one_by_one(scan.lag, b, emax, ev_first)
        if not subscribed:
            return
        cc = scan.consume.counts
        polls = np.flatnonzero(b.meta == POLL_META).tolist()
        procs, first = b.proc.tolist(), ev_first.tolist()
        names, ekey = b.keys, b.ev_key.tolist()
        if pstart is None:
            pstart = np.concatenate(([0], np.cumsum(b.ev_n)))
        vals, ps = event_pairs(b)[1].tolist(), pstart.tolist()
        for c in polls:
            p = procs[c]
            if p in subscribed:
                for e in range(first[c], first[c + 1]):
                    k = names[ekey[e]]
                    for v in vals[ps[e]:ps[e + 1]]:
                        cc[(p, k, v)] = cc.get((p, k, v), 0) + 1


def event_pairs(b: Batch) -> tuple[np.ndarray, np.ndarray]:
    """The batch's pairs in event order (``off``, ``val``): as read, or
    from its pairs by key (:attr:`checkers.queue.lines.Batch.key_off`),
    put back in event order once and kept."""
    if b.off is None or b.val is None:
        order = stable_argsort(b.ev_key, len(b.keys))
        at = _pair_order(b, order)  # each key-ordered pair's place in event order
        b.off = np.empty(len(at), np.int64)
        b.val = np.empty(len(at), np.int64)
        if len(at):
            b.off[at] = np.concatenate(b.key_off)  # type: ignore[arg-type]
            b.val[at] = np.concatenate(b.key_val)  # type: ignore[arg-type]
    return b.off, b.val


def _pair_order(b: Batch, order: np.ndarray) -> np.ndarray:
    """Where each pair of the events in ``order`` (a stable sort of them by
    key) lies in the batch's event order: an event's pairs lie together
    and are its key's, so they follow the events' order (a run of each
    event's pairs in turn), with no sort of every pair by its key."""
    n_s = b.ev_n[order]
    pair_end = np.cumsum(n_s)
    first_pair = np.cumsum(b.ev_n) - b.ev_n
    return np.repeat(first_pair[order] - (pair_end - n_s), n_s) + np.arange(int(pair_end[-1]) if len(order) else 0)


def _pair_starts(b: Batch) -> list[int]:
    """Where each event's pairs start in the batch's ``off``/``val`` (and the end)."""
    return np.concatenate(([0], np.cumsum(b.ev_n))).tolist()


class _ByKey:
    """A batch's events and pairs in key order (a stable sort by key
    number keeps each key's events, and their pairs, in history order):
    group ``g`` is key number ``kids[g]``, events ``bounds[g]`` to
    ``bounds[g + 1]``; :meth:`append` adds a group to its key's columns."""

    def __init__(self, b: Batch, order: np.ndarray) -> None:
        n = len(order)
        ks = b.ev_key[order]
        self.first = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
        self.bounds: list[int] = np.r_[self.first, n].tolist()
        self.kids: list[int] = ks[self.first].tolist()
        c = b.ev_c[order]
        self.ix, self.proc, self.tm = b.ix[c], b.proc[c], b.tm[c]
        self.meta = b.meta[c]
        self.poll = (self.meta == POLL_META).view(np.uint8)
        self.ext = self.poll if b.ext is None else b.ext[c]
        self.pair_end = np.cumsum(b.ev_n[order])  # each event's pairs' end, in key order
        # the pairs in key order: a list of operations' batch has them so
        # (each key's, :attr:`checkers.queue.lines.Batch.key_off`), a
        # file's are put so
        self.key_off, self.key_val = b.key_off, b.key_val
        if self.key_off is None:
            porder = _pair_order(b, order)
            self.off, self.val = b.off[porder], b.val[porder]  # type: ignore[index]
        self._ks = ks
        #: per interned column, the values the batch holds and (when needed) each group's in first-seen order
        self._present = {"meta": _present(self.meta, len(META)), "ext": _present(self.ext, len(EXT))}
        self._firsts: dict[str, list[list[int]]] = {}

    def append(self, cols: KeyColumns, g: int) -> None:
        """Group ``g``'s events onto ``cols`` (its columns all arrays, its
        interned codes bytes)."""
        a, e = self.bounds[g], self.bounds[g + 1]
        cols.op.data.frombytes(self.ix[a:e].view(np.uint8))
        cols.proc.data.frombytes(self.proc[a:e].view(np.uint8))
        cols.time.data.frombytes(self.tm[a:e].view(np.uint8))
        cols.type.extend(bytes(e - a))
        cols.kind.extend(self.poll[a:e])
        self._intern("meta", cols.meta, self.meta, META, g, a, e)
        self._intern("ext", cols.ext, self.ext, EXT, g, a, e)
        pa = int(self.pair_end[a - 1]) if a else 0
        pb = int(self.pair_end[e - 1])
        od = cols.offs.data
        base = len(od)
        if self.key_off is not None and self.key_val is not None:  # the group is all its key's pairs
            od.frombytes(self.key_off[self.kids[g]].view(np.uint8))
            cols.vals.data.frombytes(self.key_val[self.kids[g]].view(np.uint8))
        else:
            od.frombytes(self.off[pa:pb].view(np.uint8))
            cols.vals.data.frombytes(self.val[pa:pb].view(np.uint8))
        cols.pair_end.frombytes((self.pair_end[a:e] + (base - pa)).view(np.uint8))

    def _intern(self, name: str, col: Interned, gids: np.ndarray, values: tuple, g: int, a: int, e: int) -> None:
        """``col.append(values[x])`` for each ``x`` of ``gids[a:e]``. When
        the column has a code for every value the batch holds, those are
        the codes; else a value new to it gets its code in the order the
        group first shows it, as appending one by one would give."""
        lut = np.zeros(len(values), np.int64)
        for x in self._present[name]:
            c = col.known(values[x])
            if c is None:
                break
            lut[x] = c
        else:
            x = -1
        if x >= 0:
            firsts = self._firsts.get(name)
            if firsts is None:
                firsts = self._firsts[name] = _firsts(self._ks, gids, len(values), self.first,
                                                      self._present[name])
            for x in firsts[g]:
                lut[x] = col.code(values[x])
        codes = lut[gids[a:e]]
        col.codes.frombytes(codes.astype(np.uint8 if col.codes.typecode == "B" else np.uint32).view(np.uint8))
        col._last, col._last_code = values[int(gids[e - 1])], int(codes[-1])


def _present(gids: np.ndarray, width: int) -> list[int]:
    """The distinct values of ``gids`` (each below ``width``)."""
    return np.flatnonzero(np.bincount(gids, minlength=width)).tolist()


def _firsts(ks: np.ndarray, gids: np.ndarray, width: int, first: np.ndarray,
            present: list[int]) -> list[list[int]]:
    """Per group of the key-sorted ``ks`` (starting at ``first``), the
    distinct ``gids`` (each below ``width``, each one of ``present``: the
    values ``gids`` holds) in the order the group first shows them; a
    value the batch does not hold is no group's, so it is not searched
    for (a seed's batch holds two of the five meta values)."""
    n = len(gids)
    pos = np.arange(n)
    at = np.full((len(first), width), n, np.int64)  # each group's first of each value (n: none)
    for x in present:
        at[:, x] = np.minimum.reduceat(np.where(gids == x, pos, n), first)
    by = np.argsort(at, axis=1, kind="stable")
    return [[x for x in row if a_[x] < n] for row, a_ in zip(by.tolist(), at.tolist())]


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


_OK, _INVOKE, _SEND, _POLL = "ok", "invoke", "send", "poll"
_F_OK = {_SEND: "send:ok", _POLL: "poll:ok"}
_ACKS_OK = {a: f"acks={a}:ok" for a in ("all", "1", "0", "-1", "?")}
#: a fast completion's ext (:attr:`checkers.queue.lines.Batch.ext`): unknown
#: idempotence, a poll's absent 8th element, a non-idempotent and an
#: idempotent send
EXT: tuple[Any, ...] = (None, _ABSENT, False, True)
