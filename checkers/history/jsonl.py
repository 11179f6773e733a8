"""JSONL histories: one operation per line, streamed and flushed by writers so
that a crash of the writer loses at most the line it was writing."""

from __future__ import annotations

import gc
import io
import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, TextIO

import orjson

from .op import OP_TYPES, HistoryError, Op
from .source import MAX_LINE, finite, open_regular, refuse_constant

#: compact JSON, non-string keys written as strings (as :mod:`json` does),
#: and the newline appended by the encoder itself
LINE_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
#: tried first: for an operation whose keys are all strings (nearly every
#: one) the bytes are LINE_OPTIONS' and orjson takes about a third less time
#: to make them; a non-string key makes it raise TypeError, and the caller
#: then encodes with LINE_OPTIONS
STR_KEYS_LINE_OPTIONS = orjson.OPT_APPEND_NEWLINE


def encode_line(op: Op) -> str:
    """The JSONL line (with its newline) every writer spells ``op`` as.

    orjson, not :mod:`json`: a history line is written for every operation
    while the test runs (the simulator's hot path, the harness's recorder
    thread), and orjson encodes an operation about ten times faster. Its
    output is plain compact JSON that :mod:`json` reads back unchanged."""
    return encode_fields(op.to_dict())


_JSON = json.JSONEncoder(separators=(",", ":"))
_JSON_ANY = json.JSONEncoder(separators=(",", ":"), default=repr)


def encode_fields(fields: dict[str, Any]) -> str:
    """The JSONL line of an operation already spelt as :meth:`Op.to_dict`
    would (for a writer that never builds the Op).

    Never raises for a value an operation may carry, so a recorder never
    drops an operation: what orjson refuses (an integer beyond 64 bits, a
    lone surrogate, an unknown type) goes through :mod:`json`, and what JSON
    cannot hold at all (a set, say) is written as its ``repr``. A float NaN
    or infinity is written as ``null`` (standard JSON has neither)."""
    try:
        return orjson.dumps(fields, option=STR_KEYS_LINE_OPTIONS).decode()
    except TypeError:  # orjson.JSONEncodeError: a non-string key, or worse
        pass
    try:
        return orjson.dumps(fields, option=LINE_OPTIONS).decode()
    except TypeError:
        pass
    try:
        return _JSON.encode(fields) + "\n"
    except (TypeError, ValueError):
        return _JSON_ANY.encode(fields) + "\n"


class JsonlWriter:
    """Append operations to a JSONL file, flushing every ``flush_every``
    lines (each one by default: a crashed writer then loses at most the line
    it was writing) and fsyncing every ``fsync_every`` operations (and on
    close). The simulator flushes less often: its history is a pure function
    of the seed, so a killed simulator loses nothing a replay cannot rebuild,
    and a flush per line was a system call per operation."""

    def __init__(self, path: str | os.PathLike[str], fsync_every: int = 200, flush_every: int = 1) -> None:
        self.path = Path(path)
        self._f: TextIO = open(self.path, "a", encoding="utf-8")
        self._fsync_every = max(1, fsync_every)
        self._flush_every = max(1, flush_every)
        self._pending = 0
        self._unflushed = 0

    def write(self, op: Op) -> None:
        self.write_line(encode_line(op))

    def write_line(self, line: str) -> None:
        """Write a line already made by :func:`encode_line`."""
        self._f.write(line)
        self._unflushed += 1
        if self._unflushed >= self._flush_every:
            self._f.flush()
            self._unflushed = 0
        self._pending += 1
        if self._pending >= self._fsync_every:
            os.fsync(self._f.fileno())
            self._pending = 0

    def write_block(self, text: str) -> None:
        """Write lines already joined, and flush them to the OS at once (a
        background recorder's drained batch)."""
        if text:
            self._f.write(text)
            self._f.flush()

    def write_bytes(self, data: bytes) -> None:
        """Write lines already joined and encoded (UTF-8), and flush them to
        the OS at once: the simulator's recorder, whose lines are bytes
        (orjson's) and would otherwise be decoded only to be encoded again."""
        if data:
            self._f.flush()  # whatever the text layer holds goes first
            self._f.buffer.write(data)
            self._f.buffer.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: made next to a history when recording starts, removed once the recorder
#: has closed it: left behind, it says the recorder was killed mid-run
RECORDING_SUFFIX = ".recording"


