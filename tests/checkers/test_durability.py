"""Durability accounting by acks level (seed 000/003: what acks=all and acks=1
promise), Wilson intervals, unacknowledged-but-visible sends, visibility delay."""

from __future__ import annotations

import random

import pytest

from checkers.check import check_history
from checkers.durability import _bucket, check_durability, merge_durability, wilson_interval
from checkers.queue.synth import HistoryBuilder, valid_history

K = "t-0"


def test_wilson_interval_known_values() -> None:
    # 0 of 10: upper bound z^2 / (n + z^2)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(3.8415 / 13.8415, rel=1e-3)
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)


def test_shape_has_both_acks_rows_even_without_sends() -> None:
    d = check_durability([])
    assert set(d) >= {"acks=all", "acks=1"}
    for row in d.values():
        assert row["acked"] == 0 and row["lost"] == 0 and row["lost_rate"] == 0.0
        assert row["lost_rate_ci95"] == [0.0, 1.0]


def test_acked_write_absent_from_final_reads_is_lost_and_acks_all_loss_is_an_anomaly() -> None:
    """acks=all: an acknowledged record the final reads do not return is lost
    (the run is invalid); the same under acks=1 is counted, not an anomaly."""
    for acks in ("all", "1"):
        b = HistoryBuilder()
        b.send(0, K, 1, 0, acks=acks)
        b.send(0, K, 2, 1, acks=acks)
        b.poll(1, {K: [(0, 1)]}, final=True)
        r = check_history(b.ops)
        row = r["durability"][f"acks={acks}"]
        assert (row["acked"], row["lost"]) == (2, 1)
        assert row["lost_rate"] == 0.5
        assert row["lost_examples"][0]["value"] == 2 and row["lost_examples"][0]["op"] == 3
        assert ("lost-acked-write" in r["anomaly_types"]) == (acks == "all")
        assert r["checkers"]["durability"]["valid"] is (acks != "all")


def test_loss_counts_are_whole_when_examples_stop() -> None:
    """The durability checker keeps EXAMPLES examples per level but counts
    every loss: 40 acknowledged acks=1 records missing from the final read
    count 40 (and the report shows that count)."""
    from checkers.durability import EXAMPLES

    b = HistoryBuilder()
    for i in range(40):
        b.send(0, K, i, i, acks="1")
    b.poll(1, {K: []}, final=True)
    r = check_history(b.ops)
    assert EXAMPLES < 40
    assert len(r["anomalies"]["lost-acks1-write"]) == EXAMPLES
    assert r["checkers"]["durability"]["counts"] == {"lost-acks1-write": 40}
    assert r["durability"]["acks=1"]["lost"] == 40


def test_record_read_once_then_missing_from_final_reads_is_lost() -> None:
    """Truncation after a leader change (seed 003): read once, gone later."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.poll(1, {K: [(0, 1)]})
    b.poll(2, {K: []}, final=True)
    row = check_durability(b.ops)["acks=all"]
    assert row["lost"] == 1 and row["lost_examples"][0]["seen"] is True


def test_offset_contradiction_marks_acked_write_lost_without_final_reads() -> None:
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks="1")
    b.send(1, K, 2, None, type="info", acks="1")
    b.poll(2, {K: [(0, 2)]})  # offset 0 now holds another record
    row = check_durability(b.ops)["acks=1"]
    assert row["lost"] == 1 and row["unacked_visible"] == 1 and row["failed_visible"] == 0


def test_unread_acked_write_without_final_reads_is_not_lost() -> None:
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.poll(1, {K: []})
    assert check_durability(b.ops)["acks=all"]["lost"] == 0
    assert check_durability(b.ops)["acks=all"]["never_visible"] == 1


def test_failed_send_that_is_read_is_counted_as_failed_visible() -> None:
    b = HistoryBuilder()
    b.send(0, K, 1, None, type="fail")
    b.send(1, K, 2, None, type="info")
    b.poll(2, {K: [(0, 1), (1, 2)]})
    row = check_durability(b.ops)["acks=all"]
    assert (row["failed"], row["indeterminate"], row["unacked_visible"], row["failed_visible"]) == (1, 1, 2, 1)
    assert row["acked"] == 0


def test_visibility_delay_is_first_read_completion_minus_ack() -> None:
    b = HistoryBuilder()
    b.send(0, K, 1, 0)           # acked at t=20
    b.t += 3_000_000 - 20        # next op completes 3 ms after the ack... plus its invoke step
    b.poll(1, {K: [(0, 1)]})     # completes at t = 3_000_010
    b.poll(2, {K: [(0, 1)]})     # a later read does not count
    d = check_durability(b.ops)["acks=all"]["visibility_delay_ms"]
    assert d["count"] == 1
    assert d["p50"] == pytest.approx(2.99999, abs=1e-4)


def test_valid_run_loses_nothing() -> None:
    ops = valid_history(3000, 5, 6, seed=11)
    d = check_durability(ops)
    row = d["acks=all"]
    assert row["acked"] > 500 and row["lost"] == 0 and row["never_visible"] == 0
    assert row["lost_rate_ci95"][0] == 0.0 and 0 < row["lost_rate_ci95"][1] < 0.01


def test_acks_levels_are_accounted_separately() -> None:
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks="all")
    b.send(0, K, 2, 1, acks="1")
    b.send(0, K, 3, 2, acks="0")
    b.poll(1, {K: [(0, 1), (1, 2), (2, 3)]}, final=True)
    d = check_durability(b.ops)
    assert [d[k]["acked"] for k in ("acks=all", "acks=1", "acks=0")] == [1, 1, 1]


def _partial(delays: list) -> dict:
    b = _bucket()  # the per-key bucket the checkers fill
    b["sent"] = b["acked"] = len(delays)
    b["delays_ns"] = delays
    return {"all": b}


def test_merged_delays_are_pythons_sorted_int_over_float_for_int64_and_larger_ints() -> None:
    rnd = random.Random(3)
    parts = [[rnd.randrange(0, 1 << 62) for _ in range(rnd.randrange(0, 50))] for _ in range(20)]
    for extra in ([], [[1 << 70, 7]]):  # beyond int64: the Python path
        every = sorted(d for p in parts + extra for d in p)
        ms = [d / 1e6 for d in every]
        got = merge_durability(_partial(p) for p in parts + extra)["acks=all"]["visibility_delay_ms"]
        assert got["count"] == len(ms)
        assert got["mean"] == sum(ms) / len(ms)
        assert got["max"] == ms[-1]
        assert got["p50"] == ms[max(0, -(-len(ms) // 2) - 1)]
