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
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field
from typing import Any, Iterable

from .graph import BudgetExceeded, find_cycles
from .keycheck import EXAMPLES
from .project import Projection

from .graph import CLASSES, RW_CLASSES
from .keycheck import ANOMALY_TYPES

G0_FAMILY = ("G0", "G0-process", "G0-realtime")
G1C_FAMILY = ("G1c", "G1c-process", "G1c-realtime")


@dataclass
class QueueOptions:
    """``sub_via``: how consumers got partitions ("assign" and/or
    "subscribe"); ``txn``: operations are Kafka transactions; ``allowed``:
    replaces the computed allowed set; ``also_allowed``: added to it;
    ``rw``: also search cycles with rw edges (G-single)."""

    sub_via: tuple[str, ...] = ("assign",)
    txn: bool = False
    allowed: frozenset[str] | None = None
    also_allowed: frozenset[str] = field(default_factory=frozenset)
    rw: bool = False


#: every type the queue checkers can report
KNOWN_ANOMALIES = frozenset(ANOMALY_TYPES) | {c[0] for c in CLASSES + RW_CLASSES} | {
    "G2-item", "G2-item-process", "G2-item-realtime", "lost-acked-write"}


def allowed_anomalies(opts: QueueOptions) -> frozenset[str]:
    if opts.allowed is not None:
        return frozenset(opts.allowed) | opts.also_allowed
    a = {"int-send-skip"}
    if "subscribe" in opts.sub_via:
        a |= {"poll-skip", "nonmonotonic-poll"}
    if opts.txn:
        a |= set(G0_FAMILY) | set(G1C_FAMILY)
    return frozenset(a) | opts.also_allowed


def merge_key_results(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sum per-key counts, keep the first examples (in key order)."""
    counts: dict[str, int] = {}
    examples: dict[str, list] = {}
    unseen_by_key: dict[str, int] = {}
    committed: set[int] = set()
    edges: list[tuple[str, dict[str, list[int]]]] = []
    durability: list[dict] = []
    per_key_stats: dict[str, dict] = {}
    for r in sorted(results, key=lambda r: r["key"]):
        for t, c in r["counts"].items():
            counts[t] = counts.get(t, 0) + c
        for t, exs in r["examples"].items():
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
    bad = [t for t in types if t not in allowed]
    if bad:
        valid: Any = False
    elif cycles_state != "complete":
        valid = "unknown"
    else:
        valid = True
    return {
        "valid": valid,
        "anomaly_types": types,
        "bad_anomaly_types": bad,
        "allowed_anomaly_types": sorted(allowed),
        "counts": counts,
        "anomalies": examples,
        "unseen": {"total": counts.get("unseen", 0), "by_key": merged["unseen_by_key"]},
        "cycle_search": cycles_state,
        "graph": cycle_stats,
        "keys": len(merged["key_stats"]),
        "cross_key_seconds": round(_time.monotonic() - t0, 3),
        "options": {"sub_via": list(opts.sub_via), "txn": opts.txn, "rw": opts.rw},
    }
