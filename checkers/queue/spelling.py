"""The common lines of a history as the recorder spells them, read without
a JSON parser.

Every writer spells an operation the same way (:func:`checkers.history.jsonl.encode_line`:
compact JSON, fields in the order ``index, time, process, type, f, value``,
then the extra fields), and most of a queue history is four shapes of line::

    {"index":0,"time":138,"process":18,"type":"invoke","f":"send","value":[["send","t-97",0]],"acks":"all"}
    {"index":1,"time":203,"process":8,"type":"invoke","f":"poll","value":[["poll"]]}
    {"index":10,"time":5317,"process":7,"type":"ok","f":"send","value":[["send","t-13",[0,2]]],"acks":"all"}
    {"index":9,"time":4776,"process":12,"type":"ok","f":"poll","value":[["poll",{"t-23":[[964,99330]]}]]}

:func:`parse` reads exactly those spellings (integers of up to 18 digits
without leading zeros, names of printable ASCII without escapes, ``acks``
one of ``all``, ``-1``, ``1``, ``0``, a poll's keys each once) straight
from the bytes, in a few passes of compiled code instead of a JSON parse and
a dict per line; anything else is None and the line reader parses it as
JSON. What it returns is what the JSON of the line says, so either way the
reader takes the same line the same way. The compiled line reader calls
the pieces :func:`parse` is made of itself (:func:`head`, then
:func:`send_fields` or :func:`poll_key`, :func:`records` and
:func:`poll_ends`), writing what they read straight into its columns
with no :class:`Spelt` made.
"""

from __future__ import annotations

import struct
from typing import Final

from librt.strings import BytesWriter, write_i64_le

__all__ = ["Spelt", "parse", "head", "send_fields", "poll_key", "records", "poll_ends", "INVOKE_SEND",
           "INVOKE_POLL", "OK_SEND", "OK_POLL", "ABSENT"]

INVOKE_SEND: Final = 1
INVOKE_POLL: Final = 2
OK_SEND: Final = 3
OK_POLL: Final = 4
#: ``acks`` of a line without the field
ABSENT: Final = "?"

_INDEX: Final = b'{"index":'
_TIME: Final = b',"time":'
_PROCESS: Final = b',"process":'
_SHAPES: Final = (
    (b',"type":"ok","f":"send","value":[["send","', OK_SEND),
    (b',"type":"ok","f":"poll","value":[["poll",{', OK_POLL),
    (b',"type":"invoke","f":"send","value":[["send","', INVOKE_SEND),
    (b',"type":"invoke","f":"poll","value":[["poll"]]', INVOKE_POLL),
)
_PREFIX: Final = {kind: prefix for prefix, kind in _SHAPES}
_ACKS: Final = b',"acks":"'
_ACKS_SPELT: Final = {b"all": "all", b"-1": "-1", b"1": "1", b"0": "0"}
_DIGITS: Final = 18


class Spelt:
    """One line read by :func:`parse`: ``kind`` (one of the four shapes),
    the op's index, time and process, and by shape the send's key and its
    value (an invocation: ``a``) or offset and value (``a``, ``b``), its
    ``acks`` (:data:`ABSENT` without the field), or the poll's
    ``(key, offsets, values)`` reads in the order of its keys."""

    __slots__ = ("kind", "ix", "tm", "proc", "key", "a", "b", "acks", "reads")

    def __init__(self, kind: int, ix: int, tm: int, proc: int, key: str, a: int, b: int, acks: str,
                 reads: list[tuple[str, list[int], list[int]]]) -> None:
        self.kind, self.ix, self.tm, self.proc = kind, ix, tm, proc
        self.key, self.a, self.b, self.acks, self.reads = key, a, b, acks, reads


_NO_READS: Final[list[tuple[str, list[int], list[int]]]] = []


def parse(raw: bytes) -> Spelt | None:
    """The line ``raw`` (with or without its newline) if spelt as one of the
    four shapes, else None."""
    kind, ix, tm, proc, i = head(raw)
    if kind == 0:
        return None
    if kind == OK_POLL:
        return _poll(raw, i, ix, tm, proc)
    if kind == INVOKE_POLL:
        return Spelt(kind, ix, tm, proc, "", 0, 0, ABSENT, _NO_READS) if _ends(raw, i) else None
    j, a, b, acks = send_fields(raw, i, kind)
    if j < 0:
        return None
    return Spelt(kind, ix, tm, proc, raw[i:j].decode("ascii"), a, b, acks, _NO_READS)


