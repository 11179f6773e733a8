"""Rules of seeds 000 and 002 an audit found untested or unfaithful, each
pinned by a test named after it: the stale-fetch fence against the broker
epoch in the metadata, the maximal-ISR rule on expansions (seed 002's
example), the HW of a leader alone in its ISR, follower state on a new leader
epoch, registrations older than the partition epoch, and the partition epoch
in AlterPartition."""

from __future__ import annotations

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    Errors,
    PartitionRecord,
    ProduceRequest,
    RegisterBrokerRecord,
    BrokerEndpoint,
)
from reference_impl.core.metadata import PartitionRegistration
from reference_impl.core.partition import NEVER
from tests.core.brokerkit import TP, MetaFeed, broker_epoch_of, make_broker, replica_fetch, sends

MIN_ISR_2 = (("min.insync.replicas", "2"),)


def leader_with(cfg=None, isr=(1, 2, 3), configs=(), feed=None):
    feed = feed or MetaFeed()
    b = make_broker(1, cfg)
    b.apply_committed(feed.cluster(isr=isr, configs=configs), 0)
    return b, feed


def produce(b, count, now, acks=1):
    return b.handle(ProduceRequest("p", TP, acks, count, None), now, None)


def alter_requests(effects):
    return [s.msg for s in sends(effects, AlterPartitionRequest)]


def answer(b, req, error=Errors.NONE, isr=(1, 2, 3), partition_epoch=1, now=5):
    res = AlterPartitionResult(TP, error, 1, 0, tuple(isr), partition_epoch)
    return b.handle(AlterPartitionResponse(req.correlation_id, Errors.NONE, (res,)), now, 100)


# -- seed 000: the stale-fetch fence ---------------------------------------------------


def test_stale_fetch_fence_compares_with_the_broker_epoch_in_metadata_seed000():
    """Replica.updateFetchStateOrThrow: a fetch whose broker epoch is older
    than the live broker epoch the metadata holds is NOT_LEADER_OR_FOLLOWER
    and its LEO is not recorded, even on a leader that never saw a fetch from
    that broker (after a leader change there is no previous fetch to compare)."""
    b, _ = leader_with()
    produce(b, 10, 1)
    p = b.partitions[TP]
    _, resp = replica_fetch(b, 2, 10, 2, broker_epoch=broker_epoch_of(2) - 5)  # a previous incarnation
    assert resp is not None and resp.error == Errors.NOT_LEADER_OR_FOLLOWER
    assert p.remote[2].leo == -1
    _, resp = replica_fetch(b, 2, 10, 3)  # the current incarnation
    assert resp is not None and resp.error == Errors.NONE and p.remote[2].leo == 10


def test_stale_fetch_fence_skips_a_fenced_broker_and_a_fetch_without_epoch_seed000():
    """Kafka's getAliveBrokerEpoch has no epoch for a fenced broker, and a
    fetch that sends broker epoch -1 bypasses the check."""
    b, feed = leader_with()
    _, resp = replica_fetch(b, 2, 0, 2, broker_epoch=-1)
    assert resp is not None and resp.error == Errors.NONE
    b.apply_committed(feed.add(RegisterBrokerRecord(3, broker_epoch_of(3), "inc-3",
                                                    BrokerEndpoint(3, "127.0.0.1", 9003), fenced=True)), 3)
    _, resp = replica_fetch(b, 3, 0, 4, broker_epoch=1)
    assert resp is not None and resp.error == Errors.NONE


# -- seed 002: the maximal ISR on expansion -----------------------------------------------


def _seed002_expansion(cfg=None):
    """ISR [1], min ISR 2; replica 3 catches up and is proposed: ISR [1],
    maximal ISR [1, 3] (seed 002's [0] / [0, 2] with our ids)."""
    b, _ = leader_with(cfg, isr=(1,), configs=MIN_ISR_2)
    produce(b, 5, 1)
    effects, _ = replica_fetch(b, 3, 0, 2)
    (req,) = alter_requests(effects)
    replica_fetch(b, 3, 5, 3)
    return b, req