def recording_marker(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    return p.with_name(p.name + RECORDING_SUFFIX)


def is_partial(path: str | os.PathLike[str]) -> bool:
    """The history's recorder never closed it (a killed harness): what is
    there checks, but the run stopped early."""
    return recording_marker(path).exists()


def write_jsonl(path: str | os.PathLike[str], ops: Iterable[Op]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for op in ops:
            f.write(encode_line(op))


def iter_jsonl(path: str | os.PathLike[str], warnings: list[str] | None = None,
               number: bool = False) -> Iterator[Op]:
    """Yield operations, reading the file as it goes (one line held at a
    time). A truncated *last* line (a crashed writer) is skipped and
    reported in ``warnings``; a malformed line elsewhere raises
    :class:`HistoryError` naming ``file:line``. ``number``: an operation
    without an index gets its position among the operations (what
    :func:`read_jsonl` gives it).

    Each line goes to orjson first (several times faster); a line orjson
    refuses goes to :mod:`json`, which decides: it reads what orjson does
    not (NaN, integers past 64 bits, lone surrogates) and words the error."""
    p = Path(path)
    n_ops = 0
    with io.TextIOWrapper(open_regular(p), encoding="utf-8", errors="replace") as f:
        i = 0
        nxt = f.readline(MAX_LINE + 1)
        while nxt:
            line, nxt = nxt, f.readline(MAX_LINE + 1)
            i += 1
            op = line_op(line, p, i, not nxt, warnings)
            if op is BLANK:
                continue
            if op is TORN:
                return
            assert isinstance(op, Op)
            if number and op.index < 0:
                op.index = n_ops
            n_ops += 1
            yield op


#: what :func:`line_op` gives for a line with no operation, and for a truncated last line
BLANK = object()
TORN = object()


def line_op(line: str, p: Path, i: int, last: bool, warnings: list[str] | None) -> Op | object:
    """Line ``i``'s operation (``last``: the file's last line): orjson
    reads it first, :mod:`json` what orjson refuses; :data:`BLANK` for a
    blank line, :data:`TORN` for a truncated last line (reported in
    ``warnings``); a bad line raises a one-line :class:`HistoryError`."""
    if len(line) > MAX_LINE:
        raise HistoryError(f"{p}:{i}: a line of more than {MAX_LINE} bytes is no operation")
    try:
        d = orjson.loads(line)
    except orjson.JSONDecodeError:
        if not line.strip():
            return BLANK
        d = _json_fallback(line, p, i, last=last, warnings=warnings)
        if d is TORN:
            return TORN
    if not isinstance(d, dict):
        raise HistoryError(f"{p}:{i}: expected a JSON object")
    return op_from_json(d, p, i)


def _json_fallback(line: str, p: Path, i: int, last: bool, warnings: list[str] | None) -> Any:
    """:mod:`json`'s reading of a line orjson refused: the value, or
    :data:`TORN` for a torn last line (reported), or a one-line HistoryError.
    NaN, the infinities and floats past a double are refused
    (:mod:`.source`)."""
    try:
        return json.loads(line, parse_constant=refuse_constant, parse_float=finite)
    except json.JSONDecodeError as e:
        if last and not line.endswith("\n") and _torn(line, e):
            if warnings is not None:
                warnings.append(f"{p}:{i}: truncated last line ignored (writer crashed?)")
            return TORN
        raise HistoryError(f"{p}:{i}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise HistoryError(f"{p}:{i}: nested too deeply") from None
    except ValueError as e:  # an integer past Python's digit limit, and the like
        raise HistoryError(f"{p}:{i}: {str(e).split(';')[0]}") from None


def _torn(line: str, e: json.JSONDecodeError) -> bool:
    """The line is an operation cut short (a writer killed mid-line), not
    garbage: an object whose text stops inside a string, a literal or a
    number, or after a complete token."""
    rest = line[e.pos:].strip()
    return line.lstrip().startswith("{") and (
        e.msg.startswith("Unterminated string") or not rest or any(w.startswith(rest) for w in ("true", "false", "null"))
        or all(c in "0123456789+-.eE" for c in rest))


_OP_TYPES = frozenset(OP_TYPES)
_PROCESS_TYPES = (int, str)  # what names a process: anything else goes to Op.from_dict, which refuses it


def op_from_json(d: dict, p: Path, i: int) -> Op:
    """``Op.from_dict`` for a freshly parsed line, reusing the parsed dict as
    ``extra`` (no copy per op: a 1M-op history is read in one pass). Anything
    unusual goes through ``Op.from_dict`` for its checks and messages."""
    t = d.get("type")
    f = d.get("f")
    tm = d.get("time", 0)
    ix = d.get("index", -1)
    if type(t) is str and t in _OP_TYPES and type(f) is str and type(tm) is int and type(ix) is int \
            and type(d.get("process")) in _PROCESS_TYPES:
        pop = d.pop
        pop("type")
        pop("f")
        pop("time", None)
        pop("index", None)
        return Op(t, f, pop("value", None), pop("process", 0), tm, ix, pop("error", None), d)
    return Op.from_dict(d, where=f"{p}:{i}")


def read_jsonl(path: str | os.PathLike[str], warnings: list[str] | None = None) -> list[Op]:
    # Millions of small containers, none cyclic: the cyclic collector would
    # rescan the growing list again and again, so pause it while reading.
    was = gc.isenabled()
    gc.disable()
    try:
        return list(iter_jsonl(path, warnings, number=True))
    finally:
        if was:
            gc.enable()
