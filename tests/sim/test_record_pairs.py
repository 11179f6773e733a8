"""The simulated consumers' reads (``reference_impl.sim.consumer.RecordPairs``):
one ``[offset, value]`` pair per record, shared by every read of it, and a
read that always says what the log held when it read."""

from __future__ import annotations

from reference_impl.core.messages import Batch, Errors, FetchPartitionResponse, TopicPartition
from reference_impl.sim.consumer import RecordPairs

TP = TopicPartition("t", 0)


def fetched(*batches: Batch) -> FetchPartitionResponse:
    return FetchPartitionResponse(TP, Errors.NONE, high_watermark=10, batches=batches)


def test_every_read_of_a_record_gets_the_same_pair() -> None:
    pairs = RecordPairs()
    log = fetched(Batch(0, 1, 2, (10, 11)), Batch(2, 1, 1, (12,)))
    first: list = []
    second: list = []
    assert pairs.take(log, 0, first) == 3
    assert pairs.take(log, 0, second) == 3
    assert first == second == [[0, 10], [1, 11], [2, 12]]
    assert all(a is b for a, b in zip(first, second))


def test_a_read_starts_at_its_position_inside_a_batch() -> None:
    pairs = RecordPairs()
    got: list = []
    assert pairs.take(fetched(Batch(0, 1, 3, (10, 11, 12))), 2, got) == 3
    assert got == [[2, 12]]
    later: list = []
    assert pairs.take(fetched(Batch(0, 1, 3, (10, 11, 12))), 3, later) == 3
    assert later == []


def test_an_offset_written_again_with_another_value_reads_as_the_new_value() -> None:
    pairs = RecordPairs()
    before: list = []
    pairs.take(fetched(Batch(0, 1, 2, (10, 11))), 0, before)
    # the log truncated to offset 1 and written again by a new leader
    after: list = []
    assert pairs.take(fetched(Batch(0, 1, 1, (10,)), Batch(1, 2, 1, (99,))), 0, after) == 2
    assert after == [[0, 10], [1, 99]]
    assert before == [[0, 10], [1, 11]]  # what the earlier read returned stays as it read it
    assert after[0] is before[0]


def test_records_a_batch_holds_no_value_for_read_as_none() -> None:
    got: list = []
    assert RecordPairs().take(fetched(Batch(4, 1, 2, None)), 0, got) == 6
    assert got == [[4, None], [5, None]]
