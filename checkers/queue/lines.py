"""Reading a JSONL queue history's lines into batches of flat columns.

The scan (:mod:`checkers.queue.scan`) folds a history in one pass; this
module is the reading half of that pass. A :class:`LineReader` reads the
lines of one byte range of the file and turns them into a stream of items,
in file order:

* a :class:`Batch`: the common lines (an invocation of a send or a poll and
  its ``ok`` completion with 64-bit non-negative integer offsets and
  values) as numpy columns;
* a :class:`Slow` line: any other line, as its raw bytes and where it is
  (line and operation counts before it), with the fast invocations its
  processes had open; the folds read it as operations (:func:`slow_ops`).

Nothing here touches a fold, so one range can be read in another process
while the folds take in the ranges before it (Jepsen's history folds run
over chunks in parallel the same way). What a range's reading depends on
from before it is small and known: which processes have an invocation
open. The reader of a later range starts with none; its completions of
invocations made before the range come out as slow lines (the folds pair
them correctly whatever is open), and the processes whose first line in
the range is an invocation read as fast are listed
(:attr:`LineReader.first_fast`): if one of them did have an invocation
open, the range is read again with the true state (:func:`usable`).
"""

from __future__ import annotations

import io
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import orjson
from librt.strings import BytesWriter, write_i64_le

from checkers.history.jsonl import BLANK, TORN, line_op, op_from_json
from checkers.history.op import HistoryError, Op
from checkers.history.source import MAX_LINE, open_regular

from .spelling import (ABSENT, INVOKE_POLL, OK_POLL, OK_SEND, _byte, _ends, head, poll_ends, poll_key, records,
                       send_fields)

_I64 = 1 << 63
_INT = {int}
_LIST = {list}
_TWO = {2}
_OK, _INVOKE, _SEND, _POLL = "ok", "invoke", "send", "poll"

#: a fast completion's meta: a send's acks (as the projection spells them), or a poll's final flag
META = (None, "all", "1", "0", False)
ACKS_CODE = {None: 0, "all": 1, "-1": 1, "1": 2, "0": 3}
POLL_META = 4
#: a fast send completion's ``acks`` as the line spells it (``"?"``: no acks field)
RAW_ACKS = ("?", None, "all", "-1", "1", "0")
_RAW_ACKS_CODE = {a: i for i, a in enumerate(RAW_ACKS)}
NO_EXTRA: dict[str, Any] = {}
#: a spelt send invocation's extra fields, one dict per acks level (shared:
#: never changed, copied where an operation is made of it)
_ACKS_EXTRA: dict[str, dict[str, Any]] = {a: {"acks": a} for a in ("all", "-1", "1", "0")}
#: the common lines read by their spelling (:mod:`.spelling`) when this
#: module is compiled (reference_impl.accel; the two are built together):
#: as Python, parsing them as JSON is the faster way
SPELT = not __file__.endswith(".py")
_NO_READS: list[Any] = []  # a poll that returned nothing (never appended to)


@dataclass
class Batch:
    """Fast lines in file order, as columns: the invocations' times (and
    how many came before the first completion), then one row per
    completion (op index, process, invocation time, completion time, meta
    code, raw acks code), and one row per (completion, key) event with its
    pairs in ``off``/``val``. ``keys`` names the batch's key numbers.

    A batch read from a list of operations (:class:`checkers.queue.opbatch.OpBatches`)
    has its pairs by key instead: ``key_off``/``key_val`` each key number's
    pairs in event order (``off``/``val`` None until asked for:
    :func:`checkers.queue.scan.event_pairs`), and ``emax`` each event's
    highest offset (-1: none): the folds put a batch's pairs in key order
    and want nothing else of them (a seed's 721k were gathered into key
    order, five arrays of them made afresh)."""

    inv_times: np.ndarray
    inv_before: int
    ix: np.ndarray
    proc: np.ndarray
    itime: np.ndarray
    tm: np.ndarray
    meta: np.ndarray       # uint8: index into META
    acks: np.ndarray       # uint8: index into RAW_ACKS (sends; polls 0)
    ev_c: np.ndarray       # each event's completion row
    ev_key: np.ndarray     # each event's key number
    ev_n: np.ndarray       # each event's number of pairs
    off: np.ndarray | None
    val: np.ndarray | None
    keys: list[str]
    #: uint8 per completion, an index into :data:`checkers.queue.scan.EXT`:
    #: the event's 8th element as the projection keeps it (a send's
    #: idempotence, a poll's none); None: a line's send, whose idempotence
    #: is unknown, and a poll's none
    ext: np.ndarray | None = None
    key_off: list[np.ndarray] | None = None
    key_val: list[np.ndarray] | None = None
    emax: np.ndarray | None = None


