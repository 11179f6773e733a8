"""Reading a list of queue operations into batches of flat columns.

What :class:`checkers.queue.lines.LineReader` does for a JSONL file's lines,
for operations already in memory (a simulated seed's history, handed to
the checkers as a list): the common operations (an invocation of a send or
a poll and its ``ok`` completion, 64-bit non-negative integer offsets and
values, no fields but ``acks`` and, on sends, ``idempotent``) go into a
:class:`~checkers.queue.lines.Batch`, every other one is a
:class:`~checkers.queue.lines.Slow` item carrying the operation itself.
The scan folds a batch at a time (:func:`checkers.queue.scan.scan_ops`),
with the same effect as feeding the operations one by one
(:meth:`checkers.queue.scan.QueueScan.of`).

A simulated seed's 32 consumers each read every record, so most of what a
seed's checkers take in is poll records: each poll's records are checked
and written as 64-bit offsets and values in one compiled loop
(:func:`_poll_reads`) straight into the batch's columns (``BytesWriter``s,
as :class:`~checkers.queue.lines.LineReader` writes a file's), so each
record is touched once. The records lie scattered over the simulation's
heap: the ten passes in C (``map``) this replaced, each a walk over every
record, took ~220 ns a record in a seed against ~65 ns for the one loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Final, Iterable

import numpy as np
from librt.strings import BytesWriter, write_i64_le

from checkers.history.op import Op

from .lines import ACKS_CODE, POLL_META, RAW_ACKS, Batch, Slow, _ints

_I64: Final = 1 << 63
_OK, _INVOKE, _SEND, _POLL = "ok", "invoke", "send", "poll"
_RAW_ACKS_CODE = {a: i for i, a in enumerate(RAW_ACKS)}
#: the extra fields a fast send may carry (its invocation and completion)
_SEND_EXTRA = frozenset(("acks", "idempotent"))
_POLL_EXTRA = frozenset(("acks",))
#: a fast completion's ``ext`` code (:attr:`checkers.queue.lines.Batch.ext`):
#: a send's idempotence as the projection keeps it
_IDEM_CODE = {None: 0, False: 2, True: 3}


@dataclass
class OpBatches:
    """Hands the operations of a history to ``emit`` as :class:`Batch`
    and :class:`Slow` items in history order (a batch at most ``batch``
    completions). ``open_`` (process -> the fast invocation it has open,
    as ``(index, time, f, value, extra)``) is shared with the folds,
    which make what is left in it pending at the end; ``pending`` holds
    the processes with any other invocation open."""

    emit: Callable[[Any], None]
    batch: int = 1 << 16
    open_: dict[Any, tuple] = field(default_factory=dict)
    pending: set[Any] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._kid: dict[str, int] = {}
        self._kname: list[str] = []
        self._reset()

    def _reset(self) -> None:
        self.inv_times: list[int] = []
        self.inv_before = 0
        self.c_ix: list[int] = []
        self.c_proc: list[int] = []
        self.c_itime: list[int] = []
        self.c_tm: list[int] = []
        self.c_meta = bytearray()
        self.c_acks = bytearray()
        self.c_ext = bytearray()
        self.e_c: list[int] = []
        self.e_kid: list[int] = []
        self.e_np: list[int] = []
        # the records' offsets and values as 64-bit ints from the start,
        # written as a poll's records are checked (:func:`_poll_reads`);
        # ``n_pairs`` of them, where a refused poll's are cut back to
        self.w_off = BytesWriter()
        self.w_val = BytesWriter()
        self.n_pairs = 0

    def run(self, ops: Iterable[Op]) -> "OpBatches":
        fast, batch = self._fast, self.batch
        for op in ops:
            if not fast(op):
                self._slow(op)
            elif len(self.c_tm) >= batch:
                self._emit_batch()
        self._emit_batch()
        return self

    def _emit_batch(self) -> None:
        if not (self.c_tm or self.inv_times):
            return
        b = Batch(_ints(self.inv_times), self.inv_before, _ints(self.c_ix), _ints(self.c_proc),
                  _ints(self.c_itime), _ints(self.c_tm), np.frombuffer(bytes(self.c_meta), np.uint8),
                  np.frombuffer(bytes(self.c_acks), np.uint8), _ints(self.e_c), _ints(self.e_kid),
                  _ints(self.e_np), _q(self.w_off), _q(self.w_val), list(self._kname),
                  np.frombuffer(bytes(self.c_ext), np.uint8))
        self._reset()
        self.emit(b)

    def _slow(self, op: Op) -> None:
        """Hand over the batch so far, then the operation, with the fast
        invocation its process had open (the folds make it pending
        first); keep ``pending`` as the folds will."""
        self._emit_batch()
        item = Slow(b"", 0, 0, False, [op])
        p = op.process
        try:
            inv = self.open_.pop(p, None)
        except TypeError:  # unhashable: the folds refuse it
            inv = None
        if inv is not None:
            item.opened[p] = inv
        self.emit(item)
        if p == "nemesis":
            return
        if op.type == _INVOKE:
            self.pending.add(p)
        else:
            self.pending.discard(p)

    def _fast(self, op: Op) -> bool:
        """Take a common operation into the batch (True), or leave it to
        :meth:`_slow` (False) with nothing changed."""
        ix, tm, proc = op.index, op.time, op.process
        if type(ix) is not int or type(tm) is not int or type(proc) is not int or op.error is not None:
            return False
        if (ix | tm | proc) < 0 or (ix | tm | proc) >= _I64:
            return False
        t = op.type
        if t == _INVOKE:
            return self._invoke(op, ix, tm, proc)
        if t == _OK:
            return self._complete(op, ix, tm, proc)
        return False

    def _invoke(self, op: Op, ix: int, tm: int, proc: int) -> bool:
        fn, extra = op.f, op.extra
        if proc in self.open_ or proc in self.pending:
            return False
        if fn == _SEND:
            if not _SEND_EXTRA.issuperset(extra) or type(extra.get("idempotent", False)) is not bool:
                return False
        elif fn != _POLL or not _POLL_EXTRA.issuperset(extra):
            return False
        self.open_[proc] = (ix, tm, fn, op.value, extra)
        self.inv_times.append(tm)
        return True

    def _complete(self, op: Op, ix: int, tm: int, proc: int) -> bool:
        inv = self.open_.get(proc)
        if inv is None or inv[2] != op.f:
            return False
        value = op.value
        mop = value[0] if type(value) is list and len(value) == 1 else None
        if type(mop) is not list:
            return False
        if op.f == _SEND:
            taken = self._sent(op.extra, mop, ix, tm, proc, inv)
        else:
            taken = not op.extra and self._polled(mop, ix, tm, proc, inv)
        if taken:
            del self.open_[proc]
        return taken

    def _sent(self, extra: dict[str, Any], mop: list, ix: int, tm: int, proc: int, inv: tuple) -> bool:
        if not _SEND_EXTRA.issuperset(extra):
            return False
        x = mop[2] if len(mop) == 3 and mop[0] == _SEND and type(mop[1]) is str else None
        if type(x) is not list or len(x) != 2:
            return False
        off, v = x
        if type(off) is not int or type(v) is not int or (off | v) < 0 or (off | v) >= _I64:
            return False
        acks = extra.get("acks")
        if acks is None:
            acks = inv[4].get("acks")
        code = ACKS_CODE.get(acks, 255) if type(acks) is str or acks is None else 255
        raw = extra.get("acks", "?")
        idem = extra.get("idempotent")
        if idem is None:
            idem = inv[4].get("idempotent")
        if code == 255 or (type(raw) is not str and raw is not None) or raw not in _RAW_ACKS_CODE \
                or (idem is not None and type(idem) is not bool):
            return False
        self._first_row()
        self.e_c.append(len(self.c_tm))
        self._row(ix, proc, inv[1], tm, code, _RAW_ACKS_CODE[raw], _IDEM_CODE[idem])
        self.e_kid.append(self._key(mop[1]))
        self.e_np.append(1)
        write_i64_le(self.w_off, off)
        write_i64_le(self.w_val, v)
        self.n_pairs += 1
        return True

    def _polled(self, mop: list, ix: int, tm: int, proc: int, inv: tuple) -> bool:
        if len(mop) != 2 or mop[0] != _POLL or type(mop[1]) is not dict:
            return False
        reads: list[tuple[str, int]] = []
        if mop[1] and not _poll_reads(mop[1], self.w_off, self.w_val, reads):
            cut = self.n_pairs * 8  # what the refused poll wrote goes
            self.w_off.truncate(cut)
            self.w_val.truncate(cut)
            return False
        self._first_row()
        c = len(self.c_tm)
        for k, n in reads:
            self.e_c.append(c)
            self.e_kid.append(self._key(k))
            self.e_np.append(n)
            self.n_pairs += n
        self._row(ix, proc, inv[1], tm, POLL_META, 0, 1)
        return True

    def _first_row(self) -> None:
        if not self.c_tm:
            self.inv_before = len(self.inv_times)

    def _row(self, ix: int, proc: int, itime: int, tm: int, meta: int, acks: int, ext: int) -> None:
        self.c_ix.append(ix)
        self.c_proc.append(proc)
        self.c_itime.append(itime)
        self.c_tm.append(tm)
        self.c_meta.append(meta)
        self.c_acks.append(acks)
        self.c_ext.append(ext)

    def _key(self, k: str) -> int:
        kid = self._kid.get(k)
        if kid is None:
            kid = self._kid[k] = len(self._kname)
            self._kname.append(k)
        return kid


def _q(w: BytesWriter) -> np.ndarray:
    """A column written as 64-bit little-endian ints, as an array."""
    return np.frombuffer(w.getvalue(), "<i8")


def _poll_reads(m: dict[Any, Any], w_off: BytesWriter, w_val: BytesWriter, out: list[tuple[str, int]]) -> bool:
    """Write a fast poll's ``{key: [[offset, value], ...]}`` records to
    ``w_off`` and ``w_val`` and ``(key, number of records)`` to ``out``,
    in order; False as soon as a key is not a string or a record is not
    a two-element list of non-negative ints below 2^63 (the caller cuts
    back what was written). One loop over the records, typed so that
    each test and write is a few machine instructions compiled: a
    record is read from memory once."""
    for k, prs_ in m.items():
        if type(k) is not str or type(prs_) is not list:
            return False
        prs: list[Any] = prs_
        n = 0
        for q_ in prs:
            if type(q_) is not list:
                return False
            q: list[Any] = q_
            if len(q) != 2:
                return False
            o_ = q[0]
            v_ = q[1]
            if type(o_) is not int or type(v_) is not int:
                return False
            o: int = o_
            v: int = v_
            if o < 0 or v < 0 or o >= _I64 or v >= _I64:
                return False
            write_i64_le(w_off, o)
            write_i64_le(w_val, v)
            n += 1
        out.append((k, n))
    return True
