"""What Jepsen's Kafka checker reports beside the anomalies: how far behind
consumers read (realtime lag), how often a subscribed consumer got a record
(consume counts), and why operations ended indefinite (info-txn causes).

They read the whole history in order, not one key, so they run on the driver
next to the cycle search; none of them changes the verdict. Each is a fold
fed one operation at a time, so a history read from a file is observed in
the same pass that projects it, never held whole.

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
from operator import itemgetter
from typing import Any, Iterable

from checkers.history.op import Op
from checkers.queue.columns import Col
from checkers.queue.records import BULK_RECORDS, max_offset_i64

QUEUE_FS = ("send", "poll", "txn")
_PAIR_TYPES = frozenset((list, tuple))
_INT = frozenset((int,))
_FIRST = itemgetter(0)


def _offsets(pairs: Any) -> list[Any]:
    """The int offsets of a poll's pairs (list or tuple pairs whose first
    element is an int; others are skipped). A list of non-empty lists of
    plain ints, as every history spells a poll, is taken in C (``map``);
    anything else pair by pair."""
    if type(pairs) is list and _PAIR_TYPES.issuperset(map(type, pairs)) and all(pairs):
        offs = list(map(_FIRST, pairs))
        if _INT.issuperset(map(type, offs)):
            return offs
    return [p[0] for p in pairs or () if isinstance(p, (list, tuple)) and p and isinstance(p[0], int)]


def max_offsets(value: Any) -> dict[str, int]:
    """Highest offset per key that an operation's micro-ops sent or polled."""
    out: dict[str, int] = {}
    for mop in value if isinstance(value, list) else ():
        if not isinstance(mop, list) or not mop:
            continue
        if mop[0] == "poll" and len(mop) > 1 and isinstance(mop[1], dict):
            for k, pairs in mop[1].items():
                # a long list of plain records in one compiled pass (a final
                # read returns every record of its key), else as _offsets reads it
                hi = max_offset_i64(pairs) if type(pairs) is list and len(pairs) >= BULK_RECORDS else None
                if hi is not None:
                    k = str(k)
                    out[k] = max(out.get(k, -1), hi)
                    continue
                offs = _offsets(pairs)
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


class _Completions:
    """Client completions in history order with their invocation's time."""

    def __init__(self) -> None:
        self.invoked: dict[Any, int] = {}

    def of(self, op: Op) -> int | None:
        """The invocation time of completion ``op`` (None for invocations
        and nemesis operations, which are no completions)."""
        if op.process == "nemesis":
            return None
        if op.type == "invoke":
            self.invoked[op.process] = op.time
            return None
        return self.invoked.pop(op.process, op.time)


class RealtimeLag:
    """Fed every operation in history order (:meth:`feed`), keeps the poll
    with the highest realtime lag (:meth:`result`), as defined above."""

    def __init__(self) -> None:
        self.completions = _Completions()
        self.expired: dict[str, Col] = {}      # key -> [time offset i was known to exist]
        self.positions: dict[Any, dict[str, int]] = {}
        self.worst: dict[str, Any] | None = None

    def feed(self, op: Op) -> None:
        t_inv = self.completions.of(op)
        if t_inv is None or op.type not in ("ok", "info"):
            return
        expired = self.expired
        offsets = max_offsets(op.value) if op.f in QUEUE_FS else {}
        for k, o in offsets.items():
            exp = expired.get(k)
            if exp is None:
                exp = expired[k] = Col()
            if len(exp) <= o:
                exp.fill(o + 1 - len(exp), op.time)
        if op.type != "ok":
            return
        positions = self.positions
        if op.f == "assign":
            keys = [str(k) for k in op.value or ()]
            old = positions.get(op.process, {})
            positions[op.process] = {k: old.get(k, -1) for k in keys}
        elif op.f == "subscribe":
            positions[op.process] = {}
        elif op.f in ("poll", "txn"):
            pos = positions.setdefault(op.process, {})
            for k, o in offsets.items():
                pos[k] = max(pos.get(k, -1), o)
            for k, o in pos.items():
                exp = expired.get(k, ())
                since = exp[o + 1] if o + 1 < len(exp) else None
                lag = max(0, t_inv - since) if since is not None else 0
                if self.worst is None or lag > self.worst["lag"]:
                    self.worst = {"time": t_inv, "process": op.process, "key": k, "lag": lag}

    def result(self) -> dict[str, Any]:
        """The worst poll, times in seconds."""
        worst = self.worst
        if worst is None:
            return {"time": 0.0, "lag": 0.0}
        return {**worst, "time": worst["time"] / 1e9, "lag": worst["lag"] / 1e9}


def worst_realtime_lag(ops: Iterable[Op]) -> dict[str, Any]:
    """The poll with the highest realtime lag, times in seconds."""
    return _fold(RealtimeLag(), ops)


class ConsumeCounts:
    """Times each subscribed consumer got each value (see the module doc),
    fed every operation in history order."""

    def __init__(self) -> None:
        self.completions = _Completions()
        self.subscribed: set[Any] = set()
        self.counts: dict[tuple[Any, str, Any], int] = {}

    def feed(self, op: Op) -> None:
        if self.completions.of(op) is None or op.type != "ok":
            return
        if op.f == "subscribe":
            self.subscribed.add(op.process)
        elif op.f in ("poll", "txn") and op.process in self.subscribed:
            counts = self.counts
            for k, v in _reads(op.value):
                counts[(op.process, k, v)] = counts.get((op.process, k, v), 0) + 1

    def result(self) -> dict[str, Any]:
        dist: dict[int, int] = {}
        dups: dict[str, dict[str, int]] = {}
        for (_p, k, v), n in self.counts.items():
            dist[n] = dist.get(n, 0) + 1
            if n > 1:
                dups.setdefault(k, {})[str(v)] = n
        return {"distribution": dict(sorted(dist.items())), "dup_counts": dict(sorted(dups.items()))}


def consume_counts(ops: Iterable[Op]) -> dict[str, Any]:
    """Times each subscribed consumer got each value (see the module doc)."""
    return _fold(ConsumeCounts(), ops)


class InfoTxnCauses:
    """Distinct errors of ``info`` send/poll/txn completions, first seen first."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.out: list[Any] = []

    def feed(self, op: Op) -> None:
        if op.type == "info" and op.f in QUEUE_FS and op.process != "nemesis":
            sig = json.dumps(op.error, sort_keys=True, default=str)
            if sig not in self.seen:
                self.seen.add(sig)
                self.out.append(op.error)

    def result(self) -> list[Any]:
        return self.out


def info_txn_causes(ops: Iterable[Op]) -> list[Any]:
    """Distinct errors of ``info`` send/poll/txn completions, first seen first."""
    return _fold(InfoTxnCauses(), ops)


def _fold(fold: Any, ops: Iterable[Op]) -> Any:
    for op in ops:
        fold.feed(op)
    return fold.result()
