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
from pathlib import Path
from typing import Any, Iterable

import orjson

from checkers.final_reads import FinalReads
from checkers.history.op import HistoryError, Op

from .columns import Col, KeyColumns
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
    go from orjson's dict straight into the folds' state
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
_OK, _INVOKE, _SEND, _POLL = "ok", "invoke", "send", "poll"
#: the completion's extra keys a fast line may carry, by function
_FAST_EXTRA = {_SEND: "acks", _POLL: "final"}
_ACKS = {"all": "all", "1": "1", "0": "0", "-1": "all"}


class _LineFeeder:
    """The fast lines of a JSONL history fed to a :class:`QueueScan`'s
    folds directly (see :func:`scan_jsonl`); what each fold does with them
    is spelt out inline, and every other line goes through
    :meth:`QueueScan.feed` as an :class:`Op`."""

    def __init__(self, scan: QueueScan) -> None:
        self.scan = scan
        self.n = 0
        self.t_min: int | None = None
        self.t_max: int | None = None
        # the folds' containers, looked up once (none of them is ever replaced)
        self.by_type, self.by_f = scan.stats.by_type, scan.stats.by_f
        self.counts, self.pending = scan.projector.counts, scan.projector.pending
        self.by_f_type = scan.clients.by_f_type
        self.lag_invoked, self.con_invoked = scan.lag.completions.invoked, scan.consume.completions.invoked
        self.table = scan.projector.table

    def _slow(self, op: Op) -> None:
        """Feed one operation to every fold (the stats' running figures
        kept here are handed over and taken back)."""
        st = self.scan.stats
        st.n, st.t_min, st.t_max = self.n, self.t_min, self.t_max
        try:
            self.scan.feed(op)
        except HistoryError as e:
            raise MalformedOp(str(e)) from None
        self.n, self.t_min, self.t_max = st.n, st.t_min, st.t_max

    def run(self, p: Path, warnings: list[str] | None) -> None:
        try:
            self._run(p, warnings)
        finally:
            st = self.scan.stats
            st.n, st.t_min, st.t_max = self.n, self.t_min, self.t_max

    def _run(self, p: Path, warnings: list[str] | None) -> None:
        from checkers.history.jsonl import _TORN, _json_fallback, _op_from_json

        scan = self.scan
        stats, finals = scan.stats, scan.finals
        counts, pending, by_type = scan.projector.counts, scan.projector.pending, stats.by_type
        lag_invoked, con_invoked = scan.lag.completions.invoked, scan.consume.completions.invoked
        loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError
        fast, key_fast = self._fast_send, self._fast_poll
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
                    if t == _INVOKE and (fn == _SEND or fn == _POLL) and proc not in pending:
                        if nd == 6:
                            extra: dict[str, Any] = {}
                        elif nd == 7 and "acks" in d:
                            extra = {"acks": d["acks"]}
                        elif nd == 7 and "final" in d:
                            extra = {"final": d["final"]}
                        else:
                            extra = None  # type: ignore[assignment]
                        if extra is not None:
                            op = Op(_INVOKE, fn, d["value"], proc, tm, ix, None, extra)
                            # OpStats, Projector, FinalReads, RealtimeLag, ConsumeCounts
                            # (InfoTxnCauses, Processing, ClientStats: nothing to do)
                            self.n += 1
                            by_type[_INVOKE] = by_type.get(_INVOKE, 0) + 1
                            if self.t_min is None or tm < self.t_min:
                                self.t_min = tm
                            if self.t_max is None or tm > self.t_max:
                                self.t_max = tm
                            counts["ops"] += 1
                            counts[_INVOKE] += 1
                            pending[proc] = op
                            if fn == _POLL and extra.get("final"):
                                finals.any_final = True
                            lag_invoked[proc] = tm
                            con_invoked[proc] = tm
                            continue
                    elif t == _OK and (nd == 6 or (nd == 7 and _FAST_EXTRA.get(fn if type(fn) is str else "", "") in d)):
                        inv = pending.get(proc)
                        if (fast if fn == _SEND else key_fast if fn == _POLL else _never)(
                                d, ix, tm, proc, inv):
                            continue
                op = _op_from_json(d, p, i)
                if op.index < 0:
                    op.index = n_ops - 1
                self._slow(op)

    def _complete(self, fn: str, ix: int, tm: int, proc: int, inv: Op | None) -> int:
        """What every fold does with any fast ``ok`` completion; returns
        its invocation's time as the realtime-lag fold has it."""
        self.n += 1
        by_type = self.by_type
        by_type[_OK] = by_type.get(_OK, 0) + 1
        by_f = self.by_f
        c = by_f.get(fn)
        if c is None:
            c = by_f[fn] = {}
        c[_OK] = c.get(_OK, 0) + 1
        t_min = self.t_min
        if t_min is None or tm < t_min:
            self.t_min = tm
        t_max = self.t_max
        if t_max is None or tm > t_max:
            self.t_max = tm
        counts = self.counts
        counts["ops"] += 1
        counts[_OK] += 1
        cs = self.by_f_type
        k = _F_OK[fn]
        cs[k] = cs.get(k, 0) + 1
        if inv is not None:
            del self.pending[proc]
        self.con_invoked.pop(proc, tm)
        t_inv = self.lag_invoked.pop(proc, tm)
        table = self.table
        itime = inv.time if inv is not None else tm
        a, b, c2, d = table.index.data, table.process.data, table.invoke_time.data, table.complete_time.data
        if type(a) is array and type(b) is array and type(c2) is array and type(d) is array:
            a.append(ix)
            b.append(proc)
            table.type.append(_OK)
            c2.append(itime)
            d.append(tm)
        else:
            table.add(ix, proc, _OK, itime, tm)
        return t_inv

    def _key(self, k: str) -> KeyColumns:
        cols = self.scan.projector.columns
        c = cols.get(k)
        if c is None:
            c = cols[k] = KeyColumns()
        return c

    def _fast_send(self, d: dict, ix: int, tm: int, proc: int, inv: Op | None) -> bool:
        """``[["send", key, [offset, value]]]``, acknowledged."""
        value = d["value"]
        if type(value) is not list or len(value) != 1:
            return False
        mop = value[0]
        if type(mop) is not list or len(mop) != 3 or mop[0] != _SEND or type(mop[1]) is not str:
            return False
        x = mop[2]
        if type(x) is not list or len(x) != 2:
            return False
        off, v = x
        if type(off) is not int or type(v) is not int or (off | v) < 0 or (off | v) >= _I64:
            return False
        ie = inv.extra if inv is not None else _NO_EXTRA
        if ie.get("idempotent") is not None or ie.get("output"):
            return False
        acks = d.get("acks")
        if acks is None:
            acks = ie.get("acks")
        if acks is not None:
            acks = _ACKS.get(acks) if type(acks) is str else None
            if acks is None:
                return False
        self._complete(_SEND, ix, tm, proc, inv)
        raw = d.get("acks", "?")  # ClientStats: as the completion spells it
        a = _ACKS_OK.get(raw) if type(raw) is str else None
        if a is None:
            a = f"acks={raw}:ok"
        sa = self.scan.clients.sends_by_acks
        sa[a] = sa.get(a, 0) + 1
        k = mop[1]
        # RealtimeLag: offset ``off`` of ``k`` is known to exist from now
        expired = self.scan.lag.expired
        exp = expired.get(k)
        if exp is None:
            exp = expired[k] = Col()
        if len(exp) <= off:
            exp.fill(off + 1 - len(exp), tm)
        self._key(k).add_ok(ix, proc, 0, [off], [v], tm, acks)
        return True

    def _fast_poll(self, d: dict, ix: int, tm: int, proc: int, inv: Op | None) -> bool:
        """``[["poll", {key: [[offset, value], ...], ...}]]``, completed."""
        value = d["value"]
        if type(value) is not list or len(value) != 1:
            return False
        mop = value[0]
        if type(mop) is not list or len(mop) != 2 or mop[0] != _POLL or type(mop[1]) is not dict:
            return False
        if inv is not None and inv.extra.get("output"):
            return False  # consume-transform-produce's output: the operation's fold decides
        reads = []
        for k, prs in mop[1].items():
            if type(prs) is not list:
                return False
            for q in prs:
                if type(q) is not list or len(q) != 2:
                    return False
            os_ = [q[0] for q in prs]
            vs = [q[1] for q in prs]
            if prs:
                if {*map(type, os_), *map(type, vs)} != _INT or min(min(os_), min(vs)) < 0 \
                        or max(max(os_), max(vs)) >= _I64:
                    return False
            reads.append((k, os_, vs))
        scan = self.scan
        t_inv = self._complete(_POLL, ix, tm, proc, inv)
        cfinal = d.get("final")
        final = bool(cfinal or (inv is not None and inv.extra.get("final")))
        key = self._key
        for k, os_, vs in reads:
            key(k).add_ok(ix, proc, 1, os_, vs, tm, final)
        # FinalReads: the completion's own ``final`` flag
        if cfinal:
            fr = scan.finals
            fr.any_final = True
            returned = [k for k, _o, _v in reads]
            fr.attempted.update(returned)
            fr.complete.update(returned)
            # Processing: a final read of input keys
            inputs = scan.processing.inputs
            for k, os_, vs in reads:
                known = inputs.setdefault(k, {})
                for o, v in zip(os_, vs):
                    known.setdefault(o, v)
        # RealtimeLag
        lag = scan.lag
        expired = lag.expired
        tops = [(k, max(os_)) for k, os_, _vs in reads if os_]
        for k, o in tops:
            exp = expired.get(k)
            if exp is None:
                exp = expired[k] = Col()
            if len(exp) <= o:
                exp.fill(o + 1 - len(exp), tm)
        pos = lag.positions.setdefault(proc, {})
        for k, o in tops:
            pos[k] = max(pos.get(k, -1), o)
        worst = lag.worst
        for k, o in pos.items():
            exp = expired.get(k)
            ed = exp.data if exp is not None else ()
            since = ed[o + 1] if o + 1 < len(ed) else None
            dt = max(0, t_inv - since) if since is not None else 0
            if worst is None or dt > worst["lag"]:
                worst = lag.worst = {"time": t_inv, "process": proc, "key": k, "lag": dt}
        # ConsumeCounts
        if proc in scan.consume.subscribed:
            cc = scan.consume.counts
            for k, _os, vs in reads:
                for v in vs:
                    cc[(proc, k, v)] = cc.get((proc, k, v), 0) + 1
        return True


_NO_EXTRA: dict[str, Any] = {}
_F_OK = {_SEND: "send:ok", _POLL: "poll:ok"}
_ACKS_OK = {a: f"acks={a}:ok" for a in ("all", "1", "0", "-1", "?")}


def _never(*_a: Any) -> bool:
    return False
