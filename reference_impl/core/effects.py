"""Effects: what a sans-IO node asks its runtime to do.

Every call into a node (``handle(message, now)``, ``tick(now)``, ``start(now)``)
returns a list of effects. The runtime (the asyncio server or the simulator)
carries them out *in list order*. Ordering matters for durability: a node that
must persist before it answers (a Raft vote, say) emits ``Fsync`` before the
``Send``; a runtime that applies effects out of order breaks the protocol, not
the node.

Persistence is modelled as two kinds of storage so that a runtime can lose
un-fsynced data faithfully:

* *logs* — append-only sequences of entries addressed by offset (partition logs,
  the metadata log). ``LogAppend`` / ``LogTruncate`` / ``LogTruncateFully``.
* *files* — small documents replaced atomically (checkpoints, quorum state,
  the clean-shutdown marker). ``FileWrite`` / ``FileDelete``.

Writes land in a page cache; only ``Fsync`` makes them durable. On a process
crash the page cache survives; on a power loss it does not. The runtime hands
whatever survived back to the node through ``StoredState`` when it restarts.

Why each class spells out its ``__init__``: a node builds several effects for
every message it handles, so their construction is on the hot path of every
runtime. A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` and stays interpreted even when the module is compiled
(reference_impl.accel); an explicit one is about twice as fast in Python and
ten times compiled. So effects are plain (not frozen) slotted dataclasses: a
runtime consumes each one once, at once, and nothing keeps or mutates them.
Messages, which travel and may be kept, stay frozen; the hot ones spell out
their ``__init__`` too (see :mod:`reference_impl.core.messages`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .messages import Message, NodeId


@dataclass(slots=True, init=False)
class Send:
    """Deliver ``msg`` to node ``dst`` over the (faultable) network."""

    dst: NodeId
    msg: Message

    def __init__(self, dst: NodeId, msg: Message) -> None:
        self.dst = dst
        self.msg = msg


@dataclass(slots=True, init=False)
class Reply:
    """Answer a client request. ``msg.ref`` names the client connection/request.

    acks=0 produce requests never get a ``Reply`` (Kafka sends no response).
    """

    msg: Message

    def __init__(self, msg: Message) -> None:
        self.msg = msg


@dataclass(slots=True, init=False)
class Timer:
    """Call ``tick(now)`` again no later than ``at`` (node-local milliseconds).

    Timers are hints: a node tolerates extra ticks, and a runtime may coalesce
    timers. A node re-arms what it still needs on every tick.
    """

    at: int

    def __init__(self, at: int) -> None:
        self.at = at


@dataclass(slots=True, init=False)
class LogAppend:
    """Append entries to the end of log ``log`` (page cache until fsynced)."""

    log: str
    entries: tuple[Any, ...]

    def __init__(self, log: str, entries: tuple[Any, ...]) -> None:
        self.log = log
        self.entries = entries


@dataclass(slots=True, init=False)
class LogTruncate:
    """Remove every entry whose offset is >= ``offset`` (truncation from the end)."""

    log: str
    offset: int

    def __init__(self, log: str, offset: int) -> None:
        self.log = log
        self.offset = offset


@dataclass(slots=True, init=False)
class LogTruncateFully:
    """Drop the whole log and restart it empty at ``start_offset``."""

    log: str
    start_offset: int

    def __init__(self, log: str, start_offset: int) -> None:
        self.log = log
        self.start_offset = start_offset


@dataclass(slots=True, init=False)
class FileWrite:
    """Atomically replace small file ``path`` with ``data`` (a dataclass from
    :mod:`reference_impl.core.storage`)."""

    path: str
    data: Any

    def __init__(self, path: str, data: Any) -> None:
        self.path = path
        self.data = data


@dataclass(slots=True, init=False)
class FileDelete:
    path: str

    def __init__(self, path: str) -> None:
        self.path = path


@dataclass(slots=True, init=False)
class Fsync:
    """Make everything written so far to ``target`` (a log name or file path)
    durable. ``target=None`` means every log and file of the node."""

    target: str | None

    def __init__(self, target: str | None = None) -> None:
        self.target = target


class TraceEvent:
    """A glass-box event for the invariant monitor (HW, ISR, leader, epochs,
    truncations, elections, ...). The runtime stamps node id and time and
    appends it to the node's trace (JSONL). ``data`` holds JSON-friendly values.

    The three events of every replicated write (:class:`AppendTrace`,
    :class:`HwTrace`, :class:`ProduceTrace`: ~90% of a simulated seed's
    events) are subclasses whose values are typed fields and whose ``data``
    is built on first read: a runtime that only checks them (the simulator
    with no trace file) reads the fields and never builds, boxes or frees
    the dict (~4,000 instructions an append, compiled). Their ``data`` is
    the dict the core built before, key for key and in the same order, so
    every trace file is byte for byte what it was.
    """

    kind: str
    _data: dict[str, Any] | None

    def __init__(self, kind: str, data: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self._data = {} if data is None else data

    @property
    def data(self) -> dict[str, Any]:
        d = self._data
        if d is None:
            d = self._data = self._build()
        return d

    def _build(self) -> dict[str, Any]:
        return {}

    def __eq__(self, other: object) -> bool:
        # what the dataclass compared: the kind and the data
        if not isinstance(other, TraceEvent):
            return NotImplemented
        return self.kind == other.kind and self.data == other.data

    def __repr__(self) -> str:
        return f"TraceEvent(kind={self.kind!r}, data={self.data!r})"


class AppendTrace(TraceEvent):
    """``append``: batches appended to a replica's log, by its leader or a
    follower (``epochs``: ``[[epoch, start], ...]``, one per epoch change).

    Built with ``epochs=None`` when the batches are of one epoch (a leader's
    append, nearly every follower's): the one run ``[[epoch, base]]`` is
    then spelt only when ``epochs`` (or ``data``) is read, and
    :attr:`one_run` says so without building it. Two lists made and freed
    per append on every replica were ~1% of a simulated seed."""

    base: int
    count: int
    epoch: int
    _epochs: list[list[int]] | None
    leo: int
    role: str
    tp: str

    def __init__(self, base: int, count: int, epoch: int, epochs: list[list[int]] | None, leo: int, role: str,
                 tp: str) -> None:
        self.kind = "append"
        self._data = None
        self.base = base
        self.count = count
        self.epoch = epoch
        self._epochs = epochs
        self.leo = leo
        self.role = role
        self.tp = tp

    @property
    def one_run(self) -> bool:
        """All the batches are of ``epoch``, the first at ``base``."""
        return self._epochs is None

    @property
    def epochs(self) -> list[list[int]]:
        e = self._epochs
        if e is None:
            e = self._epochs = [[self.epoch, self.base]]
        return e

    def _build(self) -> dict[str, Any]:
        return {"base": self.base, "count": self.count, "epoch": self.epoch, "epochs": self.epochs,
                "leo": self.leo, "role": self.role, "tp": self.tp}


class HwTrace(TraceEvent):
    """``hw``: a replica's high watermark moved (with its LEO then)."""

    hw: int
    leo: int
    role: str
    tp: str

    def __init__(self, hw: int, leo: int, role: str, tp: str) -> None:
        self.kind = "hw"
        self._data = None
        self.hw = hw
        self.leo = leo
        self.role = role
        self.tp = tp

    def _build(self) -> dict[str, Any]:
        return {"hw": self.hw, "leo": self.leo, "role": self.role, "tp": self.tp}


class ProduceTrace(TraceEvent):
    """``produce``: a produce request's end on its leader (its acks, error,
    base offset and record count)."""

    tp: str
    acks: int
    error: int
    base: int
    count: int

    def __init__(self, tp: str, acks: int, error: int, base: int, count: int) -> None:
        self.kind = "produce"
        self._data = None
        self.tp = tp
        self.acks = acks
        self.error = error
        self.base = base
        self.count = count

    def _build(self) -> dict[str, Any]:
        return {"tp": self.tp, "acks": self.acks, "error": self.error, "base": self.base, "count": self.count}


@dataclass(slots=True, init=False)
class Halt:
    """The node has finished a controlled shutdown; the runtime may exit."""

    reason: str

    def __init__(self, reason: str = "controlled shutdown complete") -> None:
        self.reason = reason


Effect = Send | Reply | Timer | LogAppend | LogTruncate | LogTruncateFully | FileWrite | FileDelete | Fsync | TraceEvent | Halt
