"""The history recorder: every invocation and completion, in the order the
interpreter saw them, streamed to ``history.jsonl`` as it happens.

Streaming (flush per line, fsync every N lines via :class:`JsonlWriter`) means a
harness killed mid-run still leaves a checkable history — the last line may be
torn, which the reader tolerates. Index and time are assigned here, under one
lock, so the file order *is* the history order.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from checkers.history.jsonl import JsonlWriter
from checkers.history.op import Op

_CORE = ("type", "f", "value", "process", "error")


class Recorder:
    """Thread-safe history sink with live counters for the progress display."""

    def __init__(self, path: Path | None, fsync_every: int = 200, keep: bool = False) -> None:
        self._lock = threading.Lock()
        self._writer = JsonlWriter(path, fsync_every=fsync_every) if path is not None else None
        self._t0 = time.monotonic_ns()
        self._index = 0
        self.counts: Counter[str] = Counter()  # ok/fail/info of client completions
        self.active_faults: dict[str, Any] = {}
        self.ops: list[Op] | None = [] if keep else None
        self.closed = False

    def restart_clock(self) -> None:
        """Make time 0 the moment the generator starts (not the cluster's
        start-up), as long as nothing has been recorded yet."""
        with self._lock:
            if self._index == 0:
                self._t0 = time.monotonic_ns()

    @property
    def t0(self) -> int:
        return self._t0

    def now(self) -> int:
        """Nanoseconds since the test began (the history's clock)."""
        return time.monotonic_ns() - self._t0

    def record(self, d: dict[str, Any]) -> Op:
        extra = {k: v for k, v in d.items() if k not in _CORE and k not in ("time", "index") and not k.startswith("_")}
        with self._lock:
            op = Op(
                type=d["type"],
                f=d["f"],
                value=d.get("value"),
                process=d["process"],
                time=self.now(),
                index=self._index,
                error=d.get("error"),
                extra=extra,
            )
            self._index += 1
            if self._writer is not None and not self.closed:
                self._writer.write(op)
            if self.ops is not None:
                self.ops.append(op)
            if op.process == "nemesis":
                if op.type == "info" and d.get("_completion"):
                    self._track_fault(op)
            elif op.type != "invoke":
                self.counts[op.type] += 1
                if not d.get("final") and op.f in ("send", "poll"):
                    self.counts[f"main-{op.type}"] += 1  # the workload proper, for throughput
        return op

    def _track_fault(self, op: Op) -> None:
        f = op.f
        if f.startswith("start-"):
            self.active_faults[f[len("start-"):]] = op.value
        elif f.startswith("stop-"):
            self.active_faults.pop(f[len("stop-"):], None)

    @property
    def size(self) -> int:
        return self._index

    def close(self) -> None:
        with self._lock:
            if self._writer is not None and not self.closed:
                self._writer.close()
            self.closed = True
