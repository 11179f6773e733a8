"""Acknowledged writes lost by design: whether a run's losses are the ones
Kafka 4.4 makes itself under the run's faults.

A run that loses acknowledged acks=all writes stays invalid: the writes are
gone, whoever lost them. But a user (and the faithful soak) must tell a
model bug from Kafka's own behaviour. The invariant monitor marks a
``leader-completeness`` violation ``by_design`` when Kafka elects the same
leader with the same hole (:mod:`checkers.invariants`: the last known
leader, after a power loss took the log it had not fsynced). This module
decides whether *everything* that made the run invalid follows from those
elections:

* every invariant violation is such a by-design ``leader-completeness``;
* every other failing anomaly is a loss or its echo (``LOSS_FAMILY``: the
  lost acks=all write, a read record gone, an offset read with two values,
  a lost write of unknown acks) on a partition one of them rewrote, at or
  above the first offset the new leader lacked when the example has an
  offset;
* the acks=all writes lost number at most the committed offsets those
  elections dropped.

Then ``loss_by_design`` in results.json says ``explained: true`` with each
partition's story, and :func:`checkers.availability.set_cause` puts the
words into ``cause`` (the terminal line and the report's top). Otherwise it
says what is not explained: a model bug until shown otherwise.

A partition rewritten by design is judged by design from the rewrite point
on: a later loss on it is covered by the count bound only.
"""

from __future__ import annotations

from typing import Any, Final

#: the anomalies a rewritten partition log shows: acknowledged acks=all
#: writes lost, reads of records later gone, offsets read with two values,
#: and a lost write whose acks the history did not record
LOSS_FAMILY: Final = frozenset({"lost-acked-write", "lost-read", "inconsistent-offsets", "lost-write",
                                "leader-completeness"})


def _bad_types(res: dict[str, Any]) -> set[str]:
    """Every anomaly type that fails the run: each checker's failing types
    and every violated invariant."""
    bad: set[str] = set()
    for name, c in (res.get("checkers") or {}).items():
        if isinstance(c, dict) and name != "invariants":
            bad.update(c.get("bad_anomaly_types") or ())
    bad.update(((res.get("invariants") or {}).get("counts") or {}).keys())
    return bad


def _rewrites(inv: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Partition -> the by-design election that rewrote it (the first
    offset lost, the committed offsets dropped, the words)."""
    out: dict[str, dict[str, Any]] = {}
    for v in inv.get("violations") or ():
        if not (isinstance(v, dict) and v.get("by_design") and v.get("tp") is not None):
            continue
        lo, hi = (v.get("lost_range") or [0, 0])[:2]
        r = out.setdefault(str(v["tp"]), {"from": lo, "dropped": 0, "why": []})
        r["from"] = min(r["from"], lo)
        r["dropped"] += max(0, hi - lo)
        r["why"].append(str(v.get("why") or v.get("message")))
    return out


def _unexplained_examples(res: dict[str, Any], bad: set[str], rewrites: dict[str, dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for kind in sorted(bad - {"leader-completeness"}):
        for e in (res.get("anomalies") or {}).get(kind) or ():
            key = e.get("key") if isinstance(e, dict) else None
            r = rewrites.get(str(key)) if key is not None else None
            off = e.get("offset") if isinstance(e, dict) else None
            if r is None or (isinstance(off, int) and off < r["from"]):
                out.append(f"{kind} on {key}" + (f" offset {off}" if off is not None else ""))
                break
    return out


def judge(res: dict[str, Any]) -> dict[str, Any] | None:
    """``loss_by_design`` for a checked run, or None when no loss is by
    design (nothing to say)."""
    inv = res.get("invariants") or {}
    designed = (inv.get("by_design") or {}).get("leader-completeness", 0)
    if not designed:
        return None
    rewrites = _rewrites(inv)
    bad = _bad_types(res)
    why: list[str] = []
    other = sorted(bad - LOSS_FAMILY)
    if other:
        why.append(f"anomalies not of a lost log: {', '.join(other)}")
    counts = inv.get("counts") or {}
    if counts.get("leader-completeness", 0) > designed:
        why.append(f"{counts['leader-completeness'] - designed} leader-completeness violations not by design")
    why += [f"{w} outside the rewritten range" for w in _unexplained_examples(res, bad, rewrites)]
    lost = ((res.get("durability") or {}).get("acks=all") or {}).get("lost") or 0
    dropped = sum(r["dropped"] for r in rewrites.values())
    if lost > dropped:
        why.append(f"{lost} acks=all writes lost, more than the {dropped} committed offsets the elections dropped")
    return {"explained": not why, "acks_all_lost": lost, "committed_dropped": dropped,
            "partitions": {tp: {"from": r["from"], "dropped": r["dropped"], "why": r["why"]}
                           for tp, r in sorted(rewrites.items())},
            **({"unexplained": why} if why else {})}


def cause_words(res: dict[str, Any]) -> str | None:
    """The ``cause`` words of a run whose losses are all by design."""
    lb = res.get("loss_by_design") or {}
    if not lb.get("explained"):
        return None
    stories = sorted({w for p in (lb.get("partitions") or {}).values() for w in p.get("why") or ()})
    return (f"{lb.get('acks_all_lost')} acknowledged acks=all writes lost by design (Kafka 4.4 elects the last "
            f"known leader too, after its unclean shutdown: PartitionChangeBuilder.canElectLastKnownLeader, an "
            f"unclean election): " + "; ".join(stories))
