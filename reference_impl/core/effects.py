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


@dataclass(slots=True, init=False)
class TraceEvent:
    """A glass-box event for the invariant monitor (HW, ISR, leader, epochs,
    truncations, elections, ...). The runtime stamps node id and time and
    appends it to the node's trace (JSONL). ``data`` holds JSON-friendly values.
    """

    kind: str
    data: dict[str, Any]

    def __init__(self, kind: str, data: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self.data = {} if data is None else data


@dataclass(slots=True, init=False)
class Halt:
    """The node has finished a controlled shutdown; the runtime may exit."""

    reason: str

    def __init__(self, reason: str = "controlled shutdown complete") -> None:
        self.reason = reason


Effect = Send | Reply | Timer | LogAppend | LogTruncate | LogTruncateFully | FileWrite | FileDelete | Fsync | TraceEvent | Halt
