"""Properties of the log under arbitrary appends, truncations and HW moves:
offsets stay contiguous, HW <= LEO, the epoch cache only names epochs that
start inside the log and is strictly increasing, and reading from any offset
returns the batch holding it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reference_impl.core.log import PartitionLog
from reference_impl.core.messages import Batch, TopicPartition

TP = TopicPartition("t", 0)

op = st.one_of(
    st.tuples(st.just("leader"), st.integers(0, 3), st.integers(1, 5)),  # epoch delta, count
    st.tuples(st.just("follower"), st.integers(0, 3), st.integers(1, 5)),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
    st.tuples(st.just("hw"), st.integers(0, 40)),
    st.tuples(st.just("follower_hw"), st.integers(0, 40)),
)


def check(log: PartitionLog) -> None:
    expect = log.log_start_offset
    for b, base in zip(log.batches, log.bases):
        assert b.base_offset == base == expect
        expect = b.next_offset
    assert log.leo == expect
    assert log.log_start_offset <= log.hw <= log.leo
    epochs, starts = log.epochs.epochs, log.epochs.starts
    assert epochs == sorted(set(epochs)) and starts == sorted(set(starts))
    assert all(s <= log.leo for s in starts)
    for b in log.batches:
        assert log.epochs.epoch_for_offset(b.base_offset) == b.leader_epoch
    for off in range(log.log_start_offset, log.leo):
        got = log.read(off, log.leo, 1)
        assert got and got[0].base_offset <= off < got[0].next_offset


@settings(max_examples=200, deadline=None)
@given(st.lists(op, max_size=40))
def test_log_invariants_hold_under_any_sequence(ops):
    log = PartitionLog(tp=TP)
    epoch = 0
    for o in ops:
        if o[0] == "leader":
            epoch += o[1]
            log.append_as_leader(epoch, o[2], None)
        elif o[0] == "follower":
            epoch += o[1]
            log.append_as_follower((Batch(log.leo, epoch, o[2], None),))
        elif o[0] == "truncate":
            hw_before = log.hw
            log.truncate_to(o[1])
            assert log.hw <= hw_before
        elif o[0] == "hw":
            before = log.hw
            log.maybe_increment_hw(o[1])
            assert log.hw >= before
        else:
            log.set_follower_hw(o[1])
            assert log.hw == max(log.log_start_offset, min(o[1], log.leo))
        check(log)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), max_size=30), st.integers(0, 60))
def test_reload_rebuilds_the_same_epoch_cache(appends, hw):
    log = PartitionLog(tp=TP)
    epoch = 0
    for d, n in appends:
        epoch += d
        log.append_as_leader(epoch, n, None)
    log.maybe_increment_hw(hw)
    from reference_impl.core.storage import LeaderEpochCheckpoint
    again, _ = PartitionLog.load(TP, list(log.batches), 0, LeaderEpochCheckpoint(log.epochs.entries()), log.hw)
    assert again.epochs.entries() == log.epochs.entries()
    assert (again.leo, again.hw) == (log.leo, log.hw)
