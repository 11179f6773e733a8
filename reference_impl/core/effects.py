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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .messages import Message, NodeId


@dataclass(frozen=True, slots=True)
class Send:
    """Deliver ``msg`` to node ``dst`` over the (faultable) network."""

    dst: NodeId
    msg: Message


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer a client request. ``msg.ref`` names the client connection/request.

    acks=0 produce requests never get a ``Reply`` (Kafka sends no response).
    """

    msg: Message


@dataclass(frozen=True, slots=True)
class Timer:
    """Call ``tick(now)`` again no later than ``at`` (node-local milliseconds).

    Timers are hints: a node tolerates extra ticks, and a runtime may coalesce
    timers. A node re-arms what it still needs on every tick.
    """

    at: int


@dataclass(frozen=True, slots=True)
class LogAppend:
    """Append entries to the end of log ``log`` (page cache until fsynced)."""

    log: str
    entries: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class LogTruncate:
    """Remove every entry whose offset is >= ``offset`` (truncation from the end)."""

    log: str
    offset: int


@dataclass(frozen=True, slots=True)
class LogTruncateFully:
    """Drop the whole log and restart it empty at ``start_offset``."""

    log: str
    start_offset: int


@dataclass(frozen=True, slots=True)
class FileWrite:
    """Atomically replace small file ``path`` with ``data`` (a dataclass from
    :mod:`reference_impl.core.storage`)."""

    path: str
    data: Any


@dataclass(frozen=True, slots=True)
class FileDelete:
    path: str


@dataclass(frozen=True, slots=True)
class Fsync:
    """Make everything written so far to ``target`` (a log name or file path)
    durable. ``target=None`` means every log and file of the node."""

    target: str | None = None


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """A glass-box event for the invariant monitor (HW, ISR, leader, epochs,
    truncations, elections, ...). The runtime stamps node id and time and
    appends it to the node's trace (JSONL). ``data`` holds JSON-friendly values.
    """

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Halt:
    """The node has finished a controlled shutdown; the runtime may exit."""

    reason: str = "controlled shutdown complete"


Effect = Send | Reply | Timer | LogAppend | LogTruncate | LogTruncateFully | FileWrite | FileDelete | Fsync | TraceEvent | Halt
