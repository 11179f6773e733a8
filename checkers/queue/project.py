"""Project a queue history onto topic-partitions.

Every queue check but the cross-key cycle search looks at one key
(topic-partition) at a time, so the history is cut once into per-key
events; those are what the pipeline ships to executors. The cut is one pass
over the history, fed one operation at a time (:class:`Projector`), and
keeps each key's events in columns (:mod:`checkers.queue.columns`), rebuilt
as the tuples below when the key is checked: it is the part of a check that
cannot be parallelised, and it must not hold the history.

An event is a tuple ``(op, process, type, kind, pairs, time, meta)``:

``op``       the completion's op index (the invocation's for an invocation
             that never completed, which counts as ``info``)
``type``     ``ok | info | fail``
``kind``     ``"w"`` (sends to this key), ``"r"`` (polls of it), or ``"a"``
             (an ok/info assign/subscribe; ``pairs`` is then True if the key
             is still assigned afterwards)
``pairs``    list of ``(offset or None, value)`` in micro-op order
``time``     completion time in ns (None if the op never completed)
``meta``     for sends the ``acks`` setting ("all", "1", "0" or None); for
             polls True when the op is a final read
``idem``     (sends only, an 8th element) the send op's ``idempotent`` flag:
             True, False, or None when the history does not say. A
             non-idempotent producer's internal retry may append a record
             twice (Kafka's at-least-once without idempotence), so the
             duplicate check needs the writer's provenance.
``rebalanced`` (polls only, an 8th element, present when the op carried a
             ``rebalance-log``) True when the log names this key.
``committed`` (``info`` sends only, a 9th element) True when some ``ok`` poll
             read one of the operation's sends, in any key: Jepsen's
             ``must-have-committed?`` (:func:`_committed_info`).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Iterable, Mapping

from checkers.history.op import HistoryError, Op

from .columns import Col, Interned, KeyColumns, KeyEvents
from .records import BULK_RECORDS, records_i64

QUEUE_FS = frozenset(("send", "poll", "txn"))
SUB_FS = frozenset(("assign", "subscribe"))

Event = tuple  # (op, process, type, kind, pairs, time, meta[, idem])


class OpTable:
    """The compact per-op projection used by the cross-key (process and
    realtime) analysis: one entry per completed queue op, in columns."""

    def __init__(self) -> None:
        self.index = Col()
        self.process = Col()
        self.type = Interned()
        self.invoke_time = Col()
        self.complete_time = Col()

    def add(self, idx: int, proc: Any, ctype: str, itime: Any, ctime: Any) -> None:
        self.index.append(idx)
        self.process.append(proc)
        self.type.append(ctype)
        self.invoke_time.append(itime)
        self.complete_time.append(ctime)


@dataclass
class Projection:
    keys: Mapping[str, list[Event]]
    ops: OpTable
    n_ops: int
    warnings: list[str]
    counts: dict[str, int]


def _pairs_of(x: Any) -> tuple[Any, Any]:
    """A send's argument: ``[offset, value]`` once acknowledged, else the
    bare value (invocations, and completions whose offset is unknown)."""
    if isinstance(x, (list, tuple)) and len(x) == 2:
        return x[0], x[1]
    return None, x


def project(ops: Iterable[Op]) -> Projection:
    p = Projector()
    for op in ops:
        p.feed(op)
    return p.finish()


class Projector:
    """The projection built one operation at a time (:meth:`feed`), so a
    history read from a file never needs to be held whole; events go to
    per-key columns (:mod:`checkers.queue.columns`)."""

    def __init__(self) -> None:
        self.columns: dict[str, KeyColumns] = {}
        self.table = OpTable()
        self.warnings: list[str] = []
        self.pending: dict[Any, Op] = {}
        self.assigns: list[tuple[int, Any, str, frozenset[str]]] = []
        self.counts = {"ops": 0, "invoke": 0, "ok": 0, "fail": 0, "info": 0, "nemesis": 0}

    def _key(self, k: str) -> KeyColumns:
        c = self.columns.get(k)
        if c is None:
            c = self.columns[k] = KeyColumns()
        return c

    def feed(self, op: Op) -> None:
        t = op.type
        counts = self.counts
        counts["ops"] += 1
        counts[t] = counts.get(t, 0) + 1
        p = op.process
        if p == "nemesis":
            counts["nemesis"] += 1
            return
        pending = self.pending
        if t == "invoke":
            prev = pending.get(p)
            if prev is not None:
                self.warnings.append(f"op {op.index}: process {p} invoked while op {prev.index} was open; "
                                     f"op {prev.index} counts as info")
                self._emit(prev, prev, "info", None)
            pending[p] = op
            return
        inv = pending.pop(p, None)
        try:
            self._emit(op, inv, t, op.time)
        except (TypeError, IndexError, KeyError, AttributeError) as e:
            raise HistoryError(f"op {op.index}: malformed {op.f} value {_short(op.value)} ({e})") from None

    def finish(self) -> Projection:
        for inv in sorted(self.pending.values(), key=lambda o: o.index):
            try:
                self._emit(inv, inv, "info", None)
            except (TypeError, IndexError, KeyError, AttributeError) as e:
                raise HistoryError(f"op {inv.index}: malformed {inv.f} value {_short(inv.value)} ({e})") from None
        self.counts["unfinished"] = len(self.pending)
        self.pending = {}
        committed = _committed_info(self.columns)
        return Projection(keys=KeyEvents(self.columns, committed, self.assigns), ops=self.table,
                          n_ops=self.counts["ops"], warnings=self.warnings, counts=self.counts)

    def _emit(self, c: Op, inv: Op | None, ctype: str, ctime: int | None) -> None:
        f = c.f
        if f in SUB_FS:
            if ctype != "fail":
                val = c.value if c.value is not None else (inv.value if inv is not None else [])
                self.assigns.append((c.index, c.process, ctype, frozenset(str(k) for k in (val or ()))))
            return
        if f not in QUEUE_FS:
            return
        if c.extra.get("output") or (inv is not None and inv.extra.get("output")):
            return  # a final read of consume-transform-produce's output: checkers.queue.processing
        value = c.value
        if value is None and inv is not None:
            value = inv.value
        if not isinstance(value, list):
            if value is not None:
                raise HistoryError(f"op {c.index}: {f} value {_short(value)} is not a list of micro-ops")
            return
        itime = inv.time if inv is not None else c.time
        idx = c.index
        proc = c.process
        self.table.add(idx, proc, ctype, itime, ctime)
        extra = c.extra
        acks, idem = _acks_idempotent(extra, inv)
        final = bool(extra.get("final") or (inv is not None and inv.extra.get("final")))
        moved = _rebalanced(extra)
        if len(value) == 1 and self._emit_one(value[0], idx, proc, ctype, ctime, acks, idem, final, moved):
            return
        self._emit_txn(idx, proc, ctype, ctime, value, acks, idem, final, moved)

    def _emit_txn(self, idx: Any, proc: Any, ctype: str, ctime: int | None, value: list, acks: Any,
                  idem: Any, final: bool, moved: frozenset[str]) -> None:
        """The general case: a transaction mixing sends and polls over
        several keys, each key's sends and reads one event."""
        key = self._key
        writes: dict[str, list] = {}
        reads: dict[str, list] = {}
        for mop in value:
            if not isinstance(mop, list) or not mop:
                raise HistoryError(f"op {idx}: malformed micro-op {_short(mop)}")
            m0 = mop[0]
            if m0 == "send" and len(mop) >= 3:
                pr = _pairs_of(mop[2])
                if pr[0] is not None and type(pr[0]) is not int:
                    raise HistoryError(f"op {idx}: send offset {_short(pr[0])} is not an integer")
                writes.setdefault(str(mop[1]), []).append(pr)
            elif m0 == "poll":
                for k, prs, _i64 in _polled(mop, idx):
                    reads.setdefault(str(k), []).extend((p[0], p[1]) for p in prs)
            elif m0 == "send":
                raise HistoryError(f"op {idx}: malformed micro-op {_short(mop)} (a send needs a key and a value)")
            else:
                self.warnings.append(f"op {idx}: unknown micro-op {m0!r}; ignored")
        for k, prs in writes.items():
            key(k).add(idx, proc, ctype, "w", prs, ctime, acks, idem)
        for k, prs in reads.items():
            if moved:
                key(k).add(idx, proc, ctype, "r", prs, ctime, final, k in moved)
            else:
                key(k).add(idx, proc, ctype, "r", prs, ctime, final)


    def _emit_one(self, mop: Any, idx: int, proc: Any, ctype: str, ctime: int | None, acks: Any, idem: Any,
                  final: bool, moved: frozenset[str]) -> bool:
        """The common case, an operation of one micro-op (a send, a poll):
        emitted, True; False for what the general case reads instead."""
        if not isinstance(mop, list) or not mop:
            raise HistoryError(f"op {idx}: malformed micro-op {_short(mop)}")
        m0 = mop[0]
        key = self._key
        if m0 == "send" and len(mop) >= 3:
            x = mop[2]
            pr = (x[0], x[1]) if isinstance(x, list) and len(x) == 2 else (None, x)
            if pr[0] is not None and type(pr[0]) is not int:
                raise HistoryError(f"op {idx}: send offset {_short(pr[0])} is not an integer")
            key(str(mop[1])).add(idx, proc, ctype, "w", (pr,), ctime, acks, idem)
            return True
        if m0 == "poll":
            for k, pairs, i64 in _polled(mop, idx):
                k = str(k)
                if moved:
                    key(k).add(idx, proc, ctype, "r", pairs, ctime, final, k in moved, i64=i64)
                else:
                    key(k).add(idx, proc, ctype, "r", pairs, ctime, final, i64=i64)
            return True
        if m0 != "send":  # another workload's micro-op (a register's read, say): not ours to read
            self.warnings.append(f"op {idx}: unknown micro-op {m0!r}; ignored")
            return True
        return False


