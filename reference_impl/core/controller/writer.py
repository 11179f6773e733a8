"""The active controller's write path, shared by every manager: the working
image, appends through the quorum, and replies held until their records
commit.

Kafka's ``QuorumController`` (metadata/src/main/java/org/apache/kafka/
controller/QuorumController.java) runs each request as a write event: a
manager returns records and a response (``ControllerResult``), the
controller appends the records through the Raft client, applies them to its
in-memory state at once (the snapshot registry reverts them on failover),
and completes the response from its deferred event queue once the records'
offset has committed. Here a manager writes records one at a time through
:meth:`MetadataWriter.write`, which applies each to the *working* image (the
committed image plus everything appended but not yet committed), and parks
its answer with :meth:`MetadataWriter.answer_after_commit`. On failover the
working image is dropped and rebuilt from the committed one, and every
parked answer becomes its ``on_failover`` (NOT_CONTROLLER): the broker
retries.

The managers read brokers and partitions from :attr:`MetadataWriter.work`
and build partition changes with :meth:`MetadataWriter.builder`, so a
manager depends on the writer and on managers below it, never on the role
(``tests/test_layering.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import ProtocolConfig
from ..effects import Effect, Reply, Send
from ..errors import LocalProtocolError
from ..messages import MetadataRecord, NodeId, TopicPartition
from ..metadata import MetadataImage
from ..partition_change import PartitionChangeBuilder
from ..raft import RaftReplica


@dataclass(init=False)
class Waiting:
    """A reply held until the metadata log has committed ``offset``."""

    offset: int
    dst: NodeId | None
    msg: Any
    #: what to answer instead if this controller loses leadership first
    on_failover: Any

    # spelt out (init=False): a dataclass's generated __init__ stays
    # interpreted when compiled (one per controller write answered)
    def __init__(self, offset: int, dst: NodeId | None, msg: Any, on_failover: Any) -> None:
        self.offset = offset
        self.dst = dst
        self.msg = msg
        self.on_failover = on_failover


def clone_image(image: MetadataImage) -> MetadataImage:
    """A working copy of the committed image (the active controller's start)."""
    return MetadataImage(
        brokers=dict(image.brokers),
        topics={k: dict(v) for k, v in image.topics.items()},
        partitions=dict(image.partitions),
        cluster_configs=dict(image.cluster_configs),
        next_producer_id=image.next_producer_id,
        offset=image.offset,
    )


def addressed(dst: NodeId | None, msg: Any) -> Effect:
    """An answer to ``dst``, or to the client of a controller-only node (``None``)."""
    return Reply(msg) if dst is None else Send(dst, msg)


class MetadataWriter:
    """The committed and working images, the clocks of the current call, and
    the appends and held replies of the active controller."""

    def __init__(self, config: ProtocolConfig, raft: RaftReplica) -> None:
        self.config = config
        self.raft = raft
        #: every committed record replayed (every controller keeps one)
        self.image = MetadataImage()
        #: the committed image plus this controller's uncommitted appends;
        #: None unless this controller is the active one
        self.work: MetadataImage | None = None
        self.waiting: list[Waiting] = []
        #: messages to brokers produced while handling something else
        self.outbox: list[Effect] = []
        self.now = 0
        #: monotonic time of the current call, and wall minus monotonic: the
        #: broker sessions and the recovery deadlines are monotonic, as
        #: Kafka's BrokerHeartbeatManager and controller event queue read
        #: ``time.nanoseconds()`` (docs/architecture.md, "Clocks")
        self.mono = 0
        self.skew = 0

    def clock(self, now: int, mono: int | None) -> None:
        self.now = now
        self.mono = now if mono is None else mono
        self.skew = now - self.mono

    @property
    def next_offset(self) -> int:
        """The offset the next appended record gets."""
        return self.raft.end_offset

    def write(self, record: MetadataRecord) -> int:
        """Append one record and apply it to the working image at once."""
        assert self.work is not None
        entries = self.raft.append([record], self.now)
        if not entries:  # not leader any more: cannot happen while work is set
            raise LocalProtocolError("append refused on the active controller")
        self.work.replay(record, entries[0].offset)
        return entries[0].offset

    def write_atomic(self, records: list[MetadataRecord]) -> None:
        """Append ``records`` as one atomic batch (Kafka's
        ControllerResult.atomicOf and the raft client's atomic append): they
        commit together or not at all. Each is applied to the working image."""
        assert self.work is not None
        entries = self.raft.append(records, self.now)
        if len(entries) != len(records):  # not leader any more: cannot happen while work is set
            raise LocalProtocolError("append refused on the active controller")
        for record, entry in zip(records, entries):
            self.work.replay(record, entry.offset)

    def answer_after_commit(self, dst: NodeId | None, msg: Any, on_failover: Any) -> None:
        """Answer once everything appended so far has committed."""
        self.waiting.append(Waiting(self.raft.end_offset - 1, dst, msg, on_failover))

    def release(self) -> list[Effect]:
        """The held replies whose records the committed image now holds."""
        out: list[Effect] = []
        done = self.image.offset
        keep: list[Waiting] = []
        for w in self.waiting:
            if w.offset <= done:
                out.append(addressed(w.dst, w.msg))
            else:
                keep.append(w)
        self.waiting = keep
        return out

    def fail_over(self) -> list[Effect]:
        """Leadership lost: drop the working image and the outbox, and answer
        every held reply with its ``on_failover``."""
        self.work = None
        self.outbox.clear()
        out = [addressed(w.dst, w.on_failover) for w in self.waiting]
        self.waiting.clear()
        return out

    def is_active_broker(self, broker: NodeId) -> bool:
        """Registered, unfenced and not in controlled shutdown (Kafka's
        ClusterControlManager.isActive), in the working image."""
        assert self.work is not None
        b = self.work.brokers.get(broker)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    def builder(self, tp: TopicPartition, reason: str) -> PartitionChangeBuilder:
        """A change of ``tp`` from its working registration, with the topic's
        min ISR, ELR and unclean-election settings."""
        assert self.work is not None
        topic_cfg = self.work.topics.get(tp.topic, {})
        return PartitionChangeBuilder(
            tp=tp,
            current=self.work.partitions[tp],
            is_active=self.is_active_broker,
            min_isr=self.config.min_isr_for(topic_cfg),
            elr_enabled=self.config.elr_enabled(),
            unclean_allowed=self.config.unclean_allowed(topic_cfg),
            reason=reason,
            recovery_strategy=self.config.recovery_strategy_for(topic_cfg),
        )
