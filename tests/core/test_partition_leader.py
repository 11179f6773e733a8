"""Leader-side partition rules (seed 000: maybeIncrementLeaderHW, ReplicaState,
ISR states, maybeShrinkIsr / maybeExpandIsr, AlterPartition; seed 002's HW gate)."""

from __future__ import annotations

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    Errors,
    PartitionRecord,
    ProduceRequest,
)
from reference_impl.core.partition import ReplicaState
from tests.core.brokerkit import TP, MetaFeed, broker_epoch_of, make_broker, replica_fetch, sends, traces

LAG = 30000


def leader_with(cfg=None, isr=(1, 2, 3), replicas=(1, 2, 3), configs=(), feed=None):
    feed = feed or MetaFeed()
    b = make_broker(1, cfg)
    b.apply_committed(feed.cluster(replicas=replicas, isr=isr, configs=configs), 0)
    return b, feed


def produce(b, count, now, acks=1, ref="p"):
    return b.handle(ProduceRequest(ref, TP, acks, count, None), now, None)


def alter_requests(effects):
    return [s.msg for s in sends(effects, AlterPartitionRequest)]


# -- the high watermark -------------------------------------------------------


def test_hw_is_min_leo_over_maximal_isr_seed_000_example():
    # ISR {1,2,3}; leader LEO 105, replica 2 at 104, replica 3 at 102 => HW 102
    b, _ = leader_with()
    for _ in range(105):
        produce(b, 1, 1)
    replica_fetch(b, 2, 104, 2)
    replica_fetch(b, 3, 102, 2)
    p = b.partitions[TP]
    assert p.log.leo == 105
    assert p.log.hw == 102
    # replica 3 catches up (and 2 too): the HW jumps to 105
    replica_fetch(b, 3, 105, 3)
    assert p.log.hw == 104
    replica_fetch(b, 2, 105, 3)
    assert p.log.hw == 105


def test_hw_waits_for_caught_up_eligible_replica_outside_isr():
    # replica 3 is not in the ISR but is caught up (fetched at the LEO): it still holds the HW
    b, _ = leader_with(isr=(1, 2))
    produce(b, 10, 1)
    replica_fetch(b, 3, 10, 2)  # caught up, but ISR expansion needs an AlterPartition round trip
    produce(b, 5, 3)  # LEO 15
    replica_fetch(b, 2, 15, 4)
    assert b.partitions[TP].log.hw == 10


def test_hw_does_not_advance_under_min_isr_min_isr_hw_gate():
    b, _ = leader_with(isr=(1,), configs=(("min.insync.replicas", "2"),))
    produce(b, 5, 1)
    assert b.partitions[TP].log.hw == 0


def test_hw_advances_under_min_isr_with_min_isr_hw_gate_off():
    b, _ = leader_with(ProtocolConfig().with_variants(min_isr_hw_gate=False), isr=(1,),
                       configs=(("min.insync.replicas", "2"),))
    produce(b, 5, 1)
    assert b.partitions[TP].log.hw == 5


def test_kip966_off_still_holds_the_hw_under_min_isr_as_kafka_does_without_elr():
    """KAFKA-15583's rule (Kafka 3.7+) does not depend on ELR: a Kafka 4.4
    formatted with eligible.leader.replicas.version=0 still holds the HW."""
    b, _ = leader_with(ProtocolConfig().with_variants(kip966=False), isr=(1,), configs=(("min.insync.replicas", "2"),))
    produce(b, 5, 1)
    assert b.partitions[TP].log.hw == 0


def test_effective_min_isr_is_capped_by_replication_factor():
    b, _ = leader_with(isr=(1,), replicas=(1,), configs=(("min.insync.replicas", "3"),))
    produce(b, 5, 1)
    assert b.partitions[TP].log.hw == 5


# -- caught-up rule -------------------------------------------------------------


