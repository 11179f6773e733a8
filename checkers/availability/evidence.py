"""Availability as evidence: for each fault change and for the final heal,
how long each partition was without a leader and without an accepted
acks=all write.

A row covers the stretch from one fault change (a start or a stop) to the
next, or to the final heal. In a row, per partition, the longer of the
outage under way at the change, measured to its end wherever that falls
(the workload's end at most), and the longest outage that began later in
the row, up to the row's end (the next change has a row of its own):

* ``leaderless_ms``: without a leader in the controllers' committed metadata
  (the glass box's ``partition_metadata``, Kafka's observer); None without
  traces. A leader that died stays the metadata's leader until the
  controller fences it;
* ``no_write_ms``: without an acknowledged acks=all write while the workload
  wrote; None in a run without acks=all writers.

The final heal's row says instead how long until the partition had a leader
for good (the end of its last leaderless stretch after the heal) and until
its first acknowledged acks=all write after the heal (None: never).

Where Kafka's observer marks its looks (``observer_poll``), the stretches in
which it was blind (:meth:`Timeline.blind_stretches`) are named beside the
figures they touch: a row, or the final heal's row, that overlaps one gets
``observer_blind`` ([from_s, to_s] pairs) and a ``note``, and a partition
whose leaderless stretch overlaps one gets them too ("leaderless 12.1-30.4
s; the observer was blind 20.3-30.1 s"): a leader lost and regained within
such a stretch is not seen, and a stretch's end may lie anywhere in it.
A trace without marks adds nothing.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from .facts import HistoryFacts
from .leaders import Timeline

#: rows kept in results.json (a long overlapping schedule has many changes)
MAX_ROWS = 400


def _gap_ms(acks: Any, start: int, end: int, stop: int) -> float:
    """The row's outage without a time of ``acks`` (sorted ns), module
    docstring: the one under way at ``start`` to the next ack (``stop`` at
    most), or a longer one between acks within [start, end)."""
    end = min(end, stop)
    if end <= start:
        return 0.0
    i = bisect_left(acks, start)
    worst = (min(acks[i], stop) if i < len(acks) else stop) - start
    prev = start
    while i < len(acks) and acks[i] < end:
        worst = max(worst, acks[i] - prev)
        prev = acks[i]
        i += 1
    return max(worst, end - prev) / 1e6


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


Blind = list[tuple[int, int, str]]


def _overlap(blind: Blind, lo: int, hi: int) -> Blind:
    """The blind stretches that overlap [lo, hi], clipped to it."""
    return [(max(a, lo), min(b, hi), why) for a, b, why in blind if a < hi and b > lo]


def _span_words(spans: Blind) -> str:
    return ", ".join(f"{a / 1e9:.1f}-{b / 1e9:.1f} s ({why})" for a, b, why in spans)


def _mark_blind(out: dict[str, Any], blind: Blind, lo: int, hi: int, what: str) -> None:
    """``observer_blind`` and a ``note`` on ``out`` where a blind stretch
    overlaps [lo, hi] (module docstring); nothing where none does."""
    spans = _overlap(blind, lo, hi)
    if spans:
        out["observer_blind"] = [[round(a / 1e9, 3), round(b / 1e9, 3)] for a, b, _ in spans]
        out["note"] = f"{what}; the observer was blind {_span_words(spans)}"


def _mark_partition(per: dict[str, Any], blind: Blind, leaderless: list[tuple[int, int]]) -> None:
    """Each leaderless stretch of a partition that a blind stretch overlaps."""
    notes, seen = [], []
    for a, b in leaderless:
        spans = _overlap(blind, a, b)
        if spans:
            notes.append(f"leaderless {a / 1e9:.1f}-{b / 1e9:.1f} s; the observer was blind {_span_words(spans)}")
            seen += [[round(x / 1e9, 3), round(y / 1e9, 3)] for x, y, _ in spans]
    if notes:
        per["observer_blind"] = seen
        per["note"] = "; ".join(notes)


def fault_rows(facts: HistoryFacts, keys: list[str], timeline: Timeline | None) -> list[dict[str, Any]]:
    """One row per fault change before the final heal (module docstring)."""
    heal = facts.heal_ns
    blind = timeline.blind_stretches(facts.end_ns) if timeline is not None else []
    events = [e for e in facts.nemesis if not e.final]
    rows = []
    for i, e in enumerate(events):
        end = events[i + 1].t_ns if i + 1 < len(events) else (heal if heal is not None else facts.end_ns)
        stop = facts.workload_end_ns or end
        per: dict[str, Any] = {}
        for k in keys:
            acks = facts.acked_all.get(k, ())
            per[k] = {
                "leaderless_ms": _ms(timeline.leaderless_ms(k, e.t_ns, end, facts.end_ns))
                if timeline is not None else None,
                "no_write_ms": _ms(_gap_ms(acks, e.t_ns, end, stop)) if facts.all_writers else None,
            }
            if blind:
                _mark_partition(per[k], blind, timeline.leaderless_spans(k, e.t_ns, end, facts.end_ns))
        row: dict[str, Any] = {"t_s": round(e.t_ns / 1e9, 3), "until_s": round(end / 1e9, 3), "event": e.label(),
                               "partitions": per}
        _mark_blind(row, blind, e.t_ns, end, f"{e.label()} {e.t_ns / 1e9:.1f}-{end / 1e9:.1f} s")
        if e.skipped:
            row["skipped"] = e.skipped
        rows.append(row)
    return rows[:MAX_ROWS]


def heal_row(facts: HistoryFacts, keys: list[str], timeline: Timeline | None) -> dict[str, Any] | None:
    """How long after the final heal until each partition had a leader for
    good and took an acks=all write (None: never, in the run)."""
    heal = facts.heal_ns
    if heal is None:
        return None
    blind = timeline.blind_stretches(facts.end_ns) if timeline is not None else []
    per: dict[str, Any] = {}
    for k in keys:
        acks = facts.acked_all.get(k, ())
        i = bisect_left(acks, heal)
        per[k] = {
            "leader_after_ms": _ms(timeline.leader_for_good_ms(k, heal)) if timeline is not None else None,
            "write_after_ms": _ms((acks[i] - heal) / 1e6) if i < len(acks) else None,
        }
        if blind:
            _mark_partition(per[k], blind, timeline.leaderless_spans(k, heal, facts.end_ns, facts.end_ns))
    row = {"t_s": round(heal / 1e9, 3), "event": "final heal", "partitions": per}
    _mark_blind(row, blind, heal, facts.end_ns, f"after the final heal {heal / 1e9:.1f}-{facts.end_ns / 1e9:.1f} s")
    return row


def worst(rows: list[dict[str, Any]], field: str) -> tuple[float | None, str | None]:
    """The largest ``field`` over a row's partitions, and which partition."""
    best: tuple[float | None, str | None] = (None, None)
    for row in rows:
        for k, v in row.get("partitions", {}).items():
            x = v.get(field)
            if x is not None and (best[0] is None or x > best[0]):
                best = (x, k)
    return best
