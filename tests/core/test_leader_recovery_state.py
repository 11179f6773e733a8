"""After an unclean election the partition is RECOVERING (seed 000, "Unclean
leader election & Eligible Leader Replicas"); the new leader's later ISR
proposals say RECOVERED, so the ISR can grow again. A leader that kept
proposing RECOVERING with two or more members would be refused forever and
the partition would stay stuck at an ISR of one."""

from __future__ import annotations

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.messages import ProduceRequest
from reference_impl.core.metadata import RECOVERED, RECOVERING
from reference_impl.core.raft.testkit import Loop

from tests.core.test_node_cluster import TP, build, create_and_produce


def test_isr_expands_and_partition_recovers_after_unclean_election():
    cfg = ProtocolConfig(replica_lag_time_max_ms=2000).with_variants(unclean_election=True, kip966=False)
    loop = Loop(latency=2)
    voters = (101, 102, 103)
    for i in voters:
        loop.add(i, build(i, {"controller"}, voters, cfg=cfg))
    for i in (1, 2, 3):
        loop.add(i, build(i, {"broker"}, voters, cfg=cfg))
    leader = create_and_produce(loop, (1, 2, 3), entry=2)
    f1, f2 = [b for b in (1, 2, 3) if b != leader]

    def active():
        return next(loop.nodes[v].controller for v in voters if loop.nodes[v].controller.is_active)

    # both followers stop replicating (still heartbeating to the controllers): ISR shrinks to the leader
    loop.cut(leader, f1)
    loop.cut(leader, f2)
    # a follower whose LEO equals the leader's stays caught up (isCaughtUp), so keep writing (acks=1)
    loop.deliver(leader, ProduceRequest("send-2", TP, 1, 1, ("c",)))
    assert loop.run_until_true(lambda: active().image.partitions[TP].isr == (leader,), limit_ms=30_000)
    # the last ISR member dies: only an unclean election can bring the partition back
    loop.crash(leader)
    assert loop.run_until_true(
        lambda: active().image.partitions[TP].leader in (f1, f2), limit_ms=30_000
    )
    reg = active().image.partitions[TP]
    assert reg.leader_recovery_state == RECOVERING
    # the network heals, the old leader comes back: the ISR grows and the state becomes RECOVERED
    loop.heal()
    loop.restart(leader, lambda stored: build(leader, {"broker"}, voters, stored=stored, cfg=cfg))
    assert loop.run_until_true(lambda: len(active().image.partitions[TP].isr) == 3, limit_ms=60_000)
    assert active().image.partitions[TP].leader_recovery_state == RECOVERED
