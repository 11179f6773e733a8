"""A replica fetch's answer on the leader (seed 000, "Recording follower
progress"; Kafka 4.4's ReplicaManager.fetchMessages answers at once when
any partition has data or an error, else parks the fetch in the fetch
purgatory until data arrives or its max wait passes).

The leader leaves a partition's empty answer unbuilt while it serves the
fetch (``partition_leader.NOTHING_YET``), as most such fetches park: these
tests hold that a fetch answered at once after all names every partition
it asked for, each empty one as it stood when served."""

from __future__ import annotations

from reference_impl.core.effects import Send
from reference_impl.core.messages import (
    Errors,
    FetchPartitionRequest,
    ProduceRequest,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TopicPartition,
)
from tests.core.brokerkit import MetaFeed, broker_epoch_of, make_broker

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def two_partition_leader():
    feed = MetaFeed()
    b = make_broker(1)
    b.apply_committed(feed.cluster(partitions=2), 0)
    return b


def fetch(b, offsets, now, max_wait_ms=0, replica=2):
    req = ReplicaFetchRequest(
        replica_id=replica, broker_epoch=broker_epoch_of(replica), correlation_id=7,
        partitions=tuple(FetchPartitionRequest(tp, off, 0, 0 if off else -1) for tp, off in offsets),
        max_wait_ms=max_wait_ms,
    )
    return [e.msg for e in b.handle(req, now, replica) if isinstance(e, Send) and isinstance(e.msg, ReplicaFetchResponse)]


def test_a_fetch_answered_for_one_partitions_data_names_the_empty_one_as_it_stood():
    b = two_partition_leader()
    b.handle(ProduceRequest("p", TP0, 1, 3, None, 1000), 1, None)
    b.handle(ProduceRequest("p", TP1, 1, 2, None, 1000), 1, None)
    fetch(b, [(TP1, 2)], 2, replica=3)  # replica 3 at TP1's LEO: the HW moves to 2
    (resp,) = fetch(b, [(TP0, 0), (TP1, 2)], 3, max_wait_ms=500)
    p0, p1 = resp.partitions
    assert (p0.tp, p0.error, len(p0.batches)) == (TP0, Errors.NONE, 1)
    # TP1: nothing new for replica 2, which was at its LEO; its HW is 2 now
    assert (p1.tp, p1.error, p1.high_watermark, p1.last_stable_offset, p1.log_start_offset, p1.batches,
            p1.diverging_epoch, p1.current_leader) == (TP1, Errors.NONE, 2, 2, 0, (), None, None)


def test_a_fetch_with_nothing_anywhere_parks_and_one_that_may_not_wait_is_answered_empty():
    b = two_partition_leader()
    assert fetch(b, [(TP0, 0), (TP1, 0)], 1, max_wait_ms=500) == []  # parked
    (resp,) = fetch(b, [(TP0, 0), (TP1, 0)], 2, max_wait_ms=0)
    assert [(p.tp, p.error, p.high_watermark, p.batches) for p in resp.partitions] == [
        (TP0, Errors.NONE, 0, ()), (TP1, Errors.NONE, 0, ())]


# A fetch of one partition (nearly every one) is answered by its own path
# (replica_manager._replica_fetch_one): the same answers as the general one.

def test_a_one_partition_fetch_with_data_is_answered_at_once_with_it():
    b = two_partition_leader()
    b.handle(ProduceRequest("p", TP0, 1, 3, None, 1000), 1, None)
    (resp,) = fetch(b, [(TP0, 0)], 2, max_wait_ms=500)
    (p0,) = resp.partitions
    assert (resp.correlation_id, p0.tp, p0.error, len(p0.batches), p0.batches[0].count) == (7, TP0, Errors.NONE, 1, 3)


def test_a_one_partition_fetch_with_nothing_parks_or_is_answered_empty_as_it_stands():
    b = two_partition_leader()
    b.handle(ProduceRequest("p", TP0, 1, 2, None, 1000), 1, None)
    fetch(b, [(TP0, 2)], 2, replica=3)  # replica 3 at the LEO: the HW moves to 2
    assert fetch(b, [(TP0, 2)], 3, max_wait_ms=500) == []  # replica 2 at the LEO too: parked
    assert len(b.fetch_purgatory.delayed) == 1
    (resp,) = fetch(b, [(TP0, 2)], 4, max_wait_ms=0)  # may not wait: the empty answer, built
    (p0,) = resp.partitions
    assert (p0.tp, p0.error, p0.high_watermark, p0.last_stable_offset, p0.log_start_offset, p0.batches,
            p0.diverging_epoch, p0.current_leader) == (TP0, Errors.NONE, 2, 2, 0, (), None, None)


def test_a_one_partition_fetch_of_a_partition_not_hosted_here_is_refused_at_once():
    b = two_partition_leader()
    (resp,) = fetch(b, [(TopicPartition("u", 0), 0)], 1, max_wait_ms=500)
    (p,) = resp.partitions
    assert (p.tp, p.error) == (TopicPartition("u", 0), Errors.NOT_LEADER_OR_FOLLOWER)


def test_a_parked_one_partition_fetch_is_answered_with_the_data_that_arrives():
    b = two_partition_leader()
    assert fetch(b, [(TP0, 0)], 1, max_wait_ms=500) == []  # parked
    effects = b.handle(ProduceRequest("p", TP0, 1, 2, None, 1000), 2, None)
    (resp,) = [e.msg for e in effects if isinstance(e, Send) and isinstance(e.msg, ReplicaFetchResponse)]
    (p0,) = resp.partitions
    assert (resp.correlation_id, p0.tp, p0.error, len(p0.batches)) == (7, TP0, Errors.NONE, 1)
    assert len(b.fetch_purgatory.delayed) == 0