def test_pending_expansion_does_not_lift_the_min_isr_gate_hw_waits_for_the_controller_seed002():
    b, req = _seed002_expansion()
    p = b.partitions[TP]
    assert p.state.kind == "pending-expand" and p.state.isr == (1,) and p.state.maximal_isr == (1, 3)
    assert p.log.hw == 0
    answer(b, req, isr=(1, 3))
    assert p.state.kind == "committed" and p.log.hw == 5


def test_maximal_isr_off_applies_an_expansion_locally_so_the_hw_advances_before_the_controller_seed002():
    b, _ = _seed002_expansion(ProtocolConfig().with_variants(maximal_isr=False))
    p = b.partitions[TP]
    assert p.state.kind == "pending-expand" and p.state.isr == (1, 3)
    assert p.log.hw == 5


def test_maximal_isr_off_expansion_refused_by_the_controller_resets_to_the_committed_isr():
    b, req = _seed002_expansion(ProtocolConfig().with_variants(maximal_isr=False))
    answer(b, req, error=Errors.INELIGIBLE_REPLICA)
    p = b.partitions[TP]
    assert p.state.kind == "committed" and p.state.isr == (1,)


# -- seed 000: makeLeader / makeFollower --------------------------------------------------


def test_hw_jumps_to_the_leo_when_becoming_leader_with_isr_of_itself_seed000():
    """makeLeader ends with maybeIncrementLeaderHW: an ISR of one lets the HW
    jump to the leader's LEO in its new epoch."""
    b, feed = leader_with()
    produce(b, 7, 1)
    p = b.partitions[TP]
    assert p.log.hw == 0  # the followers have not fetched
    b.apply_committed(feed.add(PartitionRecord(TP, (1, 2, 3), (1,), 1, leader_epoch=1, partition_epoch=1)), 2)
    assert p.is_leader and p.leader_epoch == 1 and p.log.hw == p.log.leo == 7


def test_new_leader_epoch_clears_last_fetch_time_of_out_of_sync_followers_seed000():
    """Replica.resetReplicaState: ISR members count as fetched now; the
    others' last fetch time is cleared, so they must fetch in the new epoch."""
    b, feed = leader_with(isr=(1, 2))
    produce(b, 5, 1)
    replica_fetch(b, 2, 5, 2)
    replica_fetch(b, 3, 5, 2)
    p = b.partitions[TP]
    b.apply_committed(feed.add(PartitionRecord(TP, (1, 2, 3), (1, 2), 1, leader_epoch=1, partition_epoch=1)), 10)
    assert p.remote[2].last_fetch_time == 10
    assert p.remote[3].last_fetch_time == NEVER


def test_make_leader_and_make_follower_ignore_a_registration_with_an_older_partition_epoch_seed000():
    b, feed = leader_with()
    p = b.partitions[TP]
    b.apply_committed(feed.change(isr=(1, 2)), 1)  # partition epoch 1
    assert p.partition_epoch == 1
    old = PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 0, 0)
    assert p.make_leader(old, 2) == ([], False)
    assert p.state.isr == (1, 2) and p.partition_epoch == 1
    effects, changed = p.make_follower(PartitionRegistration((1, 2, 3), (1, 2, 3), 2, 0, 0), 3)
    assert (effects, changed) == ([], False) and p.is_leader


# -- seed 000: AlterPartition --------------------------------------------------------------


def test_alter_partition_carries_the_partition_epoch_seed000():
    b, feed = leader_with()
    b.apply_committed(feed.change(isr=(1, 2)), 1)  # partition epoch 1
    effects, _ = replica_fetch(b, 3, 0, 2)
    (req,) = alter_requests(effects)
    (item,) = req.items
    assert item.partition_epoch == 1 and item.leader_epoch == 0


def test_operation_not_attempted_resets_to_the_last_committed_isr_seed000():
    """handleAlterPartitionError: OPERATION_NOT_ATTEMPTED is an authoritative
    "not applied", so the leader resets to its last committed state."""
    b, _ = leader_with(isr=(1, 2))
    effects, _ = replica_fetch(b, 3, 0, 2)
    (req,) = alter_requests(effects)
    answer(b, req, error=Errors.OPERATION_NOT_ATTEMPTED)
    p = b.partitions[TP]
    assert p.state.kind == "committed" and p.state.isr == (1, 2) and p.state.maximal_isr == (1, 2)
