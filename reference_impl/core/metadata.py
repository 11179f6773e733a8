"""The metadata image: what replaying the committed metadata log yields.

Controllers and brokers both hold one. The controller validates AlterPartition
and runs elections against it; a broker turns the partitions that changed into
makeLeader / makeFollower transitions (seed 001 §2.3.2, "metadata update deltas
and materialization"). Only *committed* records are replayed (seed 004).

``replay`` returns a :class:`Delta` naming what changed, so the broker applies
exactly the deltas Kafka's ``ReplicaManager.applyDelta`` would.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final

from .messages import (
    NO_LEADER,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataRecord,
    NodeId,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicPartition,
    TopicRecord,
    UnregisterBrokerRecord,
)

RECOVERED: Final = 0
RECOVERING: Final = 1


@dataclass(frozen=True, slots=True, init=False)
class BrokerRegistration:
    broker_id: NodeId
    broker_epoch: int
    incarnation_id: str
    endpoint: BrokerEndpoint
    fenced: bool = True
    in_controlled_shutdown: bool = False

    # spelt out (init=False): a frozen dataclass's generated __init__ stays
    # interpreted when the module is compiled (see reference_impl.core.effects)
    def __init__(
        self, broker_id: NodeId, broker_epoch: int, incarnation_id: str, endpoint: BrokerEndpoint,
        fenced: bool = True, in_controlled_shutdown: bool = False,
    ) -> None:
        object.__setattr__(self, "broker_id", broker_id)
        object.__setattr__(self, "broker_epoch", broker_epoch)
        object.__setattr__(self, "incarnation_id", incarnation_id)
        object.__setattr__(self, "endpoint", endpoint)
        object.__setattr__(self, "fenced", fenced)
        object.__setattr__(self, "in_controlled_shutdown", in_controlled_shutdown)


@dataclass(frozen=True, slots=True, init=False)
class PartitionRegistration:
    """Seed 000, "PartitionRegistration, the authoritative metadata record"."""

    replicas: tuple[NodeId, ...]
    isr: tuple[NodeId, ...]
    leader: NodeId
    leader_epoch: int
    partition_epoch: int
    elr: tuple[NodeId, ...] = ()
    last_known_elr: tuple[NodeId, ...] = ()
    leader_recovery_state: int = RECOVERED
    #: KIP-966 LastKnownLeader (seed 002 "The last known leader will be
    #: tracked"): the last ISR member, recorded when it left the ISR; cleared
    #: when a new leader is elected. NO_LEADER when none.
    last_known_leader: NodeId = NO_LEADER
    #: KIP-455: a reassignment in progress adds these replicas and removes
    #: those; ``replicas`` is the union (the target, then the removing ones)
    adding_replicas: tuple[NodeId, ...] = ()
    removing_replicas: tuple[NodeId, ...] = ()

    # spelt out (init=False): a frozen dataclass's generated __init__ stays
    # interpreted when the module is compiled (see reference_impl.core.effects)
    def __init__(
        self, replicas: tuple[NodeId, ...], isr: tuple[NodeId, ...], leader: NodeId, leader_epoch: int,
        partition_epoch: int, elr: tuple[NodeId, ...] = (), last_known_elr: tuple[NodeId, ...] = (),
        leader_recovery_state: int = RECOVERED, last_known_leader: NodeId = NO_LEADER,
        adding_replicas: tuple[NodeId, ...] = (), removing_replicas: tuple[NodeId, ...] = (),
    ) -> None:
        object.__setattr__(self, "replicas", replicas)
        object.__setattr__(self, "isr", isr)
        object.__setattr__(self, "leader", leader)
        object.__setattr__(self, "leader_epoch", leader_epoch)
        object.__setattr__(self, "partition_epoch", partition_epoch)
        object.__setattr__(self, "elr", elr)
        object.__setattr__(self, "last_known_elr", last_known_elr)
        object.__setattr__(self, "leader_recovery_state", leader_recovery_state)
        object.__setattr__(self, "last_known_leader", last_known_leader)
        object.__setattr__(self, "adding_replicas", adding_replicas)
        object.__setattr__(self, "removing_replicas", removing_replicas)

    @property
    def is_reassigning(self) -> bool:
        """Kafka's PartitionReassignmentReplicas.isReassignmentInProgress."""
        return bool(self.adding_replicas or self.removing_replicas)

    def merge(self, change: PartitionChangeRecord) -> "PartitionRegistration":
        """Apply a change: every change bumps partition_epoch; a leader change
        also bumps leader_epoch (seed 000, PartitionRegistration.merge), and
        so does a new replica list that drops a replica: Kafka's
        PartitionChangeBuilder.triggerLeaderEpochBumpForReplicaReassignmentIfNeeded
        writes the unchanged leader into such a record, so a removed replica
        can no longer fetch in the leader's epoch."""
        leader_changed = change.leader is not None and change.leader != self.leader
        if change.replicas is not None and not set(self.replicas) <= set(change.replicas):
            leader_changed = True
        # every field named: the constructor itself, not dataclasses.replace
        # (interpreted, ~14,000 instructions a change when compiled)
        return PartitionRegistration(
            replicas=self.replicas if change.replicas is None else tuple(change.replicas),
            adding_replicas=self.adding_replicas if change.adding_replicas is None else tuple(change.adding_replicas),
            removing_replicas=(
                self.removing_replicas if change.removing_replicas is None else tuple(change.removing_replicas)
            ),
            isr=self.isr if change.isr is None else tuple(change.isr),
            leader=self.leader if change.leader is None else change.leader,
            elr=self.elr if change.elr is None else tuple(change.elr),
            last_known_elr=self.last_known_elr if change.last_known_elr is None else tuple(change.last_known_elr),
            leader_recovery_state=(
                self.leader_recovery_state if change.leader_recovery_state is None else change.leader_recovery_state
            ),
            last_known_leader=(
                self.last_known_leader if change.last_known_leader is None else change.last_known_leader
            ),
            leader_epoch=self.leader_epoch + 1 if leader_changed else self.leader_epoch,
            partition_epoch=self.partition_epoch + 1,
        )

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(init=False)
class Delta:
    """What one or more replayed records changed."""

    partitions: set[TopicPartition] = field(default_factory=set)
    brokers: set[NodeId] = field(default_factory=set)
    topics: set[str] = field(default_factory=set)

    # spelt out (init=False): a dataclass's generated __init__ stays
    # interpreted when compiled, and every record replayed makes a Delta
    def __init__(self, partitions: set[TopicPartition] | None = None, brokers: set[NodeId] | None = None,
                 topics: set[str] | None = None) -> None:
        self.partitions = set() if partitions is None else partitions
        self.brokers = set() if brokers is None else brokers
        self.topics = set() if topics is None else topics

    def merge(self, other: "Delta") -> None:
        self.partitions |= other.partitions
        self.brokers |= other.brokers
        self.topics |= other.topics

    def __bool__(self) -> bool:
        return bool(self.partitions or self.brokers or self.topics)


