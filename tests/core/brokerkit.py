"""Helpers for driving broker roles and partitions with hand-made messages
(imported by the tests as ``tests.core.brokerkit``).

Metadata enters a broker exactly as it would from the KRaft observer: as
committed :class:`MetadataEntry` records through ``apply_committed``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.effects import Reply, Send, TraceEvent
from reference_impl.core.messages import (
    BrokerEndpoint,
    BrokerRegistrationResponse,
    FetchPartitionRequest,
    MetadataEntry,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    ReplicaFetchRequest,
    TopicPartition,
    TopicRecord,
)
from reference_impl.core.replica_manager import BrokerRole
from reference_impl.core.storage import StoredState

TP = TopicPartition("t", 0)
CONTROLLER = 100


def broker_epoch_of(node_id: int) -> int:
    return 10 + node_id


@dataclass
class MetaFeed:
    """A hand-written committed metadata log."""

    offset: int = -1
    log: list[MetadataEntry] = field(default_factory=list)

    def add(self, *records) -> list[MetadataEntry]:
        out = []
        for r in records:
            self.offset += 1
            e = MetadataEntry(self.offset, 1, r)
            self.log.append(e)
            out.append(e)
        return out

    def cluster(self, brokers=(1, 2, 3), topic="t", configs=(), replicas=(1, 2, 3), isr=None, leader=1,
                leader_epoch=0, partitions=1):
        recs = [
            RegisterBrokerRecord(b, broker_epoch_of(b), f"inc-{b}", BrokerEndpoint(b, "127.0.0.1", 9000 + b), fenced=False)
            for b in brokers
        ]
        recs.append(TopicRecord(topic, tuple(configs)))
        for i in range(partitions):
            recs.append(
                PartitionRecord(
                    TopicPartition(topic, i),
                    tuple(replicas),
                    tuple(isr if isr is not None else replicas),
                    leader,
                    leader_epoch=leader_epoch,
                    partition_epoch=0,
                )
            )
        return self.add(*recs)

    def change(self, tp=TP, **kw):
        return self.add(PartitionChangeRecord(tp, **kw))


def make_broker(node_id: int, config: ProtocolConfig | None = None, stored: StoredState | None = None,
                now: int = 0) -> BrokerRole:
    b = BrokerRole(
        node_id,
        config or ProtocolConfig(),
        (CONTROLLER,),
        stored or StoredState(),
        random.Random(node_id),
        f"inc-{node_id}",
        BrokerEndpoint(node_id, "127.0.0.1", 9000 + node_id),
    )
    b.start(now)
    b.handle(BrokerRegistrationResponse(0, broker_epoch_of(node_id)), now, CONTROLLER)
    return b


def replica_fetch(leader: BrokerRole, replica: int, offset: int, now: int, leader_epoch: int = 0,
                  last_fetched_epoch: int = -1, tp=TP, max_wait_ms: int = 0, broker_epoch=None):
    """A follower fetch as the leader sees it; returns (effects, partition response or None)."""
    req = ReplicaFetchRequest(
        replica_id=replica,
        broker_epoch=broker_epoch_of(replica) if broker_epoch is None else broker_epoch,
        correlation_id=1,
        partitions=(FetchPartitionRequest(tp, offset, leader_epoch, last_fetched_epoch),),
        max_wait_ms=max_wait_ms,
    )
    effects = leader.handle(req, now, replica)
    resp = None
    for e in effects:
        if isinstance(e, Send) and e.dst == replica and hasattr(e.msg, "partitions"):
            resp = e.msg.partitions[0]
    return effects, resp


def replies(effects, cls=None):
    return [e.msg for e in effects if isinstance(e, Reply) and (cls is None or isinstance(e.msg, cls))]


def sends(effects, cls=None, dst=None):
    return [
        e for e in effects
        if isinstance(e, Send) and (cls is None or isinstance(e.msg, cls)) and (dst is None or e.dst == dst)
    ]


def traces(effects, kind):
    return [e.data for e in effects if isinstance(e, TraceEvent) and e.kind == kind]