@dataclass
class Slow:
    """A line the folds read as operations: its bytes, the lines (``i``)
    and operations (``n_ops``) before it in its range, and whether it is
    the file's last line."""

    raw: bytes
    i: int
    n_ops: int
    last: bool
    ops: list[Op] | None = None   # as the reader numbered them (None: the folds read it again)
    opened: dict[Any, tuple] = field(default_factory=dict)  # the fast invocations its processes had open


def slow_ops(raw: bytes, p: Path, i: int, n_ops: int, last: bool,
             warnings: list[str] | None) -> tuple[list[Op], int, int, bool]:
    """The operations of a line read as :func:`checkers.history.jsonl.iter_jsonl`
    reads it (invalid UTF-8 replaced, any of ``\\r``, ``\\n``, ``\\r\\n``
    ends a line, :mod:`json` decides what orjson refuses), numbered after
    ``i`` lines and ``n_ops`` operations: ``(ops, i, n_ops, torn)``, torn
    when it is a truncated last line (reported in ``warnings``). Raises
    the one-line :class:`HistoryError` of a bad line."""
    loads = orjson.loads
    d: Any = None
    if 13 not in raw and len(raw) <= MAX_LINE:  # no b"\r" (see LineReader._run); a longer line is refused
        try:
            d = loads(raw)
        except orjson.JSONDecodeError:
            pass
    if type(d) is dict:
        op = op_from_json(d, p, i + 1)
        if op.index < 0:
            op.index = n_ops
        return [op], i + 1, n_ops + 1, False
    s = raw.decode("utf-8", "replace")
    parts = io.StringIO(s, newline=None).readlines() if "\r" in s else [s]
    ops: list[Op] = []
    for j, line in enumerate(parts):
        i += 1
        got = line_op(line, p, i, last and j == len(parts) - 1, warnings)
        if got is BLANK:
            continue
        if got is TORN:
            return ops, i, n_ops, True
        assert isinstance(got, Op)
        op = got
        if op.index < 0:
            op.index = n_ops
        n_ops += 1
        ops.append(op)
    return ops, i, n_ops, False


