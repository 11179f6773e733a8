"""One pass over a queue history that keeps no operation.

Everything the queue verdict needs from the whole history is a fold over
the operations in order: the per-key projection (into columns,
:mod:`checkers.queue.columns`), the operation counts, the final reads'
coverage and Jepsen's side outputs (realtime lag, consume counts, info
causes). :class:`QueueScan` feeds each operation to all of them, so a
history read from a file (:func:`scan_jsonl`) is parsed line by line and
each line's operation dropped at once: a 1M-operation history is checked in
a few hundred megabytes rather than the gigabytes its objects would take,
with the same results as checking the list of operations
(``check_history`` accepts either).
"""

from __future__ import annotations

import gc
import os
from typing import Any, Iterable

from checkers.final_reads import FinalReads
from checkers.history.op import HistoryError, Op

from .observe import ConsumeCounts, InfoTxnCauses, RealtimeLag
from .processing import Processing
from .project import Projection, Projector


class OpStats:
    """Operations by type and by function, and the history's duration."""

    def __init__(self) -> None:
        self.n = 0
        self.by_type: dict[str, int] = {}
        self.by_f: dict[str, dict[str, int]] = {}
        self.t_min: int | None = None
        self.t_max: int | None = None

    def feed(self, op: Op) -> None:
        self.n += 1
        t = op.type
        self.by_type[t] = self.by_type.get(t, 0) + 1
        if t != "invoke":
            d = self.by_f.get(op.f)
            if d is None:
                d = self.by_f[op.f] = {}
            d[t] = d.get(t, 0) + 1
        tm = op.time
        if self.t_min is None or tm < self.t_min:
            self.t_min = tm
        if self.t_max is None or tm > self.t_max:
            self.t_max = tm

    def result(self) -> dict[str, Any]:
        span = (self.t_max - self.t_min) / 1e9 if self.n else 0.0  # type: ignore[operator]
        return {"ops": self.n, "by_type": self.by_type, "by_f": self.by_f, "duration_s": span}


def op_stats(ops: Iterable[Op]) -> dict[str, Any]:
    s = OpStats()
    for op in ops:
        s.feed(op)
    return s.result()


class MalformedOp(HistoryError):
    """An operation that was read but whose value the checker cannot use
    (raised while scanning, where checking a list raises it from
    ``check_history``)."""


class QueueScan:
    """Every fold the queue checker needs, fed one operation at a time;
    :meth:`finish` once the history has ended."""

    def __init__(self) -> None:
        self.projector = Projector()
        self.stats = OpStats()
        self.finals = FinalReads()
        self.lag = RealtimeLag()
        self.consume = ConsumeCounts()
        self.causes = InfoTxnCauses()
        self.processing = Processing()
        self._feeds = (self.projector.feed, self.stats.feed, self.finals.feed, self.lag.feed,
                       self.consume.feed, self.causes.feed, self.processing.feed)
        self.projection: Projection | None = None

    def feed(self, op: Op) -> None:
        for feed in self._feeds:
            feed(op)

    def finish(self) -> "QueueScan":
        if self.projection is None:
            self.projection = self.projector.finish()
        return self

    @classmethod
    def of(cls, ops: Iterable[Op]) -> "QueueScan":
        """Scan a history: a list of operations, or any iterable of them."""
        scan = cls()
        feeds = scan._feeds
        was = gc.isenabled()
        gc.disable()  # acyclic, short-lived objects: no collector passes
        try:
            for op in ops:
                try:
                    for feed in feeds:
                        feed(op)
                except HistoryError as e:
                    raise MalformedOp(str(e)) from None
        finally:
            if was:
                gc.enable()
        return scan.finish()


def scan_jsonl(path: str | os.PathLike[str], warnings: list[str] | None = None) -> QueueScan:
    """Scan a JSONL history line by line (the errors and warnings of
    :func:`checkers.history.jsonl.read_jsonl`, word for word)."""
    from checkers.history.jsonl import iter_jsonl

    return QueueScan.of(iter_jsonl(path, warnings, number=True))
