"""The EDN reader's fast path: the common layout, one op map per line.

Jepsen's ``history.edn`` and Porcupine's kv logs write one flat map per
line (``{:process 0, :type :invoke, :f :get, :key "7", :value nil}``), in
an optional vector. :func:`read_flat` reads such a file line by line
without the tokenizer, straight into :class:`~.op.Op` objects, and returns
None on anything else, so that :func:`checkers.history.edn.read_edn` hands
the file to the full reader, which reads the same ops or words the error.

A module of its own so that ``reference_impl.accel`` can compile it (a
short history's read is mostly this loop: Porcupine's smallest kv log,
76 lines, spends about as long here as in the whole linearizability
check). :mod:`checkers.history` must not import it when it is imported
(the harness imports that package before the accelerator's loader, and a
compiled module imported first leaves the whole build unused), so
:mod:`.edn` imports it where it is called.
"""

from __future__ import annotations

import re
from typing import Any

from .op import Op

__all__ = ["read_flat"]

#: a keyword name or a decimal integer (of up to 18 digits) the flat reader takes
#: as is; anything else sends the file to the full reader
_FLAT_NAME = re.compile(r"[A-Za-z*!_?<>=][\w*+!_?<>=.\-]*")
_FLAT_INT = re.compile(r"-?[0-9]{1,18}")  # longer: the full reader words the error
_FLAT_CONST: dict[str, Any] = {"nil": None, "true": True, "false": False}
_OP_TYPES = frozenset(("invoke", "ok", "fail", "info"))


def read_flat(text: str) -> list[Op] | None:
    """The ops of ``text`` if every line is of the flat layout: one map per
    line (``{:k v, :k v}``), in an optional vector, ``;`` comment lines,
    values that are keywords, strings without quotes or backslashes,
    decimal integers, nil, true or false, and ops with ``:type``/``:f`` and
    integer ``:time``/``:index`` when present; else None. Fields repeat
    from line to line (``type :invoke``), so each distinct one is read
    once (``seen``)."""
    ops: list[Op] = []
    seen: dict[str, tuple[str, Any]] = {}
    opened = closed = False
    for raw in text.split("\n"):
        if raw[:2] == "{:" and raw[-1:] == "}" and not closed:
            line = raw  # the common line, already bare
        else:
            line = raw.strip()
            if not line or line[0] == ";":
                continue
            if closed:
                return None
            if not ops and not opened and line[0] == "[":
                opened = True
                line = line[1:].lstrip()
                if not line:
                    continue
            if opened and line[-1] == "]":
                closed = True
                line = line[:-1].rstrip()
                if not line:
                    continue
            if line[:2] != "{:" or line[-1] != "}":
                return None
        op = _flat_op(line, seen, len(ops))
        if op is None:
            return None
        ops.append(op)
    return ops if ops and opened == closed else None


def _flat_op(line: str, seen: dict[str, tuple[str, Any]], pos: int) -> Op | None:
    """One ``{:k v, ...}`` line as the full reader plus ``Op.from_dict``
    would make it (a repeated key: the last value, in the first one's
    place), or None when the line is not of the flat shape."""
    t: Any = None
    f: Any = None
    value: Any = None
    process: Any = 0
    time: Any = 0
    index: Any = -1
    error: Any = None
    extra: dict[str, Any] = {}
    for field in line[2:-1].split(", :"):
        kx = seen.get(field)
        if kx is None:
            new = _flat_field(field)
            if new is None:
                return None
            kx = seen[field] = new
        k, v = kx
        if k == "type":
            t = v
        elif k == "f":
            f = v
        elif k == "value":
            value = v
        elif k == "process":
            process = v
        elif k == "time":
            time = v
        elif k == "index":
            index = v
        elif k == "error":
            error = v
        else:
            extra[k] = v
    if t not in _OP_TYPES or type(f) is not str or type(time) is not int or type(index) is not int:
        return None
    return Op(t, f, value, process, time, index if index >= 0 else pos, error, extra)


def _flat_field(field: str) -> tuple[str, Any] | None:
    """``k v`` (a map entry without its colon) as (name, value), or None."""
    k, _, v = field.partition(" ")
    if not v or _FLAT_NAME.fullmatch(k) is None:
        return None
    c = v[0]
    if c == '"':
        if len(v) < 2 or v[-1] != '"' or '"' in v[1:-1] or "\\" in v:
            return None
        return k, v[1:-1]
    if c == ":":
        return (k, v[1:]) if _FLAT_NAME.fullmatch(v, 1) else None
    if v in _FLAT_CONST:
        return k, _FLAT_CONST[v]
    if _FLAT_INT.fullmatch(v):
        return k, int(v)
    return None
