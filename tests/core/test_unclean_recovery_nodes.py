"""Unclean recovery with whole nodes (seed 002, "Unclean recovery"): the
brokers answer the controller's GetReplicaLogInfo from their real logs, and
the longest log is elected.

The story is seed 002's: a follower (``stale``) is cut off from the other
brokers and falls out of the ISR; the ISR {leader, other} acknowledges more
records; then both crash (no clean-shutdown marker) and restart. With the
recovery manager on (Balanced) the controller waits for the LastKnownELR
members to come back and elects the longest log, so the acknowledged records
survive. With the old unclean election the stale follower leads and they are
lost (the control test: the scenario really does separate the two).
"""

from __future__ import annotations

import random

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.messages import (
    NO_LEADER,
    BrokerEndpoint,
    GetReplicaLogInfoRequest,
    ProduceRequest,
    ProduceResponse,
)
from reference_impl.core.metadata import RECOVERING
from reference_impl.core.node import Node
from reference_impl.core.raft.testkit import Loop
from reference_impl.core.storage import StoredState

from tests.core.test_node_cluster import TP, build, create_and_produce, replies_of

VOTERS = (101, 102, 103)
BROKERS = (1, 2, 3)


def restarted(node_id: int, stored: StoredState, cfg: ProtocolConfig) -> Node:
    """A broker process started again, with a fresh incarnation id."""
    return build(node_id, {"broker"}, VOTERS, stored=stored, cfg=cfg, rng_seed=node_id + 1000, incarnation="-restarted")


def _lose_isr_and_elr(cfg: ProtocolConfig):
    loop = Loop(latency=2)
    for i in VOTERS:
        loop.add(i, build(i, {"controller"}, VOTERS, cfg=cfg))
    for i in BROKERS:
        loop.add(i, build(i, {"broker"}, VOTERS, cfg=cfg))
    leader = create_and_produce(loop, BROKERS, entry=2)
    stale, other = [b for b in BROKERS if b != leader]

    def active():
        return next(loop.nodes[v].controller for v in VOTERS if v not in loop.down and loop.nodes[v].controller.is_active)

    # the stale follower loses its links to the other brokers (not to the controllers)
    loop.cut(stale, leader)
    loop.cut(stale, other)
    loop.deliver(leader, ProduceRequest("send-2", TP, -1, 1, ("c",)))
    loop.deliver(leader, ProduceRequest("send-3", TP, -1, 1, ("d",)))
    assert loop.run_until_true(lambda: len(replies_of(loop, ProduceResponse)) == 3, limit_ms=30_000)
    assert all(r.error == 0 for r in replies_of(loop, ProduceResponse))
    assert set(active().image.partitions[TP].isr) == {leader, other}
    # both holders of the acknowledged records crash
    loop.crash(leader)
    loop.crash(other)
    return loop, leader, stale, other, active


def test_balanced_recovery_elects_the_longest_log_and_keeps_acknowledged_records():
    cfg = ProtocolConfig(
        replica_lag_time_max_ms=2000, unclean_recovery_manager_enabled=True, unclean_recovery_strategy="Balanced"
    )
    loop, leader, stale, other, active = _lose_isr_and_elr(cfg)
    assert loop.run_until_true(lambda: set(active().image.partitions[TP].elr) == {leader, other}, limit_ms=30_000)
    # Balanced: the fenced ELR members are waited for, the stale replica is not elected
    loop.run_for(5000)
    assert active().image.partitions[TP].leader == NO_LEADER
    logs = {b: loop.nodes[b].broker.partitions[TP].log for b in BROKERS}
    lengths = {b: (log.latest_epoch, log.leo) for b, log in logs.items()}
    assert lengths[stale][1] < lengths[leader][1] and lengths[stale][1] < lengths[other][1]
    replicas = active().image.partitions[TP].replicas
    longest = max(BROKERS, key=lambda b: (lengths[b], -replicas.index(b)))
    for b in (leader, other):
        loop.restart(b, lambda stored, b=b: restarted(b, stored, cfg))
    assert loop.run_until_true(lambda: active().image.partitions[TP].leader != NO_LEADER, limit_ms=60_000)
    p = active().image.partitions[TP]
    assert p.leader == longest and p.leader_recovery_state == RECOVERING
    elections = [e.data for _t, _n, e in loop.traces if e.kind == "election"]
    assert elections[-1]["data_kind"] == "recovery" and elections[-1]["leader"] == p.leader
    # every replica was asked, and answered from its real log
    asked = {d for (_t, _s, d, m) in loop.sent if isinstance(m, GetReplicaLogInfoRequest)}
    assert asked == set(BROKERS)
    assert loop.run_until_true(lambda: loop.nodes[p.leader].broker.partitions[TP].is_leader, limit_ms=10_000)
    log = loop.nodes[p.leader].broker.partitions[TP].log
    assert [b.payload for b in log.batches] == [("a", "b"), ("c",), ("d",)]


