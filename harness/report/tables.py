"""Nested results (statistics, checker outputs, configuration) as rows a
person reads: nested maps become dotted names (``messages.sent``), short
lists of plain values are joined, long ones say how long they are and show
their start, and a table too long to read is cut with a note of how much
was left out (the whole object stays in results.json, linked)."""

from __future__ import annotations

import json
from typing import Any

MAX_ROWS = 80
MAX_DEPTH = 4
MAX_LIST = 12
MAX_CHARS = 300


def _scalar(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}"
    s = str(v)
    return s if len(s) <= MAX_CHARS else s[:MAX_CHARS] + " …"


def _plain(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _value(v: Any) -> str:
    if _plain(v):
        return _scalar(v)
    if isinstance(v, list):
        if not v:
            return "none"
        if all(_plain(x) for x in v):
            shown = ", ".join(_scalar(x) for x in v[:MAX_LIST])
            return shown + (f" … ({len(v)} in all)" if len(v) > MAX_LIST else "")
        if all(isinstance(x, list) and all(_plain(y) for y in x) for x in v):
            shown = "; ".join("(" + ", ".join(_scalar(y) for y in x) + ")" for x in v[:MAX_LIST])
            return shown + (f" … ({len(v)} in all)" if len(v) > MAX_LIST else "")
        return f"{len(v)} entries: " + _scalar(json.dumps(v[:3], default=str, sort_keys=True)) + (" …" if len(v) > 3 else "")
    if isinstance(v, dict) and not v:
        return "none"
    return _scalar(json.dumps(v, default=str, sort_keys=True))


def rows(obj: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, str]]:
    """(name, value) rows of a nested object, every value a plain string."""
    if not isinstance(obj, dict):
        return [(prefix or "value", _value(obj))]
    out: list[tuple[str, str]] = []
    for k, v in obj.items():
        name = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v and depth < MAX_DEPTH:
            out.extend(rows(v, name, depth + 1))
        else:
            out.append((name, _value(v)))
    return out


def table(obj: Any, limit: int = MAX_ROWS) -> dict[str, Any]:
    """A table for the template: its rows (cut at ``limit``) and how many
    more there were."""
    rs = rows(obj)
    return {"rows": rs[:limit], "more": max(0, len(rs) - limit)}
