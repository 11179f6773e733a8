"""Duplicates and the producer's idempotence.

Without idempotence, a producer that retries a produce whose answer it lost
(librdkafka retries NOT_LEADER_OR_FOLLOWER internally, even with
retries=0) may append the same batch twice: the old leader had appended it
before the leader change, the new leader appends it again. That is Kafka's
at-least-once delivery, not a replication bug, so a value duplicated by a
producer that said ``"idempotent": false`` is ``duplicate-nonidempotent``:
reported, allowed unless ``strict_duplicates``, and only its first copy takes
part in the version order (no G0/G1c cycle through the retry). An idempotent
producer's broker deduplicates by (producer id, epoch, sequence), so its
duplicates (and those of unknown provenance) stay ``duplicate``, invalid.
"""

from __future__ import annotations

from typing import Any

from checkers.check import check_history
from checkers.queue.synth import HistoryBuilder

K = "t-0"
V = "dup"
FIRST, RETRY = 465, 483


def campaign_shape(idempotent: Any) -> HistoryBuilder:
    """The default campaign's history: value ``V`` appended at 465 by the
    old leader, then (after the leader change, records 466..482 from other
    producers in between) at 483 by the retry on the new leader; the send is
    acknowledged with the retry's offset. Reads return the whole range."""
    b = HistoryBuilder()
    for off in range(460, FIRST):
        b.send(10 + off % 3, K, off, off, idempotent=idempotent)
    # V's send is in flight across the leader change: invoked before the
    # records that landed between its two copies, acknowledged after them
    b.invoke(1, "send", [["send", K, V]], acks="all", idempotent=idempotent)
    for off in range(FIRST + 1, RETRY):
        b.send(10 + off % 3, K, off, off, idempotent=idempotent)
    b.complete(1, "ok", [["send", K, [RETRY, V]]])
    b.send(2, K, 484, 484, idempotent=idempotent)
    reads = [(o, V if o in (FIRST, RETRY) else o) for o in range(460, 485)]
    b.poll(5, {K: reads[:10]})
    b.poll(5, {K: reads[10:]})
    b.poll(6, {K: reads}, final=True)
    return b


def test_campaign_shape_without_idempotence_is_an_allowed_retry_duplicate() -> None:
    r = check_history(campaign_shape(False).ops)
    assert r["valid"] is True, r["anomaly_types"]
    assert "duplicate-nonidempotent" in r["anomaly_types"]
    assert "duplicate" not in r["anomaly_types"]
    ex = r["anomalies"]["duplicate-nonidempotent"][0]
    assert ex["value"] == V and ex["offsets"] == [FIRST, RETRY]


def test_retry_duplicate_builds_no_g0_or_g1c_cycle() -> None:
    r = check_history(campaign_shape(False).ops)
    cyc = [t for t in r["anomaly_types"] if t.startswith(("G0", "G1c"))]
    assert cyc == []
    # the same shape from an idempotent producer is a real duplicate, and
    # the two copies in the version order close a ww cycle (G0)
    r2 = check_history(campaign_shape(True).ops)
    assert any(t.startswith("G0") for t in r2["anomaly_types"]), r2["anomaly_types"]


def test_strict_duplicates_make_retry_duplicates_invalid() -> None:
    r = check_history(campaign_shape(False).ops, strict_duplicates=True)
    assert r["valid"] is False
    assert "duplicate-nonidempotent" in r["checkers"]["queue"]["bad_anomaly_types"]
    # from test.json, as `kraftwerk check` on a run directory reads it
    r2 = check_history(campaign_shape(False).ops, test={"strict_duplicates": True})
    assert r2["valid"] is False


def test_idempotent_producer_duplicate_stays_invalid() -> None:
    r = check_history(campaign_shape(True).ops)
    assert r["valid"] is False
    assert "duplicate" in r["anomaly_types"]
    assert "duplicate-nonidempotent" not in r["anomaly_types"]


def test_duplicate_of_unknown_provenance_stays_invalid() -> None:
    r = check_history(campaign_shape(None).ops)
    assert r["valid"] is False
    assert "duplicate" in r["anomaly_types"]


def test_duplicate_is_nonidempotent_only_if_every_send_of_it_was() -> None:
    """Two sends of one value (one idempotent): not a pure retry duplicate."""
    b = HistoryBuilder()
    b.send(1, K, 7, 0, idempotent=False)
    b.send(2, K, 8, 1, idempotent=True)
    b.send(3, K, 7, 2, idempotent=True)
    b.poll(4, {K: [(0, 7), (1, 8), (2, 7)]}, final=True)
    r = check_history(b.ops)
    assert "duplicate" in r["anomaly_types"]
    assert r["valid"] is False


def test_retry_copy_keeps_polls_dense() -> None:
    """A poll that returns the retry copy between its neighbours is neither a
    skip nor a rewind: the copy keeps its slot in the offsets."""
    r = check_history(campaign_shape(False).ops)
    for t in ("poll-skip", "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll", "lost-write"):
        assert t not in r["anomaly_types"]
