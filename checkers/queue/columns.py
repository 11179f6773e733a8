"""Per-key events kept in columns, not as a tuple per event.

A 1M-operation history has about a million per-key events and a few million
``(offset, value)`` pairs; as Python tuples and lists that is well over a
gigabyte. Here each key holds its events as a handful of flat columns
(``array('q')`` for integers, one byte per event for the small enums), so
the same history takes tens of megabytes. A key's event tuples (the shape
:mod:`checkers.queue.project` documents, which every per-key check reads)
are rebuilt only when that key is checked, one key at a time, and are
equal to what the tuple-per-event projection built.

A column stays a typed array while its values are 64-bit integers and turns
into a plain list at the first other value (``None``, a string, a float):
the histories this matters for are integer throughout, and any history
still reads back exactly as written.
"""

from __future__ import annotations

import marshal
from array import array
from operator import itemgetter
from typing import Any, Iterator, Mapping

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

TYPES = ("ok", "info", "fail")
_TYPE_CODE = {t: i for i, t in enumerate(TYPES)}
KINDS = ("w", "r")
_INT = {int}
_SEQ = (list, tuple)
_ABSENT = "\x00absent"  # an event without an 8th element (a poll without a rebalance-log)
_ABSENT_KEY = object()  # no value appended yet
_FIRST = itemgetter(0)    # p[0], mapped in C over a poll's records
_SECOND = itemgetter(1)


class Col:
    """An append-only column: an ``array('q')`` while every value is a
    64-bit int, a list from the first value that is not."""

    __slots__ = ("data",)

    def __init__(self, data: Any = None) -> None:
        self.data = array("q") if data is None else data

    def append(self, x: Any) -> None:
        d = self.data
        if type(d) is array:
            if type(x) is int:
                try:
                    d.append(x)
                    return
                except OverflowError:  # past 64 bits
                    pass
            d = self.data = d.tolist()
        d.append(x)

    def fill(self, n: int, x: Any) -> None:
        """Append ``x`` ``n`` times."""
        d = self.data
        if type(d) is array and type(x) is int and _I64_MIN <= x <= _I64_MAX:
            d.extend(array("q", [x]) * n)
        else:
            for _ in range(n):
                self.append(x)

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.data)

    def __getitem__(self, i: Any) -> Any:
        return self.data[i]

    def dump(self) -> Any:
        d = self.data
        return ("q", d.tobytes()) if type(d) is array else ("l", d)

    @classmethod
    def load(cls, x: Any) -> "Col":
        tag, payload = x
        if tag == "q":
            a = array("q")
            a.frombytes(payload)
            return cls(a)
        return cls(list(payload))


class Interned:
    """A column of few distinct values (acks levels, flags): one byte per
    entry indexing a small table (four past 256 distinct values)."""

    __slots__ = ("table", "codes", "_code", "_last", "_last_code")

    def __init__(self) -> None:
        self.table: list[Any] = []
        self._code: dict[Any, int] = {}
        self.codes = array("B")
        self._last: Any = _ABSENT_KEY
        self._last_code = 0

    def append(self, x: Any) -> None:
        if x is self._last:  # the same object as last time (None, True, an interned "ok")
            self.codes.append(self._last_code)
            return
        c = self.code(x)
        self.codes.append(c)
        self._last, self._last_code = x, c

    def code(self, x: Any) -> int:
        """``x``'s code, a new one (and a wider code array past 256 values)
        for a value not seen before; keyed by type too: True and 1 are
        equal but not the same value."""
        k = (type(x), x)
        c = self._code.get(k)
        if c is None:
            c = len(self.table)
            if c == 256:
                self.codes = array("I", self.codes)
            self._code[k] = c
            self.table.append(x)
        return c

    def known(self, x: Any) -> int | None:
        """``x``'s code if it has one (nothing added)."""
        return self._code.get((type(x), x))

    def values(self) -> list[Any]:
        t = self.table
        return [t[c] for c in self.codes]

    def __iter__(self) -> Iterator[Any]:
        t = self.table
        return (t[c] for c in self.codes)

    def __len__(self) -> int:
        return len(self.codes)

    def dump(self) -> Any:
        return (self.table, self.codes.typecode, self.codes.tobytes())

    @classmethod
    def load(cls, x: Any) -> "Interned":
        self = cls()
        self.table = list(x[0])
        self.codes = array(x[1])
        self.codes.frombytes(x[2])
        self._code = {(type(v), v): i for i, v in enumerate(self.table)}
        self._last = _ABSENT_KEY
        return self