@dataclass
class LineReader:
    """Reads the lines of ``[start, end)`` of a JSONL history (``end``
    None: to the end of the file) into :class:`Batch` and :class:`Slow`
    items handed to ``emit`` in file order.

    ``open_`` (process -> the fast invocation it has open) and ``pending``
    (processes with any other invocation open) start as the state before
    the range and end as the state after it; the reader keeps ``pending``
    as the projection keeps its pending operations (an invocation opens
    one, any completion closes it, the nemesis has none)."""

    path: Path
    emit: Callable[[Any], None]
    start: int = 0
    end: int | None = None
    batch: int = 1 << 16
    open_: dict[Any, tuple] = field(default_factory=dict)
    pending: set[Any] = field(default_factory=set)
    i: int = 0          # lines read (a line with \r in it counts its parts)
    n_ops: int = 0      # operations read
    stopped: bool = False   # a bad or torn line ended the reading
    touched: set[Any] = field(default_factory=set)      # processes the range has had a line of
    first_fast: set[Any] = field(default_factory=set)   # ... whose first was read as a fast invocation
    #: a process's first line in the range never read as a fast invocation
    #: (:attr:`first_fast` stays empty): the range then reads as it would
    #: after any state before it (see :func:`usable`)
    first_slow: bool = False
    #: where reading would go on after the items handed over so far (with
    #: :attr:`i` and :attr:`n_ops` as they stand when an item is handed over)
    at: int = 0

    def run(self) -> "LineReader":
        """Read the range, handing each item to ``emit`` as it is made."""
        self._kid: dict[str, int] = {}
        self._kname: list[str] = []
        self._kid_b: dict[bytes, int] = {}     # a key's spelling -> its number (:meth:`_key_at`)
        self._names_b: dict[bytes, str] = {}   # a name's spelling -> the name (:meth:`_name_at`)
        # the batch being read: each column's 64-bit ints (one byte for meta
        # and acks) written as they are read, and how many rows each has
        self.w_inv, self.w_ix, self.w_proc, self.w_itime, self.w_tm = (BytesWriter(), BytesWriter(),
                                                                       BytesWriter(), BytesWriter(),
                                                                       BytesWriter())
        self.w_meta, self.w_acks = BytesWriter(), BytesWriter()
        self.w_ec, self.w_ekid, self.w_enp, self.w_off, self.w_val = (BytesWriter(), BytesWriter(),
                                                                      BytesWriter(), BytesWriter(),
                                                                      BytesWriter())
        self.n_inv = 0      # invocations
        self.n_rows = 0     # completions
        self.n_ev = 0       # (completion, key) events
        self.n_pairs = 0    # their (offset, value) pairs
        self.inv_before = 0
        self.at = self.start
        self._run()
        self._emit_batch()
        return self

    def _emit_batch(self) -> None:
        """Hand the batch read so far over as arrays, and start the next.
        (The columns are written as bytes, not kept as lists of ints: no
        int object is made per value and none turned back into an int64.)"""
        if not (self.n_rows or self.n_inv):
            return
        batch = Batch(_i64(self.w_inv), self.inv_before, _i64(self.w_ix), _i64(self.w_proc),
                      _i64(self.w_itime), _i64(self.w_tm), _u8(self.w_meta), _u8(self.w_acks),
                      _i64(self.w_ec), _i64(self.w_ekid), _i64(self.w_enp), _i64(self.w_off),
                      _i64(self.w_val), list(self._kname))
        for w in (self.w_inv, self.w_ix, self.w_proc, self.w_itime, self.w_tm, self.w_meta, self.w_acks,
                  self.w_ec, self.w_ekid, self.w_enp, self.w_off, self.w_val):
            w.truncate(0)
        self.n_inv = self.n_rows = self.n_ev = self.n_pairs = 0
        self.inv_before = 0
        self.emit(batch)

    def _slow(self, raw: bytes, last: bool, start: int, after: int) -> None:
        """Hand over a slow line, after the batch so far, with the fast
        invocations its operations' processes had open (the folds read it
        again, with the file's numbering, and make those pending first);
        keep ``pending`` as the folds will. The line starts at ``start`` of
        the file and the next one at ``after``."""
        self.at = start
        self._emit_batch()
        self.at = after
        item = Slow(raw, self.i, self.n_ops, last)
        try:
            ops, self.i, self.n_ops, torn = slow_ops(raw, self.path, self.i, self.n_ops, last, None)
        except HistoryError:
            ops, torn = [], True
        open_, pending, touched = self.open_, self.pending, self.touched
        try:
            for op in ops:
                p = op.process
                inv = open_.pop(p, None)
                if inv is not None:
                    item.opened[p] = inv
                touched.add(p)
                if p == "nemesis":
                    continue
                if op.type == _INVOKE:
                    pending.add(p)
                else:
                    pending.discard(p)
        except TypeError:  # unhashable: the folds refuse it
            torn = True
        if torn:
            self.stopped = True
        else:
            item.ops = ops
        self.emit(item)

    def _run(self) -> None:
        end = self.end
        pos = self.start
        batch = self.batch
        loads, bad_json = orjson.loads, orjson.JSONDecodeError
        with open_regular(self.path) as f:
            f.seek(pos)
            for raw in f:
                if end is not None and pos >= end:
                    break
                start = pos
                pos += len(raw)
                taken = False
                if SPELT:
                    taken = self._spelt(raw)
                if not taken:
                    d: Any = None
                    # no b"\r" (``bytes in bytes`` first tries it as an int: slower); a longer line is refused
                    if 13 not in raw and len(raw) <= MAX_LINE:
                        try:
                            d = loads(raw)
                        except bad_json:
                            pass
                    taken = type(d) is dict and self._fast(d)
                if taken:
                    if self.n_rows >= batch:
                        self.at = pos
                        self._emit_batch()
                    continue
                self._slow(raw, end is None and not f.peek(1), start, pos)
                if self.stopped:
                    return
        self.at = pos

    def _fast(self, d: dict) -> bool:
        """Take a common line into the batch (True), or leave it to
        :meth:`_slow` (False) with nothing changed."""
        ix = d.get("index")
        tm = d.get("time")
        proc = d.get("process")
        if type(ix) is not int or type(tm) is not int or type(proc) is not int or "value" not in d:
            return False
        if (ix | tm | proc) < 0 or (ix | tm | proc) >= _I64:
            return False
        t = d.get("type")
        if t == _INVOKE:
            taken = self._invoke(d, ix, tm, proc)
        elif t == _OK:
            taken = self._complete(d, ix, tm, proc)
        else:
            return False
        if taken:
            self.i += 1
            self.n_ops += 1
        return taken

    def _invoke(self, d: dict, ix: int, tm: int, proc: int) -> bool:
        fn = d.get("f")
        if not (fn == _SEND or fn == _POLL) or proc in self.open_ or proc in self.pending:
            return False
        nd = len(d)
        if nd == 6:
            extra: Any = NO_EXTRA
        elif nd == 7 and "acks" in d:
            extra = {"acks": d["acks"]}
        else:
            return False
        return self._add_invoke(ix, tm, proc, fn, d["value"], extra)

    def _add_invoke(self, ix: int, tm: int, proc: int, fn: str, value: Any, extra: Any) -> bool:
        if proc not in self.touched:
            if self.first_slow:
                return False
            self.touched.add(proc)
            self.first_fast.add(proc)
        self.open_[proc] = (ix, tm, fn, value, extra)
        write_i64_le(self.w_inv, tm)
        self.n_inv += 1
        return True

    def _spelt(self, raw: bytes) -> bool:
        """Take a line spelt as one of :mod:`.spelling`'s four shapes
        (True), read straight into the batch's columns, as :meth:`_fast`
        takes its JSON; False, with nothing changed, when the line is
        spelt otherwise or :meth:`_fast` would not take it either."""
        kind, ix, tm, proc, i = head(raw)
        if kind == 0:
            return False
        if kind == OK_POLL:
            return self._spelt_poll(raw, i, ix, tm, proc)
        if kind == INVOKE_POLL:
            if not _ends(raw, i) or proc in self.open_ or proc in self.pending \
                    or not self._add_invoke(ix, tm, proc, _POLL, [[_POLL]], NO_EXTRA):
                return False
        else:
            j, a, b, acks = send_fields(raw, i, kind)
            if j < 0:
                return False
            if kind == OK_SEND:
                inv = self.open_.get(proc)
                if inv is None:
                    return False
                given: Any = None if acks == ABSENT else acks
                if given is None:
                    given = inv[4].get("acks")
                code = ACKS_CODE.get(given, 255) if type(given) is str or given is None else 255
                if code == 255:
                    return False
                del self.open_[proc]
                self._add_send(ix, tm, proc, inv, self._key_at(raw, i, j), a, b, code, _RAW_ACKS_CODE[acks])
            elif proc in self.open_ or proc in self.pending or not self._add_invoke(
                    ix, tm, proc, _SEND, [[_SEND, self._name_at(raw, i, j), a]],
                    NO_EXTRA if acks == ABSENT else _ACKS_EXTRA[acks]):
                return False
        self.i += 1
        self.n_ops += 1
        return True

    def _spelt_poll(self, raw: bytes, i: int, ix: int, tm: int, proc: int) -> bool:
        """A poll's completion spelt ``{"key":[[O,V],...],...}]]}`` from
        ``i``: its events and pairs written as they are read, and taken
        back if the line turns out spelt otherwise."""
        inv = self.open_.get(proc)
        if inv is None:
            return False
        w_off = self.w_off
        e0, p0, k0 = self.n_ev, len(w_off), len(self._kname)
        kids: list[int] = []
        ok = True
        if _byte(raw, i) == 125:
            i += 1
        else:
            while True:
                j = poll_key(raw, i)
                if j < 0:
                    ok = False
                    break
                kid = self._key_at(raw, i + 1, j)
                if kid in kids:
                    ok = False  # a repeated key: JSON keeps the last, leave it to the parser
                    break
                kids.append(kid)
                n0 = len(w_off)
                i = records(raw, j + 3, w_off, self.w_val)
                if i < 0:
                    ok = False
                    break
                self._event(kid, (len(w_off) - n0) >> 3)
                t = _byte(raw, i)
                i += 1
                if t == 125:
                    break
                if t != 44:
                    ok = False
                    break
        if not ok or not poll_ends(raw, i):
            for w in (self.w_ec, self.w_ekid, self.w_enp):
                w.truncate(e0 << 3)
            w_off.truncate(p0)
            self.w_val.truncate(p0)
            self.n_ev = e0
            self._forget_keys(k0)
            return False
        self.n_pairs += (len(w_off) - p0) >> 3
        del self.open_[proc]
        self._row(ix, proc, inv[1], tm, POLL_META, 0)
        self.i += 1
        self.n_ops += 1
        return True

    def _event(self, kid: int, n: int) -> None:
        """An event of key ``kid`` with ``n`` pairs, of the completion being read."""
        write_i64_le(self.w_ec, self.n_rows)
        write_i64_le(self.w_ekid, kid)
        write_i64_le(self.w_enp, n)
        self.n_ev += 1

    def _key_at(self, raw: bytes, i: int, j: int) -> int:
        """The number of the key spelt ``raw[i:j]`` (known by its bytes: no
        name decoded for a key seen before)."""
        kb = raw[i:j]
        kid = self._kid_b.get(kb)
        if kid is None:
            kid = self._kid_b[kb] = self._key(kb.decode("ascii"))
        return kid

    def _name_at(self, raw: bytes, i: int, j: int) -> str:
        """The name spelt ``raw[i:j]`` (one string for each name)."""
        kb = raw[i:j]
        name = self._names_b.get(kb)
        if name is None:
            name = self._names_b[kb] = kb.decode("ascii")
        return name

    def _forget_keys(self, k0: int) -> None:
        """Key numbers from ``k0`` on were given to a line not taken after all."""
        if len(self._kname) > k0:
            for name in self._kname[k0:]:
                del self._kid[name]
            del self._kname[k0:]
            self._kid_b = {kb: kid for kb, kid in self._kid_b.items() if kid < k0}

    def _complete(self, d: dict, ix: int, tm: int, proc: int) -> bool:
        fn = d.get("f")
        nd = len(d)
        if not (nd == 6 or (nd == 7 and fn == _SEND and "acks" in d)):
            return False
        open_ = self.open_
        inv = open_.get(proc)
        if inv is None:
            return False
        del open_[proc]
        value = d["value"]
        mop = value[0] if type(value) is list and len(value) == 1 else None
        if type(mop) is list:
            if fn == _SEND and self._sent(d, mop, ix, tm, proc, inv):
                return True
            if fn == _POLL and self._polled(mop, ix, tm, proc, inv):
                return True
        open_[proc] = inv  # not a fast line after all
        return False

    def _sent(self, d: dict, mop: list, ix: int, tm: int, proc: int, inv: tuple) -> bool:
        x = mop[2] if len(mop) == 3 and mop[0] == _SEND and type(mop[1]) is str else None
        if type(x) is not list or len(x) != 2:
            return False
        off, v = x
        if type(off) is not int or type(v) is not int or (off | v) < 0 or (off | v) >= _I64:
            return False
        acks = d.get("acks")
        if acks is None:
            acks = inv[4].get("acks")
        code = ACKS_CODE.get(acks, 255) if type(acks) is str or acks is None else 255
        if code == 255:
            return False
        self._add_send(ix, tm, proc, inv, self._key(mop[1]), off, v, code, _RAW_ACKS_CODE[d.get("acks", ABSENT)])
        return True

    def _add_send(self, ix: int, tm: int, proc: int, inv: tuple, kid: int, off: int, v: int,
                  code: int, raw_code: int) -> None:
        self._event(kid, 1)
        write_i64_le(self.w_off, off)
        write_i64_le(self.w_val, v)
        self.n_pairs += 1
        self._row(ix, proc, inv[1], tm, code, raw_code)

    def _polled(self, mop: list, ix: int, tm: int, proc: int, inv: tuple) -> bool:
        if len(mop) != 2 or mop[0] != _POLL or type(mop[1]) is not dict:
            return False
        reads = _poll_reads(mop[1]) if mop[1] else _NO_READS
        if reads is None:
            return False
        self._add_poll(ix, tm, proc, inv, reads)
        return True

    def _add_poll(self, ix: int, tm: int, proc: int, inv: tuple,
                  reads: list[tuple[str, list[int], list[int]]]) -> None:
        w_off, w_val = self.w_off, self.w_val
        for k, os_, vs in reads:
            self._event(self._key(k), len(os_))
            for o in os_:
                write_i64_le(w_off, o)
            for v in vs:
                write_i64_le(w_val, v)
            self.n_pairs += len(os_)
        self._row(ix, proc, inv[1], tm, POLL_META, 0)

    def _row(self, ix: int, proc: int, itime: int, tm: int, meta: int, acks: int) -> None:
        """A completion's row, after its events."""
        if not self.n_rows:
            self.inv_before = self.n_inv
        write_i64_le(self.w_ix, ix)
        write_i64_le(self.w_proc, proc)
        write_i64_le(self.w_itime, itime)
        write_i64_le(self.w_tm, tm)
        self.w_meta.append(meta)
        self.w_acks.append(acks)
        self.n_rows += 1

    def _key(self, k: str) -> int:
        kid = self._kid.get(k)
        if kid is None:
            kid = self._kid[k] = len(self._kname)
            self._kname.append(k)
        return kid


