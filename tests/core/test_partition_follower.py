"""Follower-side rules: the fetch loop (seed 001 §2.2.2), epoch-based
truncation (seed 000, "Leader epochs & epoch-based truncation"), the
follower HW, and the pre-KIP-101 variant (seed 003)."""

from __future__ import annotations

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.messages import (
    Batch,
    Errors,
    FetchPartitionResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
)
from tests.core.brokerkit import TP, MetaFeed, make_broker, replica_fetch, sends, traces


def follower(cfg=None, leader=1, node=2, feed=None):
    feed = feed or MetaFeed()
    b = make_broker(node, cfg)
    effects = b.apply_committed(feed.cluster(leader=leader), 0)
    return b, feed, effects


def fetch_sent(effects):
    reqs = [s for s in sends(effects, ReplicaFetchRequest)]
    return reqs[-1] if reqs else None


def answer(b, send, *batches, hw=0, leader=1, now=1, error=Errors.NONE, diverging=None, log_start=0):
    part = FetchPartitionResponse(TP, error, high_watermark=hw, log_start_offset=log_start,
                                  batches=tuple(batches), diverging_epoch=diverging)
    return b.handle(ReplicaFetchResponse(leader, send.msg.correlation_id, Errors.NONE, (part,)), now, leader)


def test_follower_fetches_from_leo_with_current_and_last_fetched_epoch():
    b, feed, effects = follower()
    s = fetch_sent(effects)
    assert s.dst == 1
    req = s.msg.partitions[0]
    assert (req.fetch_offset, req.current_leader_epoch, req.last_fetched_epoch) == (0, 0, -1)
    effects = answer(b, s, Batch(0, 0, 4, None), hw=0)
    s2 = fetch_sent(effects)  # the next fetch goes out at once
    req2 = s2.msg.partitions[0]
    assert (req2.fetch_offset, req2.last_fetched_epoch) == (4, 0)
    assert traces(effects, "append")[0]["role"] == "follower"


def test_follower_hw_is_min_of_leader_hw_and_own_leo():
    b, _, effects = follower()
    s = fetch_sent(effects)
    effects = answer(b, s, Batch(0, 0, 4, None), hw=9)
    p = b.partitions[TP]
    assert (p.log.leo, p.log.hw) == (4, 4)
    s = fetch_sent(effects)
    answer(b, s, hw=2, now=2)
    assert p.log.hw == 2


def test_leader_answers_diverging_epoch_instead_of_records():
    # leader 1: epoch 0 [0,5), then epoch 2 from 5. A follower that wrote [5,10) in epoch 1.
    feed = MetaFeed()
    leader = make_broker(1)
    leader.apply_committed(feed.cluster(leader=2), 0)
    p = leader.partitions[TP]
    p.handle_fetch_response(FetchPartitionResponse(TP, 0, high_watermark=5, batches=(Batch(0, 0, 5, None),)), 1)
    leader.apply_committed(feed.change(leader=3), 2)  # epoch 1 elsewhere
    leader.apply_committed(feed.change(leader=1), 3)  # epoch 2: ours, starting at 5
    assert p.leader_epoch == 2 and p.log.epochs.entries() == ((0, 0), (2, 5))
    _, resp = replica_fetch(leader, 3, 10, 4, leader_epoch=2, last_fetched_epoch=1)
    assert resp.diverging_epoch == (0, 5)
    assert resp.batches == ()
    # the divergent fetch did not count as progress
    assert p.remote[3].leo == -1


def test_follower_truncates_to_diverging_epoch_end():
    b, _, effects = follower()
    s = fetch_sent(effects)
    p = b.partitions[TP]
    # the follower holds epoch 0 [0,5) and epoch 1 [5,10) (it led epoch 1, never committed)
    p.log.append_as_follower((Batch(0, 0, 5, None), Batch(5, 1, 5, None)))
    effects = answer(b, s, diverging=(0, 5))
    assert p.log.leo == 5
    t = traces(effects, "truncate")
    assert t == [{"tp": "t-0", "to": 5, "leo_before": 10, "reason": "diverging-epoch"}]
    assert p.log.epochs.entries() == ((0, 0),)


