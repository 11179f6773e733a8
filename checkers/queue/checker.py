"""Jepsen's Kafka checker on kraftwerk histories: per-key checks merged,
then the cross-key cycle search, then the verdict.

Which anomaly types make a run invalid follows Jepsen's
``allowed-error-types``: ``int-send-skip`` is always allowed (other
producers' records interleave); with ``subscribe`` the group coordinator may
rebalance a consumer between polls, so ``poll-skip`` and
``nonmonotonic-poll`` are allowed; with transactions writes are not isolated,
so G0 and (because ww edges are inferred) G1c cycles are allowed.
kraftwerk's queue workload sends one record per operation without
transactions, so by default G0/G1c (and their -process / -realtime forms)
count: they can only arise from offsets that contradict real time or process
order.

Losses are judged by the promise the write's acks level carried (seed 003):
``lost-write``/``unseen`` of acks=all (or unknown acks) sends are anomalies;
the same findings for acks=1 sends (``lost-write-acks1``, ``unseen-acks1``)
are reported but allowed unless ``strict_acks1``; acks=0 ones
(``-acks0``) are always allowed — acks=0 promises nothing. Every other type
(duplicates, G1a, ordering, cycles) applies to every acks level.

A value appended twice by a producer that was not idempotent is
``duplicate-nonidempotent``: a retry without idempotence is at-least-once
by design, so it is reported and allowed unless ``strict_duplicates``;
duplicates from idempotent producers (or of unknown provenance) stay
``duplicate`` and invalidate.

A key whose final read never completed (:mod:`checkers.final_reads`) cannot
show a record is gone, so its ``unseen*`` findings become
``unverified-unseen*``: they make the verdict "unknown", not invalid. A
``lost-write`` there stays what it is — a later offset was read, so the
record's absence is evidence.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field
from typing import Any, Iterable

from .graph import BudgetExceeded, find_cycles
from .keycheck import EXAMPLES
from .project import Projection

from .graph import CLASSES, RW_CLASSES
from .keycheck import ANOMALY_TYPES, WEAK_ACKS

#: prefix of the findings moved out of judgement because their key's final
#: read never completed (see :func:`merge_key_results`)
UNVERIFIED = "unverified-"
#: the per-key types that are evidence of loss only after a complete final read
ABSENCE_TYPES = ("unseen",) + tuple("unseen" + sfx for sfx in WEAK_ACKS.values())
#: weaker-acks loss types: acks=1 ones are allowed unless strict_acks1
ACKS1_LOSS_TYPES = frozenset({"lost-write-acks1", "unseen-acks1", "lost-acks1-write"})
ACKS0_LOSS_TYPES = frozenset({"lost-write-acks0", "unseen-acks0", "lost-acks0-write"})

#: a value appended twice by a non-idempotent producer's retry
NONIDEMPOTENT_DUPLICATE = "duplicate-nonidempotent"

G0_FAMILY = ("G0", "G0-process", "G0-realtime")
G1C_FAMILY = ("G1c", "G1c-process", "G1c-realtime")


@dataclass
class QueueOptions:
    """``sub_via``: how consumers got partitions ("assign" and/or
    "subscribe"); ``txn``: operations are Kafka transactions; ``allowed``:
    replaces the computed allowed set; ``also_allowed``: added to it;
    ``rw``: also search cycles with rw edges (G-single); ``strict_acks1``:
    acks=1 losses are anomalies too (by default they are reported and
    allowed: acks=1 never promised to survive a leader failure)."""

    sub_via: tuple[str, ...] = ("assign",)
    txn: bool = False
    allowed: frozenset[str] | None = None
    also_allowed: frozenset[str] = field(default_factory=frozenset)
    rw: bool = False
    strict_acks1: bool = False
    #: ``duplicate-nonidempotent`` (a retry of a non-idempotent producer)
    #: counts as an anomaly too
    strict_duplicates: bool = False


#: every type the queue checkers can report
KNOWN_ANOMALIES = frozenset(ANOMALY_TYPES) | {c[0] for c in CLASSES + RW_CLASSES} | {
    "G2-item", "G2-item-process", "G2-item-realtime", "lost-acked-write"} | ACKS1_LOSS_TYPES | \
    ACKS0_LOSS_TYPES | {UNVERIFIED + t for t in ABSENCE_TYPES}


def allowed_anomalies(opts: QueueOptions) -> frozenset[str]:
    if opts.allowed is not None:
        return frozenset(opts.allowed) | opts.also_allowed
    a = {"int-send-skip"} | ACKS0_LOSS_TYPES
    if not opts.strict_acks1:
        a |= ACKS1_LOSS_TYPES
    if not opts.strict_duplicates:
        a.add(NONIDEMPOTENT_DUPLICATE)
    if "subscribe" in opts.sub_via:
        a |= {"poll-skip", "nonmonotonic-poll"}
    if opts.txn:
        a |= set(G0_FAMILY) | set(G1C_FAMILY)
    return frozenset(a) | opts.also_allowed


def merge_key_results(results: Iterable[dict[str, Any]],
                      unverified: Iterable[str] = ()) -> dict[str, Any]:
    """Sum per-key counts, keep the first examples (in key order).

    ``unverified``: keys whose final read never completed; their absence
    findings (:data:`ABSENCE_TYPES`) are renamed ``unverified-<type>``, and
    the acknowledged sends they hold are summed by acks level
    (``unverified_acked``)."""
    unv = frozenset(unverified)
    unverified_acked: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}
    examples: dict[str, list] = {}
    unseen_by_key: dict[str, int] = {}
    committed: set[int] = set()
    edges: list[tuple[str, dict[str, list[int]]]] = []
    durability: list[dict] = []
    per_key_stats: dict[str, dict] = {}
    for r in sorted(results, key=lambda r: r["key"]):
        rename = r["key"] in unv
        if rename:
            unverified_acked[r["key"]] = dict(r.get("acked", {}))
        for t, c in r["counts"].items():
            if rename and t in ABSENCE_TYPES:
                t = UNVERIFIED + t
            counts[t] = counts.get(t, 0) + c
        for t, exs in r["examples"].items():
            if rename and t in ABSENCE_TYPES:
                t = UNVERIFIED + t
            lst = examples.setdefault(t, [])
            room = EXAMPLES - len(lst)
            if room > 0:
                lst.extend(exs[:room])
        if r["counts"].get("unseen"):
            unseen_by_key[r["key"]] = r["counts"]["unseen"]
        committed.update(r["committed_info"])
        edges.append((r["key"], r["edges"]))
        durability.append(r["durability"])
        per_key_stats[r["key"]] = r["stats"]
    return {"counts": counts, "examples": examples, "unseen_by_key": unseen_by_key,
            "unverified_acked": unverified_acked,
            "committed_info": committed, "edges": edges, "durability": durability,
            "key_stats": per_key_stats}


def finish(proj: Projection, merged: dict[str, Any], opts: QueueOptions,
           deadline: float | None) -> dict[str, Any]:
    """Run the cross-key cycle search and decide. Returns the ``queue``
    checker entry: ``valid`` is ``"unknown"`` if the cycle search ran out of
    budget and nothing else was already wrong."""
    t0 = _time.monotonic()
    counts = dict(merged["counts"])
    examples = {t: list(v) for t, v in merged["examples"].items()}
    cycles_state = "complete"
    cycle_stats: dict[str, Any] = {}
    try:
        cyc = find_cycles(proj.ops, merged["edges"], merged["committed_info"], rw=opts.rw,
                          deadline=deadline)
        for t, c in cyc["counts"].items():
            counts[t] = counts.get(t, 0) + c
            examples[t] = cyc["anomalies"][t]
        cycle_stats = cyc["stats"]
    except BudgetExceeded as e:
        cycles_state = f"budget-exceeded: {e}" if str(e) else "budget-exceeded"
    allowed = allowed_anomalies(opts)
    types = sorted(counts)
    # an unverified finding would be bad if its key had been readable
    inconclusive = [t for t in types if t.startswith(UNVERIFIED) and t[len(UNVERIFIED):] not in allowed]
    bad = [t for t in types if t not in allowed and not t.startswith(UNVERIFIED)]
    if bad:
        valid: Any = False
    elif cycles_state != "complete" or inconclusive:
        valid = "unknown"
    else:
        valid = True
    return {
        "valid": valid,
        "anomaly_types": types,
        "bad_anomaly_types": bad,
        "inconclusive_anomaly_types": inconclusive,
        "allowed_anomaly_types": sorted(allowed),
        "counts": counts,
        "anomalies": examples,
        "unseen": {"total": counts.get("unseen", 0), "by_key": merged["unseen_by_key"]},
        "cycle_search": cycles_state,
        "graph": cycle_stats,
        "keys": len(merged["key_stats"]),
        "cross_key_seconds": round(_time.monotonic() - t0, 3),
        "options": {"sub_via": list(opts.sub_via), "txn": opts.txn, "rw": opts.rw,
                    "strict_acks1": opts.strict_acks1,
                    "strict_duplicates": opts.strict_duplicates},
    }
