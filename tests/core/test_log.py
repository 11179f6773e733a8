"""PartitionLog rules: offsets, LEO/HW, truncation, persistence effects, recovery."""

from __future__ import annotations

from reference_impl.core.effects import FileWrite, Fsync, LogAppend, LogTruncate, LogTruncateFully
from reference_impl.core.log import PartitionLog
from reference_impl.core.messages import Batch, TopicPartition
from reference_impl.core.storage import LeaderEpochCheckpoint

TP = TopicPartition("t", 0)


def log_with(*spec, flush=0):
    """spec: (epoch, count) per batch, appended as leader."""
    log = PartitionLog(tp=TP, flush_interval_messages=flush)
    for epoch, count in spec:
        log.append_as_leader(epoch, count, None)
    return log


def test_leader_append_assigns_offsets_and_epoch_and_persists_via_effects():
    log = PartitionLog(tp=TP)
    batch, effects = log.append_as_leader(3, 5, "p")
    assert (batch.base_offset, batch.count, batch.leader_epoch) == (0, 5, 3)
    assert log.leo == 5
    assert effects[0] == LogAppend("t-0", (batch,))
    # a new epoch is checkpointed and fsynced synchronously (LeaderEpochFileCache.assign)
    assert FileWrite("t-0/leader-epoch-checkpoint", LeaderEpochCheckpoint(((3, 0),))) in effects
    assert Fsync("t-0/leader-epoch-checkpoint") in effects
    _, effects2 = log.append_as_leader(3, 1, "q")
    assert effects2 == [LogAppend("t-0", (log.batches[-1],))]  # same epoch: nothing else


def test_flush_policy_zero_never_fsyncs_the_log_on_append():
    log = log_with((0, 1000))
    _, effects = log.append_as_leader(0, 1000, None)
    assert not any(isinstance(e, Fsync) and e.target == "t-0" for e in effects)


def test_flush_policy_fsyncs_after_n_messages_and_moves_recovery_point():
    log = PartitionLog(tp=TP, flush_interval_messages=3)
    _, e1 = log.append_as_leader(0, 2, None)
    assert Fsync("t-0") not in e1
    _, e2 = log.append_as_leader(0, 1, None)
    assert Fsync("t-0") in e2
    assert log.recovery_point == 3


def test_hw_is_monotonic_on_leader_and_never_above_leo():
    log = log_with((0, 10))
    assert log.maybe_increment_hw(4)
    assert not log.maybe_increment_hw(2)
    assert log.hw == 4
    assert log.maybe_increment_hw(50)
    assert log.hw == 10


def test_follower_hw_is_min_of_leader_hw_and_own_leo():
    log = log_with((0, 5))
    log.set_follower_hw(9)
    assert log.hw == 5
    log.set_follower_hw(3)
    assert log.hw == 3


def test_read_returns_whole_batches_bounded_by_upto():
    log = log_with((0, 2), (0, 3), (1, 4))  # [0,2) [2,5) [5,9)
    assert [b.base_offset for b in log.read(0, 9)] == [0, 2, 5]
    assert [b.base_offset for b in log.read(3, 9)] == [2, 5]  # batch holding offset 3
    assert [b.base_offset for b in log.read(0, 5)] == [0, 2]  # bounded by an HW of 5
    assert [b.base_offset for b in log.read(0, 6)] == [0, 2]  # batch [5,9) not wholly below 6
    assert log.read(9, 9) == ()
    assert [b.base_offset for b in log.read(0, 9, max_batches=1)] == [0]


def test_truncate_to_drops_tail_epochs_and_pulls_hw_down():
    log = log_with((0, 5), (2, 5))
    log.maybe_increment_hw(8)
    effects = log.truncate_to(5)
    assert LogTruncate("t-0", 5) in effects
    assert (log.leo, log.hw) == (5, 5)
    assert log.epochs.entries() == ((0, 0),)
    # truncation checkpoints the cache but does not fsync it (Kafka flushes it asynchronously)
    assert FileWrite("t-0/leader-epoch-checkpoint", LeaderEpochCheckpoint(((0, 0),))) in effects
    assert not any(isinstance(e, Fsync) for e in effects)


def test_truncate_inside_a_batch_removes_the_whole_batch():
    log = log_with((0, 5), (0, 5))
    log.truncate_to(7)
    assert log.leo == 5


def test_truncate_beyond_leo_is_a_no_op():
    log = log_with((0, 5))
    assert log.truncate_to(5) == []
    assert log.truncate_to(9) == []


def test_truncate_fully_restarts_empty_log_at_offset():
    log = log_with((0, 5))
    effects = log.truncate_fully(20)
    assert effects[0] == LogTruncateFully("t-0", 20)
    assert (log.log_start_offset, log.leo, log.hw, log.batches) == (20, 20, 20, [])


