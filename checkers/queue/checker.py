"""Jepsen's Kafka checker on kraftwerk histories: per-key checks merged,
then the cross-key cycle search, then the verdict.

Which anomaly types make a run invalid depends on the reading
(:mod:`.readings`): ``jepsen`` is exactly Jepsen's ``allowed-error-types``
for the test's options (ww dependencies off unless set); ``kraftwerk``, the
default for kraftwerk's own histories, is described here. It follows
Jepsen's ``allowed-error-types``: ``int-send-skip`` is always allowed
(producers' records interleave); so are G0 and its -process / -realtime forms
and the cycle-exists fallback ``PL-1-cycle-exists`` / ``strong-PL-1-cycle-exists``
(Kafka does not isolate writes); with ww dependencies inferred from offsets
(``ww_deps``, Jepsen's ``:ww-deps``, on unless ``--no-ww-deps``) the G1c family
and ``PL-2-cycle-exists`` / ``strong-PL-2-cycle-exists`` are allowed too (a
cycle ``T0 ww T1 wr T0`` is what unisolated writes make); with ``subscribe``
the group coordinator may rebalance a consumer between polls, so
``poll-skip`` and ``nonmonotonic-poll`` are allowed.

``strict_cycles`` is kraftwerk's stricter reading: without transactions an
operation sends one record, so a G0/G1c cycle (or its cycle-exists
fallback) can only come from offsets that contradict process or real-time
order, and it counts; with transactions (``txn``) those stay allowed.

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

from checkers.verdict import UNKNOWN, combine

from .graph import BudgetExceeded, find_cycles
from .keycheck import EXAMPLES
from .project import Projection

from .graph import CLASSES, EXISTS_SPECS, RW_CLASSES
from .keycheck import ANOMALY_TYPES, WEAK_ACKS
from .readings import G0_FAMILY, G1C_FAMILY, JEPSEN, KRAFTWERK, KRAFTWERK_STRICT, PL1_EXISTS, PL2_EXISTS, \
    jepsen_allowed

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
    #: infer ww edges from offsets (Jepsen's ``:ww-deps``); off: no ww
    #: edges, so no G0, and G1c is no longer allowed
    ww_deps: bool = True
    #: kraftwerk's stricter reading: G0/G1c cycles count unless ``txn``
    strict_cycles: bool = False
    #: keep every example (Jepsen's ``--all-errors``), else a sample
    all_errors: bool = False
    #: ``jepsen``: Jepsen's allowed-error-types and nothing else (see
    #: :mod:`.readings`); ``kraftwerk``: kraftwerk's reading, stricter on
    #: cycles with ``strict_cycles``
    reading: str = KRAFTWERK

    @property
    def reading_name(self) -> str:
        """The reading a verdict names: jepsen, kraftwerk or kraftwerk-strict-cycles."""
        if self.reading == JEPSEN:
            return JEPSEN
        return KRAFTWERK_STRICT if self.strict_cycles else KRAFTWERK


#: every type the queue checkers can report
KNOWN_ANOMALIES = frozenset(ANOMALY_TYPES) | {c[0] for c in CLASSES + RW_CLASSES} | {
    "G2-item", "G2-item-process", "G2-item-realtime", "lost-acked-write", "read-committed-stuck"} | \
    {spec[0] for spec in EXISTS_SPECS} | ACKS1_LOSS_TYPES | \
    ACKS0_LOSS_TYPES | {UNVERIFIED + t for t in ABSENCE_TYPES}


def allowed_anomalies(opts: QueueOptions) -> frozenset[str]:
    if opts.allowed is not None:
        return frozenset(opts.allowed) | opts.also_allowed
    if opts.reading == JEPSEN:
        return jepsen_allowed(opts.sub_via, opts.ww_deps) | opts.also_allowed
    a = {"int-send-skip"} | ACKS0_LOSS_TYPES
    if not opts.strict_acks1:
        a |= ACKS1_LOSS_TYPES
    if not opts.strict_duplicates:
        a.add(NONIDEMPOTENT_DUPLICATE)
    if "subscribe" in opts.sub_via:
        a |= {"poll-skip", "nonmonotonic-poll"}
    if opts.strict_cycles:
        if opts.txn:
            a |= set(G0_FAMILY + G1C_FAMILY + PL1_EXISTS + PL2_EXISTS)
    else:
        a |= set(G0_FAMILY + PL1_EXISTS)
        if opts.ww_deps:
            a |= set(G1C_FAMILY + PL2_EXISTS)
    return frozenset(a) | opts.also_allowed


def merge_key_results(results: Iterable[dict[str, Any]],
                      unverified: Iterable[str] = (), limit: int | None = EXAMPLES) -> dict[str, Any]:
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
            if limit is None:
                lst.extend(exs)
                continue
            room = limit - len(lst)
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


#: Jepsen's default sample of each type's examples (``condense-error``):
#: (how many, sort key, keep the largest rather than the smallest)
_SAMPLE: dict[str, tuple[int, Any, bool]] = {
    "duplicate": (32, lambda e: e.get("count", 0), False),
    "inconsistent-offsets": (32, lambda e: len(e.get("values", ())), False),
    **{t: (8, lambda e: e.get("delta", 0), False)
       for t in ("int-nonmonotonic-poll", "int-nonmonotonic-send", "nonmonotonic-poll", "nonmonotonic-send")},
    **{t: (8, lambda e: e.get("delta", 0), True) for t in ("int-poll-skip", "int-send-skip", "poll-skip")},
    **{t: (8, lambda e: len(e.get("steps", ())), False) for t in G0_FAMILY + G1C_FAMILY},
}


def condense(typ: str, examples: list) -> list:
    """The examples shown by default, as Jepsen picks them: the shortest
    cycles, the smallest rewinds, the largest skips (from the examples kept,
    the first :data:`EXAMPLES` of each key); ``all_errors`` shows all."""
    rule = _SAMPLE.get(typ)
    if rule is None:
        return examples
    n, key, largest = rule
    ordered = sorted(examples, key=key)
    return ordered[-n:] if largest else ordered[:n]


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
                          ww=opts.ww_deps, deadline=deadline)
        for t, c in cyc["counts"].items():
            counts[t] = counts.get(t, 0) + c
            examples[t] = cyc["anomalies"][t]
        cycle_stats = cyc["stats"]
        if "cut_short" in cyc:
            # Elle's fallback: the cycle-exists types stand for what was
            # not named; they decide unless rw cycles were asked for
            cycles_state = f"cut-short: {cyc['cut_short']}"
    except BudgetExceeded as e:
        cycles_state = f"budget-exceeded: {e}" if str(e) else "budget-exceeded"
    if not opts.all_errors:
        examples = {t: condense(t, exs) for t, exs in examples.items()}
    allowed = allowed_anomalies(opts)
    types = sorted(counts)
    if opts.reading == JEPSEN:
        # Jepsen has no unverified keys: an unseen record is unseen
        inconclusive = []
        bad = [t for t in types if t not in allowed and t.removeprefix(UNVERIFIED) not in allowed]
    else:
        # an unverified finding would be bad if its key had been readable
        inconclusive = [t for t in types if t.startswith(UNVERIFIED) and t[len(UNVERIFIED):] not in allowed]
        bad = [t for t in types if t not in allowed and not t.startswith(UNVERIFIED)]
    undecided = (cycles_state != "complete" and not (cycles_state.startswith("cut-short") and not opts.rw)) \
        or bool(inconclusive)
    valid = combine([not bad, UNKNOWN if undecided else True])
    return {
        "valid": valid,
        "reading": opts.reading_name,
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
                    "strict_duplicates": opts.strict_duplicates, "ww_deps": opts.ww_deps,
                    "strict_cycles": opts.strict_cycles, "all_errors": opts.all_errors,
                    "reading": opts.reading},
    }
