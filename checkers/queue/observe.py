"""What Jepsen's Kafka checker reports beside the anomalies: how far behind
consumers read (realtime lag), how often a subscribed consumer got a record
(consume counts), and why operations ended indefinite (info-txn causes).

They read the whole history in order, not one key, so they run on the driver
next to the cycle search; none of them changes the verdict.

* **Realtime lag** of a key in an ``ok`` poll: a lower bound on how long the
  highest offset the process had read of that key had already stopped being
  the log's last record when the poll was invoked. Offset ``o + 1`` is known
  to exist from the completion of the first ``ok``/``info`` operation that
  sent or polled an offset ``>= o + 1``; a process's read position is the
  highest offset it polled or sent there, reset to -1 by an ``assign`` that
  (re)names the key and forgotten by a ``subscribe``.
* **Consume counts**: for processes that subscribed (an ``ok`` subscribe),
  how many times each ``ok`` poll returned each value: ``distribution``
  (times -> how many (process, key, value) had it) and ``dup_counts`` (key
  -> value -> times, for values a consumer got more than once).
* **info-txn causes**: the distinct ``error`` of ``info`` send/poll/txn
  completions.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

from checkers.history.op import Op

QUEUE_FS = ("send", "poll", "txn")


def max_offsets(value: Any) -> dict[str, int]:
    """Highest offset per key that an operation's micro-ops sent or polled."""
    out: dict[str, int] = {}
    for mop in value if isinstance(value, list) else ():
        if not isinstance(mop, list) or not mop:
            continue
        if mop[0] == "poll" and len(mop) > 1 and isinstance(mop[1], dict):
            for k, pairs in mop[1].items():
                offs = [p[0] for p in pairs or () if isinstance(p, (list, tuple)) and p and
                        isinstance(p[0], int)]
                if offs:
                    k = str(k)
                    out[k] = max(out.get(k, -1), max(offs))
        elif mop[0] == "send" and len(mop) > 2 and isinstance(mop[2], (list, tuple)) and \
                len(mop[2]) == 2 and isinstance(mop[2][0], int):
            k = str(mop[1])
            out[k] = max(out.get(k, -1), mop[2][0])
    return out


def _reads(value: Any) -> Iterable[tuple[str, Any]]:
    for mop in value if isinstance(value, list) else ():
        if isinstance(mop, list) and len(mop) > 1 and mop[0] == "poll" and isinstance(mop[1], dict):
            for k, pairs in mop[1].items():
                for p in pairs or ():
                    if isinstance(p, (list, tuple)) and len(p) == 2:
                        yield str(k), p[1]


def _completions(ops: Iterable[Op]) -> Iterable[tuple[Op, int]]:
    """Client completions in history order with their invocation's time."""
    invoked: dict[Any, int] = {}
    for op in ops:
        if op.process == "nemesis":
            continue
        if op.type == "invoke":
            invoked[op.process] = op.time
        else:
            yield op, invoked.pop(op.process, op.time)


def realtime_lags(ops: list[Op]) -> Iterator[dict[str, Any]]:
    """One ``{time, process, key, lag}`` (nanoseconds) per key of each ``ok``
    poll/txn, as defined above."""
    expired: dict[str, list[int]] = {}     # key -> [time offset i was known to exist]
    positions: dict[Any, dict[str, int]] = {}
    for op, t_inv in _completions(ops):
        if op.type not in ("ok", "info"):
            continue
        if op.f in QUEUE_FS:
            for k, o in max_offsets(op.value).items():
                exp = expired.setdefault(k, [])
                while len(exp) <= o:
                    exp.append(op.time)
        if op.type != "ok":
            continue
        if op.f == "assign":
            keys = [str(k) for k in op.value or ()]
            old = positions.get(op.process, {})
            positions[op.process] = {k: old.get(k, -1) for k in keys}
        elif op.f == "subscribe":
            positions[op.process] = {}
        elif op.f in ("poll", "txn"):
            pos = positions.setdefault(op.process, {})
            for k, o in max_offsets(op.value).items():
                pos[k] = max(pos.get(k, -1), o)
            for k, o in pos.items():
                exp = expired.get(k, ())
                since = exp[o + 1] if o + 1 < len(exp) else None
                lag = max(0, t_inv - since) if since is not None else 0
                yield {"time": t_inv, "process": op.process, "key": k, "lag": lag}


def worst_realtime_lag(ops: list[Op]) -> dict[str, Any]:
    """The poll with the highest realtime lag, times in seconds."""
    worst = max(realtime_lags(ops), key=lambda x: x["lag"], default=None)
    if worst is None:
        return {"time": 0.0, "lag": 0.0}
    return {**worst, "time": worst["time"] / 1e9, "lag": worst["lag"] / 1e9}


def consume_counts(ops: list[Op]) -> dict[str, Any]:
    """Times each subscribed consumer got each value (see the module doc)."""
    subscribed: set[Any] = set()
    counts: dict[tuple[Any, str, Any], int] = {}
    for op, _t in _completions(ops):
        if op.type != "ok":
            continue
        if op.f == "subscribe":
            subscribed.add(op.process)
        elif op.f in ("poll", "txn") and op.process in subscribed:
            for k, v in _reads(op.value):
                counts[(op.process, k, v)] = counts.get((op.process, k, v), 0) + 1
    dist: dict[int, int] = {}
    dups: dict[str, dict[str, int]] = {}
    for (_p, k, v), n in counts.items():
        dist[n] = dist.get(n, 0) + 1
        if n > 1:
            dups.setdefault(k, {})[str(v)] = n
    return {"distribution": dict(sorted(dist.items())), "dup_counts": dict(sorted(dups.items()))}


def info_txn_causes(ops: list[Op]) -> list[Any]:
    """Distinct errors of ``info`` send/poll/txn completions, first seen first."""
    seen: set[str] = set()
    out: list[Any] = []
    for op in ops:
        if op.type == "info" and op.f in QUEUE_FS and op.process != "nemesis":
            sig = json.dumps(op.error, sort_keys=True, default=str)
            if sig not in seen:
                seen.add(sig)
                out.append(op.error)
    return out
