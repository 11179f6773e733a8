"""Jepsen's queue diagnostics from a history, computed in a few passes and
plotted with the faults shaded:

- realtime lag (``realtime-lag.png``): for each poll by a process, how long
  before its invocation the oldest acknowledged record it had not yet read
  (past its position in that key) was acknowledged; 0 when it was caught
  up. Per key, and the worst over all keys. Only keys the process ever read
  count, and final reads (fresh consumers) are left out;
- unseen (``unseen.png``): acknowledged records no poll had returned yet,
  over time, in total and for the keys with the highest peak;
- consume counts (``consume-counts.png``): how many (non-final) polls
  returned each acknowledged record;
- how indeterminate (``info``) sends were resolved: read later (so they
  took effect) or never read (treated as never written).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.history.op import Op

from .mpl import plt
from .plots import Interval, gapped, outside_legend, pairs, shade

BUCKETS = 600
TOP_KEYS = 8
KEY_COLOURS = ["#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#bcbd22"]


@dataclass
class QueueFacts:
    """The history's sends and reads, as the diagnostics need them."""

    acked: dict[str, list[tuple[int, int, Any]]] = field(default_factory=lambda: defaultdict(list))  # key -> (offset, ack ns, value)
    info_sends: list[tuple[str, Any, str, int]] = field(default_factory=list)   # key, value, acks, op index
    fail_sends: list[tuple[str, Any, str, int]] = field(default_factory=list)
    polls: list[tuple[Any, int, int, bool, dict[str, list[tuple[int, Any]]]]] = field(default_factory=list)
    resets: list[tuple[Any, int]] = field(default_factory=list)  # (process, ns) an assign/subscribe
    acks_of: dict[tuple[str, Any], str] = field(default_factory=dict)
    end_ns: int = 0


def _sends(value: Any) -> list[tuple[str, Any, int | None]]:
    out = []
    for m in value if isinstance(value, list) else []:
        if isinstance(m, list) and len(m) >= 3 and m[0] == "send":
            if isinstance(m[2], list) and len(m[2]) == 2:
                out.append((str(m[1]), m[2][1], m[2][0] if isinstance(m[2][0], int) else None))
            else:
                out.append((str(m[1]), m[2], None))
    return out


def _reads(value: Any) -> dict[str, list[tuple[int, Any]]]:
    out: dict[str, list[tuple[int, Any]]] = {}
    for m in value if isinstance(value, list) else []:
        if isinstance(m, list) and len(m) >= 2 and m[0] == "poll" and isinstance(m[1], dict):
            for k, recs in m[1].items():
                for r in recs if isinstance(recs, list) else []:
                    if isinstance(r, list) and len(r) == 2 and isinstance(r[0], int):
                        out.setdefault(str(k), []).append((r[0], r[1]))
    return out


def facts(ops: list[Op], prs: list[tuple[Op, Op]] | None = None) -> QueueFacts:
    q = QueueFacts(end_ns=max((o.time for o in ops), default=0))
    for inv, comp in (pairs(ops) if prs is None else prs):
        acks = str((comp.extra or {}).get("acks", (inv.extra or {}).get("acks", "all")))
        if comp.f in ("assign", "subscribe"):
            q.resets.append((comp.process, comp.time))
        if comp.f in ("send", "txn"):
            for key, v, off in _sends(comp.value if comp.value is not None else inv.value):
                q.acks_of[(key, v)] = acks
                if comp.type == "ok" and off is not None:
                    q.acked[key].append((off, comp.time, v))
                elif comp.type == "info":
                    q.info_sends.append((key, v, acks, comp.index))
                elif comp.type == "fail":
                    q.fail_sends.append((key, v, acks, comp.index))
        if comp.f in ("poll", "txn") and comp.type == "ok":
            reads = _reads(comp.value)
            final = bool((comp.extra or {}).get("final") or (inv.extra or {}).get("final"))
            q.polls.append((comp.process, inv.time, comp.time, final, reads))
    for recs in q.acked.values():
        recs.sort()
    q.polls.sort(key=lambda p: p[2])
    return q