@dataclass
class MetadataImage:
    brokers: dict[NodeId, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> topic configs
    partitions: dict[TopicPartition, PartitionRegistration] = field(default_factory=dict)
    cluster_configs: dict[str, str] = field(default_factory=dict)
    next_producer_id: int = 1000
    #: offset of the last replayed record (-1: nothing yet)
    offset: int = -1

    def replay(self, record: MetadataRecord, offset: int) -> Delta:
        """Apply one committed record at ``offset``."""
        d = Delta()
        self.offset = offset
        if isinstance(record, RegisterBrokerRecord):
            self.brokers[record.broker_id] = BrokerRegistration(
                record.broker_id, record.broker_epoch, record.incarnation_id, record.endpoint, fenced=record.fenced
            )
            d.brokers.add(record.broker_id)
        elif isinstance(record, BrokerRegistrationChangeRecord):
            b = self.brokers.get(record.broker_id)
            if b is not None and b.broker_epoch == record.broker_epoch:
                self.brokers[record.broker_id] = replace(
                    b,
                    fenced=b.fenced if record.fenced is None else record.fenced,
                    in_controlled_shutdown=(
                        b.in_controlled_shutdown
                        if record.in_controlled_shutdown is None
                        else record.in_controlled_shutdown
                    ),
                )
                d.brokers.add(record.broker_id)
        elif isinstance(record, UnregisterBrokerRecord):
            b = self.brokers.get(record.broker_id)
            if b is not None and b.broker_epoch == record.broker_epoch:
                del self.brokers[record.broker_id]
                d.brokers.add(record.broker_id)
        elif isinstance(record, TopicRecord):
            self.topics[record.name] = dict(record.configs)
            d.topics.add(record.name)
        elif isinstance(record, PartitionRecord):
            self.partitions[record.tp] = PartitionRegistration(
                replicas=tuple(record.replicas),
                isr=tuple(record.isr),
                leader=record.leader,
                leader_epoch=record.leader_epoch,
                partition_epoch=record.partition_epoch,
                elr=tuple(record.elr),
                last_known_elr=tuple(record.last_known_elr),
                leader_recovery_state=record.leader_recovery_state,
                last_known_leader=record.last_known_leader,
                adding_replicas=tuple(record.adding_replicas),
                removing_replicas=tuple(record.removing_replicas),
            )
            d.partitions.add(record.tp)
        elif isinstance(record, PartitionChangeRecord):
            cur = self.partitions.get(record.tp)
            if cur is not None:
                self.partitions[record.tp] = cur.merge(record)
                d.partitions.add(record.tp)
        elif isinstance(record, ConfigRecord):
            target = self.topics.get(record.resource) if record.resource else self.cluster_configs
            if target is not None:
                if record.value is None:
                    target.pop(record.key, None)
                else:
                    target[record.key] = record.value
                if record.resource:
                    d.topics.add(record.resource)
        elif isinstance(record, ProducerIdsRecord):
            self.next_producer_id = max(self.next_producer_id, record.next_producer_id)
        elif isinstance(record, NoOpRecord):
            pass
        return d

    # -- queries -----------------------------------------------------------

    def topic_partitions(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.partitions if tp.topic == topic)

    def is_alive(self, broker_id: NodeId) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced

    def broker_epoch(self, broker_id: NodeId) -> int:
        b = self.brokers.get(broker_id)
        return -1 if b is None else b.broker_epoch