def _polled(mop: list, idx: int) -> Any:
    """(key, pairs, i64) of a poll micro-op (``["poll"]``, as invoked, has
    none): a map from keys to lists of ``[offset, value]`` whose offsets
    are integers, else a one-line HistoryError. ``i64``: a long list's
    records as 64-bit ints (:func:`checkers.queue.records.records_i64`,
    one compiled pass: a final read returns every record of its key), or
    None when they are not that plain or few."""
    if len(mop) < 2 or mop[1] is None:
        return ()
    polled = mop[1]
    if not isinstance(polled, dict):
        raise HistoryError(f"op {idx}: poll result {_short(polled)} is not a map of keys to records")
    out = []
    for k, prs in polled.items():
        if prs is None:
            out.append((k, (), None))
            continue
        i64 = records_i64(prs) if type(prs) is list and len(prs) >= BULK_RECORDS else None
        if i64 is None and (not isinstance(prs, list) or not _pairs(prs)):
            raise HistoryError(f"op {idx}: poll of {_short(k)} {_short(prs)} is not a list of [offset, value] "
                               f"with integer offsets")
        out.append((k, prs or (), i64))
    return out


def _pairs(prs: list[Any]) -> bool:
    """Every element of ``prs`` is a list of at least two whose first is an
    int (not a bool), tested a pass at a time in C (a final read returns
    every record of its key: a generator per record took 0.17 s on the 1M-op
    bench history)."""
    if not prs:
        return True
    return set(map(type, prs)) == _LIST_T and min(map(len, prs)) >= 2 \
        and set(map(type, map(_FIRST, prs))) == _INT_T


