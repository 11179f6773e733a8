"""Consume-transform-produce checks (:mod:`checkers.queue.processing`),
each case written from the definitions in the module's docstring:

* duplicate-processing: an input value at two or more positions of the
  output topic's final reads; allowed at-least-once, an anomaly when every
  round was a transaction (exactly-once).
* lost-processing: an input below an offset an ``ok`` round committed (no
  ``commit-error``), or whose output was acknowledged, with no output in
  the complete final reads of the output topic; "unknown" while an output
  key's final read is incomplete.
"""

from __future__ import annotations

from typing import Any

from checkers.check import check_history
from checkers.history.op import Op
from checkers.queue.processing import check_processing


class H:
    """A history under construction: invoke/complete pairs in order."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def _add(self, type_: str, f: str, value: Any, process: Any, **extra: Any) -> None:
        err = extra.pop("error", None)
        self.ops.append(Op(type_, f, value, process, time=len(self.ops) * 1000, index=len(self.ops),
                           error=err, extra=extra))

    def send(self, p: int, key: str, off: int, v: int) -> "H":
        self._add("invoke", "send", [["send", key, v]], p, acks="all")
        self._add("ok", "send", [["send", key, [off, v]]], p, acks="all")
        return self

    def ctp(self, p: int, type_: str, reads: dict[str, list[list[int]]], outs: list[tuple[str, int, int]],
            txn: bool = False, **extra: Any) -> "H":
        self._add("invoke", "ctp", [["poll"]], p, txn=txn)
        value = [["poll", reads]] + [["send", k, [o, v]] for k, o, v in outs]
        self._add(type_, "ctp", value, p, txn=txn, **extra)
        return self

    def final(self, p: int, key: str, pairs: list[list[int]], output: bool = False, type_: str = "ok") -> "H":
        extra: dict[str, Any] = {"final": True, "key": key, **({"output": True} if output else {})}
        self._add("invoke", "poll", [["poll"]], p, **extra)
        self._add(type_, "poll", [["poll", {key: pairs}]], p, **extra)
        return self


def _inputs(h: H) -> H:
    return h.send(0, "t0-0", 0, 10).send(0, "t0-0", 1, 11).send(0, "t0-0", 2, 12)


def _final_inputs(h: H) -> H:
    return h.final(9, "t0-0", [[0, 10], [1, 11], [2, 12]])


def test_each_input_processed_once_is_valid() -> None:
    h = _inputs(H()).ctp(1, "ok", {"t0-0": [[0, 10], [1, 11], [2, 12]]},
                         [("tout-0", 0, 10), ("tout-0", 1, 11), ("tout-0", 2, 12)])
    _final_inputs(h).final(9, "tout-0", [[0, 10], [1, 11], [2, 12]], output=True)
    r = check_processing(h.ops)
    assert r is not None and r["valid"] is True and r["anomaly_types"] == []
    assert r["committed"] == {"t0-0": 3} and r["inputs_processed"] == 3


def test_an_input_whose_output_appears_twice_is_duplicate_processing_allowed_at_least_once() -> None:
    """A round wrote outputs, its commit was refused (a rebalance), the next
    owner processed the same inputs again: at-least-once allows it."""
    h = _inputs(H()).ctp(1, "ok", {"t0-0": [[0, 10], [1, 11]]}, [("tout-0", 0, 10), ("tout-0", 1, 11)],
                         **{"commit-error": "ILLEGAL_GENERATION"})
    h.ctp(2, "ok", {"t0-0": [[0, 10], [1, 11], [2, 12]]}, [("tout-0", 2, 10), ("tout-0", 3, 11), ("tout-0", 4, 12)])
    _final_inputs(h).final(9, "tout-0", [[0, 10], [1, 11], [2, 10], [3, 11], [4, 12]], output=True)
    r = check_processing(h.ops)
    assert r is not None and r["anomaly_types"] == ["duplicate-processing"]
    assert r["counts"] == {"duplicate-processing": 2}
    assert r["mode"] == "at-least-once" and r["valid"] is True
    ex = r["anomalies"]["duplicate-processing"][0]
    assert ex["value"] == 10 and ex["outputs"] == [["tout-0", 0], ["tout-0", 2]]


def test_duplicate_processing_under_exactly_once_is_an_anomaly() -> None:
    """Every round a transaction (outputs and offsets committed together):
    an output twice means a zombie's transaction committed too."""
    h = _inputs(H()).ctp(1, "ok", {"t0-0": [[0, 10]]}, [("tout-0", 0, 10)], txn=True)
    h.ctp(2, "ok", {"t0-0": [[0, 10], [1, 11], [2, 12]]}, [("tout-0", 2, 10), ("tout-0", 4, 11), ("tout-0", 6, 12)],
          txn=True)
    _final_inputs(h).final(9, "tout-0", [[0, 10], [2, 10], [4, 11], [6, 12]], output=True)
    r = check_processing(h.ops)
    assert r is not None and r["mode"] == "exactly-once"
    assert r["valid"] is False and r["bad_anomaly_types"] == ["duplicate-processing"]


