"""Replaying a committed metadata record into the committed image, with the
trace events a controller emits for it (``partition_metadata``,
``election``, ``broker_fenced`` / ``broker_unfenced``,
``broker_unregistered``).

Every controller node replays every committed record (Kafka's
QuorumController.replay, and the MetadataLoader that publishes the image);
the trace events are what the invariant monitor and the reports read of the
controller's decisions.
"""

from __future__ import annotations

from typing import Any

from ..effects import Effect, TraceEvent
from ..messages import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    MetadataEntry,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicPartition,
    UnregisterBrokerRecord,
)
from ..metadata import MetadataImage, PartitionRegistration


def replay(image: MetadataImage, e: MetadataEntry) -> list[Effect]:
    """Apply one committed entry to ``image``; the trace events it makes."""
    out: list[Effect] = []
    rec = e.record
    before_b = image.brokers.get(getattr(rec, "broker_id", -1))
    image.replay(rec, e.offset)
    if isinstance(rec, (PartitionRecord, PartitionChangeRecord)):
        p = image.partitions.get(rec.tp)
        if p is not None:
            out.append(TraceEvent("partition_metadata", partition_trace(rec.tp, p)))
            if isinstance(rec, PartitionChangeRecord) and rec.leader is not None and rec.leader != NO_LEADER:
                kind = rec.reason.rsplit("election:", 1)[1] if "election:" in rec.reason else "clean"
                out.append(
                    TraceEvent(
                        # "data_kind", not "kind": a trace line's own "kind" is the event kind
                        "election",
                        {"tp": str(rec.tp), "data_kind": kind, "leader": p.leader, "leader_epoch": p.leader_epoch},
                    )
                )
    elif isinstance(rec, UnregisterBrokerRecord):
        if before_b is not None and rec.broker_id not in image.brokers:
            out.append(TraceEvent("broker_unregistered", {"broker": rec.broker_id, "broker_epoch": rec.broker_epoch}))
    elif isinstance(rec, (RegisterBrokerRecord, BrokerRegistrationChangeRecord)):
        after_b = image.brokers.get(rec.broker_id)
        was_fenced = before_b is None or before_b.fenced
        if after_b is not None and after_b.fenced != was_fenced:
            kind = "broker_fenced" if after_b.fenced else "broker_unfenced"
            out.append(TraceEvent(kind, {"broker": rec.broker_id, "broker_epoch": after_b.broker_epoch}))
    return out


def partition_trace(tp: TopicPartition, p: PartitionRegistration) -> dict[str, Any]:
    return {
        "tp": str(tp),
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "elr": list(p.elr),
        "last_known_elr": list(p.last_known_elr),
        "last_known_leader": p.last_known_leader,
        "recovery_state": p.leader_recovery_state,
        "adding_replicas": list(p.adding_replicas),
        "removing_replicas": list(p.removing_replicas),
    }