def test_truncation_when_follower_never_saw_leaders_epoch_goes_to_its_own_epoch_end():
    b, _, _ = follower()
    p = b.partitions[TP]
    p.log.append_as_follower((Batch(0, 0, 5, None), Batch(5, 3, 5, None)))
    # leader says: your epoch 3 is unknown to me, my largest below is epoch 2 ending at 8;
    # the follower has no epoch 2, its largest below is 0 ending at 5
    assert p.truncation_offset(2, 8) == 5
    assert p.truncation_offset(0, 3) == 3
    assert p.truncation_offset(-1, -1) == p.log.hw


def test_kip101_on_follower_keeps_log_beyond_hw_on_become_follower():
    feed = MetaFeed()
    b = make_broker(2)
    b.apply_committed(feed.cluster(leader=2), 0)
    p = b.partitions[TP]
    for _ in range(10):
        p.log.append_as_leader(0, 1, None)
    p.log.maybe_increment_hw(6)
    effects = b.apply_committed(feed.change(leader=1), 1)
    assert p.log.leo == 10
    assert traces(effects, "truncate") == []
    assert fetch_sent(effects).msg.partitions[0].fetch_offset == 10


def test_kip101_off_truncates_to_hw_on_become_follower():
    feed = MetaFeed()
    b = make_broker(2, ProtocolConfig().with_variants(kip101=False))
    b.apply_committed(feed.cluster(leader=2), 0)
    p = b.partitions[TP]
    for _ in range(10):
        p.log.append_as_leader(0, 1, None)
    p.log.maybe_increment_hw(6)
    effects = b.apply_committed(feed.change(leader=1), 1)
    assert p.log.leo == 6
    assert traces(effects, "truncate") == [{"tp": "t-0", "to": 6, "leo_before": 10, "reason": "hw"}]
    req = fetch_sent(effects).msg.partitions[0]
    assert (req.fetch_offset, req.last_fetched_epoch) == (6, -1)


def test_out_of_range_above_leader_asks_offsets_for_leader_epoch_and_truncates():
    b, _, effects = follower(ProtocolConfig().with_variants(kip101=False))
    p = b.partitions[TP]
    p.log.append_as_follower(tuple(Batch(i, 0, 1, None) for i in range(8)))
    s = fetch_sent(effects)
    effects = answer(b, s, error=Errors.OFFSET_OUT_OF_RANGE, log_start=0)
    ofle = [x for x in sends(effects, OffsetForLeaderEpochRequest)]
    assert ofle and ofle[0].dst == 1 and ofle[0].msg.ref is None and ofle[0].msg.replica_id == 2
    effects = b.handle(OffsetForLeaderEpochResponse(None, TP, Errors.NONE, 0, 5), 3, 1)
    assert p.log.leo == 5
    assert fetch_sent(effects).msg.partitions[0].fetch_offset == 5


def test_out_of_range_below_leader_log_start_restarts_log():
    b, _, effects = follower()
    s = fetch_sent(effects)
    effects = answer(b, s, error=Errors.OFFSET_OUT_OF_RANGE, log_start=40)
    p = b.partitions[TP]
    assert (p.log.log_start_offset, p.log.leo) == (40, 40)
    assert traces(effects, "truncate")[0]["reason"] == "full"


def test_leader_answers_offsets_for_leader_epoch_to_replicas_by_send():
    leader = make_broker(1)
    leader.apply_committed(MetaFeed().cluster(), 0)
    leader.partitions[TP].log.append_as_leader(0, 7, None)
    effects = leader.handle(OffsetForLeaderEpochRequest(None, TP, 0, 0, replica_id=2), 1, 2)
    (s,) = sends(effects, OffsetForLeaderEpochResponse)
    assert s.dst == 2 and (s.msg.leader_epoch, s.msg.end_offset) == (0, 7)


def test_fenced_leader_epoch_stops_fetching_until_new_metadata():
    b, feed, effects = follower()
    s = fetch_sent(effects)
    effects = answer(b, s, error=Errors.FENCED_LEADER_EPOCH)
    assert fetch_sent(effects) is None
    effects = b.apply_committed(feed.change(leader=3), 2)
    assert fetch_sent(effects).dst == 3


