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
(:meth:`OpBatches._poll_reads`) straight into the batch's columns
(``BytesWriter``s, as :class:`~checkers.queue.lines.LineReader` writes a
file's), so each record is touched once. They are written by key (each
key's own columns, :attr:`checkers.queue.lines.Batch.key_off`), the order
the folds append them to the projection in, and each event's highest
offset with them: a batch of a file's lines has its pairs in event order,
which the folds gathered into key order (for one 60 s seed's 721k pairs,
five arrays of them made afresh: ~7 ms of ~115 ms of its checkers). The records lie scattered over the simulation's
heap: the ten passes in C (``map``) this replaced, each a walk over every
record, took ~220 ns a record in a seed against ~45 ns for the one loop
(~65 before its range test was a shift, below).

What an operation costs besides its records is kept to the compiled code's
own: every column is written as it is read (``write_i64_le``, no int
object boxed per field and an ``array`` made of each list per batch), a
value's range is tested as ``x >> 63`` (zero for 0 <= x < 2^63; compared
with the constant 2^63, which does not fit a tagged int, each test boxed
``x``) and :meth:`OpBatches.run` calls ``self._fast`` natively (a bound
method held in a local is called through Python's generic call). On one
60 s seed's history: ~96 ms to read it, ~62 ms after.

The module's constants are ``Final`` (compiled, a plain global is a lookup
in the module's dict at each use: several an operation), an operation's
extra fields are tested by two lookups (``frozenset.issuperset`` of a dict
cost ~860 instructions), and its int fields are passed on as the objects
they are (none boxed again): the walk of one 60 s seed's operations with
the availability pass, 498 M instructions under callgrind, 362 M after.
Since the ``Op`` is compiled, its int fields are read as it holds them
(native ints): read through ``Any``, each was boxed again at every
operation by the compiled class's attribute getter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Final, Iterable

import numpy as np
from librt.strings import BytesWriter, write_i64_le

try:  # the accelerator's 64-bit int (reference_impl.accel): as Python, an int
    from mypy_extensions import i64
except ImportError:  # pragma: no cover - mypy is optional (the accel extra)
    i64 = int  # type: ignore[misc, assignment]

from checkers.availability.factpass import FactPass
from checkers.history.op import Op

from .lines import ACKS_CODE, POLL_META, RAW_ACKS, Batch, Slow

#: Final: compiled, each is a constant where a plain global (or a name
#: imported from another module) was a lookup in the module's dict at every
#: use, several an operation
_OK: Final = "ok"
_INVOKE: Final = "invoke"
_SEND: Final = "send"
_POLL: Final = "poll"
_ACKS: Final = "acks"
_IDEMPOTENT: Final = "idempotent"
#: what a field absent from an operation's extra reads as (:meth:`OpBatches._sent`)
_MISSING: Final = object()
#: a fast completion's meta code of each acks level (:data:`checkers.queue.lines.ACKS_CODE`)
_ACKS_CODE: Final = ACKS_CODE
#: a send completion's acks as it spells them (``"?"``: not at all), coded
#: as an index into :data:`checkers.queue.lines.RAW_ACKS`
_RAW_CODE: Final = {a: i for i, a in enumerate(RAW_ACKS)}
_POLL_META: Final = POLL_META
#: this module runs compiled (reference_impl.accel): an Op's int fields are then ints
_COMPILED: Final = not __file__.endswith(".py")


@dataclass
class OpBatches:
    """Hands the operations of a history to ``emit`` as :class:`Batch`
    and :class:`Slow` items in history order (a batch at most ``batch``
    completions). ``open_`` (process -> the fast invocation it has open,
    as ``(index, time, f, value, extra)``) is shared with the folds,
    which make what is left in it pending at the end; ``pending`` holds
    the processes with any other invocation open. ``facts``, if given, is
    fed every operation on the same walk (the availability checker's pass,
    :class:`checkers.availability.factpass.FactPass`): a common operation
    as the fields read here (an int process, no error, no field but
    ``acks`` and ``idempotent``: of the workload proper, so a poll moves
    only the history's end), any other as the operation."""

    emit: Callable[[Any], None]
    batch: int = 1 << 16
    open_: dict[Any, tuple] = field(default_factory=dict)
    pending: set[Any] = field(default_factory=set)
    facts: FactPass | None = None

    def __post_init__(self) -> None:
        self._kid: dict[str, int] = {}
        self._kname: list[str] = []
        self._reset()

    def _reset(self) -> None:
        # every column written as it is read, 64-bit ints (and bytes for
        # the codes) as the file reader writes them: no int object boxed
        # per field and converted again per batch
        self.inv_times = BytesWriter()
        self.n_inv = 0
        self.inv_before = 0
        self.c_ix = BytesWriter()
        self.c_proc = BytesWriter()
        self.c_itime = BytesWriter()
        self.c_tm = BytesWriter()
        self.c_meta = BytesWriter()
        self.c_acks = BytesWriter()
        self.c_ext = BytesWriter()
        self.n_rows = 0
        self.e_c = BytesWriter()
        self.e_kid = BytesWriter()
        self.e_np = BytesWriter()
        self.e_max = BytesWriter()
        # each key number's records' offsets and values as 64-bit ints from
        # the start, written as a poll's records are checked
        # (:meth:`_poll_reads`): the batch's pairs by key
        # (:attr:`checkers.queue.lines.Batch.key_off`)
        self.k_off: list[BytesWriter] = [BytesWriter() for _ in self._kname]
        self.k_val: list[BytesWriter] = [BytesWriter() for _ in self._kname]

    def run(self, ops: Iterable[Op]) -> "OpBatches":
        batch = self.batch
        facts = self.facts
        for op in ops:
            if not self._fast(op):  # a native call (a bound method in a local is a generic one)
                if facts is not None:
                    facts.feed_op(op)
                self._slow(op)
            elif self.n_rows >= batch:
                self._emit_batch()
        self._emit_batch()
        return self

    def _emit_batch(self) -> None:
        if not (self.n_rows or self.n_inv):
            return
        b = Batch(_q(self.inv_times), self.inv_before, _q(self.c_ix), _q(self.c_proc),
                  _q(self.c_itime), _q(self.c_tm), _u8(self.c_meta), _u8(self.c_acks), _q(self.e_c),
                  _q(self.e_kid), _q(self.e_np), None, None, list(self._kname), _u8(self.c_ext),
                  [_q(w) for w in self.k_off], [_q(w) for w in self.k_val], _q(self.e_max))
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
        :meth:`_slow` (False) with nothing changed. The int fields are read
        as the compiled ``Op`` holds them (native ints: no object made, where
        a read through ``Any`` boxed each again at every operation), the
        process as the object it is (the key of ``open_``); as Python, an
        ``Op``'s ints are whatever it was given and their type is tested
        here (compiled, the ``Op`` checks its declared ints when set)."""
        ix: int = op.index
        tm: int = op.time
        proc_o: Any = op.process
        if not _COMPILED and (type(op.index) is not int or type(op.time) is not int):
            return False
        if type(proc_o) is not int or op.error is not None:
            return False
        proc: int = proc_o
        if (ix | tm | proc) >> 63:  # a negative or past 64 bits
            return False
        t = op.type
        if t == _INVOKE:
            return self._invoke(op, ix, tm, proc_o)
        if t == _OK:
            return self._complete(op, ix, tm, proc_o)
        return False

    def _invoke(self, op: Op, ix: int, tm: int, proc: Any) -> bool:
        if proc in self.open_ or proc in self.pending:
            return False
        fn, extra = op.f, op.extra
        n = len(extra)
        if fn == _SEND:
            if n:  # no field but acks and a bool idempotent
                known = 0
                if _ACKS in extra:
                    known += 1
                idem = extra.get(_IDEMPOTENT, _MISSING)
                if idem is not _MISSING:
                    if type(idem) is not bool:
                        return False
                    known += 1
                if known != n:
                    return False
        elif fn != _POLL or (n and (n != 1 or _ACKS not in extra)):  # no field but acks
            return False
        value = op.value
        self.open_[proc] = (ix, tm, fn, value, extra)
        write_i64_le(self.inv_times, tm)
        self.n_inv += 1
        facts = self.facts
        if facts is not None:
            if fn == _SEND:
                facts.feed_send(proc, _INVOKE, value, tm, extra)
            else:  # a poll of the workload proper moves only the history's end
                facts.see_time(tm)
        return True

    def _complete(self, op: Op, ix: int, tm: int, proc: Any) -> bool:
        inv = self.open_.get(proc)
        if inv is None:
            return False
        f = op.f
        fn: str = inv[2]
        if fn is not f and fn != f:
            return False
        value = op.value
        mop = value[0] if type(value) is list and len(value) == 1 else None
        if type(mop) is not list:
            return False
        extra = op.extra
        send = f == _SEND
        if send:
            taken = self._sent(extra, mop, ix, tm, proc, inv)
        else:
            taken = not extra and self._polled(mop, ix, tm, proc, inv)
        if taken:
            del self.open_[proc]
            facts = self.facts
            if facts is not None:
                if send:
                    facts.feed_send(proc, _OK, value, tm, extra)
                else:
                    facts.see_time(tm)
        return taken

    def _sent(self, extra: dict[str, Any], mop: list, ix: int, tm: int, proc: int, inv: tuple) -> bool:
        # the completion's own acks and idempotent: no other field
        given = extra.get(_ACKS, _MISSING)
        idem = extra.get(_IDEMPOTENT, _MISSING)
        n = len(extra)
        if n and n != (given is not _MISSING) + (idem is not _MISSING):
            return False
        x = mop[2] if len(mop) == 3 and mop[0] == _SEND and type(mop[1]) is str else None
        if type(x) is not list or len(x) != 2:
            return False
        off, v = x
        if type(off) is not int or type(v) is not int or (off | v) >> 63:
            return False
        # the acks level: the completion's, else the invocation's; spelt as
        # the completion spells it ("?": not at all); the idempotence: the
        # completion's, else the invocation's
        raw = "?" if given is _MISSING else given
        acks = given
        if given is None or given is _MISSING:
            iextra: dict[str, Any] = inv[4]
            acks = iextra.get(_ACKS)
        if idem is None or idem is _MISSING:
            iextra2: dict[str, Any] = inv[4]
            idem = iextra2.get(_IDEMPOTENT)
        code = _ACKS_CODE.get(acks, 255) if type(acks) is str or acks is None else 255
        raw_code = _RAW_CODE.get(raw, 255) if type(raw) is str or raw is None else 255
        if code == 255 or raw_code == 255 or (idem is not None and type(idem) is not bool):
            return False
        kid = self._key(mop[1])
        self._first_row()
        write_i64_le(self.e_c, self.n_rows)
        # ext (:attr:`checkers.queue.lines.Batch.ext`): the idempotence as
        # the projection keeps it, None 0, False 2, True 3
        self._row(ix, proc, inv[1], tm, code, raw_code, 0 if idem is None else (3 if idem else 2))
        write_i64_le(self.e_kid, kid)
        write_i64_le(self.e_np, 1)
        write_i64_le(self.e_max, off)
        write_i64_le(self.k_off[kid], off)
        write_i64_le(self.k_val[kid], v)
        return True

    def _polled(self, mop: list, ix: int, tm: int, proc: int, inv: tuple) -> bool:
        if len(mop) != 2 or mop[0] != _POLL or type(mop[1]) is not dict:
            return False
        reads: list[tuple[int, int, int]] = []
        if mop[1]:
            n_keys = len(self._kname)
            touched: list[tuple[int, int]] = []
            if not self._poll_reads(mop[1], reads, touched):
                # what the refused poll wrote goes, and the keys it named first
                for kid, before in touched:
                    self.k_off[kid].truncate(before)
                    self.k_val[kid].truncate(before)
                while len(self._kname) > n_keys:
                    del self._kid[self._kname.pop()]
                    self.k_off.pop()
                    self.k_val.pop()
                return False
        self._first_row()
        c = self.n_rows
        for kid, n, mx in reads:
            write_i64_le(self.e_c, c)
            write_i64_le(self.e_kid, kid)
            write_i64_le(self.e_np, n)
            write_i64_le(self.e_max, mx)
        self._row(ix, proc, inv[1], tm, _POLL_META, 0, 1)
        return True

    def _first_row(self) -> None:
        if not self.n_rows:
            self.inv_before = self.n_inv

    def _row(self, ix: int, proc: int, itime: int, tm: int, meta: int, acks: int, ext: int) -> None:
        write_i64_le(self.c_ix, ix)
        write_i64_le(self.c_proc, proc)
        write_i64_le(self.c_itime, itime)
        write_i64_le(self.c_tm, tm)
        self.c_meta.append(meta)
        self.c_acks.append(acks)
        self.c_ext.append(ext)
        self.n_rows += 1

    def _key(self, k: str) -> int:
        kid = self._kid.get(k)
        if kid is None:
            kid = self._kid[k] = len(self._kname)
            self._kname.append(k)
            self.k_off.append(BytesWriter())
            self.k_val.append(BytesWriter())
        return kid

    def _poll_reads(self, m: dict[Any, Any], out: list[tuple[int, int, int]],
                    touched: list[tuple[int, int]]) -> bool:
        """Write a fast poll's ``{key: [[offset, value], ...]}`` records to
        their keys' ``k_off`` and ``k_val`` and ``(key number, number of
        records, highest offset or -1)`` to ``out``, in order; False as
        soon as a key is not a string or a record is not a two-element
        list of non-negative ints below 2^63: the caller cuts back what
        was written, each key written to being in ``touched`` with its
        writers' length before. One loop over the
        records, typed so that each test and write is a few machine
        instructions compiled: a record is read from memory once, its
        offset and value unboxed straight to 64-bit ints (``i64``; by way
        of mypyc's tagged int, and a shift on that, the loop took ~10% more
        instructions)."""
        for k, prs_ in m.items():
            if type(k) is not str or type(prs_) is not list:
                return False
            prs: list[Any] = prs_
            kid = self._key(k)
            w_off = self.k_off[kid]
            w_val = self.k_val[kid]
            touched.append((kid, len(w_off)))
            n = 0
            mx: i64 = -1
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
                try:  # compiled, past 64 bits raises ValueError; as Python, i64 is int
                    o: i64 = o_
                    v: i64 = v_
                except (ValueError, OverflowError):
                    return False
                if (o | v) >> 63:  # a negative (or, as Python, past 64 bits)
                    return False
                write_i64_le(w_off, o)
                write_i64_le(w_val, v)
                if o > mx:
                    mx = o
                n += 1
            out.append((kid, n, mx))
        return True


def _q(w: BytesWriter) -> np.ndarray:
    """A column written as 64-bit little-endian ints, as an array."""
    return np.frombuffer(w.getvalue(), "<i8")


def _u8(w: BytesWriter) -> np.ndarray:
    """A column written as bytes, as an array."""
    return np.frombuffer(w.getvalue(), np.uint8)