def realtime_lag(q: QueueFacts) -> dict[str, list[tuple[float, float]]]:
    """key -> [(poll invocation s, lag s)] (see the module docstring)."""
    offsets = {k: [r[0] for r in recs] for k, recs in q.acked.items()}
    sufmin: dict[str, list[int]] = {}
    for k, recs in q.acked.items():
        m = [0] * (len(recs) + 1)
        m[-1] = 1 << 62
        for i in range(len(recs) - 1, -1, -1):
            m[i] = min(m[i + 1], recs[i][1])
        sufmin[k] = m
    keys_of: dict[Any, set[str]] = defaultdict(set)
    for proc, _, _, final, reads in q.polls:
        if not final:
            keys_of[proc].update(reads)
    pos: dict[tuple[Any, str], int] = {}
    resets = sorted(q.resets, key=lambda r: r[1])
    ri = 0
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for proc, t_inv, t_done, final, reads in sorted(q.polls, key=lambda p: p[1]):
        while ri < len(resets) and resets[ri][1] <= t_inv:
            rp = resets[ri][0]
            for k in [k for (p, k) in pos if p == rp]:
                pos.pop((rp, k), None)
            ri += 1
        if final:
            continue
        for k in keys_of[proc]:
            if k not in offsets:
                continue
            p = pos.get((proc, k), -1)
            i = bisect.bisect_right(offsets[k], p)
            oldest = sufmin[k][i]
            out[k].append((t_inv / 1e9, max(0.0, (t_inv - oldest) / 1e9) if oldest < t_inv else 0.0))
        for k, recs in reads.items():
            hi = max(off for off, _ in recs)
            if hi > pos.get((proc, k), -1):
                pos[(proc, k)] = hi
    return out


def _thin_max(pts: list[tuple[float, float]], width: float) -> list[tuple[float, float]]:
    """The highest point per bucket (a lag spike must survive thinning)."""
    best: dict[int, tuple[float, float]] = {}
    for t, v in pts:
        b = int(t / width)
        if b not in best or v > best[b][1]:
            best[b] = (t, v)
    return [best[b] for b in sorted(best)]


def unseen_series(q: QueueFacts, buckets: int = BUCKETS) -> tuple[list[float], list[int], dict[str, list[int]]]:
    """(bucket times s, total unseen, per key unseen) sampled at bucket ends."""
    first_seen: dict[tuple[str, Any], int] = {}
    for _, _, t_done, _, reads in q.polls:
        for k, recs in reads.items():
            for _, v in recs:
                first_seen.setdefault((k, v), t_done)
    end = q.end_ns or 1
    width = max(end / buckets, 1)
    deltas: dict[str, list[int]] = {}
    for k, recs in q.acked.items():
        d = [0] * (buckets + 2)
        for _, t_ack, v in recs:
            seen = first_seen.get((k, v))
            if seen is not None and seen <= t_ack:
                continue
            d[min(int(t_ack / width), buckets - 1)] += 1
            if seen is not None:
                d[min(int(seen / width), buckets - 1)] -= 1
        deltas[k] = d
    ts = [(i + 1) * width / 1e9 for i in range(buckets)]
    per: dict[str, list[int]] = {}
    for k, d in deltas.items():
        run, ys = 0, []
        for i in range(buckets):
            run += d[i]
            ys.append(run)
        per[k] = ys
    total = [sum(col) for col in zip(*per.values())] if per else [0] * buckets
    return ts, total, per


def consume_counts(q: QueueFacts) -> Counter[int]:
    """times consumed -> number of acknowledged records (non-final polls)."""
    n: Counter[tuple[str, Any]] = Counter()
    for _, _, _, final, reads in q.polls:
        if final:
            continue
        for k, recs in reads.items():
            for v in {v for _, v in recs}:
                n[(k, v)] += 1
    out: Counter[int] = Counter()
    for k, recs in q.acked.items():
        for _, _, v in recs:
            out[n.get((k, v), 0)] += 1
    return out


