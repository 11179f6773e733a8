"""Broker (ReplicaManager) rules: the acks paths and purgatory (seed 000, "The
acks=all produce path"), consumer reads below the HW, ListOffsets, epoch
checks, idempotence, metadata, lifecycle (registration with the clean-shutdown
marker of seed 002, heartbeats, controlled shutdown) and the periodic HW
checkpoint."""

from __future__ import annotations

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.effects import FileDelete, FileWrite, Fsync, Halt
from reference_impl.core.messages import (
    Batch,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    ClientFetchRequest,
    ClientFetchResponse,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    Errors,
    FetchPartitionRequest,
    FetchPartitionResponse,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    NewTopic,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from reference_impl.core.replica_manager import BrokerRole
from reference_impl.core.storage import CLEAN_SHUTDOWN, HW_CHECKPOINT, CleanShutdown, OffsetCheckpoint, StoredState
from tests.core.brokerkit import (
    CONTROLLER, TP, MetaFeed, broker_epoch_of, make_broker, replica_fetch, replies, sends, traces,
)

MIN2 = (("min.insync.replicas", "2"),)


def leader(cfg=None, isr=(1, 2, 3), configs=(), feed=None):
    feed = feed or MetaFeed()
    b = make_broker(1, cfg)
    b.apply_committed(feed.cluster(isr=isr, configs=configs), 0)
    return b, feed


def produce(b, now, acks=-1, count=1, ref="p", timeout_ms=30000, pid=-1, seq=-1, pepoch=0, payload=None):
    return b.handle(ProduceRequest(ref, TP, acks, count, payload, timeout_ms, pid, pepoch if pid >= 0 else -1, seq), now, None)


def produce_replies(effects):
    return replies(effects, ProduceResponse)


# -- acks -------------------------------------------------------------------------


def test_acks_all_under_min_isr_is_refused_before_appending():
    b, _ = leader(isr=(1,), configs=MIN2)
    effects = produce(b, 1)
    (r,) = produce_replies(effects)
    assert r.error == Errors.NOT_ENOUGH_REPLICAS
    assert b.partitions[TP].log.leo == 0
    assert traces(effects, "produce") == [{"tp": "t-0", "acks": -1, "error": Errors.NOT_ENOUGH_REPLICAS, "base": -1, "count": 1}]


def test_acks_1_under_min_isr_is_accepted():
    b, _ = leader(isr=(1,), configs=MIN2)
    (r,) = produce_replies(produce(b, 1, acks=1))
    assert (r.error, r.base_offset) == (Errors.NONE, 0)


def test_acks_0_gets_no_response():
    b, _ = leader()
    effects = produce(b, 1, acks=0)
    assert produce_replies(effects) == []
    assert b.partitions[TP].log.leo == 1


def test_acks_all_waits_in_purgatory_until_hw_reaches_offset():
    b, _ = leader()
    assert produce_replies(produce(b, 1, count=2)) == []
    _, _ = replica_fetch(b, 2, 2, 2)
    effects, _ = replica_fetch(b, 3, 1, 3)
    assert produce_replies(effects) == []  # HW 1 < 2
    effects, _ = replica_fetch(b, 3, 2, 4)
    (r,) = produce_replies(effects)
    assert (r.error, r.base_offset) == (Errors.NONE, 0)


def test_a_partition_whose_parked_produces_all_settled_waits_on_nothing_and_parks_the_next():
    """The produce purgatory keeps a partition's emptied queue for its next
    produce: emptied, it holds no deadline (the broker's wake-up ignores it),
    and the next acks=all produce waits in it and times out on its own
    deadline (seed 000, "The acks=all produce path": DelayedProduce)."""
    b, _ = leader()
    produce(b, 1)
    replica_fetch(b, 2, 1, 2)
    effects, _ = replica_fetch(b, 3, 1, 3)
    (r,) = produce_replies(effects)
    assert (r.error, r.base_offset) == (Errors.NONE, 0)
    assert b.produce_purgatory.deadlines() == []
    b.next_wakeup(3)
    produce(b, 4, timeout_ms=1000, ref="q")
    assert produce_replies(b.tick(1003)) == []
    assert produce_replies(b.tick(1004)) == [ProduceResponse("q", TP, Errors.REQUEST_TIMED_OUT, -1, 0)]


def test_one_append_answers_every_parked_fetch_it_feeds_and_parks_those_it_does_not():
    """FetchPurgatory.check: an append on the leader answers, in one pass,
    every parked fetch of that partition it gives data to (both followers'
    replica fetches, a consumer's waits for the HW), and leaves the rest
    parked (seed 000: DelayedFetch completes when the LEO, for a follower,
    or the HW, for a consumer, passes its fetch offset)."""
    b, _ = leader()
    assert replica_fetch(b, 2, 0, 1, max_wait_ms=500)[1] is None  # parked
    assert replica_fetch(b, 3, 0, 1, max_wait_ms=500)[1] is None  # parked
    poll = ClientFetchRequest("c", (FetchPartitionRequest(TP, 0),), max_wait_ms=500)
    assert b.handle(poll, 1, None) == []  # parked: nothing below the HW
    effects = produce(b, 2)
    answered = sorted(e.dst for e in sends(effects) if e.msg.partitions[0].batches)
    assert answered == [2, 3]
    assert replies(effects, ClientFetchResponse) == []  # the HW has not moved: still parked
    assert len(b.fetch_purgatory.delayed) == 1


def test_acks_all_times_out_in_purgatory():
    b, _ = leader()
    produce(b, 1, timeout_ms=1000)
    assert produce_replies(b.tick(1000)) == []
    assert produce_replies(b.tick(1001)) == [ProduceResponse("p", TP, Errors.REQUEST_TIMED_OUT, -1, 0)]


def test_acks_all_not_enough_replicas_after_append_when_isr_shrank_min_isr_hw_gate_off():
    b, feed = leader(ProtocolConfig().with_variants(min_isr_hw_gate=False), isr=(1, 2), configs=MIN2)
    produce(b, 1, timeout_ms=100_000)
    # the controller shrank the ISR; replica 2 (silent since the election) is no longer caught up
    effects = b.apply_committed(feed.change(isr=(1,)), 30_001)
    (r,) = produce_replies(effects)
    assert r.error == Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_acks_all_under_min_isr_with_the_min_isr_hw_gate_times_out_instead():
    """The gate alone decides, ELR or not (kip966 off is Kafka 4.4 without
    the ELR feature, which still holds the HW)."""
    for cfg in (ProtocolConfig(), ProtocolConfig().with_variants(kip966=False)):
        b, feed = leader(cfg, isr=(1, 2), configs=MIN2)
        produce(b, 1, timeout_ms=500)
        assert produce_replies(b.apply_committed(feed.change(isr=(1,)), 2)) == []
        assert produce_replies(b.tick(501))[0].error == Errors.REQUEST_TIMED_OUT


def test_parked_produce_fails_not_leader_after_losing_leadership():
    b, feed = leader()
    produce(b, 1)
    effects = b.apply_committed(feed.change(leader=2), 2)
    (r,) = produce_replies(effects)
    assert r.error == Errors.NOT_LEADER_OR_FOLLOWER


def test_produce_to_follower_is_not_leader_and_unknown_topic_is_unknown():
    b = make_broker(2)
    b.apply_committed(MetaFeed().cluster(leader=1), 0)
    assert produce_replies(produce(b, 1, acks=1))[0].error == Errors.NOT_LEADER_OR_FOLLOWER
    r = b.handle(ProduceRequest("x", TopicPartition("nope", 0), 1, 1, None), 1, None)
    assert produce_replies(r)[0].error == Errors.UNKNOWN_TOPIC_OR_PARTITION


# -- idempotence ----------------------------------------------------------------------


def test_idempotent_duplicate_gets_original_offset_and_is_not_appended():
    b, _ = leader(isr=(1,))
    (r1,) = produce_replies(produce(b, 1, pid=7, seq=0, count=2, ref="a"))
    (r2,) = produce_replies(produce(b, 2, pid=7, seq=2, count=1, ref="b"))
    (r3,) = produce_replies(produce(b, 3, pid=7, seq=0, count=2, ref="a-retry"))
    assert (r1.base_offset, r2.base_offset, r3.base_offset) == (0, 2, 0)
    assert r3.error == Errors.NONE
    assert b.partitions[TP].log.leo == 3


def test_without_producer_sequence_checks_a_retried_batch_is_appended_again():
    """Variant producer_sequence_checks off: the leader checks nothing (a
    broker without idempotence): the retry of offset 0 is a second copy at
    offset 3, and a sequence gap is not refused."""
    from reference_impl.core.config import Variants

    b, _ = leader(cfg=ProtocolConfig(variants=Variants(producer_sequence_checks=False)), isr=(1,))
    (r1,) = produce_replies(produce(b, 1, pid=7, seq=0, count=2, ref="a"))
    (r2,) = produce_replies(produce(b, 2, pid=7, seq=2, count=1, ref="b"))
    (r3,) = produce_replies(produce(b, 3, pid=7, seq=0, count=2, ref="a-retry"))
    (r4,) = produce_replies(produce(b, 4, pid=7, seq=9, count=1, ref="gap"))
    assert (r1.base_offset, r2.base_offset, r3.base_offset, r4.base_offset) == (0, 2, 3, 5)
    assert {r.error for r in (r1, r2, r3, r4)} == {Errors.NONE}
    assert b.partitions[TP].log.leo == 6


def test_idempotent_sequence_gap_is_out_of_order():
    b, _ = leader(isr=(1,))
    produce(b, 1, pid=7, seq=0, acks=1)
    (r,) = produce_replies(produce(b, 2, pid=7, seq=5, acks=1))
    assert r.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert b.partitions[TP].log.leo == 1


def test_unknown_producer_is_accepted_at_any_sequence_kip_360():
    """KIP-360: no state for the producer id (its batches truncated away, or
    a new leader that never saw them) is not an error; the append starts the
    producer's state here, and the sequence after it is checked as usual."""
    b, _ = leader(isr=(1,))
    (r,) = produce_replies(produce(b, 1, pid=9, seq=12, count=2, acks=1))
    assert (r.error, r.base_offset) == (Errors.NONE, 0)
    (r,) = produce_replies(produce(b, 2, pid=9, seq=15, acks=1))
    assert r.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    (r,) = produce_replies(produce(b, 3, pid=9, seq=14, acks=1))
    assert (r.error, r.base_offset) == (Errors.NONE, 2)
    assert b.partitions[TP].log.leo == 3


def test_only_last_five_batches_are_deduplicated():
    b, _ = leader(isr=(1,))
    for s in range(7):
        produce(b, 1, pid=7, seq=s, acks=1)
    (r,) = produce_replies(produce(b, 2, pid=7, seq=1, acks=1))
    assert r.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    (r,) = produce_replies(produce(b, 2, pid=7, seq=3, acks=1))
    assert (r.error, r.base_offset) == (Errors.NONE, 3)


def test_producer_ids_are_unique_across_brokers():
    b1, b2 = make_broker(1), make_broker(2)
    ids = set()
    for b in (b1, b2):
        for i in range(3):
            (r,) = replies(b.handle(InitProducerIdRequest(i), 1, None))
            ids.add(r.producer_id)
    assert len(ids) == 6


# -- consumer reads -------------------------------------------------------------------------


def client_fetch(b, offset, now, epoch=-1, max_wait_ms=0):
    return b.handle(ClientFetchRequest("c", (FetchPartitionRequest(TP, offset, epoch),), max_wait_ms), now, None)


def test_consumer_fetch_is_bounded_by_hw():
    b, _ = leader()
    produce(b, 1, acks=1, count=2)
    produce(b, 1, acks=1, count=3)
    replica_fetch(b, 2, 2, 2)
    replica_fetch(b, 3, 2, 2)
    (resp,) = replies(client_fetch(b, 0, 3), ClientFetchResponse)
    part = resp.partitions[0]
    assert part.high_watermark == 2
    assert [x.base_offset for x in part.batches] == [0]


def test_consumer_fetch_beyond_leo_is_out_of_range():
    b, _ = leader()
    (resp,) = replies(client_fetch(b, 5, 1), ClientFetchResponse)
    assert resp.partitions[0].error == Errors.OFFSET_OUT_OF_RANGE


def test_consumer_long_poll_completes_when_hw_advances():
    b, _ = leader()
    assert client_fetch(b, 0, 1, max_wait_ms=500) == [] or not replies(client_fetch(b, 0, 1, max_wait_ms=500))
    produce(b, 2, acks=1)
    replica_fetch(b, 2, 1, 3)
    effects, _ = replica_fetch(b, 3, 1, 3)
    got = replies(effects, ClientFetchResponse)
    assert got and got[0].partitions[0].batches[0].base_offset == 0


def test_consumer_long_poll_expires_empty():
    b, _ = leader()
    client_fetch(b, 0, 1, max_wait_ms=500)
    (resp,) = replies(b.tick(501), ClientFetchResponse)
    assert resp.partitions[0].error == Errors.NONE and resp.partitions[0].batches == ()


def test_fenced_and_unknown_leader_epoch_on_client_requests():
    b, feed = leader()
    b.apply_committed(feed.change(leader=1, isr=(1, 2)), 1)  # no leader change: epoch stays 0
    (resp,) = replies(client_fetch(b, 0, 2, epoch=1), ClientFetchResponse)
    assert resp.partitions[0].error == Errors.UNKNOWN_LEADER_EPOCH
    b.apply_committed(feed.change(leader=2), 3)
    b.apply_committed(feed.change(leader=1), 4)  # epoch 2
    (resp,) = replies(client_fetch(b, 0, 5, epoch=1), ClientFetchResponse)
    assert resp.partitions[0].error == Errors.FENCED_LEADER_EPOCH


def test_an_ex_leader_checks_the_requesters_epoch_before_saying_it_does_not_lead():
    """Partition.getLocalLog: the leader epoch is checked before leadership.
    Broker 1 led in epoch 0 and follows in epoch 1: a requester still in
    epoch 0 is fenced (FENCED_LEADER_EPOCH: it must wait for metadata), one
    ahead hears UNKNOWN_LEADER_EPOCH, and only one in epoch 1 hears
    NOT_LEADER_OR_FOLLOWER — for replica and consumer fetches,
    OffsetForLeaderEpoch and ListOffsets alike."""
    from reference_impl.core.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

    b, feed = leader()
    b.apply_committed(feed.change(leader=2), 1)  # epoch 1, broker 1 follows
    want = {0: Errors.FENCED_LEADER_EPOCH, 1: Errors.NOT_LEADER_OR_FOLLOWER, 2: Errors.UNKNOWN_LEADER_EPOCH}
    for epoch, err in want.items():
        _, resp = replica_fetch(b, 3, 0, 2, leader_epoch=epoch)
        assert resp is not None and resp.error == err, epoch
        (r,) = replies(client_fetch(b, 0, 2, epoch=epoch), ClientFetchResponse)
        assert r.partitions[0].error == err, epoch
        (r,) = replies(b.handle(OffsetForLeaderEpochRequest("o", TP, 0, epoch), 2, None), OffsetForLeaderEpochResponse)
        assert r.error == err, epoch
        (r,) = replies(b.handle(ListOffsetsRequest("l", TP, -1, epoch), 2, None))
        assert r.error == err, epoch


def test_list_offsets_offset_not_available_while_hw_below_epoch_start():
    feed = MetaFeed()
    b = make_broker(1)
    b.apply_committed(feed.cluster(leader=2, isr=(1, 2, 3)), 0)
    p = b.partitions[TP]
    p.handle_fetch_response(FetchPartitionResponse(TP, 0, high_watermark=3, batches=(Batch(0, 0, 5, None),)), 1)
    b.apply_committed(feed.change(leader=1, isr=(1, 2)), 2)  # new leader at LEO 5 with HW 3
    (r,) = replies(b.handle(ListOffsetsRequest("l", TP, -1), 3, None))
    assert r.error == Errors.OFFSET_NOT_AVAILABLE
    (r,) = replies(b.handle(ListOffsetsRequest("l", TP, -2), 3, None))
    assert (r.error, r.offset) == (Errors.NONE, 0)
    replica_fetch(b, 2, 5, 4, leader_epoch=1, last_fetched_epoch=0)
    (r,) = replies(b.handle(ListOffsetsRequest("l", TP, -1), 5, None))
    assert (r.error, r.offset) == (Errors.NONE, 5)


def test_list_offsets_by_timestamp_finds_no_record_in_batches_without_timestamps():
    """UnifiedLog.fetchOffsetByTimestamp: the first record with a timestamp at
    least the target. Batches with no timestamp (NO_TIMESTAMP, as the
    simulator's) have none, so a lookup answers offset -1, epoch -1: no error
    once the HW has reached the leader-epoch start offset, OFFSET_NOT_AVAILABLE
    before (ReplicaManager throws the lagging-HW error for an empty answer);
    earliest (-2) is the log start with the epoch it was written in."""
    feed = MetaFeed()
    b = make_broker(1)
    b.apply_committed(feed.cluster(leader=2, isr=(1, 2, 3)), 0)
    p = b.partitions[TP]
    p.handle_fetch_response(FetchPartitionResponse(TP, 0, high_watermark=3, batches=(Batch(0, 0, 5, None),)), 1)
    b.apply_committed(feed.change(leader=1, isr=(1, 2)), 2)
    for ts in (0, 1_700_000_000_000):
        (r,) = replies(b.handle(ListOffsetsRequest("l", TP, ts), 3, None))
        assert (r.error, r.offset, r.leader_epoch) == (Errors.OFFSET_NOT_AVAILABLE, -1, -1)
    replica_fetch(b, 2, 5, 4, leader_epoch=p.leader_epoch, last_fetched_epoch=0)  # the HW reaches the epoch start offset
    assert p.log.hw == 5
    for ts in (0, 1_700_000_000_000):
        (r,) = replies(b.handle(ListOffsetsRequest("l", TP, ts), 5, None))
        assert (r.error, r.offset, r.leader_epoch) == (Errors.NONE, -1, -1)
    (r,) = replies(b.handle(ListOffsetsRequest("l", TP, -2), 3, None))
    assert (r.error, r.offset, r.leader_epoch) == (Errors.NONE, 0, 0)


def test_duplicate_registration_is_retried_at_the_same_controller_after_a_heartbeat_interval():
    """DUPLICATE_BROKER_REGISTRATION comes from the right controller (our old
    incarnation's session is still live there): unlike NOT_CONTROLLER it is
    not a reason to try another voter, and it is retried a heartbeat
    interval later, not at once."""
    import random as _random

    from reference_impl.core.messages import BrokerEndpoint, BrokerRegistrationResponse

    cfg = ProtocolConfig()
    b = BrokerRole(1, cfg, (100, 101), StoredState(), _random.Random(1), "inc-1", BrokerEndpoint(1, "127.0.0.1", 9001))
    (first,) = sends(b.start(0), BrokerRegistrationRequest)
    assert b.handle(BrokerRegistrationResponse(Errors.DUPLICATE_BROKER_REGISTRATION), 5, first.dst) == []
    assert sends(b.tick(5 + cfg.broker_heartbeat_interval_ms - 1), BrokerRegistrationRequest) == []
    (again,) = sends(b.tick(5 + cfg.broker_heartbeat_interval_ms), BrokerRegistrationRequest)
    assert again.dst == first.dst
    b.handle(BrokerRegistrationResponse(Errors.NOT_CONTROLLER), 600, first.dst)
    (other,) = sends(b.tick(600 + cfg.alter_partition_retry_backoff_ms), BrokerRegistrationRequest)
    assert other.dst != first.dst


# -- metadata and topics ------------------------------------------------------------------------


def test_metadata_lists_partitions_with_leader_epochs_and_self_as_controller():
    b, feed = leader()
    b.apply_committed(feed.change(leader=2), 1)
    (m,) = replies(b.handle(MetadataRequest("m", None), 2, None))
    assert m.controller_id == 1
    assert [x.node_id for x in m.brokers] == [1, 2, 3]
    (t,) = m.topics
    (pm,) = t.partitions
    assert (pm.leader, pm.leader_epoch, pm.replicas) == (2, 1, (1, 2, 3))
    (m2,) = replies(b.handle(MetadataRequest("m", ("nope",)), 2, None))
    assert m2.topics[0].error == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_create_topics_is_forwarded_to_the_controller_and_answered():
    b = make_broker(1)
    effects = b.handle(CreateTopicsRequest("client-ref", (NewTopic("x", 1, 3),)), 1, None)
    (s,) = sends(effects, CreateTopicsRequest)
    assert s.dst == CONTROLLER and s.msg.ref != "client-ref"
    effects = b.handle(CreateTopicsResponse(s.msg.ref, (CreateTopicResult("x", Errors.NONE),)), 2, CONTROLLER)
    (r,) = replies(effects)
    assert r.ref == "client-ref" and r.results[0].error == Errors.NONE



def test_create_topics_refused_with_not_controller_goes_on_whole_with_the_time_left():
    """AdminForwarder.answer: a NOT_CONTROLLER answer sends the request on,
    under the same token, every field kept (``internal`` too) but the time
    left (broker_requests._resent builds a CreateTopics directly where
    ``dataclasses.replace`` built the same)."""
    b = make_broker(1)
    req = CreateTopicsRequest("client-ref", (NewTopic("x", 1, 3),), timeout_ms=1000, internal=True)
    (s,) = sends(b.handle(req, 1, None), CreateTopicsRequest)
    refused = CreateTopicsResponse(s.msg.ref, (CreateTopicResult("x", Errors.NOT_CONTROLLER),))
    (again,) = sends(b.handle(refused, 301, CONTROLLER), CreateTopicsRequest)
    assert type(again.msg) is CreateTopicsRequest
    assert again.msg == CreateTopicsRequest(s.msg.ref, req.topics, timeout_ms=700, internal=True)


# -- lifecycle ----------------------------------------------------------------------------------------


def new_broker(stored):
    from reference_impl.core.messages import BrokerEndpoint
    import random
    return BrokerRole(1, ProtocolConfig(), (CONTROLLER,), stored, random.Random(1), "inc", BrokerEndpoint(1, "h", 1))


def test_registration_carries_previous_epoch_from_clean_shutdown_marker_and_deletes_it():
    stored = StoredState(files={CLEAN_SHUTDOWN: CleanShutdown(42)})
    effects = new_broker(stored).start(0)
    (s,) = sends(effects, BrokerRegistrationRequest)
    assert s.msg.previous_broker_epoch == 42
    i = effects.index(FileDelete(CLEAN_SHUTDOWN))
    assert isinstance(effects[i + 1], Fsync)


def test_registration_after_unclean_shutdown_sends_minus_one():
    (s,) = sends(new_broker(StoredState()).start(0), BrokerRegistrationRequest)
    assert s.msg.previous_broker_epoch == -1


def test_heartbeats_carry_broker_epoch_and_metadata_offset():
    b, feed = leader()
    b.handle(BrokerHeartbeatResponse(Errors.NONE, True, False), 1, CONTROLLER)
    effects = b.tick(2000)
    (s,) = sends(effects, BrokerHeartbeatRequest)
    assert (s.msg.broker_epoch, s.msg.metadata_offset) == (broker_epoch_of(1), feed.offset)


def test_controlled_shutdown_waits_for_controller_then_writes_marker_and_halts():
    b, _ = leader()
    effects = b.begin_controlled_shutdown(10)
    (s,) = sends(effects, BrokerHeartbeatRequest)
    assert s.msg.want_shutdown
    assert not any(isinstance(e, Halt) for e in effects)
    effects = b.handle(BrokerHeartbeatResponse(Errors.NONE, True, False, should_shut_down=True), 20, CONTROLLER)
    assert isinstance(effects[-1], Halt)
    marker = [e for e in effects if isinstance(e, FileWrite) and e.path == CLEAN_SHUTDOWN]
    assert marker and marker[0].data == CleanShutdown(broker_epoch_of(1))
    assert effects.index(Fsync(None)) < effects.index(marker[0])


def test_hw_checkpoint_is_periodic_not_synchronous():
    b, _ = leader(isr=(1,))
    effects = produce(b, 1, acks=1)
    assert b.partitions[TP].log.hw == 1
    assert not any(isinstance(e, FileWrite) and e.path == HW_CHECKPOINT for e in effects)
    effects = b.tick(5000)
    (w,) = [e for e in effects if isinstance(e, FileWrite) and e.path == HW_CHECKPOINT]
    assert w.data == OffsetCheckpoint(((TP, 1),))


def test_restart_loads_logs_and_hw_from_stored_state():
    stored = StoredState(
        logs={"t-0": [Batch(0, 0, 3, None), Batch(3, 1, 2, None)]},
        files={HW_CHECKPOINT: OffsetCheckpoint(((TP, 3),))},
    )
    effects = new_broker(stored).start(0)
    (t,) = traces(effects, "loaded")
    assert t == {"tp": "t-0", "leo": 5, "hw": 3, "log_start": 0, "epochs": [[0, 0], [1, 3]]}


def test_restarted_broker_does_not_act_on_metadata_until_it_replays_its_own_registration():
    # metadata from before the restart still names broker 1 leader; its new
    # session (epoch 50) is not in the log yet: it must not lead with whatever log it has
    from reference_impl.core.messages import BrokerRegistrationResponse, RegisterBrokerRecord, BrokerEndpoint
    feed = MetaFeed()
    b = new_broker(StoredState())
    b.start(0)
    b.handle(BrokerRegistrationResponse(Errors.NONE, 50), 1, CONTROLLER)
    effects = b.apply_committed(feed.cluster(leader=1), 2)
    assert traces(effects, "become_leader") == []
    assert TP not in b.partitions
    # the controller moved leadership away when it registered the new session
    moved = feed.change(leader=2, isr=(2, 3))
    effects = b.apply_committed(moved + feed.add(RegisterBrokerRecord(1, 50, "inc", BrokerEndpoint(1, "h", 1))), 3)
    assert traces(effects, "become_leader") == []
    assert traces(effects, "become_follower")[0]["leader"] == 2


def test_registration_is_resent_to_the_next_voter_when_unanswered():
    import random
    from reference_impl.core.messages import BrokerEndpoint
    b = BrokerRole(1, ProtocolConfig(), (101, 102, 103), StoredState(), random.Random(1), "inc", BrokerEndpoint(1, "h", 1))
    (first,) = sends(b.start(0), BrokerRegistrationRequest)
    assert sends(b.tick(3999), BrokerRegistrationRequest) == []
    (second,) = sends(b.tick(4000), BrokerRegistrationRequest)
    assert first.dst != second.dst


def test_controlled_shutdown_before_registration_halts_at_once_with_epoch_minus_one():
    b = new_broker(StoredState())
    b.start(0)
    effects = b.begin_controlled_shutdown(5)
    assert isinstance(effects[-1], Halt)
    assert FileWrite(CLEAN_SHUTDOWN, CleanShutdown(-1)) in effects


def test_unanswered_replica_fetch_is_resent_after_the_fetch_timeout():
    from reference_impl.core.messages import ReplicaFetchRequest
    b = make_broker(2)
    effects = b.apply_committed(MetaFeed().cluster(leader=1), 0)
    assert len(sends(effects, ReplicaFetchRequest)) == 1
    assert sends(b.tick(1000), ReplicaFetchRequest) == []
    assert len(sends(b.tick(b.fetch_timeout_ms), ReplicaFetchRequest)) == 1


def test_alter_partition_not_controller_is_retried_after_backoff():
    from reference_impl.core.messages import AlterPartitionRequest, AlterPartitionResponse
    b, _ = leader(isr=(1, 2))
    effects, _ = replica_fetch(b, 3, 0, 2)
    (s,) = sends(effects, AlterPartitionRequest)
    b.handle(AlterPartitionResponse(s.msg.correlation_id, Errors.NOT_CONTROLLER), 3, CONTROLLER)
    assert sends(b.tick(10), AlterPartitionRequest) == []
    (again,) = sends(b.tick(3 + 50), AlterPartitionRequest)
    assert again.msg.items == s.msg.items


def test_consumer_fetch_with_stale_last_fetched_epoch_gets_diverging_epoch():
    feed = MetaFeed()
    b = make_broker(1)
    b.apply_committed(feed.cluster(leader=2), 0)
    p = b.partitions[TP]
    p.handle_fetch_response(FetchPartitionResponse(TP, 0, high_watermark=5, batches=(Batch(0, 0, 5, None),)), 1)
    b.apply_committed(feed.change(leader=3), 2)
    b.apply_committed(feed.change(leader=1, isr=(1,)), 3)  # epoch 2 from offset 5
    req = FetchPartitionRequest(TP, 8, current_leader_epoch=2, last_fetched_epoch=1)
    (resp,) = replies(b.handle(ClientFetchRequest("c", (req,), 0), 4, None), ClientFetchResponse)
    assert resp.partitions[0].diverging_epoch == (0, 5)


def test_purgatory_completes_exactly_the_produces_the_hw_has_passed():
    b, _ = leader()
    produce(b, 1, pid=7, seq=0, ref="s0")
    produce(b, 2, pid=7, seq=1, ref="s1")
    produce(b, 3, pid=7, seq=0, ref="s0-retry")  # duplicate of offset 0, parked behind s1
    replica_fetch(b, 2, 1, 4)
    effects, _ = replica_fetch(b, 3, 1, 4)  # HW 1
    done = {r.ref: r.base_offset for r in produce_replies(effects)}
    assert done == {"s0": 0, "s0-retry": 0}
    replica_fetch(b, 2, 2, 5)
    effects, _ = replica_fetch(b, 3, 2, 5)
    assert [(r.ref, r.base_offset) for r in produce_replies(effects)] == [("s1", 1)]


def test_replica_fetch_from_an_unnamed_sender_is_served_and_answered_to_the_fetching_replica():
    """A runtime that cannot name a fetch's sender still gets it served (the
    follower's LEO moves the HW) and answered to ``replica_id``."""
    from reference_impl.core.effects import Send
    from reference_impl.core.messages import FetchPartitionRequest, ReplicaFetchRequest

    b, _ = leader()
    produce(b, 1, count=2)
    replica_fetch(b, 2, 2, 2)
    req = ReplicaFetchRequest(replica_id=3, broker_epoch=broker_epoch_of(3), correlation_id=9,
                              partitions=(FetchPartitionRequest(TP, 2, 0, -1),), max_wait_ms=0)
    effects = b.handle(req, 3, None)
    (send,) = [e for e in effects if isinstance(e, Send) and e.msg.__class__.__name__ == "ReplicaFetchResponse"]
    assert send.dst == 3 and send.msg.correlation_id == 9
    assert b.partitions[TP].log.hw == 2
    (r,) = produce_replies(effects)
    assert r.error == Errors.NONE
