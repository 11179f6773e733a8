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


def test_a_batch_read_again_gets_its_pairs_and_a_rewrite_between_reads_is_seen() -> None:
    """The same one-record batch object read again is taken without
    comparing values; after another leader's batch rewrote the offset, the
    old batch (an old leader's log, still read) gets its own value back,
    not the note it left before the rewrite."""
    pairs = RecordPairs()
    old = Batch(0, 1, 1, (10,))
    new = Batch(0, 2, 1, (99,))
    a: list = []
    b: list = []
    pairs.take(fetched(old), 0, a)
    pairs.take(fetched(old), 0, b)
    assert a == b == [[0, 10]] and a[0] is b[0]
    c: list = []
    pairs.take(fetched(new), 0, c)
    assert c == [[0, 99]]
    d: list = []
    pairs.take(fetched(old), 0, d)
    assert d == [[0, 10]]
    e: list = []
    pairs.take(fetched(new), 0, e)
    assert e == [[0, 99]]


def test_an_equal_batch_of_another_leader_shares_the_pair_it_left() -> None:
    pairs = RecordPairs()
    first: list = []
    second: list = []
    pairs.take(fetched(Batch(0, 1, 1, (10,))), 0, first)
    pairs.take(fetched(Batch(0, 1, 1, (10,))), 0, second)  # a follower's copy, now the leader's
    assert first == second == [[0, 10]] and first[0] is second[0]


def test_a_read_past_a_batch_skips_it_and_a_cleared_run_forgets_its_notes() -> None:
    pairs = RecordPairs()
    b0, b1 = Batch(0, 1, 1, (10,)), Batch(1, 1, 1, (11,))
    got: list = []
    assert pairs.take(fetched(b0, b1), 1, got) == 2
    assert got == [[1, 11]]
    pairs.clear()
    assert pairs.by_tp == {} and pairs.checked == {}
    again: list = []
    assert pairs.take(fetched(b0, b1), 0, again) == 2
    assert again == [[0, 10], [1, 11]]


def test_known_batches_at_gapped_offsets_around_a_new_one_read_in_log_order() -> None:
    """Batches already noted are taken as runs of consecutive offsets: a
    run ends at a gap in the offsets (a compacted or truncated log) and
    before a batch read for the first time, so each read is every record
    fetched, each once, in the log's order (a run carried over the gap
    would add the offsets in it, one ended late would reorder them)."""
    pairs = RecordPairs()
    b0, b1, b3, b4 = (Batch(o, 1, 1, (10 + o,)) for o in (0, 1, 3, 4))
    warm: list = []
    pairs.take(fetched(b0, b1, Batch(2, 1, 1, (12,)), b3, b4), 0, warm)
    fresh = Batch(5, 1, 2, (15, 16))
    got: list = []
    assert pairs.take(fetched(b0, b1, b3, b4, fresh, Batch(7, 1, 1, (17,))), 0, got) == 8
    assert got == [[0, 10], [1, 11], [3, 13], [4, 14], [5, 15], [6, 16], [7, 17]]
    assert got[0] is warm[0] and got[3] is warm[4]
    again: list = []
    assert pairs.take(fetched(b0, b1, b3, b4, fresh, Batch(7, 1, 1, (17,))), 1, again) == 8
    assert again == got[1:]


def test_room_left_past_the_last_record_reads_as_not_yet_read() -> None:
    """The lists kept per partition grow ahead of the log; the room past
    the last record read holds no pair and no note, so a record read
    there later is made and noted as the first read of it."""
    pairs = RecordPairs()
    first: list = []
    pairs.take(fetched(Batch(0, 1, 1, (10,))), 0, first)
    later = Batch(1, 1, 1, (11,))
    got: list = []
    assert pairs.take(fetched(later), 1, got) == 2
    again: list = []
    assert pairs.take(fetched(later), 1, again) == 2
    assert got == again == [[1, 11]] and got[0] is again[0]


def test_a_polls_keys_are_sorted_only_when_they_arrived_out_of_order() -> None:
    """A poll's value lists its keys sorted; keys already in order (read
    leader by leader in key order, nearly always) are taken as they are."""
    from reference_impl.sim.consumer import _in_order

    assert _in_order({}) and _in_order({"t-0": 1}) and _in_order({"t-0": 1, "t-1": 2, "t-2": 3})
    assert not _in_order({"t-1": 1, "t-0": 2}) and not _in_order({"t-0": 1, "t-2": 2, "t-1": 3})


def test_a_longer_batch_read_again_reads_every_record_of_it() -> None:
    """A note stands for one record at its own offset: a read finds the
    notes of a run of known one-record batches and takes that many pairs
    at once, so a longer batch leaves none (noted, a read of it again
    would take one pair for its three records)."""
    pairs = RecordPairs()
    longer = Batch(0, 1, 3, (10, 11, 12))
    first: list = []
    again: list = []
    assert pairs.take(fetched(longer), 0, first) == 3
    assert pairs.take(fetched(longer), 0, again) == 3
    assert first == again == [[0, 10], [1, 11], [2, 12]]
    assert all(a is b for a, b in zip(first, again))
    after: list = []
    tail = Batch(3, 1, 1, (13,))
    pairs.take(fetched(longer, tail), 0, after)
    assert after == [[0, 10], [1, 11], [2, 12], [3, 13]]