def head(raw: bytes) -> tuple[int, int, int, int, int]:
    """``(kind, index, time, process, i)`` of a line spelt as one of the four
    shapes up to the end of its shape's prefix (at ``i``), what follows
    unread; kind 0 (and the rest 0) for any other line. (The line reader
    reads on from there into its columns, with no :class:`Spelt` made.)"""
    if not raw.startswith(_INDEX):
        return 0, 0, 0, 0, 0
    ix, i = _uint(raw, len(_INDEX))
    if ix < 0 or not _at(raw, i, _TIME):
        return 0, 0, 0, 0, 0
    tm, i = _uint(raw, i + len(_TIME))
    if tm < 0 or not _at(raw, i, _PROCESS):
        return 0, 0, 0, 0, 0
    proc, i = _uint(raw, i + len(_PROCESS))
    if proc < 0:
        return 0, 0, 0, 0, 0
    # the shape by two bytes (``"type":"o`` or ``i``, then ``"f":"s`` or
    # ``p``), then that one prefix compared whole
    t = _byte(raw, i + 9)
    if t == 111:
        kind = OK_SEND if _byte(raw, i + 18) == 115 else OK_POLL
    elif t == 105:
        kind = INVOKE_SEND if _byte(raw, i + 22) == 115 else INVOKE_POLL
    else:
        return 0, 0, 0, 0, 0
    prefix = _PREFIX[kind]
    if not _at(raw, i, prefix):
        return 0, 0, 0, 0, 0
    return kind, ix, tm, proc, i + len(prefix)


def send_fields(raw: bytes, i: int, kind: int) -> tuple[int, int, int, str]:
    """A send's ``key",V]]`` (an invocation) or ``key",[O,V]]]`` (a
    completion) from ``i``, then the end of the line with or without
    ``acks``: ``(j, a, b, acks)``, the key being ``raw[i:j]`` (j -1: not so
    spelt), ``a`` the value (an invocation) or offset, ``b`` the value (a
    completion), ``acks`` :data:`ABSENT` without the field."""
    j = _name_end(raw, i)
    if j < 0:
        return -1, 0, 0, ABSENT
    b = 0
    if kind == OK_SEND:
        if not (_byte(raw, j + 1) == 44 and _byte(raw, j + 2) == 91):  # ",[
            return -1, 0, 0, ABSENT
        a, i = _uint(raw, j + 3)
        if a < 0 or not _byte(raw, i) == 44:
            return -1, 0, 0, ABSENT
        b, i = _uint(raw, i + 1)
        if b < 0 or not (_byte(raw, i) == 93 and _byte(raw, i + 1) == 93 and _byte(raw, i + 2) == 93):
            return -1, 0, 0, ABSENT
        i += 3
    else:
        if not _byte(raw, j + 1) == 44:  # ",
            return -1, 0, 0, ABSENT
        a, i = _uint(raw, j + 2)
        if a < 0 or not (_byte(raw, i) == 93 and _byte(raw, i + 1) == 93):
            return -1, 0, 0, ABSENT
        i += 2
    if _ends(raw, i):
        return j, a, b, ABSENT
    if not _at(raw, i, _ACKS):
        return -1, 0, 0, ABSENT
    i += len(_ACKS)
    k = _name_end(raw, i)
    acks = _ACKS_SPELT.get(raw[i:k]) if k > 0 else None
    if acks is None or not _ends(raw, k + 1):
        return -1, 0, 0, ABSENT
    return j, a, b, acks


def poll_key(raw: bytes, i: int) -> int:
    """Where the name ends of a poll's key spelt ``"key":[`` at ``i`` (the
    name is ``raw[i + 1:j]``, its records start at ``j + 3``); -1 if not so."""
    if not _byte(raw, i) == 34:
        return -1
    j = _name_end(raw, i + 1)
    if j < 0 or not (_byte(raw, j + 1) == 58 and _byte(raw, j + 2) == 91):  # ":[
        return -1
    return j


