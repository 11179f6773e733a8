"""What a node keeps on disk, and what it gets back after a restart.

Small files are written with :class:`~reference_impl.core.effects.FileWrite`
using the dataclasses below; the server serialises each to Kafka's on-disk
text format (``leader-epoch-checkpoint``, ``replication-offset-checkpoint``,
``recovery-point-offset-checkpoint``, ``quorum-state``), the simulator keeps the
objects as they are. Logs hold :class:`~reference_impl.core.messages.Batch`
(partition logs) or :class:`~reference_impl.core.messages.MetadataEntry` (the
metadata log).

Names (so that both runtimes agree on layout):

* partition log ``<topic>-<partition>``; its files ``<topic>-<partition>/leader-epoch-checkpoint``
* ``replication-offset-checkpoint`` (HW per partition), ``recovery-point-offset-checkpoint``
* ``clean-shutdown`` (:class:`CleanShutdown`, carries the broker epoch)
* metadata log ``__cluster_metadata-0``; ``__cluster_metadata-0/quorum-state``
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from .messages import NodeId, TopicPartition

METADATA_LOG: Final = "__cluster_metadata-0"
QUORUM_STATE: Final = f"{METADATA_LOG}/quorum-state"
HW_CHECKPOINT: Final = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN: Final = "clean-shutdown"


def partition_log(tp: TopicPartition) -> str:
    return str(tp)


def epoch_checkpoint(tp: TopicPartition) -> str:
    return f"{tp}/leader-epoch-checkpoint"


@dataclass(frozen=True, slots=True)
class LeaderEpochCheckpoint:
    """``(epoch, start_offset)`` pairs, ascending (Kafka: version line, count, pairs)."""

    entries: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class OffsetCheckpoint:
    """Per-partition offsets (HW checkpoint or recovery points)."""

    offsets: tuple[tuple[TopicPartition, int], ...]


@dataclass(frozen=True, slots=True)
class CleanShutdown:
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class QuorumState:
    epoch: int
    voted_for: NodeId = -1
    leader_id: NodeId = -1


@dataclass
class StoredState:
    """Whatever survived on the node's disk, handed to the node on (re)start.

    ``logs`` maps a log name to its entries in offset order plus the log start
    offset; ``files`` maps a file path to its last durable (or, after a mere
    process crash, cached) content. A fresh node gets an empty StoredState.
    """

    logs: dict[str, list[Any]] = field(default_factory=dict)
    log_start_offsets: dict[str, int] = field(default_factory=dict)
    files: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> "StoredState":
        """An independent copy: new dicts and lists; the entries and file
        contents are frozen dataclasses, shared."""
        return StoredState(
            {name: list(entries) for name, entries in self.logs.items()},
            dict(self.log_start_offsets),
            dict(self.files),
        )