def test_a_known_run_then_new_batches_read_in_order_with_the_known_pairs() -> None:
    """A read of batches other consumers read before (taken as one run)
    followed by batches written since (checked one by one): every record
    once, in offset order, the known ones by the pairs made before; a run
    that starts before the read's position is read batch by batch."""
    pairs = RecordPairs()
    known = tuple(Batch(o, 1, 1, (10 + o,)) for o in range(4))
    warm: list = []
    assert pairs.take(fetched(*known), 0, warm) == 4
    new = (Batch(4, 1, 1, (14,)), Batch(5, 1, 2, (15, 16)))
    got: list = []
    assert pairs.take(fetched(*known, *new), 0, got) == 7
    assert got == [[o, 10 + o] for o in range(7)]
    assert all(a is b for a, b in zip(got, warm))
    mid: list = []
    assert pairs.take(fetched(*known, *new), 2, mid) == 7
    assert mid == got[2:] and mid[0] is got[2]
    rewritten: list = []
    assert pairs.take(fetched(*known[:2], Batch(2, 2, 1, (99,)), known[3]), 0, rewritten) == 4
    assert rewritten == [[0, 10], [1, 11], [2, 99], [3, 13]]


def test_an_ok_completion_reaches_a_plain_callback_as_its_fields() -> None:
    """``complete_ok`` hands any callback but a Completion (the
    virtual-time interpreter's, tests/harness/test_virtual_interpreter.py)
    the fields, as the clients always did."""
    from reference_impl.sim.endpoint import complete_ok

    got: list = []
    complete_ok(got.append, [1, 2])
    assert got == [{"type": "ok", "value": [1, 2]}]


def test_a_polls_value_is_written_from_its_pairs_spelt_once_as_orjson_spells_it() -> None:
    """RecordPairs.poll_json writes a poll's value ``[["poll", got]]`` from
    the JSON of the runs of pairs its keys read, each pair spelt once for
    the run: the bytes orjson writes for the value, whatever runs the polls
    read (overlapping, past the spelt end, before its start, across a gap)
    and after an offset is written again. A poll that began before a pair
    was replaced gets None (its pairs may not be the ones spelt), as does a
    key whose pairs are not one run of offsets, or a pair orjson refuses."""
    import orjson

    from reference_impl.sim.consumer import _Keys

    tp1 = TopicPartition("t", 1)
    keys = _Keys([TP, tp1])
    pairs = RecordPairs()

    def fetched_of(tp: TopicPartition, *batches: Batch) -> FetchPartitionResponse:
        return FetchPartitionResponse(tp, Errors.NONE, high_watermark=99, batches=batches)

    def poll(reads: dict) -> tuple[dict, int]:
        rewrites = pairs.rewrites
        got: dict = {}
        for tp, (log, pos) in reads.items():
            got[str(tp)] = []
            pairs.take(log, pos, got[str(tp)])
        return got, rewrites

    log0 = [Batch(o, 1, 1, (10 + o,)) for o in range(20)]
    log1 = [Batch(0, 1, 3, ("a", 'q"', None)), Batch(3, 1, 1, (2.5,))]
    for reads in ({TP: (fetched_of(TP, *log0[:5]), 0), tp1: (fetched_of(tp1, *log1), 0)},
                  {TP: (fetched_of(TP, *log0[:9]), 2), tp1: (fetched_of(tp1, *log1), 4)},
                  {TP: (fetched_of(TP, *log0[:12]), 1)},
                  {TP: (fetched_of(TP, *log0[15:]), 15), tp1: (fetched_of(tp1, *log1), 1)},
                  {TP: (fetched_of(TP, *log0), 0)}):
        got, rewrites = poll(reads)
        assert pairs.poll_json(got, keys, rewrites) == orjson.dumps([["poll", got]])
    # offset 3 written again with another value by a new leader: a poll begun before is not spelt from the run
    before = pairs.rewrites
    got, _ = poll({TP: (fetched_of(TP, *log0[:3], Batch(3, 2, 1, (99,)), *log0[4:]), 0)})
    assert got[str(TP)][3] == [3, 99] and pairs.rewrites == before + 1
    assert pairs.poll_json(got, keys, before) is None
    again, rewrites = poll({TP: (fetched_of(TP, *log0[:3], Batch(3, 2, 1, (99,)), *log0[4:]), 1)})
    assert pairs.poll_json(again, keys, rewrites) == orjson.dumps([["poll", again]])
    twice = {str(TP): again[str(TP)] + again[str(TP)][:1]}
    assert pairs.poll_json(twice, keys, rewrites) is None  # not one run of offsets
    assert pairs.poll_json({str(TP): [], str(tp1): []}, keys, rewrites) == orjson.dumps([["poll", {"t-0": [], "t-1": []}]])
    big, rewrites = poll({TP: (fetched_of(TP, Batch(20, 1, 1, (2**70,))), 20)})
    assert pairs.poll_json(big, keys, rewrites) is None  # orjson refuses it: the line is encoded whole


def test_a_polls_pairs_out_of_offset_order_are_not_written_from_the_run() -> None:
    """A key's pairs of the run's length but not in offset order (5, 7, 6,
    8) would pass the run-of-offsets test; poll_json checks each pair is
    the one at its offset, so such a value is encoded whole (None), never
    spelt as the run (5, 6, 7, 8) it is not; the same pairs in order are."""
    import orjson

    from reference_impl.sim.consumer import _Keys

    keys = _Keys([TP])
    pairs = RecordPairs()
    rewrites = pairs.rewrites
    read: list = []
    pairs.take(fetched(*[Batch(o, 1, 1, (10 + o,)) for o in range(10)]), 5, read)
    assert [p[0] for p in read] == [5, 6, 7, 8, 9]
    shuffled = {str(TP): [read[0], read[2], read[1], read[3]]}
    assert pairs.poll_json(shuffled, keys, rewrites) is None
    ordered = {str(TP): read[:4]}
    assert pairs.poll_json(ordered, keys, rewrites) == orjson.dumps([["poll", ordered]])