def _poll(raw: bytes, i: int, ix: int, tm: int, proc: int) -> Spelt | None:
    """``"key":[[O,V],...],...}]]`` then the end of the line."""
    reads: list[tuple[str, list[int], list[int]]] = []
    if _byte(raw, i) == 125:
        i += 1
    else:
        while True:
            j = poll_key(raw, i)
            if j < 0:
                return None
            key = raw[i + 1:j].decode("ascii")
            for k, _, _ in reads:
                if k == key:
                    return None  # a repeated key: JSON keeps the last, leave it to the parser
            offs, vals = BytesWriter(), BytesWriter()
            i = records(raw, j + 3, offs, vals)
            if i < 0:
                return None
            reads.append((key, _ints(offs), _ints(vals)))
            if _byte(raw, i) == 125:
                i += 1
                break
            if not _byte(raw, i) == 44:
                return None
            i += 1
    if not poll_ends(raw, i):
        return None
    return Spelt(OK_POLL, ix, tm, proc, "", 0, 0, ABSENT, reads if reads else _NO_READS)


def _ints(w: BytesWriter) -> list[int]:
    """What :func:`records` wrote, as ints."""
    return [x for (x,) in struct.iter_unpack("<q", w.getvalue())]


def poll_ends(raw: bytes, i: int) -> bool:
    """Whether ``raw[i:]`` is ``]]}`` with or without the newline."""
    return _byte(raw, i) == 93 and _byte(raw, i + 1) == 93 and _ends(raw, i + 2)


def records(raw: bytes, i: int, offs: BytesWriter, vals: BytesWriter) -> int:
    """``[O,V],[O,V]]`` (or ``]``) written to ``offs``/``vals`` as 64-bit
    little-endian ints; the position after the closing bracket, or -1
    (with what was written of them left for the caller to take back)."""
    if _byte(raw, i) == 93:
        return i + 1
    while True:
        if not _byte(raw, i) == 91:
            return -1
        o, i = _uint(raw, i + 1)
        if o < 0 or not _byte(raw, i) == 44:
            return -1
        v, i = _uint(raw, i + 1)
        if v < 0 or not _byte(raw, i) == 93:
            return -1
        write_i64_le(offs, o)
        write_i64_le(vals, v)
        i += 1
        if _byte(raw, i) == 93:
            return i + 1
        if not _byte(raw, i) == 44:
            return -1
        i += 1


def _uint(raw: bytes, i: int) -> tuple[int, int]:
    """The non-negative integer spelt at ``raw[i:]`` (JSON: no leading zero,
    here at most 18 digits) and the position after it; -1 if none."""
    n = len(raw)
    if i >= n:
        return -1, i
    c = raw[i]
    if c == 48:  # 0, alone: what follows must be a delimiter
        return 0, i + 1
    if c < 49 or c > 57:
        return -1, i
    v = c - 48
    j = i + 1
    while j < n:
        c = raw[j]
        if c < 48 or c > 57:
            break
        v = v * 10 + c - 48
        j += 1
    if j - i > _DIGITS:
        return -1, i
    return v, j


def _name_end(raw: bytes, i: int) -> int:
    """The closing quote of a name starting at ``raw[i]``, if every byte
    before it is printable ASCII and no escape; else -1."""
    n = len(raw)
    while i < n:
        c = raw[i]
        if c == 34:
            return i
        if c < 32 or c > 126 or c == 92:
            return -1
        i += 1
    return -1


def _ends(raw: bytes, i: int) -> bool:
    """Whether ``raw[i:]`` is ``}`` with or without the newline."""
    n = len(raw)
    if n - i == 1:
        return raw[i] == 125
    return n - i == 2 and raw[i] == 125 and raw[i + 1] == 10


def _at(raw: bytes, i: int, lit: bytes) -> bool:
    """Whether ``lit`` is spelt at ``raw[i]``."""
    return raw[i:i + len(lit)] == lit


def _byte(raw: bytes, i: int) -> int:
    """``raw[i]``, or -1 past the end."""
    return raw[i] if i < len(raw) else -1