def test_replicated_log_matches_leader_through_in_process_fetch_loop():
    feed = MetaFeed()
    recs = feed.cluster()
    brokers = {i: make_broker(i) for i in (1, 2, 3)}
    queue = []
    for i, br in brokers.items():
        queue += [(i, e) for e in br.apply_committed(recs, 0)]
    from reference_impl.core.messages import ProduceRequest
    from reference_impl.core.effects import Reply, Send
    queue += [(1, e) for e in brokers[1].handle(ProduceRequest("p", TP, -1, 3, ("a", "b", "c")), 1, None)]
    acked = []
    now = 1
    while queue and now < 100:
        src, e = queue.pop(0)
        now += 1
        if isinstance(e, Send) and e.dst in brokers:
            queue += [(e.dst, x) for x in brokers[e.dst].handle(e.msg, now, src)]
        elif isinstance(e, Reply):
            acked.append(e.msg)
    assert acked and acked[0].error == Errors.NONE and acked[0].base_offset == 0
    for i in (2, 3):
        assert [b.payload for b in brokers[i].partitions[TP].log.batches] == [("a", "b", "c")]


def test_follower_whose_last_batch_straddles_leader_batch_realigns_without_losing_prefix():
    b, _, effects = follower()
    p = b.partitions[TP]
    p.log.append_as_follower((Batch(0, 0, 5, None), Batch(5, 0, 2, "diverged")))  # LEO 7
    s = fetch_sent(b.tick(0) or effects)
    # the leader's batch holding offset 7 is [5, 10)
    effects = answer(b, s, Batch(5, 0, 5, "leader"), hw=5)
    assert [(x.base_offset, x.payload) for x in p.log.batches] == [(0, None), (5, "leader")]
    assert traces(effects, "truncate")[0]["to"] == 5


def test_initial_fetch_offset_is_hw_when_epoch_cache_is_empty():
    # batches without a leader epoch (pre-v2 format) leave the epoch cache empty:
    # Kafka's initialFetchOffset starts such a follower from its HW
    feed = MetaFeed()
    b = make_broker(2)
    b.apply_committed(feed.cluster(leader=3), 0)
    p = b.partitions[TP]
    p.log.append_as_follower(tuple(Batch(i, -1, 1, None) for i in range(10)))
    p.log.set_follower_hw(6)
    assert p.log.epochs.is_empty()
    effects = b.apply_committed(feed.change(leader=1), 1)
    assert p.log.leo == 6
    assert traces(effects, "truncate")[0]["reason"] == "hw"
    assert fetch_sent(effects).msg.partitions[0].fetch_offset == 6


def _acked_then_leader_change(cfg):
    """Three replicas: B (2) fetches the records before C (3), so the HW that
    acknowledges them reaches the leader only with C's fetch and B's copy of
    the HW stays behind. Then the leader fails and C takes over."""
    from reference_impl.core.effects import Reply
    from reference_impl.core.messages import ProduceRequest, ProduceResponse
    feed = MetaFeed()
    recs = feed.cluster(leader=1)
    a, b = make_broker(1, cfg), make_broker(2, cfg)
    a.apply_committed(recs, 0)
    b.apply_committed(recs, 0)
    a.handle(ProduceRequest("m", TP, -1, 2, ("m0", "m1")), 1, None)
    _, to_b = replica_fetch(a, 2, 0, 2)
    b.partitions[TP].handle_fetch_response(to_b, 2)
    _, to_b = replica_fetch(a, 2, 2, 3)  # B at 2; C still at 0: HW stays 0
    b.partitions[TP].handle_fetch_response(to_b, 3)
    replica_fetch(a, 3, 0, 4)
    effects, _ = replica_fetch(a, 3, 2, 5)  # C at 2: HW 2, the produce is acknowledged
    acked = [e.msg for e in effects if isinstance(e, Reply) and isinstance(e.msg, ProduceResponse)]
    assert acked and acked[0].error == Errors.NONE
    assert b.partitions[TP].log.hw == 0
    b.apply_committed(feed.change(leader=3, isr=(2, 3)), 6)  # A failed; B stays in the ISR
    return b.partitions[TP]


def test_kip101_off_follower_in_isr_drops_acknowledged_records_seed_003():
    p = _acked_then_leader_change(ProtocolConfig().with_variants(kip101=False))
    # B is an ISR member (electable) without the acknowledged records
    assert 2 in p.state.isr and p.log.leo == 0