def info_resolution(q: QueueFacts) -> list[dict[str, Any]]:
    """Per acks level: indeterminate sends read later (they took effect) and
    never read (treated as never written), and failed sends read anyway."""
    read: set[tuple[str, Any]] = set()
    for _, _, _, _, reads in q.polls:
        for k, recs in reads.items():
            read.update((k, v) for _, v in recs)
    rows: dict[str, dict[str, Any]] = {}
    for kind, sends in (("info", q.info_sends), ("fail", q.fail_sends)):
        for key, v, acks, idx in sends:
            r = rows.setdefault(acks, {"acks": f"acks={acks}", "info": 0, "info_read": 0, "info_unread": 0,
                                       "fail": 0, "fail_read": 0, "examples": []})
            r[kind] += 1
            if (key, v) in read:
                r[f"{kind}_read"] += 1
                if kind == "info" and len(r["examples"]) < 8:
                    r["examples"].append(idx)
            elif kind == "info":
                r["info_unread"] += 1
    return [rows[k] for k in sorted(rows, key=lambda a: (a != "all", a))]


# -- plots ----------------------------------------------------------------------------------------------

def _top(per: dict[str, Any], score: Any) -> list[str]:
    return sorted(per, key=lambda k: -score(per[k]))[:TOP_KEYS]


def lag_plot(lag: dict[str, list[tuple[float, float]]], intervals: list[Interval], end: float,
             path: Path) -> dict[str, float]:
    """Per-key lag (thin) and the worst over keys (bold); returns each key's
    worst lag in seconds."""
    width = max(end, 1.0) / BUCKETS
    fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=100)
    shade(ax, intervals, end)
    worst_by_key = {k: max((v for _, v in pts), default=0.0) for k, pts in lag.items()}
    top = _top(lag, lambda pts: max((v for _, v in pts), default=0.0))
    for i, k in enumerate(top):
        ax.plot(*gapped(_thin_max(lag[k], width)), lw=0.9, alpha=0.75, color=KEY_COLOURS[i % len(KEY_COLOURS)],
                label=k)
    allpts = _thin_max([p for pts in lag.values() for p in pts], width)
    ax.plot(*gapped(allpts), lw=1.8, color="#111", label="worst (all keys)")
    ax.set_xlim(0, max(end, 1))
    ax.set_xlabel("time (s)")
    ax.set_ylabel("lag (s)")
    ax.set_title("realtime lag: age of the oldest acknowledged record\na poll had not yet read", fontsize=10)
    outside_legend(ax)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return worst_by_key


def unseen_plot(ts: list[float], total: list[int], per: dict[str, list[int]], intervals: list[Interval],
                end: float, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=100)
    shade(ax, intervals, end)
    ax.plot(ts, total, color="#111", lw=1.8, label="all keys")
    for i, k in enumerate(_top(per, max) if len(per) > 1 else []):
        ax.plot(ts, per[k], lw=0.9, color=KEY_COLOURS[i % len(KEY_COLOURS)], label=k)
    ax.set_xlim(0, max(end, 1))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("records")
    ax.set_title("unseen: acknowledged records no poll had returned yet", fontsize=10)
    outside_legend(ax)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def consume_plot(counts: Counter[int], path: Path) -> None:
    xs = sorted(counts)
    fig, ax = plt.subplots(figsize=(6.5, 3.2), dpi=100)
    ax.bar([str(x) for x in xs], [counts[x] for x in xs], color=["#d62828" if x == 0 else "#1f5fbf" for x in xs])
    ax.set_xlabel("times consumed by non-final polls")
    ax.set_ylabel("acknowledged records")
    ax.set_title("consume counts per record")
    for i, x in enumerate(xs):
        ax.text(i, counts[x], str(counts[x]), ha="center", va="bottom", fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
