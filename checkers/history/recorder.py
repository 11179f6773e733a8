"""The history recorder of both runtimes: every invocation and completion,
given its index and time as it is recorded, streamed to ``history.jsonl``
and, if asked, kept in memory for the checkers.

Time is the runtime's, injected as ``clock`` (a :class:`Clock`,
nanoseconds) and counted from ``epoch``: real processes record on the monotonic clock from the start of
the generator (:meth:`Recorder.restart_clock`), the simulator on its event
loop's virtual time from 0, so a seed's history is byte-identical on every
replay (no wall clock anywhere).

How the lines reach the file is the runtime's too:

* ``background=True`` (real processes): many worker threads record. Index
  and time are assigned under one lock, so the file order *is* the history
  order. Serialising and writing happen on a background writer thread (a
  worker only appends to a list), which drains every 20 ms, each batch
  flushed to the OS, so a SIGKILLed harness loses at most the last ~20 ms of
  operations, and fsyncs once a second, so a machine crash loses at most a
  second. Recording in the interpreter's own thread cost it about half its
  throughput (bench/harness_overhead.py). A ``.recording`` marker beside
  the file says, until :meth:`Recorder.close`, that it may be partial.
* ``background=False`` (the simulator, one thread): each operation is
  encoded as it is recorded, and lines are written :data:`FLUSH_EVERY` at
  a time, as the bytes the digest is fed (one join, one write and no
  decoding per block), and fsynced once, on close: a seed's history is a
  pure function of the seed, so a killed simulator loses nothing a replay
  cannot rebuild.

Either way a line is encoded once, as :func:`~checkers.history.jsonl.encode_line`
spells the operation (orjson, with ``encode_fields``' fallbacks; a test
holds them together), and feeds a SHA-256 of the history exactly as
``history.jsonl`` spells it (:meth:`Recorder.digest`, what replay checks
compare). The module is compiled with the simulator (reference_impl.accel):
a simulated seed records two lines per operation.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Final

import orjson

from .jsonl import STR_KEYS_LINE_OPTIONS, JsonlWriter, encode_fields, recording_marker
from .op import Op

#: the fields an operation's own attributes hold (the rest go to ``extra``)
_SKIP: Final = frozenset(("type", "f", "value", "process", "error", "time", "index"))
#: how often the background writer drains, and fsyncs (seconds)
DRAIN_S: Final = 0.02
FSYNC_S: Final = 1.0
#: lines buffered between writes to the OS (and between digest updates)
#: when recording inline
FLUSH_EVERY: Final = 512
#: bound once (compiled, a Final is a static; ``orjson.dumps`` was a module
#: attribute looked up by name on every line)
_dumps: Final = orjson.dumps
#: what orjson writes as it is: a value whose JSON is known already
_Fragment: Final = orjson.Fragment
#: Any, not int: compiled, an int constant is kept unboxed and was
#: boxed anew (an allocation) for every line's call
_OPTIONS: Final[Any] = STR_KEYS_LINE_OPTIONS
#: the first six fields of a line, in :meth:`Op.to_dict`'s order: each
#: line's dict is a copy of this whose values are then set (a copy of a
#: small dict's table and six replaced values, where a dict built key by key
#: took ~1,400 instructions a line)
_LINE: Final[dict[str, Any]] = {"index": None, "time": None, "process": None, "type": None, "f": None,
                                "value": None}


def encode_op(fields: dict[str, Any]) -> bytes:
    """The line of an operation spelt as :meth:`Op.to_dict` would, as bytes
    (orjson's first try inline; what it refuses through encode_fields)."""
    try:
        return _dumps(fields, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: encode_fields' fallbacks
        return encode_fields(fields).encode()


def op_extra(d: dict[str, Any]) -> dict[str, Any]:
    """The fields of an operation given as a dict that its Op keeps in
    ``extra``: all but its own attributes and the keys starting with ``_``
    (the interpreter's: ``_timeout``, ``_sleep``, ``_completion``)."""
    return {k: v for k, v in d.items() if k not in _SKIP and k[0] != "_"}


def completion_extra(extra: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
    """``op_extra`` of an invocation's fields updated by a completion's
    (``res``), from the invocation's own ``extra``: the completion's extra
    fields in the same order, without going over the invocation's fields
    again (a new dict: an Op's ``extra`` is its own)."""
    out = dict(extra)
    for k, v in res.items():
        if k not in _SKIP and k[0] != "_":
            out[k] = v
    return out


class Clock:
    """A runtime's time as the recorder reads it, in nanoseconds. A compiled
    base class, so the simulator's clock is a native call on every
    operation (a Python callable there cost ~3% of the recorder's time)."""

    def now_ns(self) -> int:
        raise NotImplementedError


class MonotonicClock(Clock):
    """Real processes' clock: the machine's monotonic clock."""

    def now_ns(self) -> int:
        return time.monotonic_ns()


class Recorder:
    """One history: index and time for each operation, its line in the file
    and the digest, live counters for the progress display.

    ``background=True`` is thread-safe (a lock assigns index and time);
    ``background=False`` is for one thread (the simulator's event loop) and
    takes no lock."""

    def __init__(self, path: str | Path | None, fsync_every: int = 200, keep: bool = False, *,
                 clock: Clock | None = None, epoch: int | None = None,
                 background: bool = True) -> None:
        self._lock = threading.Lock()
        self._wlock = threading.Lock()  # one drainer at a time keeps file order
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._t0: int = self._clock.now_ns() if epoch is None else epoch
        self._index = 0
        self._pending: list[tuple[dict[str, Any], int, int]] = []
        #: ok/fail/info of client completions (and the workload proper's, main-*)
        self.counts: Counter[str] = Counter()
        self.active_faults: dict[str, Any] = {}
        #: the operations, kept for the checkers (``keep``), else None
        self.ops: list[Op] | None = [] if keep else None
        #: the fields of the line :meth:`append` recorded last (its
        #: caller's to keep for :meth:`append_ok`; never changed here)
        self.last_fields: dict[str, Any] | None = None
        self.closed = False
        self.path: Path | None = Path(path) if path is not None else None
        self._background = background
        self._writer: JsonlWriter | None = None
        self._sha = hashlib.sha256()
        # lines not yet hashed: one update per batch, where an update per
        # line cost more in call overhead than in hashing
        self._unhashed: list[bytes] = []
        self._wake = threading.Event()
        self._drainer: threading.Thread | None = None
        if self.path is not None:
            if background:
                # removed by close(): a history left with it is partial (a killed harness)
                recording_marker(self.path).touch()
                # flushed per drained batch and fsynced by time on the writer
                # thread, not by JsonlWriter's counts
                self._writer = JsonlWriter(self.path, fsync_every=1 << 62, flush_every=1 << 62)
                self._drainer = threading.Thread(target=self._drain_loop, name="history-writer", daemon=True)
                self._drainer.start()
            else:
                # written a block at a time by _hash_pending, fsynced on close
                self._writer = JsonlWriter(self.path, fsync_every=1 << 62, flush_every=1 << 62)

    # -- time ------------------------------------------------------------------------------------
    def restart_clock(self) -> None:
        """Make time 0 now (the generator's start, not the cluster's), as
        long as nothing has been recorded yet."""
        with self._lock:
            if self._index == 0:
                self._t0 = self._clock.now_ns()

    @property
    def t0(self) -> int:
        return self._t0

    def now(self) -> int:
        """Nanoseconds since the history's epoch, on the runtime's clock."""
        return self._clock.now_ns() - self._t0

    # -- recording -----------------------------------------------------------------------------
    def record(self, d: dict[str, Any]) -> int:
        """Record one operation given as a dict (type, f, value, process,
        error and any extra keys; keys starting with ``_`` are not
        recorded). Returns its index."""
        if not self._background:
            self._count(d)
            extra = {k: v for k, v in d.items() if k not in _SKIP and k[0] != "_"}
            return self.append(d["process"], d["type"], d["f"], d.get("value"), d.get("error"), extra).index
        with self._lock:
            idx = self._index
            self._index += 1
            self._pending.append((dict(d), idx, self._clock.now_ns() - self._t0))
        self._count(d)
        if self._drainer is None:
            self._flush_pending()
        return idx

    def append_op(self, d: dict[str, Any]) -> Op:
        """:meth:`record` of one operation given as a dict, at once and
        without the live counters (the progress display's). Returns the Op."""
        return self.append(d["process"], d["type"], d["f"], d.get("value"), d.get("error"), op_extra(d))

    def append(self, process: Any, type_: str, f: str, value: Any, error: Any = None,
               extra: dict[str, Any] | None = None) -> Op:
        """Record one operation given by its fields, at once (``background=False``,
        the simulator's clients: no dict to take apart, no thread, no lock);
        ``extra`` holds its other fields (``acks``, ``final``, ``node``...),
        kept by the Op as its own. Returns the Op."""
        if extra is None:
            extra = {}
        i = self._index
        self._index = i + 1
        # boxed once each (Any): compiled, a native int was boxed anew for
        # the Op and again for the line's fields
        index: Any = i
        t: Any = self._clock.now_ns() - self._t0
        op = self._keep(type_, f, value, process, t, index, error, extra)
        # the fields are Op.to_dict's, in its order (a test holds the two
        # together), built here because this runs compiled and to_dict does not
        fields = _LINE.copy()
        fields["index"] = index
        fields["time"] = t
        fields["process"] = process
        fields["type"] = type_
        fields["f"] = f
        fields["value"] = value
        if error is not None:
            fields["error"] = error
        if extra:
            fields.update(extra)
        self.last_fields = fields
        self._emit(fields)
        return op

    def append_ok(self, invocation: dict[str, Any], process: Any, f: str, value: Any, error: Any,
                  extra: dict[str, Any], value_json: bytes | None = None) -> Op:
        """:meth:`append` of an ``ok`` completion of an operation whose
        invocation's line had the fields ``invocation`` (:attr:`last_fields`
        just after it was recorded), given the same ``process``, ``f``,
        ``error`` and extra fields (``extra``, equal to the invocation's
        and the completion Op's own): its line is that line with index,
        time, type and value set, the same keys in the same order, where
        building it anew set two more fields and merged the extra ones
        again (the simulated clients complete nearly every op so).

        ``value_json``, if given, is ``orjson.dumps(value)``, known to the
        caller (a simulated poll's value: every record it read, each spelt
        once for the run, ``reference_impl.sim.consumer.poll_json``): the
        line holds those bytes for the value (an ``orjson.Fragment``), the
        line it spells byte for byte, where the value was encoded anew;
        a line orjson refuses is encoded again from the value itself, as
        any line (``encode_op``'s fallbacks)."""
        i = self._index
        self._index = i + 1
        index: Any = i
        t: Any = self._clock.now_ns() - self._t0
        op = self._keep("ok", f, value, process, t, index, error, extra)
        fields = invocation.copy()
        fields["index"] = index
        fields["time"] = t
        fields["type"] = "ok"
        if value_json is None:
            fields["value"] = value
            self._emit(fields)
            return op
        fields["value"] = _Fragment(value_json)
        try:
            line = _dumps(fields, option=_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError: the line as encode_op spells it
            fields["value"] = value
            line = encode_op(fields)
        self._emit_line(line)
        return op

    def _keep(self, type_: str, f: str, value: Any, process: Any, t: Any, index: Any, error: Any,
              extra: dict[str, Any]) -> Op:
        """The Op of one line, kept for the checkers if asked. Op is
        compiled with this module (reference_impl.accel): its constructor
        is a native call that sets the fields in the object's own slots,
        where the class of an interpreted module was made by
        ``object.__new__`` and eight generic attribute sets (~1,650
        instructions a line, two lines an operation)."""
        op = Op(type_, f, value, process, t, index, error, extra)
        ops = self.ops
        if ops is not None:
            ops.append(op)
        return op

    def _emit(self, fields: dict[str, Any]) -> None:
        """The line of ``fields`` joins the lines not yet hashed (hashed
        and written :data:`FLUSH_EVERY` at a time)."""
        self._emit_line(encode_op(fields))

    def _emit_line(self, line: bytes) -> None:
        """:meth:`_emit` of a line already encoded."""
        unhashed = self._unhashed
        unhashed.append(line)
        if len(unhashed) >= FLUSH_EVERY:
            self._hash_pending()

    def _count(self, d: dict[str, Any]) -> None:
        if d["process"] == "nemesis":
            if d.get("_completion"):
                self._track_fault(d)
        elif d["type"] != "invoke":
            t = d["type"]
            self.counts[t] += 1
            if not d.get("final") and d["f"] in ("send", "poll"):
                self.counts[f"main-{t}"] += 1  # the workload proper, for throughput

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
    def _fields(d: dict[str, Any], idx: int, t: int) -> dict[str, Any]:
        """``_op(d, idx, t).to_dict()``, without building the Op: the
        background writer keeps no Op unless asked (``keep``)."""
        out: dict[str, Any] = {"index": idx, "time": t, "process": d["process"], "type": d["type"],
                               "f": d["f"], "value": d.get("value")}
        err = d.get("error")
        if err is not None:
            out["error"] = err
        for k, v in d.items():
            if k not in _SKIP and k[0] != "_":
                out[k] = v
        return out

    @staticmethod
    def _line(d: dict[str, Any], idx: int, t: int) -> str:
        """The JSONL line of ``_op(d, idx, t)``, byte for byte."""
        return encode_op(Recorder._fields(d, idx, t)).decode()

    def _flush_pending(self) -> None:
        """Hand what the workers recorded to the file, in index order."""
        with self._wlock:
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                return
            ops = self.ops
            if ops is not None:
                ops.extend([self._op(d, idx, t) for d, idx, t in batch])
            lines = [encode_op(self._fields(d, idx, t)) for d, idx, t in batch]
            self._unhashed.extend(lines)
            self._hash_pending()
            if self._writer is not None:
                self._writer.write_block(b"".join(lines).decode())

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

    # -- reading ---------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self._index

    def flush(self) -> None:
        """Write everything recorded so far (tests, and before reading the file)."""
        self._flush_pending()
        if not self._background:
            self._hash_pending()

    def _hash_pending(self) -> None:
        """Feed the lines not yet hashed to the digest; recording inline,
        they reach the file too, as the same block of bytes."""
        block = b"".join(self._unhashed)
        self._unhashed.clear()
        self._sha.update(block)
        if not self._background and self._writer is not None:
            self._writer.write_bytes(block)

    def digest(self) -> str:
        """SHA-256 of the history exactly as ``history.jsonl`` spells it (replay checks)."""
        self._flush_pending()
        self._hash_pending()
        return self._sha.hexdigest()

    def close(self) -> None:
        """Everything recorded reaches the file (fsynced); a background
        recorder's marker goes."""
        if self.closed:
            return
        self.closed = True
        self._wake.set()
        if self._drainer is not None:
            self._drainer.join(timeout=5)
        self._flush_pending()
        if not self._background:
            self._hash_pending()  # the last block reaches the file
        if self._writer is not None:
            self._writer.close()  # flush + fsync
            self._writer = None
        if self.path is not None and self._background:
            recording_marker(self.path).unlink(missing_ok=True)
