"""The history recorder: every invocation and completion, in the order the
interpreter saw them, streamed to ``history.jsonl`` while the test runs.

Index and time are assigned under one lock, so the file order *is* the
history order. Serialising and writing happen on a background writer thread
(the interpreter only appends to a list), which drains every 20 ms through
:class:`JsonlWriter` — each line flushed to the OS, so a SIGKILLed harness
loses at most the last ~20 ms of operations — and fsyncs once a second, so a
machine crash loses at most a second. Recording in the interpreter's own
thread cost it about half its throughput (bench/harness_overhead.py).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from checkers.history.jsonl import JsonlWriter, encode_fields, encode_line, recording_marker
from checkers.history.op import Op


class HistoryWriter(JsonlWriter):
    """JsonlWriter with a batch write: one flush per drained batch instead of
    one per line (the writer thread drains every 20 ms, so what a SIGKILL can
    lose is bounded by the drain interval either way)."""

    def write_many(self, ops: list[Op]) -> None:
        self.write_lines([encode_line(op) for op in ops])

    def write_lines(self, lines: list[str]) -> None:
        if lines:
            self._f.write("".join(lines))
            self._f.flush()


_SKIP = frozenset(("type", "f", "value", "process", "error", "time", "index"))
DRAIN_S = 0.02
FSYNC_S = 1.0


class Recorder:
    """Thread-safe history sink with live counters for the progress display."""

    def __init__(self, path: Path | None, fsync_every: int = 200, keep: bool = False) -> None:
        self._lock = threading.Lock()
        self._wlock = threading.Lock()  # one drainer at a time keeps file order
        self._t0 = time.monotonic_ns()
        self._index = 0
        self._pending: list[tuple[dict[str, Any], int, int]] = []
        self.counts: Counter[str] = Counter()  # ok/fail/info of client completions
        self.active_faults: dict[str, Any] = {}
        self.ops: list[Op] | None = [] if keep else None
        self.closed = False
        self.path = path
        self._writer: HistoryWriter | None = None
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        if path is not None:
            # removed by close(): a history left with it is partial (a killed harness)
            recording_marker(path).touch()
            # fsync is done by time on the writer thread, not by JsonlWriter's count
            self._writer = HistoryWriter(path, fsync_every=1 << 62)
            self._thread = threading.Thread(target=self._drain_loop, name="history-writer", daemon=True)
            self._thread.start()

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

    def record(self, d: dict[str, Any]) -> int:
        """Record one operation (a dict with type, f, value, process, error and
        any extra keys; keys starting with ``_`` are not recorded). Returns its
        index."""
        with self._lock:
            idx = self._index
            self._index += 1
            self._pending.append((dict(d), idx, time.monotonic_ns() - self._t0))
        if d["process"] == "nemesis":
            if d.get("_completion"):
                self._track_fault(d)
        elif d["type"] != "invoke":
            t = d["type"]
            self.counts[t] += 1
            if not d.get("final") and d["f"] in ("send", "poll"):
                self.counts[f"main-{t}"] += 1  # the workload proper, for throughput
        if self._writer is None:
            self._flush_pending()
        return idx

    @staticmethod
    def _op(d: dict[str, Any], idx: int, t: int) -> Op:
        return Op(
            type=d["type"],
            f=d["f"],
            value=d.get("value"),
            process=d["process"],
            time=t,
            index=idx,
            error=d.get("error"),
            extra={k: v for k, v in d.items() if k not in _SKIP and k[0] != "_"},
        )

    @staticmethod
    def _line(d: dict[str, Any], idx: int, t: int) -> str:
        """The JSONL line of ``_op(d, idx, t).to_dict()``, byte for byte, without
        building the Op: recording is on the interpreter's critical path
        (bench/harness_overhead.py)."""
        out: dict[str, Any] = {"index": idx, "time": t, "process": d["process"], "type": d["type"],
                               "f": d["f"], "value": d.get("value")}
        err = d.get("error")
        if err is not None:
            out["error"] = err
        for k, v in d.items():
            if k not in _SKIP and k[0] != "_":
                out[k] = v
        return encode_fields(out)

    def _flush_pending(self) -> None:
        with self._wlock:
            with self._lock:
                batch, self._pending = self._pending, []
            if self.ops is not None:
                ops = [self._op(d, idx, t) for d, idx, t in batch]
                self.ops.extend(ops)
                if self._writer is not None:
                    self._writer.write_many(ops)
            elif self._writer is not None and batch:
                self._writer.write_lines([self._line(d, idx, t) for d, idx, t in batch])

    def _drain_loop(self) -> None:
        last_sync = time.monotonic()
        while not self.closed:
            self._wake.wait(DRAIN_S)
            self._wake.clear()
            self._flush_pending()
            if time.monotonic() - last_sync >= FSYNC_S and self._writer is not None:
                self._fsync()
                last_sync = time.monotonic()

    def _fsync(self) -> None:
        assert self.path is not None
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)  # any descriptor of the file syncs its data
        finally:
            os.close(fd)

    def _track_fault(self, d: dict[str, Any]) -> None:
        f = d["f"]
        if f.startswith("start-"):
            self.active_faults[f[len("start-"):]] = d.get("value")
        elif f.startswith("stop-"):
            self.active_faults.pop(f[len("stop-"):], None)

    @property
    def size(self) -> int:
        return self._index

    def flush(self) -> None:
        """Write everything recorded so far (tests, and before reading the file)."""
        self._flush_pending()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._flush_pending()
        if self._writer is not None:
            self._writer.close()  # flush + fsync
        if self.path is not None:
            recording_marker(self.path).unlink(missing_ok=True)