def test_follower_append_keeps_leader_offsets_and_skips_what_it_has():
    log = PartitionLog(tp=TP)
    b0, b1 = Batch(0, 1, 3, None), Batch(3, 2, 2, None)
    log.append_as_follower((b0,))
    log.append_as_follower((b0, b1))
    assert [b.base_offset for b in log.batches] == [0, 3]
    assert log.epochs.entries() == ((1, 0), (2, 3))


def test_load_rebuilds_epochs_from_batches_and_caps_hw_at_leo():
    # the checkpoint lost the epoch-2 entry, and still holds an entry past the surviving log
    batches = [Batch(0, 1, 5, None), Batch(5, 2, 5, None)]
    cp = LeaderEpochCheckpoint(((1, 0), (3, 40)))
    log, effects = PartitionLog.load(TP, batches, 0, cp, hw_checkpoint=99)
    assert log.leo == 10
    assert log.hw == 10
    assert log.epochs.entries() == ((1, 0), (2, 5))
    assert FileWrite("t-0/leader-epoch-checkpoint", LeaderEpochCheckpoint(((1, 0), (2, 5)))) in effects


def test_load_takes_stale_hw_checkpoint_as_lower_bound():
    log, _ = PartitionLog.load(TP, [Batch(0, 0, 10, None)], 0, None, hw_checkpoint=4)
    assert (log.leo, log.hw) == (10, 4)


def test_offset_lookup_bisects_long_logs():
    log = log_with(*[(0, 1)] * 20000)
    assert log.read(12345, 12347)[0].base_offset == 12345
    assert log.batch_at(19999).base_offset == 19999


def test_a_read_starts_at_the_batch_holding_the_offset_near_the_tail_or_far_from_it():
    """batch_index looks back from the tail a few batches before it bisects;
    every offset, near the LEO or far behind it, finds the same batch."""
    import random
    from bisect import bisect_right

    rng = random.Random(7)
    for n in (0, 1, 2, 7, 8, 9, 10, 40):
        log = log_with(*[(0, rng.choice((1, 1, 3))) for _ in range(n)])
        for offset in range(-1, log.leo + 3):
            i = bisect_right(log.bases, offset) - 1
            want = 0 if i < 0 else i + 1 if log.batches[i].next_offset <= offset else i
            assert log.batch_index(offset) == want, (n, offset)


def test_last_at_or_before_is_bisect_right_minus_one_near_the_tail_and_far_from_it():
    """The log's lookup of a batch by offset (the tail walk, then its own
    bisection over the ints) answers what ``bisect_right(bases, x) - 1``
    does, for every x around every base of short and long logs."""
    import random
    from bisect import bisect_right

    from reference_impl.core.log import last_at_or_before

    rng = random.Random(11)
    for n in (0, 1, 2, 8, 9, 10, 17, 100, 1000):
        bases, off = [], rng.randrange(3)
        for _ in range(n):
            bases.append(off)
            off += rng.choice((1, 2, 5))
        for x in range(-2, off + 2):
            assert last_at_or_before(bases, x) == bisect_right(bases, x) - 1, (n, x)


def test_last_at_or_before_checks_its_guess_of_one_record_a_batch_on_any_ascending_bases():
    """The guess of a log of one-record batches (index ``x - bases[0]``) is
    taken only where it is the answer: for dense logs, logs with gaps,
    repeated bases (a batch of no record) and a log start past 0, every x
    finds what ``bisect_right(bases, x) - 1`` does."""
    from bisect import bisect_right

    from reference_impl.core.log import last_at_or_before

    cases = [list(range(50)), list(range(7, 60)), [0, 1, 2, 3, 10, 11, 12, 13, 14], [0, 1, 1, 1, 2, 3, 4],
             [0, 0, 0, 1], [5, 6, 6, 7, 9, 10, 11, 12], [3], [2, 3]]
    for bases in cases:
        for x in range(-2, bases[-1] + 3):
            assert last_at_or_before(bases, x) == bisect_right(bases, x) - 1, (bases, x)


def test_a_read_up_to_the_hw_far_behind_the_leo_ends_at_the_last_whole_batch_below_it():
    """A consumer's read ends at the HW; with the HW far behind the LEO the
    last batch is found by bisection, not by the walk back from the tail."""
    log = log_with(*[(0, 2)] * 50)
    batches = log.read(10, 61)
    assert batches[0].base_offset == 10 and batches[-1].next_offset == 60
    assert log.read(10, 12)[-1].next_offset == 12 and log.read(10, 11) == ()


def test_load_keeps_only_the_contiguous_prefix():
    log, _ = PartitionLog.load(TP, [Batch(0, 0, 2, None), Batch(2, 0, 2, None), Batch(7, 0, 1, None)], 0, None, None)
    assert log.leo == 4 and len(log.batches) == 2