class KeyColumns:
    """One key's send ("w") and poll ("r") events in columns; ``pair_end[i]``
    is where event ``i``'s pairs end in ``offs``/``vals``."""

    __slots__ = ("op", "proc", "type", "kind", "time", "meta", "ext", "pair_end", "offs", "vals")

    def __init__(self) -> None:
        self.op = Col()
        self.proc = Col()
        self.type = bytearray()
        self.kind = bytearray()
        self.time = Col()
        self.meta = Interned()     # acks for sends, the final flag for polls
        self.ext = Interned()      # idempotent for sends, rebalanced (or absent) for polls
        self.pair_end = array("q")
        self.offs = Col()
        self.vals = Col()

    def __len__(self) -> int:
        return len(self.type)

    def add(self, idx: int, proc: Any, ctype: str, kind: str, pairs: Any, ctime: Any, meta: Any,
            ext: Any = _ABSENT, i64: tuple[bytes, bytes, int] | None = None) -> None:
        """One event, as :mod:`checkers.queue.project` spells its fields
        (``pairs``: ``(offset, value)`` pairs; ``i64``, if given, the same
        pairs' offsets and values as 64-bit little-endian ints,
        :func:`checkers.queue.records.records_i64`)."""
        self.op.append(idx)
        self.proc.append(proc)
        self.type.append(_TYPE_CODE[ctype])
        self.kind.append(0 if kind == "w" else 1)
        self.time.append(ctime)
        self.meta.append(meta)
        self.ext.append(ext)
        od, vd = self.offs.data, self.vals.data
        if i64 is not None and type(od) is array and type(vd) is array:
            # what _add_pairs does with 64-bit ints, taken as read in one pass
            od.frombytes(i64[0])
            vd.frombytes(i64[1])
            self.pair_end.append(len(od))
            return
        self._add_pairs(pairs)

    def add_ok(self, idx: int, proc: int, kind: int, offs: list[int], vals: list[int], ctime: int,
               meta: Any, ext: Any = _ABSENT_KEY) -> None:
        """:meth:`add` of an ``ok`` event whose fields are all 64-bit ints
        (the reader has checked them), with ``ext`` its 8th element
        (default: none for a poll, ``idempotent`` unknown (None) for a
        send): the bulk of a history, appended without :class:`Col`'s
        checks while the columns are arrays."""
        if ext is _ABSENT_KEY:
            ext = None if kind == 0 else _ABSENT
        op, pr, tm, od, vd = self.op.data, self.proc.data, self.time.data, self.offs.data, self.vals.data
        if type(op) is not array or type(pr) is not array or type(tm) is not array:
            # what add() does with these fields: each Col appends as it is
            self.op.append(idx)
            self.proc.append(proc)
            self.type.append(0)
            self.kind.append(kind)
            self.time.append(ctime)
        else:
            op.append(idx)
            pr.append(proc)
            self.type.append(0)
            self.kind.append(kind)
            tm.append(ctime)
        self.meta.append(meta)
        self.ext.append(ext)
        # 64-bit ints: an array column takes them as they are, and a column
        # that turned into a list (a send without an offset before, under
        # faults) as Col.append would one by one, so extended in bulk either way
        od.extend(offs)
        vd.extend(vals)
        self.pair_end.append(len(od))

    def _add_pairs(self, pairs: Any) -> None:
        """Each pair's first two elements (``[offset, value]`` as read, or
        a tuple); integers go into the arrays in bulk."""
        offs, vals = self.offs, self.vals
        if type(pairs) in _SEQ and len(pairs) == 1:  # a send, or a poll of one record
            p = pairs[0]
            offs.append(p[0])
            vals.append(p[1])
        elif pairs:
            os_ = list(map(_FIRST, pairs))
            vs = list(map(_SECOND, pairs))
            od, vd = offs.data, vals.data
            if type(od) is array and type(vd) is array and {*map(type, os_), *map(type, vs)} == _INT:
                n_o, n_v = len(od), len(vd)
                try:
                    od.extend(os_)
                    vd.extend(vs)
                    self.pair_end.append(len(od))
                    return
                except OverflowError:  # past 64 bits: one by one, the column turns into a list
                    del od[n_o:], vd[n_v:]
            for o, v in zip(os_, vs):
                offs.append(o)
                vals.append(v)
        self.pair_end.append(len(offs))

    def info_send_values(self) -> Iterator[tuple[int, list[Any]]]:
        """``(op, values)`` of each ``info`` send."""
        # found by the bytearray's own search: most keys have no info event,
        # and a Python loop over every event of every key cost 0.1 s on the
        # 1M-op bench history
        info = _TYPE_CODE["info"]
        t, kind, ends, vals = self.type, self.kind, self.pair_end, self.vals
        i = t.find(info)
        while i >= 0:
            if kind[i] == 0:
                yield self.op[i], list(vals[ends[i - 1] if i else 0:ends[i]])
            i = t.find(info, i + 1)

    def ok_read_values(self) -> set[Any]:
        ok = _TYPE_CODE["ok"]
        out: set[Any] = set()
        start = 0
        vals = self.vals
        for i, end in enumerate(self.pair_end):
            if self.type[i] == ok and self.kind[i] == 1:
                out.update(vals[start:end])
            start = end
        return out

    def events(self, committed: frozenset[int] | set[int] = frozenset()) -> list[tuple]:
        """The key's event tuples, in the order they were added; each
        ``info`` send gets its 9th element (op in ``committed``)."""
        out: list[tuple] = []
        offs, vals = self.offs.data, self.vals.data
        ops, procs, times = self.op.data, self.proc.data, self.time.data
        meta, ext = self.meta.values(), self.ext.values()
        start = 0
        for i, end in enumerate(self.pair_end):
            pairs = list(zip(offs[start:end], vals[start:end]))
            start = end
            t = TYPES[self.type[i]]
            x = ext[i]
            if self.kind[i] == 0:
                ev: tuple = (ops[i], procs[i], t, "w", pairs, times[i], meta[i], x)
                if t == "info":
                    ev = ev + (ops[i] in committed,)
            elif x == _ABSENT:
                ev = (ops[i], procs[i], t, "r", pairs, times[i], meta[i])
            else:
                ev = (ops[i], procs[i], t, "r", pairs, times[i], meta[i], x)
            out.append(ev)
        return out

    def dump(self) -> bytes:
        return marshal.dumps((self.op.dump(), self.proc.dump(), bytes(self.type), bytes(self.kind),
                              self.time.dump(), self.meta.dump(), self.ext.dump(),
                              self.pair_end.tobytes(), self.offs.dump(), self.vals.dump()))

    @classmethod
    def load(cls, b: bytes) -> "KeyColumns":
        (op, proc, typ, kind, tm, meta, ext, ends, offs, vals) = marshal.loads(b)
        self = cls()
        self.op, self.proc, self.time = Col.load(op), Col.load(proc), Col.load(tm)
        self.type, self.kind = bytearray(typ), bytearray(kind)
        self.meta, self.ext = Interned.load(meta), Interned.load(ext)
        self.pair_end = array("q")
        self.pair_end.frombytes(ends)
        self.offs, self.vals = Col.load(offs), Col.load(vals)
        return self