def test_kip101_on_follower_keeps_acknowledged_records():
    p = _acked_then_leader_change(ProtocolConfig())
    assert p.log.leo == 2


def test_an_answer_to_a_fetch_not_in_flight_is_dropped_and_the_one_in_flight_is_taken():
    """ReplicaFetcherManager.handle_response: an answer whose correlation id
    is not the fetch in flight (a late answer to a fetch given up on) is
    dropped; the answer to the one in flight is appended, once."""
    b, _, effects = follower()
    s = fetch_sent(effects)
    p = b.partitions[TP]
    late = FetchPartitionResponse(TP, Errors.NONE, high_watermark=0, log_start_offset=0, batches=(Batch(0, 0, 2, None),))
    corr = s.msg.correlation_id
    assert b.handle(ReplicaFetchResponse(1, corr + 1, Errors.NONE, (late,)), 1, 1) == [] and p.log.leo == 0
    assert traces(answer(b, s, Batch(0, 0, 2, None), hw=0), "append") and p.log.leo == 2
    assert b.handle(ReplicaFetchResponse(1, corr, Errors.NONE, (late,)), 2, 1) == [] and p.log.leo == 2


def test_an_answer_for_a_partition_whose_leader_epoch_moved_while_in_flight_is_not_applied():
    """ReplicaFetcherManager.handle_response: a partition's part of an answer
    is applied only in the leader epoch the fetch asked in (its
    ``current_leader_epoch`` as sent): here the leadership went to broker 3
    and back to broker 1 (epoch 0 -> 2) while the fetch was out, so broker
    1's answer to the epoch-0 fetch appends nothing: the follower fetches in
    its current leader epoch (seed 001 §2.2.2), and an answer from an older
    one is not its to apply."""
    b, feed, effects = follower()
    s = fetch_sent(effects)
    p = b.partitions[TP]
    assert s.msg.partitions[0].current_leader_epoch == 0
    b.apply_committed(feed.change(leader=3), 1)
    b.apply_committed(feed.change(leader=1), 2)
    assert (p.leader_id, p.leader_epoch) == (1, 2)
    effects = answer(b, s, Batch(0, 0, 2, None), hw=0, now=3)
    assert not traces(effects, "append") and p.log.leo == 0


def test_an_answer_from_a_leader_whose_partitions_all_moved_away_sends_it_no_next_fetch():
    """ReplicaFetcherManager: an answer is followed by the next fetch from
    the same fetcher, to the partitions this broker still follows from that
    leader (the fetcher's members, kept with the metadata: seed 001 §2.2.2,
    one fetcher per leader broker, as Kafka's ReplicaFetcherManager removes a
    partition from its fetcher on makeLeader/makeFollower). Once the only
    partition moved to another leader while a fetch was out, its late answer
    sends nothing more to the old leader."""
    b, feed, effects = follower()
    s = fetch_sent(effects)
    assert s.dst == 1
    moved = b.apply_committed(feed.change(leader=3), 1)
    assert [x.dst for x in sends(moved, ReplicaFetchRequest)] == [3]
    effects = answer(b, s, Batch(0, 0, 2, None), hw=0, now=2)
    assert sends(effects, ReplicaFetchRequest) == [] and b.partitions[TP].log.leo == 0


def test_a_one_partition_fetcher_resends_its_request_unchanged_and_a_moved_one_anew():
    """A fetcher of one partition sends the tuple it sent last while the
    partition's request is the same object (Partition.fetch_request keeps it
    while nothing in it moved: ReplicaFetcherManager._fetch_next), and a new
    one naming the new offset once the follower's log moved."""
    b, _, effects = follower()
    s = fetch_sent(effects)
    empty = fetch_sent(answer(b, s, hw=0, now=1))  # nothing new: the same request again
    assert empty.msg.partitions is s.msg.partitions and empty.msg.correlation_id != s.msg.correlation_id
    moved = fetch_sent(answer(b, empty, Batch(0, 0, 3, None), hw=0, now=2))
    assert moved.msg.partitions is not s.msg.partitions
    assert [(r.tp, r.fetch_offset, r.last_fetched_epoch) for r in moved.msg.partitions] == [(TP, 3, 0)]
