"""Whole nodes talking in-process (the raft test kit's plain event loop, not
the simulator): KRaft elects an active controller, brokers register, a topic
is created through a broker, a partition leader is elected, and an acks=all
produce is acknowledged once the followers have replicated it."""

from __future__ import annotations

import random

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.messages import (
    BrokerEndpoint,
    ClientFetchRequest,
    ClientFetchResponse,
    ControlledShutdownRequest,
    CreateTopicsRequest,
    CreateTopicsResponse,
    Errors,
    FetchPartitionRequest,
    MetadataRequest,
    MetadataResponse,
    NewTopic,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from reference_impl.core.node import Node
from reference_impl.core.raft.testkit import Loop
from reference_impl.core.storage import StoredState

TP = TopicPartition("t", 0)


def build(node_id, roles, voters, stored=None, cfg=None, rng_seed=None, incarnation=""):
    """A node; a restarted process passes its own ``incarnation`` suffix (a
    registration with the old incarnation id would be taken for a retry of
    the old registration) and rng seed."""
    return Node(
        node_id,
        roles=roles,
        config=cfg or ProtocolConfig(),
        voters=voters,
        stored=stored or StoredState(),
        rng=random.Random(node_id if rng_seed is None else rng_seed),
        incarnation_id=f"inc-{node_id}{incarnation}",
        endpoint=BrokerEndpoint(node_id, "127.0.0.1", 9000 + node_id),
    )


def combined_cluster() -> tuple[Loop, tuple[int, ...]]:
    """Three nodes 1..3, each a broker and a KRaft voter."""
    loop = Loop(latency=2)
    voters = (1, 2, 3)
    for i in voters:
        loop.add(i, build(i, {"broker", "controller"}, voters))
    return loop, voters


def dedicated_cluster() -> tuple[Loop, tuple[int, ...]]:
    """Controllers 101..103 (the voters) and brokers 1..3."""
    loop = Loop(latency=2)
    voters = (101, 102, 103)
    for i in voters:
        loop.add(i, build(i, {"controller"}, voters))
    for i in (1, 2, 3):
        loop.add(i, build(i, {"broker"}, voters))
    return loop, voters


def replies_of(loop, cls):
    return [m for _, _, m in loop.replies if isinstance(m, cls)]


def create_and_produce(loop, broker_ids, entry):
    assert loop.run_until_true(
        lambda: all(loop.nodes[b].broker.broker_epoch >= 0 and not loop.nodes[b].broker.is_fenced for b in broker_ids),
        limit_ms=30_000,
    )
    loop.deliver(entry, CreateTopicsRequest("create", (NewTopic("t", 1, 3, (("min.insync.replicas", "2"),)),)))
    assert loop.run_until_true(lambda: replies_of(loop, CreateTopicsResponse), limit_ms=10_000)
    (created,) = replies_of(loop, CreateTopicsResponse)
    assert created.results[0].error == Errors.NONE

    def leader_known():
        return any(loop.nodes[b].broker.partitions.get(TP) is not None and loop.nodes[b].broker.partitions[TP].is_leader
                   for b in broker_ids)

    assert loop.run_until_true(leader_known, limit_ms=10_000)
    leader = next(b for b in broker_ids if loop.nodes[b].broker.partitions[TP].is_leader)
    # brokers learn metadata at their own pace (sequential consistency, seed 001 §1.2.1)
    assert loop.run_until_true(lambda: TP in loop.nodes[entry].broker.image.partitions, limit_ms=5_000)
    loop.deliver(entry, MetadataRequest("md", ("t",)))
    md = replies_of(loop, MetadataResponse)[-1]
    assert md.topics[0].partitions[0].leader == leader
    loop.deliver(leader, ProduceRequest("send-1", TP, -1, 2, ("a", "b")))
    assert loop.run_until_true(lambda: replies_of(loop, ProduceResponse), limit_ms=10_000)
    (acked,) = replies_of(loop, ProduceResponse)
    assert (acked.error, acked.base_offset) == (Errors.NONE, 0)
    for b in broker_ids:
        assert [x.payload for x in loop.nodes[b].broker.partitions[TP].log.batches] == [("a", "b")]
    # a consumer on the leader reads the acknowledged records (they are below the HW)
    loop.deliver(leader, ClientFetchRequest("read", (FetchPartitionRequest(TP, 0),), max_wait_ms=0))
    read = replies_of(loop, ClientFetchResponse)[-1]
    assert [x.payload for x in read.partitions[0].batches] == [("a", "b")]
    return leader


def test_combined_nodes_create_topic_elect_leader_and_ack_acks_all():
    loop, voters = combined_cluster()
    create_and_produce(loop, voters, entry=1)


def test_broker_only_nodes_learn_metadata_as_kraft_observers():
    loop, voters = dedicated_cluster()
    create_and_produce(loop, (1, 2, 3), entry=2)


def test_leader_failover_keeps_acknowledged_records():
    loop, voters = combined_cluster()
    leader = create_and_produce(loop, voters, entry=1)
    loop.crash(leader)
    others = [b for b in voters if b != leader]

    def new_leader():
        return any(loop.nodes[b].broker.partitions[TP].is_leader for b in others)

    assert loop.run_until_true(new_leader, limit_ms=30_000)
    nl = next(b for b in others if loop.nodes[b].broker.partitions[TP].is_leader)
    p = loop.nodes[nl].broker.partitions[TP]
    assert p.leader_epoch >= 1
    assert [x.payload for x in p.log.batches] == [("a", "b")]


def test_controlled_shutdown_moves_leadership_then_halts_with_clean_marker():
    from reference_impl.core.storage import CLEAN_SHUTDOWN, CleanShutdown

    loop, voters = dedicated_cluster()
    leader = create_and_produce(loop, (1, 2, 3), entry=2)
    node = loop.nodes[leader]
    epoch = node.broker.broker_epoch
    loop.deliver(leader, ControlledShutdownRequest())
    assert loop.run_until_true(lambda: node.halted, limit_ms=30_000)
    # the controller let it go only after committing another leader
    active = next(loop.nodes[v].controller for v in voters if loop.nodes[v].controller.is_active)
    assert active.image.partitions[TP].leader not in (leader, -1)
    others = [b for b in (1, 2, 3) if b != leader]
    # leadership moved to another broker before the halt
    assert loop.run_until_true(lambda: any(loop.nodes[b].broker.partitions[TP].is_leader for b in others), limit_ms=10_000)
    assert loop.disks[leader].durable.files.get(CLEAN_SHUTDOWN) == CleanShutdown(epoch)


def test_restarted_broker_reloads_its_log_and_rejoins_the_isr():
    loop, voters = dedicated_cluster()
    leader = create_and_produce(loop, (1, 2, 3), entry=2)
    victim = next(b for b in (1, 2, 3) if b != leader)
    node = loop.restart(victim, lambda stored: build(victim, {"broker"}, voters, stored=stored))
    loaded = [e.data for t, n, e in loop.traces if n == victim and e.kind == "loaded"]
    assert loaded and loaded[-1]["leo"] == 2
    lp = loop.nodes[leader].broker.partitions[TP]

    def back_in_isr():
        return victim in lp.state.isr and lp.state.kind == "committed" and node.broker.partitions[TP].log.leo == 2

    assert loop.run_until_true(back_in_isr, limit_ms=60_000)
