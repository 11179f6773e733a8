"""How both runtimes spell a node's trace events in ``trace.jsonl``.

The simulator and the real node process write the same events (the core's
``TraceEvent``s plus the runtime's stamps), and the invariant monitor reads
them back from either (``checkers.invariants.iter_trace_dir``), so there is
one encoder. It is on the hot path — a simulated seed writes ~160k events —
so it is orjson, falling back to :mod:`json` (and to ``repr`` for anything
JSON cannot hold) so that writing a trace line never raises.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping

import orjson

from reference_impl.core.messages import TopicPartition

_OPTS = orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATACLASS


def _default(v: Any) -> Any:
    """Values orjson does not write itself: a partition as ``topic-N`` (as
    the core's own events spell it), sets sorted (so a replay writes the same
    bytes), other dataclasses as their fields, bytes as hex."""
    if isinstance(v, TopicPartition):
        return str(v)
    if isinstance(v, (set, frozenset)):
        try:
            return sorted(v)
        except TypeError:
            return list(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
    if isinstance(v, bytes):
        return v.hex()
    raise TypeError(type(v).__name__)


def _fallback(v: Any) -> Any:
    try:
        return _default(v)
    except TypeError:
        return repr(v)


_JSON = json.JSONEncoder(separators=(",", ":"), default=_fallback)


def encode_trace_line(rec: Mapping[str, Any]) -> bytes:
    """One ``trace.jsonl`` line, newline included. Never raises: what orjson
    refuses (an integer beyond 64 bits, an unknown type) goes through
    :mod:`json`, whose last resort is the value's ``repr``."""
    try:
        return orjson.dumps(rec, default=_default, option=_OPTS)
    except TypeError:  # orjson.JSONEncodeError
        return (_JSON.encode(dict(rec)) + "\n").encode()


def stamp(rec: dict[str, Any], data: Mapping[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    """Add an event's data to the runtime's stamps (time, node, kind, ...).

    A data key that collides with a stamp — an election event's own ``kind``
    (clean/elr/unclean) — becomes ``data_<key>`` instead of replacing it."""
    if reserved.isdisjoint(data):
        rec.update(data)
    else:
        for k, v in data.items():
            rec[f"data_{k}" if k in reserved else k] = v
    return rec
