"""LeaderEpochCache rules (seed 000, "LeaderEpochFileCache, epoch -> start-offset")."""

from __future__ import annotations

from reference_impl.core.epoch_cache import LeaderEpochCache


def cache(*entries):
    return LeaderEpochCache.from_entries(list(entries))


def test_assign_appends_new_epochs_in_order():
    c = LeaderEpochCache()
    assert c.assign(0, 0)
    assert c.assign(2, 10)
    assert c.entries() == ((0, 0), (2, 10))
    assert c.latest_epoch == 2


def test_assign_same_epoch_with_later_offset_is_a_no_op():
    c = cache((1, 5))
    assert not c.assign(1, 9)
    assert c.entries() == ((1, 5),)


def test_assign_repairs_non_monotonic_entries():
    # maybeTruncateNonMonotonicEntries: entries with epoch >= new or start >= new go
    c = cache((1, 0), (3, 10), (5, 20))
    assert c.assign(4, 15)
    assert c.entries() == ((1, 0), (3, 10), (4, 15))
    c = cache((1, 0), (3, 10))
    assert c.assign(5, 8)  # start below epoch 3's start: epoch 3 is dropped
    assert c.entries() == ((1, 0), (5, 8))


def test_end_offset_for_latest_epoch_is_the_leo():
    c = cache((5, 100), (7, 130))
    assert c.end_offset_for(7, 142) == (7, 142)


def test_end_offset_for_older_epoch_is_next_epoch_start():
    # seed 000's example: epoch 5 -> 100, epoch 7 -> 130; a follower at epoch 5 truncates to 130
    c = cache((5, 100), (7, 130))
    assert c.end_offset_for(5, 142) == (5, 130)


def test_end_offset_for_missing_epoch_answers_largest_epoch_below():
    c = cache((5, 100), (7, 130))
    assert c.end_offset_for(6, 142) == (5, 130)


def test_end_offset_for_epoch_below_first_answers_requested_epoch_and_first_start():
    c = cache((5, 100), (7, 130))
    assert c.end_offset_for(3, 142) == (3, 100)


def test_end_offset_for_unknown_or_future_epoch_is_undefined():
    c = cache((5, 100), (7, 130))
    assert c.end_offset_for(-1, 142) == (-1, -1)
    assert c.end_offset_for(9, 142) == (-1, -1)
    assert LeaderEpochCache().end_offset_for(0, 0) == (-1, -1)


def test_truncate_from_end_drops_epochs_starting_at_or_after_offset():
    c = cache((1, 0), (2, 10), (3, 20))
    assert c.truncate_from_end(10)
    assert c.entries() == ((1, 0),)
    assert not c.truncate_from_end(50)


def test_truncate_from_start_moves_covering_epoch_to_new_start():
    c = cache((1, 0), (2, 10), (3, 20))
    assert c.truncate_from_start(15)
    assert c.entries() == ((2, 15), (3, 20))


def test_epoch_for_offset():
    c = cache((1, 0), (2, 10))
    assert c.epoch_for_offset(9) == 1
    assert c.epoch_for_offset(10) == 2


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 5)), min_size=1, max_size=8), st.integers(-1, 30))
def test_end_offset_for_matches_definition(steps, requested):
    # build strictly increasing (epoch, start) entries
    entries, epoch, start = [], 0, 0
    for de, ds in steps:
        epoch += de
        start += ds
        if entries and start <= entries[-1][1]:
            start = entries[-1][1] + 1
        entries.append((epoch, start))
    leo = entries[-1][1] + 7
    c = LeaderEpochCache.from_entries(entries)
    got = c.end_offset_for(requested, leo)
    if requested == -1:
        assert got == (-1, -1)
        return
    lower = [(e, s) for e, s in entries if e <= requested]
    higher = [(e, s) for e, s in entries if e > requested]
    if entries[-1][0] == requested:
        assert got == (requested, leo)
    elif not higher:
        assert got == (-1, -1)
    elif not lower:
        assert got == (requested, higher[0][1])
    else:
        assert got == (lower[-1][0], higher[0][1])