_LIST_T, _INT_T, _FIRST = {list}, {int}, itemgetter(0)


def _acks_idempotent(extra: dict[str, Any], inv: Op | None) -> tuple[str | None, bool | None]:
    """An op's acks level (``-1`` spelt ``all``) and idempotence, from its
    completion or else its invocation (None: not said)."""
    acks = extra.get("acks")
    if acks is None and inv is not None:
        acks = inv.extra.get("acks")
    if acks is not None:
        acks = str(acks)
        if acks == "-1":  # the producer's own spelling of acks=all
            acks = "all"
    idem = extra.get("idempotent")
    if idem is None and inv is not None:
        idem = inv.extra.get("idempotent")
    if idem is not None:
        idem = bool(idem)
    return acks, idem


def _rebalanced(extra: dict[str, Any]) -> frozenset[str]:
    """Keys named by the op's ``rebalance-log`` (Jepsen: the group
    coordinator moved partitions during the operation, a list of maps with
    ``keys``): their reads within the op need not be contiguous."""
    log = extra.get("rebalance-log", extra.get("rebalance_log"))
    if not log or not isinstance(log, list):
        return frozenset()
    return frozenset(str(k) for ev in log if isinstance(ev, dict)
                     for k in (ev.get("keys") or ()) if not isinstance(k, (list, dict)))


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _committed_info(columns: dict[str, KeyColumns]) -> set[int]:
    """An ``info`` operation (it may or may not have happened) must have
    committed once an ``ok`` poll returned one of its sends, whichever key
    that send went to (Jepsen's ``must-have-committed?``); so all its sends,
    in every key, take part in the version order and can be lost. Returns
    those ops; each ``info`` send event carries the verdict as its 9th
    element."""
    committed: set[int] = set()
    for cols in columns.values():
        read_ok = None
        for op, vals in cols.info_send_values():
            if read_ok is None:
                read_ok = cols.ok_read_values()
            if any(v in read_ok for v in vals):
                committed.add(op)
    return committed
