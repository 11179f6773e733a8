"""A poll's records are lists of at least [offset, value] with an integer
(not bool) offset; anything else is refused with the one-line error, whichever
record of a long final read breaks the rule."""

from __future__ import annotations

import pytest

from checkers.history.op import HistoryError, Op
from checkers.queue.project import project


def _poll(records: list) -> list[Op]:
    return [Op("invoke", "poll", [["poll"]], 0, 1, 0),
            Op("ok", "poll", [["poll", {"t-1": records}]], 0, 2, 1)]


GOOD = [[i, 100 + i] for i in range(1000)]


@pytest.mark.parametrize("bad", [[5], (5, 6), [True, 6], [5.0, 6], ["5", 6], None, []])
@pytest.mark.parametrize("where", [0, 500, 999])
def test_a_bad_record_anywhere_in_a_poll_is_refused(bad, where):
    records = [list(r) for r in GOOD]
    records[where] = bad
    with pytest.raises(HistoryError, match=r"op 1: poll of 't-1' .* is not a list of \[offset, value\]"):
        project(_poll(records))


def test_records_longer_than_a_pair_and_empty_polls_are_read():
    proj = project(_poll([[0, 7, "extra"], [1, 8]]))
    assert list(proj.keys) == ["t-1"]
    assert project(_poll([])).counts["ok"] == 1


# -- a long poll's records read in one pass (checkers.queue.records) ---------------------------------------

def test_a_plain_list_of_records_is_read_as_64_bit_offsets_and_values_with_its_highest_offset():
    """``records_i64`` is what the projection appends to a key's columns
    and ``max_offset_i64`` what the realtime lag takes of a final read:
    both must be the records' own, in order (the highest offset need not
    be the last)."""
    from array import array

    from checkers.queue.records import max_offset_i64, records_i64

    recs = [[5, 50], [9, 90], [7, (1 << 63) - 1], [0, 0]]
    offs, vals, hi = records_i64(recs)
    assert array("q", offs).tolist() == [5, 9, 7, 0]
    assert array("q", vals).tolist() == [50, 90, (1 << 63) - 1, 0]
    assert hi == 9 == max_offset_i64(recs)
    assert records_i64([]) == (b"", b"", -1) and max_offset_i64([]) == -1


@pytest.mark.parametrize("bad", [[5], [5, 6, 7], (5, 6), [True, 6], [5, False], [5.0, 6], ["5", 6], [5, "v"],
                                 [-1, 6], [5, -6], [1 << 63, 6], [5, 1 << 63], [1 << 70, 6], None])
@pytest.mark.parametrize("where", [0, 3])
def test_records_other_than_two_non_negative_64_bit_ints_are_left_to_the_folds(bad, where):
    """Anything but a two-element list of ints in [0, 2^63) is None, so
    the folds read the records as they always did (a value may be any
    JSON, an offset past 64 bits turns a column into a list)."""
    from checkers.queue.records import max_offset_i64, records_i64

    recs: list = [[i, i] for i in range(4)]
    recs[where] = bad
    assert records_i64(recs) is None
    assert max_offset_i64(recs) is None


def _long_polls(first: list[Op] = ()) -> list[Op]:
    """Some history, then a long final read of t-1 and t-2 by a process that
    read part of t-1 before (the lag's position), the records out of order;
    process 3, which read t-1 up to offset 38 first, then polls nothing
    new: its lag is from when the final read showed offset 39 (t=300)."""
    t1 = [[i, 1000 + i] for i in range(40)]
    t1[3], t1[30] = t1[30], t1[3]
    ops = [Op("invoke", "poll", [["poll"]], 3, 20, 0), Op("ok", "poll", [["poll", {"t-1": [[38, 1038]]}]], 3, 21, 0)]
    ops += list(first) + [
        Op("invoke", "poll", [["poll"]], 0, 100, 0),
        Op("ok", "poll", [["poll", {"t-1": t1[:10]}]], 0, 101, 0),
        Op("invoke", "poll", [["poll"]], 0, 200, 0, extra={"final": True}),
        Op("ok", "poll", [["poll", {"t-1": t1, "t-2": [[i, 7 * i] for i in range(12)],
                                    "t-3": [[0, "x"]] * 9}]], 0, 300, 0, extra={"final": True}),
        Op("invoke", "poll", [["poll"]], 3, 1000, 0),
        Op("ok", "poll", [["poll", {"t-1": []}]], 3, 1001, 0),
    ]
    return [Op(o.type, o.f, o.value, o.process, o.time, i, o.error, o.extra) for i, o in enumerate(ops)]


@pytest.mark.parametrize("first", [
    [],
    # a send that never learnt its offset: t-1's offset column is then a list
    [Op("invoke", "send", [["send", "t-1", 5]], 1, 10, 0), Op("info", "send", [["send", "t-1", 5]], 1, 11, 0)],
    # a record past 64 bits: t-2's value column is a list
    [Op("invoke", "poll", [["poll"]], 2, 10, 0), Op("ok", "poll", [["poll", {"t-2": [[0, 1 << 64]]}]], 2, 11, 0)],
], ids=["arrays", "offsets-a-list", "values-a-list"])
def test_a_long_poll_read_in_one_pass_projects_and_lags_as_read_record_by_record(monkeypatch, first):
    """The projection's events and the realtime lag of long polls are the
    same whether their records were read in one pass or by the folds
    themselves (the records' reading answering None), whatever the key's
    columns already are."""
    import checkers.queue.observe as observe
    import checkers.queue.project as project_mod
    from checkers.queue.observe import worst_realtime_lag

    ops = _long_polls(first)

    def read() -> tuple:
        proj = project(ops)
        return {k: proj.keys[k] for k in proj.keys}, worst_realtime_lag(ops)

    bulk = read()
    monkeypatch.setattr(project_mod, "records_i64", lambda prs: None)
    monkeypatch.setattr(observe, "max_offset_i64", lambda prs: None)
    assert read() == bulk
    assert [len(e[4]) for e in bulk[0]["t-1"] if e[1] == 0][-1] == 40
    assert bulk[1] == {"time": 1000 / 1e9, "process": 3, "key": "t-1", "lag": 700 / 1e9}