def merge_assigns(key: str, events: list[tuple], assigns: list[tuple]) -> list[tuple]:
    """Broadcast each assign/subscribe to the key, as an ``"a"`` event
    saying whether the key is still assigned (Jepsen keeps a process's
    last-read position only for keys it is still assigned), in op order."""
    if not assigns:
        return events
    merged = events + [(idx, proc, ctype, "a", key in ks, None, None) for idx, proc, ctype, ks in assigns]
    merged.sort(key=lambda e: e[0])
    return merged


class KeyEvents(Mapping[str, list]):
    """``{key: [event, ...]}`` over :class:`KeyColumns`, each key's events
    built when asked for (and not kept): the projection's ``keys``."""

    def __init__(self, columns: dict[str, KeyColumns], committed: set[int],
                 assigns: list[tuple]) -> None:
        self.columns = columns
        self.committed = committed
        self.assigns = assigns

    def __getitem__(self, key: str) -> list[tuple]:
        cols = self.columns[key]
        if cols is None:
            raise KeyError(f"{key}: its events were released")
        return merge_assigns(key, cols.events(self.committed), self.assigns)

    def release(self, key: str) -> None:
        """Free the key's columns (it stays a key: only its name is kept)."""
        self.columns[key] = None  # type: ignore[assignment]

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def payload(self, key: str) -> bytes:
        """What an executor needs to rebuild the key's events
        (:func:`events_from_payload`): its columns, the committed ``info``
        sends among its ops, and the assigns."""
        cols = self.columns[key]
        mine = {op for op, _vals in cols.info_send_values() if op in self.committed}
        return marshal.dumps((key, cols.dump(), sorted(mine),
                              [(i, p, t, sorted(ks)) for i, p, t, ks in self.assigns]))


def events_from_payload(b: bytes) -> tuple[str, list[tuple]]:
    key, cols, committed, assigns = marshal.loads(b)
    evs = KeyColumns.load(cols).events(frozenset(committed))
    return key, merge_assigns(key, evs, [(i, p, t, frozenset(ks)) for i, p, t, ks in assigns])
