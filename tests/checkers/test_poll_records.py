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