def _i64(w: BytesWriter) -> np.ndarray:
    """A column written as 64-bit little-endian ints, as an array."""
    return np.frombuffer(w.getvalue(), "<i8")


def _u8(w: BytesWriter) -> np.ndarray:
    """A column written as bytes, as an array."""
    return np.frombuffer(w.getvalue(), np.uint8)


def _ints(col: list[int]) -> np.ndarray:
    """A column of Python ints as int64: copied into an ``array('q')`` (one
    C loop, about 16 ns an int against ``np.fromiter``'s 27) that the array
    then reads in place."""
    return np.frombuffer(array("q", col), np.int64)


def _poll_reads(m: dict) -> list[tuple[str, list[int], list[int]]] | None:
    """A fast poll's ``{key: [[offset, value], ...]}`` as ``(key, offsets,
    values)``, or None unless every offset and value is a 64-bit
    non-negative int."""
    reads = []
    for k, prs in m.items():
        if type(prs) is not list:
            return None
        os_: list[int] = []
        vs: list[int] = []
        for q in prs:
            if type(q) is not list or len(q) != 2:
                return None
            o = q[0]
            v = q[1]
            if type(o) is not int or type(v) is not int or o < 0 or v < 0 or o >= _I64 or v >= _I64:
                return None
            os_.append(o)
            vs.append(v)
        reads.append((k, os_, vs))
    return reads


def usable(first_fast: set[Any], open_before: dict[Any, tuple], pending_before: set[Any]) -> bool:
    """Whether a range read from an empty start reads as it would have
    with the true state before it: no process it read a fast invocation
    of first (its reader's :attr:`LineReader.first_fast`) had one open."""
    return not any(p in open_before or p in pending_before for p in first_fast)
