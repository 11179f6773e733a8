"""EDN histories: read Jepsen's (and Knossos') history files, write ours back
so Jepsen's own tools can check them.

Why a small tokenizer instead of ``edn_format``: ``edn_format`` parses every
file under the Knossos corpus, but at about 1 MB/s, and its parse errors carry
no line numbers. Histories are big flat vectors of small maps, so a regex
tokenizer plus an explicit stack is both faster and able to say ``file:line``.
The round-trip tests compare this reader against ``edn_format`` on the corpus.

Mapping (EDN -> Python): keywords -> ``str`` without the ``:``; ``nil`` ->
``None``; vectors and lists -> ``list``; sets -> ``list`` (in file order);
maps -> ``dict``; ``#tag value`` -> ``value`` (tags dropped); characters
(``\\a``) -> one-character ``str``; ``#_`` discards the next form.

Writing (Python -> EDN): dict keys and strings that are valid keyword names
are written as keywords (Jepsen writes ``:type :ok``, ``:f :send``); any other
string is written as an EDN string. Reading back gives the same Python values,
so ``read_edn(write_edn(ops)) == ops``.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Iterable

from .op import HistoryError, Op
from .source import read_regular

_TOKEN = re.compile(
    r"""
    (?P<ws>[\s,]+|;[^\n]*)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<open>\#\{|[\[({])
  | (?P<close>[\])}])
  | (?P<discard>\#_)
  | (?P<tag>\#[A-Za-z][^\s,\[\](){}"]*)
  | (?P<char>\\(?:newline|space|tab|return|backspace|formfeed|u[0-9a-fA-F]{4}|.))
  | (?P<atom>[^\s,\[\](){}"]+)
    """,
    re.VERBOSE | re.DOTALL,
)

_INT = re.compile(r"^[+-]?\d+N?$")
_FLOAT = re.compile(r"^[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?$")
_RATIO = re.compile(r"^[+-]?\d+/\d+$")
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r", "backspace": "\b", "formfeed": "\f"}
_STR_ESC = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_STR_ESC_MAP = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f"}
_CLOSER = {"[": "]", "(": ")", "{": "}", "#{": "}"}

_DISCARD = object()


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s

    def rep(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] == "u" and len(e) == 5:
            return chr(int(e[1:], 16))
        return _STR_ESC_MAP.get(e, e)

    return _STR_ESC.sub(rep, s)


def _atom(tok: str) -> Any:
    if tok == "nil":
        return None
    if tok == "true":
        return True
    if tok == "false":
        return False
    if tok[0] == ":":
        return tok[1:]
    c = tok[0]
    if c.isdigit() or (c in "+-" and len(tok) > 1 and tok[1].isdigit()):
        if _INT.match(tok):
            return int(tok.rstrip("N"))
        if _FLOAT.match(tok):
            x = float(tok.rstrip("M"))
            if not math.isfinite(x):
                raise ValueError(f"{tok} overflows a double")
            return x
        if _RATIO.match(tok):
            n, d = (int(x) for x in tok.split("/"))
            if d == 0:
                raise ValueError(f"ratio {tok!r} divides by zero")
            try:
                return n / d
            except OverflowError:
                raise ValueError(f"ratio {tok!r} is too large") from None
        raise ValueError(f"bad number {tok!r}")
    if tok in ("##Inf", "##-Inf", "##NaN"):
        raise ValueError(f"{tok} is not a number a history may hold")
    return tok  # a symbol: keep its name


def loads(text: str, where: str = "<string>", positions: list[list[int]] | None = None) -> list[Any]:
    """Parse every top-level form in ``text``; errors name ``where:line``.
    If ``positions`` is a list, it receives two lists: the character offsets
    of the top-level forms and of the elements of top-level collections."""

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def fail(pos: int, msg: str) -> HistoryError:
        return HistoryError(f"{where}:{line_of(pos)}: {msg}")

    top: list[Any] = []
    pos0: list[int] = []
    pos1: list[int] = []
    if positions is not None:
        positions[:] = [pos0, pos1]
    # stack entries: (opener, items list, start pos)
    stack: list[tuple[str, list[Any], int]] = []
    pending_discard: list[int] = []  # stack depths at which a #_ awaits a form
    pending_tag = 0
    cur = top
    pos = 0
    n = len(text)
    finditer = _TOKEN.finditer(text)
    for m in finditer:
        if m.start() != pos:
            raise fail(pos, f"unexpected character {text[pos]!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind == "ws":
            continue
        if kind == "open":
            stack.append((m.group(), cur, m.start()))
            cur = []
            continue
        if kind == "discard":
            pending_discard.append(len(stack))
            continue
        if kind == "tag":
            if m.group() in ("##Inf", "##-Inf", "##NaN"):
                raise fail(m.start(), f"{m.group()} is not a number a history may hold")
            pending_tag += 1
            continue
        val: Any
        if kind == "close":
            if not stack:
                raise fail(m.start(), f"unbalanced {m.group()!r}")
            opener, parent, start = stack.pop()
            if _CLOSER[opener] != m.group():
                raise fail(m.start(), f"{m.group()!r} closes {opener!r} opened on line {line_of(start)}")
            items = cur
            cur = parent
            val = _map(items, lambda msg: fail(start, msg)) if opener == "{" else items
        else:
            try:
                val = _scalar(kind, m.group())
            except ValueError as e:
                raise fail(m.start(), str(e)) from None
        if pending_discard and pending_discard[-1] == len(stack):
            pending_discard.pop()
            continue
        depth = len(stack)
        if depth < 2:
            (pos0 if depth == 0 else pos1).append(start if kind == "close" else m.start())
        cur.append(val)
    if pos != n:
        raise fail(pos, f"unexpected character {text[pos]!r}")
    if stack:
        opener, _, start = stack[-1]
        raise fail(start, f"{opener!r} is never closed (file truncated?)")
    return top


def _map(items: list[Any], fail: Any) -> dict[Any, Any]:
    """A map literal's forms as a dict; ``fail(msg)`` makes its error."""
    if len(items) % 2:
        raise fail("map literal with an odd number of forms")
    try:
        return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}
    except TypeError:
        raise fail("unhashable map key") from None


def _scalar(kind: str | None, tok: str) -> Any:
    """A string, character or atom token's value (ValueError: a bad atom)."""
    if kind == "str":
        return _unescape(tok[1:-1])
    if kind == "char":
        c = tok[1:]
        return _CHARS.get(c, chr(int(c[1:], 16)) if len(c) == 5 and c[0] == "u" else c)
    return _atom(tok)


def _hashable(k: Any) -> Any:
    if isinstance(k, list):
        return tuple(_hashable(x) for x in k)
    return k


def read_edn(path: str | os.PathLike[str]) -> list[Op]:
    """Read a Jepsen/Knossos EDN history: one vector or list of op maps (or
    the maps at top level). Missing ``:index`` is filled in by position."""
    data = read_regular(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HistoryError(f"{Path(path)}:1: not UTF-8 text ({e.reason})") from None
    fast = _read_flat(text)
    if fast is not None:
        return fast
    p = Path(path)
    positions: list[list[int]] = []
    forms = loads(text, str(p), positions)
    if len(forms) == 1 and isinstance(forms[0], list):
        maps = forms[0]
        where = positions[1]
    else:
        maps = forms
        where = positions[0]

    def _line_of_form(_text: str, i: int) -> int:
        return text.count("\n", 0, where[i]) + 1 if i < len(where) else 1
    ops: list[Op] = []
    for i, d in enumerate(maps):
        if not isinstance(d, dict):
            raise HistoryError(f"{p}:{_line_of_form(text, i)}: expected an operation map, got {type(d).__name__}")
        try:
            op = Op.from_dict({str(k): v for k, v in d.items()})
        except HistoryError as e:
            msg = str(e).lstrip(": ")
            raise HistoryError(f"{p}:{_line_of_form(text, i)}: {msg}") from None
        if op.index < 0:
            op.index = i
        ops.append(op)
    return ops


def _read_flat(text: str) -> list[Op] | None:
    """The common one-map-per-line layout read without the tokenizer
    (:func:`checkers.history.flat.read_flat`), or None: the full reader
    reads the file (and words any error), so both give the same ops."""
    # the harness imports this package before the accelerator's loader, and a
    # compiled module imported before the loader leaves the whole build unused
    from .flat import read_flat  # late: compiled (reference_impl.accel), loaded after the accelerator's loader

    return read_flat(text)


_KEYWORD = re.compile(r"^[A-Za-z*!_?<>=][A-Za-z0-9*+!_?<>=.\-]*(/[A-Za-z0-9*+!_?<>=.\-]+)?$")
_RESERVED = {"nil", "true", "false"}


def _kw_ok(s: str) -> bool:
    return bool(_KEYWORD.match(s))


def dumps(v: Any) -> str:
    """One Python value as EDN (see the module docstring for the mapping)."""
    if v is None:
        return "nil"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v:
            return "##NaN"
        if v in (float("inf"), float("-inf")):
            return "##Inf" if v > 0 else "##-Inf"
        return repr(v)
    if isinstance(v, str):
        if _kw_ok(v):
            return ":" + v
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r") + '"'
    if isinstance(v, dict):
        return "{" + ", ".join(f"{dumps(k)} {dumps(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(dumps(x) for x in v) + "]"
    if isinstance(v, (set, frozenset)):
        return "#{" + " ".join(dumps(x) for x in v) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as EDN")


def write_edn(path: str | os.PathLike[str], ops: Iterable[Op]) -> None:
    """Write a history as one EDN vector, one op map per line (Jepsen's
    ``history.edn`` layout)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("[")
        first = True
        for op in ops:
            if not first:
                f.write("\n ")
            first = False
            f.write(dumps(op.to_dict()))
        f.write("]\n")
