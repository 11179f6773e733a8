"""A controller RPC that reaches a broker-only node is refused, as Kafka's
broker refuses an API its listener does not enable (the socket server throws
``InvalidRequestException`` and closes the connection): no answer, so the
sender's request times out and it tries another node, and an ``rpc_refused``
trace event says what came from whom. A broker API on a controller-only node
likewise. Nothing is dropped silently."""

from __future__ import annotations

import pytest

from reference_impl.core.effects import Reply, Send, TraceEvent
from reference_impl.core.messages import (
    AllocateProducerIdsRequest,
    ProduceRequest,
    ReplicaFetchRequest,
    TopicPartition,
    AlterPartitionRequest,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    BrokerEndpoint,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    EndQuorumEpochRequest,
    GetReplicaLogInfoResponse,
    RaftFetchRequest,
    VoteRequest,
    VoteResponse,
)
from reference_impl.core.groups.messages import FindCoordinatorRequest
from reference_impl.core.node import BROKER_API_REFUSED, CONTROLLER_API_REFUSED, CONTROLLER_MESSAGES

from tests.core.test_node_cluster import build

VOTERS = (101, 102, 103)

#: one instance of every message only a controller (or KRaft voter) answers
SAMPLES = (
    BrokerRegistrationRequest(2, "inc-2", BrokerEndpoint(2, "127.0.0.1", 9002)),
    BrokerHeartbeatRequest(2, 5, 0),
    AlterPartitionRequest(2, 5, 1, ()),
    AllocateProducerIdsRequest(2, 5),
    VoteRequest(102, 3, 1, 10),
    VoteResponse(102, 0, 3, -1, True),
    BeginQuorumEpochRequest(102, 3),
    BeginQuorumEpochResponse(102, 0, 3, 101),
    EndQuorumEpochRequest(102, 3),
    RaftFetchRequest(102, 3, 10, 1),
    GetReplicaLogInfoResponse(2, 5, 1),
)


def test_every_controller_message_type_has_a_sample() -> None:
    assert {type(m) for m in SAMPLES} == set(CONTROLLER_MESSAGES)


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_broker_only_node_refuses_a_controller_rpc_with_a_trace_and_no_answer(msg) -> None:
    node = build(1, {"broker"}, VOTERS)
    node.start(0, 0)
    effects = node.handle(msg, 10, 102, 10)
    assert [e for e in effects if isinstance(e, (Send, Reply))] == []
    refused = [e.data for e in effects if isinstance(e, TraceEvent) and e.kind == "rpc_refused"]
    assert refused == [{"api": type(msg).__name__, "src": 102, "reason": CONTROLLER_API_REFUSED}]


def test_combined_node_answers_the_same_rpc_it_would_refuse_as_a_broker_only_node() -> None:
    """The refusal is the broker-only node's: a node with a controller answers a vote."""
    node = build(101, {"broker", "controller"}, VOTERS)
    node.start(0, 0)
    effects = node.handle(VoteRequest(102, 3, 1, 10), 10, 102, 10)
    assert [type(e.msg) for e in effects if isinstance(e, Send)] == [VoteResponse]
    assert not [e for e in effects if isinstance(e, TraceEvent) and e.kind == "rpc_refused"]


@pytest.mark.parametrize("msg", [
    ProduceRequest("p", TopicPartition("t", 0), -1, 1, None),
    ReplicaFetchRequest(replica_id=2, broker_epoch=5, correlation_id=1, partitions=()),
    FindCoordinatorRequest("c", ("g",)),
], ids=lambda m: type(m).__name__)
def test_controller_only_node_refuses_a_broker_api_with_a_trace_and_no_answer(msg) -> None:
    node = build(101, {"controller"}, VOTERS)
    node.start(0, 0)
    effects = node.handle(msg, 10, 2, 10)
    assert [e for e in effects if isinstance(e, (Send, Reply))] == []
    refused = [e.data for e in effects if isinstance(e, TraceEvent) and e.kind == "rpc_refused"]
    assert refused == [{"api": type(msg).__name__, "src": 2, "reason": BROKER_API_REFUSED}]


def test_the_messages_routed_to_the_broker_by_type_identity_are_broker_only() -> None:
    """Node.handle sends the four messages of nearly every call (replica
    fetches and their answers, produces, consumer fetches) to the broker role
    by type identity, before its set of the types that may concern another
    role: that shortcut holds only while none of them is in the set."""
    from reference_impl.core.messages import ClientFetchRequest, ReplicaFetchResponse
    from reference_impl.core.node import _NOT_BROKER_ONLY

    hot = {ReplicaFetchRequest, ReplicaFetchResponse, ProduceRequest, ClientFetchRequest}
    assert not hot & _NOT_BROKER_ONLY


def test_a_node_routes_each_message_by_its_type_and_sender_whatever_it_saw_before() -> None:
    """Node._for_controller finds a message type's route once per type
    (``Node._routes``), never its answer: a forwarded admin request is the
    controller's from a broker and the broker's to forward from a client
    (Kafka's ForwardingManager), on one node in either order; a quorum RPC
    is the controller's; a RaftFetchResponse is the controller's only on a
    node that has one (a broker-only node's observer fetches)."""
    from reference_impl.core.messages import CreateTopicsRequest, RaftFetchResponse

    broker_only = build(1, {"broker"}, VOTERS)
    combined = build(101, {"broker", "controller"}, VOTERS)
    create = CreateTopicsRequest("c", ())
    for node in (broker_only, combined):
        assert node._for_controller(create, None) is False  # a client's: forwarded
        assert node._for_controller(create, 2) is True  # a broker's: committed here
        assert node._for_controller(create, None) is False
        assert node._for_controller(VoteRequest(102, 3, 1, 10), 102) is True
    answer = RaftFetchResponse(101, 3, 0, 1, 10)
    assert broker_only._for_controller(answer, 101) is False and combined._for_controller(answer, 102) is True
    assert broker_only._for_controller(ProduceRequest("p", TopicPartition("t", 0), -1, 1, None), None) is False