def test_an_aborted_rounds_outputs_are_not_processing() -> None:
    """A failed (aborted) round commits nothing: its reads do not move the
    committed offset and read_committed final reads do not show its outputs."""
    h = _inputs(H()).ctp(1, "fail", {"t0-0": [[0, 10], [1, 11], [2, 12]]}, [("tout-0", 0, 10)], txn=True,
                         error="aborted")
    h.ctp(2, "ok", {"t0-0": [[0, 10], [1, 11], [2, 12]]},
          [("tout-0", 2, 10), ("tout-0", 3, 11), ("tout-0", 4, 12)], txn=True)
    _final_inputs(h).final(9, "tout-0", [[2, 10], [3, 11], [4, 12]], output=True)
    r = check_processing(h.ops)
    assert r is not None and r["valid"] is True and r["anomaly_types"] == []


def test_a_record_below_a_committed_offset_without_output_is_lost_processing() -> None:
    """The group committed offset 3 (a round read only offset 2, having been
    handed a position past 0 and 1): records 0 and 1 were never processed."""
    h = _inputs(H()).ctp(1, "ok", {"t0-0": [[2, 12]]}, [("tout-0", 0, 12)])
    _final_inputs(h).final(9, "tout-0", [[0, 12]], output=True)
    r = check_processing(h.ops)
    assert r is not None and r["valid"] is False and r["bad_anomaly_types"] == ["lost-processing"]
    lost = r["anomalies"]["lost-processing"]
    assert [(x["offset"], x["value"], x["why"]) for x in lost] == [(0, 10, "committed"), (1, 11, "committed")]


def test_a_final_read_of_inputs_before_the_round_reads_as_one_after_it() -> None:
    """What a final read of an input key says counts where no round read
    the offset, whether the final read comes before the round or after."""
    def lost(final_first: bool) -> list:
        h = _inputs(H())
        if final_first:
            h.final(9, "t0-0", [[0, 10], [1, 11], [2, 99]])
        h.ctp(1, "ok", {"t0-0": [[2, 12]]}, [("tout-0", 0, 12)])
        if not final_first:
            h.final(9, "t0-0", [[0, 10], [1, 11], [2, 99]])
        h.final(9, "t0-0", [[0, 77]]).final(9, "tout-0", [[0, 12]], output=True)
        r = check_processing(h.ops)
        assert r is not None
        return [(x["offset"], x["value"]) for x in r["anomalies"]["lost-processing"]]

    assert lost(final_first=True) == lost(final_first=False) == [(0, 10), (1, 11)]


def test_an_acknowledged_output_missing_from_the_final_read_is_lost_processing() -> None:
    h = _inputs(H()).ctp(1, "ok", {"t0-0": [[0, 10]]}, [("tout-0", 0, 10)], **{"commit-error": "REBALANCE"})
    _final_inputs(h).final(9, "tout-0", [], output=True)
    r = check_processing(h.ops)
    assert r is not None and r["valid"] is False
    assert [x["why"] for x in r["anomalies"]["lost-processing"]] == ["acknowledged"]


def test_records_above_the_committed_offset_are_not_yet_processed_not_lost() -> None:
    h = _inputs(H()).ctp(1, "ok", {"t0-0": [[0, 10]]}, [("tout-0", 0, 10)])
    _final_inputs(h).final(9, "tout-0", [[0, 10]], output=True)
    r = check_processing(h.ops)
    assert r is not None and r["valid"] is True and r["committed"] == {"t0-0": 1}


def test_a_refused_commit_or_an_info_round_commits_nothing() -> None:
    h = _inputs(H()).ctp(1, "info", {"t0-0": [[0, 10], [1, 11], [2, 12]]}, [], error="crashed")
    h.ctp(2, "ok", {"t0-0": [[2, 12]]}, [], **{"commit-error": "ILLEGAL_GENERATION"})
    _final_inputs(h).final(9, "tout-0", [], output=True)
    r = check_processing(h.ops)
    assert r is not None and r["valid"] is True and r["committed"] == {}


def test_without_a_complete_output_read_a_missing_output_is_unknown() -> None:
    h = _inputs(H()).ctp(1, "ok", {"t0-0": [[2, 12]]}, [("tout-0", 0, 12)])
    _final_inputs(h).final(9, "tout-0", [], output=True, type_="info")
    r = check_processing(h.ops)
    assert r is not None and r["valid"] == "unknown" and r["unjudged"] == 3
    assert r["output_keys_unread"] == ["tout-0"]


def test_the_queue_verdict_carries_the_processing_checker_and_ignores_output_reads() -> None:
    """check_history: the output topic's final reads are not queue reads
    (no duplicate, no unseen there), the processing verdict joins the run's."""
    h = _inputs(H()).ctp(1, "ok", {"t0-0": [[2, 12]]}, [("tout-0", 0, 12)])
    _final_inputs(h).final(9, "tout-0", [[0, 12], [1, 12]], output=True)
    res = check_history(h.ops)
    assert "tout-0" not in res["checkers"]["queue"].get("unseen", {})
    assert res["stats"]["keys"] == 1
    assert res["checkers"]["processing"]["counts"] == {"duplicate-processing": 1, "lost-processing": 2}
    assert res["valid"] is False and "lost-processing" in res["anomaly_types"]
    assert "duplicate" not in res["anomaly_types"]


def test_a_history_without_rounds_has_no_processing_checker() -> None:
    h = _final_inputs(_inputs(H()))
    assert check_processing(h.ops) is None
    assert "processing" not in check_history(h.ops)["checkers"]