def test_two_tier_caught_up_rule():
    r = ReplicaState(2)
    # fetch reaching the leader's current LEO: caught up now
    r.update_fetch_state(10, 0, now=100, leader_leo=10, broker_epoch=12, leader_epoch=0)
    assert r.last_caught_up_time == 100
    # fetch below current LEO (12) but reaching the LEO of the previous fetch (10): the previous fetch time
    r.update_fetch_state(10, 0, now=200, leader_leo=12, broker_epoch=12, leader_epoch=0)
    assert r.last_caught_up_time == 100
    r.update_fetch_state(12, 0, now=300, leader_leo=15, broker_epoch=12, leader_epoch=0)
    assert r.last_caught_up_time == 200  # reached 12, the leader LEO as of the fetch at 200
    # falling further behind: unchanged
    r.update_fetch_state(13, 0, now=400, leader_leo=20, broker_epoch=12, leader_epoch=0)
    assert r.last_caught_up_time == 200


def test_is_caught_up_at_leader_leo_or_within_lag():
    r = ReplicaState(2, leo=10, last_caught_up_time=0)
    assert r.is_caught_up(10, now=10**9, max_lag_ms=LAG)
    assert r.is_caught_up(11, now=LAG, max_lag_ms=LAG)
    assert not r.is_caught_up(11, now=LAG + 1, max_lag_ms=LAG)


def test_a_first_fetch_behind_the_leader_is_not_caught_up_as_of_time_zero():
    """Kafka's "never" is lastFetchTimeMs = 0, i.e. 1970 on a wall clock; node
    clocks here start at 0, so never must be NEVER. A replica outside the ISR
    that fetches once from far behind must not count as caught up (and hold
    back the HW) for the first replica.lag.time.max.ms of the run."""
    b, _ = leader_with(isr=(1, 2))
    produce(b, 10, 1)
    replica_fetch(b, 2, 10, 2)
    p = b.partitions[TP]
    assert p.log.hw == 10
    produce(b, 10, 3)
    replica_fetch(b, 3, 5, 4)  # first fetch ever, below the HW: not eligible to join the ISR
    assert not p.remote[3].is_caught_up(p.log.leo, now=5, max_lag_ms=LAG)
    replica_fetch(b, 2, 20, 5)
    assert p.log.hw == 20  # not held at 5 by replica 3


def test_a_leader_re_elected_in_a_new_epoch_keeps_its_followers_offsets():
    """Replica.resetReplicaState with isNewLeader=false: the followers fetched
    from this same leader, so their LEOs stand and the HW need not wait a
    fetch round; a broker that *becomes* leader forgets them."""
    b, feed = leader_with()
    produce(b, 10, 1)
    replica_fetch(b, 2, 10, 2)
    replica_fetch(b, 3, 8, 2)
    p = b.partitions[TP]
    # same leader, new epoch (the controller never does this today, but a
    # registration may: Kafka bumped the epoch on ISR shrinks before 3.6)
    b.apply_committed(feed.add(PartitionRecord(TP, (1, 2, 3), (1, 2, 3), 1, leader_epoch=1, partition_epoch=1)), 3)
    assert p.leader_epoch == 1 and (p.remote[2].leo, p.remote[3].leo) == (10, 8)
    b.apply_committed(feed.change(leader=2), 4)
    b.apply_committed(feed.change(leader=1), 5)  # leader again after following
    assert (p.remote[2].leo, p.remote[3].leo) == (-1, -1)


# -- shrink ---------------------------------------------------------------------


