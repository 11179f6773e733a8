"""The broker's answers to client and admin requests that are not the
replication path: Metadata, ListOffsets, InitProducerId, GetReplicaLogInfo
(the controller's unclean-recovery question), and the forwarding of admin
requests (CreateTopics, IncrementalAlterConfigs, AlterPartitionReassignments,
ListPartitionReassignments, UnregisterBroker) to the active controller,
as Kafka's ForwardingManager does.

Each function reads the broker (a :class:`BrokerView`, the ``broker``
argument) and returns effects; only the forwarder keeps state of
its own (the requests waiting for the controller).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final, Protocol

from .controller_link import ControllerLink
from .effects import Effect, Reply, Send
from .errors import MissingSender
from .messages import (
    NO_LEADER,
    AlterConfigsResult,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    Errors,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    NodeId,
    PartitionMetadata,
    ReassignmentResult,
    ReplicaLogInfo,
    TopicMetadata,
    TopicPartition,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from .metadata import MetadataImage
from .partition import Partition


class BrokerView(ControllerLink, Protocol):
    """What these answers read of the broker (never the broker class: the
    core's imports form no circle)."""

    partitions: dict[TopicPartition, Partition]
    image: MetadataImage
    next_producer_seq: int

#: producer ids are ``broker_epoch * PRODUCER_ID_BLOCK + n``: broker epochs are
#: unique cluster-wide, so ids never collide without a round trip
PRODUCER_ID_BLOCK: Final = 1 << 32

AdminRequest = (CreateTopicsRequest | IncrementalAlterConfigsRequest | AlterPartitionReassignmentsRequest
                | ListPartitionReassignmentsRequest | UnregisterBrokerRequest)
AdminResponse = (CreateTopicsResponse | IncrementalAlterConfigsResponse | AlterPartitionReassignmentsResponse
                 | ListPartitionReassignmentsResponse | UnregisterBrokerResponse)


def _not_controller(msg: AdminResponse) -> bool:
    """The controller asked was not the active one (try the next)."""
    if isinstance(msg, (ListPartitionReassignmentsResponse, UnregisterBrokerResponse)):
        return msg.error == Errors.NOT_CONTROLLER
    return any(r.error == Errors.NOT_CONTROLLER for r in msg.results)


def list_offsets(broker: BrokerView, msg: ListOffsetsRequest) -> list[Effect]:
    p = broker.partitions.get(msg.tp)
    if p is None:
        err = Errors.NOT_LEADER_OR_FOLLOWER if msg.tp in broker.image.partitions else Errors.UNKNOWN_TOPIC_OR_PARTITION
        return [Reply(ListOffsetsResponse(msg.ref, msg.tp, err))]
    return [Reply(p.list_offset(msg))]


def init_producer_id(broker: BrokerView, msg: InitProducerIdRequest) -> list[Effect]:
    """Allocate a producer id unique cluster-wide without a round trip:
    the broker epoch names this broker session, the counter the id in it."""
    if broker.broker_epoch < 0:
        return [Reply(InitProducerIdResponse(msg.ref, Errors.LEADER_NOT_AVAILABLE))]
    pid = broker.broker_epoch * PRODUCER_ID_BLOCK + broker.next_producer_seq
    broker.next_producer_seq += 1
    return [Reply(InitProducerIdResponse(msg.ref, Errors.NONE, pid, 0))]


def metadata(broker: BrokerView, msg: MetadataRequest) -> list[Effect]:
    """Brokers are the unfenced registered ones; the broker names itself
    as controller so admin clients send CreateTopics here (it forwards).
    Leader epochs come from the replayed image, which never goes back."""
    img = broker.image
    brokers = tuple(b.endpoint for _, b in sorted(img.brokers.items()) if not b.fenced)
    names = sorted(img.topics) if msg.topics is None else list(msg.topics)
    topics = []
    for name in names:
        if name not in img.topics:
            topics.append(TopicMetadata(name, Errors.UNKNOWN_TOPIC_OR_PARTITION, ()))
            continue
        parts = []
        for tp in img.topic_partitions(name):
            reg = img.partitions[tp]
            err = Errors.NONE if reg.leader != NO_LEADER else Errors.LEADER_NOT_AVAILABLE
            offline = tuple(r for r in reg.replicas if not img.is_alive(r))
            parts.append(PartitionMetadata(tp, err, reg.leader, reg.leader_epoch, reg.replicas, reg.isr, reg.elr, offline))
        topics.append(TopicMetadata(name, Errors.NONE, tuple(parts)))
    return [Reply(MetadataResponse(msg.ref, brokers, broker.node_id, tuple(topics)))]


def replica_log_info(broker: BrokerView, msg: GetReplicaLogInfoRequest, src: NodeId | None) -> list[Effect]:
    """KIP-966 unclean recovery (seed 002): tell the controller how long
    our log is (latest leader epoch, LEO) with our broker epoch (an answer
    from before a reboot is refused) and the leader epoch our metadata
    holds (it fences stale answers)."""
    if src is None:
        raise MissingSender("GetReplicaLogInfo came without a sender: its answer goes to the controller that asked")
    infos = []
    for tp in msg.tps:
        p = broker.partitions.get(tp)
        reg = broker.image.partitions.get(tp)
        current = reg.leader_epoch if reg is not None else -1
        if p is None:
            infos.append(ReplicaLogInfo(tp, -1, current, -1, Errors.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            infos.append(ReplicaLogInfo(tp, p.log.latest_epoch, current, p.log.leo))
    return [Send(src, GetReplicaLogInfoResponse(broker.node_id, broker.broker_epoch, msg.correlation_id, tuple(infos)))]


class AdminForwarder:
    """Admin requests forwarded to the active controller, by token: a
    NOT_CONTROLLER answer is sent on to the next controller until the
    client's timeout, then the client hears REQUEST_TIMED_OUT."""

    def __init__(self) -> None:
        #: token -> (client ref, deadline, request, controller)
        self.pending: dict[Any, tuple[Any, int, AdminRequest, NodeId]] = {}

    def deadlines(self) -> list[int]:
        return [deadline for _ref, deadline, _req, _dst in self.pending.values()]

    def forward(self, broker: ControllerLink, msg: AdminRequest, now: int) -> list[Effect]:
        token = (broker.node_id, broker.next_correlation_id())
        dst = broker.controller_id()
        self.pending[token] = (msg.ref, now + msg.timeout_ms, msg, dst)
        broker.note_deadline(now + msg.timeout_ms)
        return [Send(dst, replace(msg, ref=token))]

    def answer(self, broker: ControllerLink, msg: AdminResponse, now: int) -> list[Effect]:
        pending = self.pending.pop(msg.ref, None)
        if pending is None:
            return []  # answered already, or timed out
        ref, deadline, req, _dst = pending
        if _not_controller(msg) and now < deadline:
            broker.controller_failed()
            dst = broker.controller_id()
            self.pending[msg.ref] = (ref, deadline, req, dst)
            return [Send(dst, _resent(req, msg.ref, max(1, deadline - now)))]
        return [Reply(replace(msg, ref=ref))]

    def expire(self, now: int) -> list[Effect]:
        """The client's answers for requests the controller never answered in time."""
        out: list[Effect] = []
        for token, (ref, deadline, req, _dst) in list(self.pending.items()):
            if now >= deadline:
                del self.pending[token]
                out.append(_timed_out(ref, req))
        return out


def _resent(req: AdminRequest, ref: Any, timeout_ms: int) -> AdminRequest:
    """``replace(req, ref=ref, timeout_ms=timeout_ms)``: a CreateTopics (the
    one a broker sends on from controller to controller until one takes it,
    as often as every round trip) built directly, since ``replace`` is an
    interpreted generic call (~10,000 instructions); the rest by ``replace``."""
    if isinstance(req, CreateTopicsRequest):
        return CreateTopicsRequest(ref, req.topics, timeout_ms, req.internal)
    return replace(req, ref=ref, timeout_ms=timeout_ms)


def _timed_out(ref: Any, req: AdminRequest) -> Effect:
    if isinstance(req, IncrementalAlterConfigsRequest):
        return Reply(IncrementalAlterConfigsResponse(ref, tuple(
            AlterConfigsResult(r.resource_type, r.name, Errors.REQUEST_TIMED_OUT) for r in req.resources)))
    if isinstance(req, AlterPartitionReassignmentsRequest):
        return Reply(AlterPartitionReassignmentsResponse(ref, tuple(
            ReassignmentResult(r.tp, Errors.REQUEST_TIMED_OUT) for r in req.partitions)))
    if isinstance(req, ListPartitionReassignmentsRequest):
        return Reply(ListPartitionReassignmentsResponse(ref, Errors.REQUEST_TIMED_OUT))
    if isinstance(req, UnregisterBrokerRequest):
        return Reply(UnregisterBrokerResponse(ref, Errors.REQUEST_TIMED_OUT))
    return Reply(CreateTopicsResponse(ref, tuple(CreateTopicResult(t.name, Errors.REQUEST_TIMED_OUT) for t in req.topics)))
