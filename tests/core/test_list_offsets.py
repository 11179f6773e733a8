"""ListOffsets with Kafka's special timestamps and lookups by timestamp
(Partition.fetchOffsetForTimestamp, UnifiedLog.fetchOffsetByTimestamp,
ReplicaManager's lastFetchableOffset cap)."""

from __future__ import annotations

from reference_impl.core.messages import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Errors,
    ListOffsetsRequest,
    ProduceRequest,
)
from tests.core.brokerkit import TP, MetaFeed, make_broker, replica_fetch, replies


def leader_with_batches(stamps, committed=None):
    """Broker 1 leads TP (ISR 1, 2); one batch of 2 records per max timestamp
    in ``stamps``; follower 2 has fetched up to ``committed`` (all by default)."""
    feed = MetaFeed()
    b = make_broker(1)
    b.apply_committed(feed.cluster(isr=(1, 2)), 0)
    for i, ts in enumerate(stamps):
        b.handle(ProduceRequest(f"p{i}", TP, 1, 2, None, max_timestamp=ts), 1, None)
    replica_fetch(b, 2, 2 * len(stamps) if committed is None else committed, 2)
    return b


def lookup(b, ts):
    (r,) = replies(b.handle(ListOffsetsRequest("l", TP, ts), 3, None))
    return r


def test_lookup_by_timestamp_answers_the_first_batch_whose_max_timestamp_is_at_or_after_it():
    b = leader_with_batches([100, 300, 200, 400])
    r = lookup(b, 150)
    assert (r.error, r.offset, r.timestamp, r.leader_epoch) == (Errors.NONE, 2, 300, 0)
    assert r.batch is not None and r.batch.base_offset == 2
    assert lookup(b, 0).offset == 0
    assert lookup(b, 400).offset == 6


def test_lookup_past_every_timestamp_answers_offset_minus_one_without_error():
    r = lookup(leader_with_batches([100, 200]), 201)
    assert (r.error, r.offset, r.timestamp, r.batch) == (Errors.NONE, -1, -1, None)


def test_lookup_by_timestamp_is_capped_at_the_high_watermark_read_uncommitted():
    """A record at or past the HW is not offered (lastFetchableOffset)."""
    b = leader_with_batches([100, 200, 300], committed=4)
    assert b.partitions[TP].log.hw == 4
    assert lookup(b, 250).offset == -1
    assert lookup(b, 150).offset == 2


def test_max_timestamp_answers_the_batch_with_the_largest_timestamp_below_the_hw():
    b = leader_with_batches([100, 500, 300, 900], committed=6)
    r = lookup(b, MAX_TIMESTAMP)
    assert (r.offset, r.timestamp) == (2, 500)


def test_latest_is_the_hw_and_earliest_and_earliest_local_are_the_log_start():
    b = leader_with_batches([100, 200], committed=2)
    assert (lookup(b, LATEST_TIMESTAMP).offset, lookup(b, LATEST_TIMESTAMP).timestamp) == (2, -1)
    for special in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        r = lookup(b, special)
        assert (r.error, r.offset, r.leader_epoch, r.timestamp) == (Errors.NONE, 0, 0, -1)


def test_latest_tiered_without_tiered_storage_is_offset_and_epoch_minus_one():
    r = lookup(leader_with_batches([100]), LATEST_TIERED_TIMESTAMP)
    assert (r.error, r.offset, r.leader_epoch) == (Errors.NONE, -1, -1)