def test_isr_shrink_runs_every_half_lag_and_removes_lagging_follower():
    b, _ = leader_with()
    produce(b, 5, 1)
    replica_fetch(b, 2, 5, 10)
    effects = b.tick(LAG // 2)
    assert alter_requests(effects) == []  # nobody lags yet
    replica_fetch(b, 2, 5, LAG)
    effects = b.tick(LAG + 1)
    reqs = alter_requests(effects)
    assert len(reqs) == 1
    item = reqs[0].items[0]
    assert [r for r, _ in item.new_isr] == [1, 2]
    assert dict(item.new_isr)[2] == broker_epoch_of(2)


def test_pending_shrink_keeps_maximal_isr_for_hw():
    b, _ = leader_with()
    produce(b, 5, 1)
    replica_fetch(b, 2, 5, LAG)
    b.tick(LAG + 1)  # replica 3 lags: shrink proposed
    p = b.partitions[TP]
    assert p.state.kind == "pending-shrink"
    assert p.state.maximal_isr == (1, 2, 3)
    assert p.log.hw == 0  # still waits for replica 3
    trace = traces(b.tick(LAG + 2) or [], "isr")
    assert trace == []


def test_shrink_applied_locally_with_maximal_isr_off():
    b, _ = leader_with(ProtocolConfig().with_variants(maximal_isr=False))
    produce(b, 5, 1)
    replica_fetch(b, 2, 5, LAG)
    effects = b.tick(LAG + 1)
    p = b.partitions[TP]
    assert p.state.kind == "pending-shrink"
    assert p.state.maximal_isr == (1, 2)
    assert p.log.hw == 5  # advanced past replica 3 before the controller agreed
    assert traces(effects, "hw")[-1]["hw"] == 5


def test_one_alter_partition_in_flight_per_broker():
    feed = MetaFeed()
    b = make_broker(1)
    b.apply_committed(feed.cluster(partitions=2), 0)
    effects = b.tick(LAG // 2 + LAG)  # both partitions shrink
    reqs = alter_requests(effects)
    assert len(reqs) == 1 and len(reqs[0].items) == 2
    assert alter_requests(b.tick(LAG // 2 + LAG + 1)) == []


# -- expansion -------------------------------------------------------------------


def test_expansion_requires_leo_at_hw_and_current_epoch_fetch():
    b, _ = leader_with(isr=(1, 2))
    produce(b, 10, 1)
    replica_fetch(b, 2, 10, 2)
    assert b.partitions[TP].log.hw == 10
    effects, _ = replica_fetch(b, 3, 5, 3)
    assert alter_requests(effects) == []  # below the HW
    effects, _ = replica_fetch(b, 3, 10, 4)
    reqs = alter_requests(effects)
    assert [r for r, _ in reqs[0].items[0].new_isr] == [1, 2, 3]
    p = b.partitions[TP]
    assert p.state.kind == "pending-expand"
    assert p.state.isr == (1, 2) and p.state.maximal_isr == (1, 2, 3)


def test_expansion_refused_before_leader_epoch_start_offset():
    # leader 1 became leader in epoch 1 at LEO 10 while its HW was still 4: a
    # follower at 6 has reached the HW but not the epoch start offset
    feed = MetaFeed()
    b = make_broker(1)
    b.apply_committed(feed.cluster(replicas=(1, 2, 3), isr=(1, 2), leader=2), 0)
    from reference_impl.core.messages import Batch, FetchPartitionResponse
    p = b.partitions[TP]
    p.handle_fetch_response(FetchPartitionResponse(TP, 0, high_watermark=4, batches=(Batch(0, 0, 10, None),)), 1)
    assert (p.log.leo, p.log.hw) == (10, 4)
    b.apply_committed(feed.change(leader=1), 2)  # epoch 1; replica 2 (in the ISR) holds the HW at 4
    assert p.leader_epoch_start_offset == 10
    assert p.log.hw == 4
    effects, _ = replica_fetch(b, 3, 6, 3, leader_epoch=1, last_fetched_epoch=0)
    assert alter_requests(effects) == []


def test_expansion_allowed_before_epoch_start_with_strict_isr_expand_off():
    feed = MetaFeed()
    b = make_broker(1, ProtocolConfig().with_variants(strict_isr_expand=False))
    b.apply_committed(feed.cluster(replicas=(1, 2, 3), isr=(1, 2), leader=2), 0)
    from reference_impl.core.messages import Batch, FetchPartitionResponse
    p = b.partitions[TP]
    p.handle_fetch_response(FetchPartitionResponse(TP, 0, high_watermark=4, batches=(Batch(0, 0, 10, None),)), 1)
    b.apply_committed(feed.change(leader=1), 2)
    effects, _ = replica_fetch(b, 3, 6, 3, leader_epoch=1, last_fetched_epoch=0)
    assert len(alter_requests(effects)) == 1


def test_expansion_refused_for_fenced_or_shutting_down_broker():
    from reference_impl.core.messages import BrokerRegistrationChangeRecord
    b, feed = leader_with(isr=(1, 2))
    b.apply_committed(feed.add(BrokerRegistrationChangeRecord(3, broker_epoch_of(3), in_controlled_shutdown=True)), 1)
    effects, _ = replica_fetch(b, 3, 0, 2)
    assert alter_requests(effects) == []


def test_expansion_refused_on_broker_epoch_mismatch():
    b, _ = leader_with(isr=(1, 2))
    effects, _ = replica_fetch(b, 3, 0, 2, broker_epoch=99)  # a newer session the metadata has not seen
    assert alter_requests(effects) == []


# -- AlterPartition responses -------------------------------------------------------


def expand_pending(b):
    effects, _ = replica_fetch(b, 3, 0, 2)
    return alter_requests(effects)[0]


def respond(b, req, error=Errors.NONE, isr=(1, 2, 3), partition_epoch=1, leader_epoch=0, now=5, top=Errors.NONE):
    res = AlterPartitionResult(TP, error, 1, leader_epoch, tuple(isr), partition_epoch)
    return b.handle(AlterPartitionResponse(req.correlation_id, top, (res,)), now, 100)


def test_alter_partition_success_commits_isr_and_partition_epoch():
    b, _ = leader_with(isr=(1, 2))
    req = expand_pending(b)
    effects = respond(b, req)
    p = b.partitions[TP]
    assert p.state.kind == "committed" and p.state.isr == (1, 2, 3)
    assert p.partition_epoch == 1
    assert traces(effects, "isr")[-1]["state"] == "committed"


def test_stale_alter_partition_response_is_ignored():
    b, feed = leader_with(isr=(1, 2))
    req = expand_pending(b)
    # metadata moved on first (another change committed): the answer is stale
    b.apply_committed(feed.change(isr=(1,)), 3)
    p = b.partitions[TP]
    respond(b, req, isr=(1, 2, 3), partition_epoch=1)
    assert p.state.isr == (1,)
    # an answer with an unknown correlation id is ignored as well
    res = AlterPartitionResult(TP, Errors.NONE, 1, 0, (1, 2, 3), 9)
    b.handle(AlterPartitionResponse(12345, Errors.NONE, (res,)), 6, 100)
    assert p.state.isr == (1,)


def test_ineligible_replica_resets_to_last_committed_isr():
    b, _ = leader_with(isr=(1, 2))
    req = expand_pending(b)
    respond(b, req, error=Errors.INELIGIBLE_REPLICA)
    p = b.partitions[TP]
    assert p.state.kind == "committed" and p.state.isr == (1, 2) and p.state.maximal_isr == (1, 2)


def test_invalid_update_version_waits_for_metadata():
    b, feed = leader_with(isr=(1, 2))
    req = expand_pending(b)
    respond(b, req, error=Errors.INVALID_UPDATE_VERSION)
    p = b.partitions[TP]
    assert p.state.kind == "pending-expand"
    assert alter_requests(b.tick(1000)) == []  # no resubmission
    b.apply_committed(feed.change(isr=(1, 2)), 1001)
    assert p.state.kind == "committed"


def test_transient_alter_partition_error_retries_after_backoff():
    b, _ = leader_with(isr=(1, 2))
    req = expand_pending(b)
    respond(b, req, error=Errors.UNKNOWN_SERVER_ERROR, now=5)
    assert alter_requests(b.tick(20)) == []
    again = alter_requests(b.tick(5 + 50))
    assert len(again) == 1 and again[0].items == req.items


def test_a_replica_fetch_served_into_the_callers_effects_appends_after_what_it_holds():
    """LeaderPartition.serve_replica_fetch_into appends its effects (here the
    HW move a follower's fetch makes) to the list it is given, after what the
    list held, and returns (response, hw_changed); into a fresh list, a
    fetch that moves nothing adds nothing."""
    from reference_impl.core.effects import HwTrace, Timer
    from reference_impl.core.messages import FetchPartitionRequest

    b, _ = leader_with()
    produce(b, 3, 1)
    replica_fetch(b, 3, 3, 2)
    p = b.partitions[TP]
    held = Timer(99)
    effects: list = [held]
    resp, hw_changed = p.serve_replica_fetch_into(FetchPartitionRequest(TP, 3, 0, 0), 2, broker_epoch_of(2), 3, effects)
    assert hw_changed and resp.error == 0 and resp.high_watermark == 3
    assert effects[0] is held and [type(e) for e in effects[1:]] == [HwTrace] and effects[1].hw == 3
    fresh: list = []
    resp, hw_changed = p.serve_replica_fetch_into(FetchPartitionRequest(TP, 3, 0, 0), 2, broker_epoch_of(2), 4, fresh)
    assert not hw_changed and fresh == [] and resp.high_watermark == 3