def test_control_old_unclean_election_elects_the_stale_replica_and_loses_acknowledged_records():
    cfg = ProtocolConfig(replica_lag_time_max_ms=2000).with_variants(unclean_election=True)
    loop, leader, stale, other, active = _lose_isr_and_elr(cfg)
    assert loop.run_until_true(lambda: active().image.partitions[TP].leader == stale, limit_ms=30_000)
    elections = [e.data for _t, _n, e in loop.traces if e.kind == "election"]
    assert elections[-1]["data_kind"] == "unclean"
    assert not any(isinstance(m, GetReplicaLogInfoRequest) for (_t, _s, _d, m) in loop.sent)
    log = loop.nodes[stale].broker.partitions[TP].log
    assert [b.payload for b in log.batches] == [("a", "b")]


def test_combined_nodes_active_controller_asks_its_own_broker_too():
    """Combined mode: the active controller is also a replica, so one
    GetReplicaLogInfo goes to its own node and the answer comes back to its
    controller half. Replication between the brokers is cut (fetches dropped)
    while the quorum stays connected."""
    from reference_impl.core.messages import ReplicaFetchRequest

    cfg = ProtocolConfig(
        replica_lag_time_max_ms=2000, unclean_recovery_manager_enabled=True, unclean_recovery_strategy="Aggressive"
    )
    voters = (1, 2, 3)

    def combined(node_id: int, stored: StoredState, incarnation: str) -> Node:
        return Node(
            node_id,
            roles={"broker", "controller"},
            config=cfg,
            voters=voters,
            stored=stored,
            rng=random.Random(node_id + 7),
            incarnation_id=incarnation,
            endpoint=BrokerEndpoint(node_id, "127.0.0.1", 9000 + node_id),
        )

    loop = Loop(latency=2)
    for i in voters:
        loop.add(i, combined(i, StoredState(), f"inc-{i}"))
    leader = create_and_produce(loop, voters, entry=1)
    a, b = [v for v in voters if v != leader]

    def active():
        act = [loop.nodes[v].controller for v in voters if v not in loop.down and loop.nodes[v].controller.is_active]
        return act[0] if len(act) == 1 else None

    def part():
        return active().image.partitions[TP]

    # the followers stop replicating: ISR = {leader}, ELR = {a, b}
    loop.drop = lambda s, d, m: isinstance(m, ReplicaFetchRequest) and s in (a, b)
    # a follower whose LEO equals the leader's stays caught up: write once more (acks=1)
    loop.deliver(leader, ProduceRequest("send-2", TP, 1, 1, ("c",)))
    assert loop.run_until_true(lambda: active() is not None and part().isr == (leader,), limit_ms=30_000)
    assert set(part().elr) == {a, b}
    # a and b restart uncleanly one at a time (the quorum keeps a majority): ELR -> LastKnownELR
    for n, v in enumerate((a, b)):
        loop.restart(v, lambda stored, v=v, n=n: combined(v, stored, f"inc-{v}-restart-{n}"))
        assert loop.run_until_true(
            lambda v=v: active() is not None and v in part().last_known_elr and not active().image.brokers[v].fenced,
            limit_ms=30_000,
        )
    # the last ISR member dies: its ELR place is fenced, Aggressive recovers from a and b
    loop.crash(leader)
    assert loop.run_until_true(lambda: active() is not None and part().leader not in (leader, NO_LEADER), 60_000)
    p = part()
    assert p.leader in (a, b) and p.leader_recovery_state == RECOVERING
    ctl = next(v for v in voters if v not in loop.down and loop.nodes[v].controller.is_active)
    asked = {(s, d) for (_t, s, d, m) in loop.sent if isinstance(m, GetReplicaLogInfoRequest)}
    assert (ctl, ctl) in asked, "the active controller asked its own broker"
