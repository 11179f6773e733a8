"""The same test on the reference implementation and on real Kafka, side by side.

``kraftwerk compare`` runs one configuration (seed, fault schedule or
scenario, workload) twice, ``--db reference`` then ``--db kafka``, and puts
what each run concluded next to the other: the verdict, the anomaly types,
the durability rows, and the leader/ISR history of each partition — the
reference's from its controllers' ``partition_metadata`` trace events, Kafka's
from the metadata the observer polled (``harness.dbs.kafka.observe``). Both
number brokers alike (node.id 1..B), so the histories compare directly.

A disagreement is either a faithfulness bug in the reference implementation
or a finding about Kafka; ``bench/differential.py`` tabulates them over every
scenario.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.invariants import iter_trace_dir

DBS = ("reference", "kafka")


@dataclass(frozen=True)
class Change:
    """One observed partition state: when (ms), leader, leader epoch, ISR, ELR."""

    t: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]


def leader_history(run_dir: str | Path) -> dict[str, list[Change]]:
    """Per partition, its successive (leader, leader epoch, ISR, ELR) states,
    from whichever ``partition_metadata`` events the run's traces hold (every
    controller replays each record: consecutive repeats are one state)."""
    out: dict[str, list[Change]] = {}
    for ev in iter_trace_dir(run_dir):
        if ev.get("kind") != "partition_metadata":
            continue
        tp = str(ev["tp"])
        c = Change(int(ev.get("t", 0)), int(ev.get("leader", -1)), int(ev.get("leader_epoch", -1)),
                   tuple(sorted(int(x) for x in ev.get("isr") or ())),
                   tuple(sorted(int(x) for x in ev.get("elr") or ())))
        hist = out.setdefault(tp, [])
        if hist and (hist[-1].leader, hist[-1].leader_epoch, hist[-1].isr, hist[-1].elr) == \
                (c.leader, c.leader_epoch, c.isr, c.elr):
            continue
        if hist and c.leader_epoch < hist[-1].leader_epoch:
            continue  # a lagging controller replaying an older record
        hist.append(c)
    return out


def history_summary(hist: list[Change]) -> dict[str, Any]:
    leaders = [c.leader for c in hist]
    return {
        "states": len(hist),
        "leader_epochs": len({c.leader_epoch for c in hist}),
        "leaders": [x for i, x in enumerate(leaders) if i == 0 or leaders[i - 1] != x],
        "min_isr_size": min((len(c.isr) for c in hist), default=None),
        "offline": sum(1 for c in hist if c.leader < 0),
        "elr_seen": any(c.elr for c in hist),
    }


def summarize(run_dir: str | Path, result: dict[str, Any]) -> dict[str, Any]:
    dur = result.get("durability") or {}
    rows = {mode: {"acked": d.get("acked"), "lost": d.get("lost")} for mode, d in sorted(dur.items())
            if isinstance(d, dict)}
    hist = leader_history(run_dir)
    inv = set(((result.get("invariants") or {}).get("counts") or {}))
    types = sorted(map(str, result.get("anomaly_types") or []))
    return {
        "run_dir": str(run_dir),
        "valid": result.get("valid"),
        "anomaly_types": types,
        # what the history alone shows (the trace invariants see inside the
        # reference broker far more than the observer sees of Kafka)
        "history_anomalies": [t for t in types if t not in inv],
        "durability": rows,
        "invariants": (result.get("invariants") or {}).get("valid"),
        "partitions": {tp: history_summary(h) for tp, h in sorted(hist.items())},
    }


def agreement(a: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    """Which of the two runs' conclusions match: the verdict, and for each
    acks level whether acknowledged writes were lost at all. The anomaly
    types are shown, not judged: which ones a run exhibits depends on what
    its clients happened to read around a truncation, and the reference's
    trace invariants see inside the broker (:func:`anomaly_diff`)."""
    out = {"verdict": a["valid"] == b["valid"]}
    for mode in sorted(set(a["durability"]) | set(b["durability"])):
        la = (a["durability"].get(mode) or {}).get("lost") or 0
        lb = (b["durability"].get(mode) or {}).get("lost") or 0
        out[f"{mode} loss"] = (la > 0) == (lb > 0)
    return out


def anomaly_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, list[str]]:
    """History anomaly types only one side showed."""
    ha, hb = set(a.get("history_anomalies", a["anomaly_types"])), set(b.get("history_anomalies", b["anomaly_types"]))
    return {"reference only": sorted(ha - hb), "kafka only": sorted(hb - ha)}


def render(sides: dict[str, dict[str, Any]]) -> str:
    """A plain side-by-side table (one line per row, fixed columns)."""
    a, b = sides["reference"], sides["kafka"]
    rows: list[tuple[str, str, str]] = [
        ("verdict", _s(a["valid"]), _s(b["valid"])),
        ("anomaly types", ",".join(a["anomaly_types"]) or "-", ",".join(b["anomaly_types"]) or "-"),
        ("invariants", _s(a["invariants"]), _s(b["invariants"])),
    ]
    for mode in sorted(set(a["durability"]) | set(b["durability"])):
        da, db = a["durability"].get(mode) or {}, b["durability"].get(mode) or {}
        rows.append((f"{mode} acked/lost", f"{da.get('acked')}/{da.get('lost')}", f"{db.get('acked')}/{db.get('lost')}"))
    for tp in sorted(set(a["partitions"]) | set(b["partitions"])):
        pa, pb = a["partitions"].get(tp), b["partitions"].get(tp)
        rows.append((f"{tp} leaders", _leaders(pa), _leaders(pb)))
        rows.append((f"{tp} epochs/min ISR/offline", _shape(pa), _shape(pb)))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len("reference"), *(len(r[1]) for r in rows))
    lines = [f"{'':<{w0}}  {'reference':<{w1}}  kafka"]
    lines += [f"{r[0]:<{w0}}  {r[1]:<{w1}}  {r[2]}" for r in rows]
    agree = agreement(a, b)
    bad = [k for k, v in agree.items() if not v]
    lines.append("agree" if not bad else "DISAGREE on " + ", ".join(bad))
    diff = {k: v for k, v in anomaly_diff(a, b).items() if v}
    if diff:
        lines.append("history anomaly types seen on one side only: "
                     + "; ".join(f"{k}: {','.join(v)}" for k, v in diff.items()))
    return "\n".join(lines)


def _s(v: Any) -> str:
    return {True: "valid", False: "INVALID", None: "-"}.get(v, str(v)) if not isinstance(v, str) else v


def _leaders(p: dict[str, Any] | None) -> str:
    if not p:
        return "(not seen)"
    ls = p["leaders"]
    s = "->".join(str(x) for x in ls[:12])
    return s + ("..." if len(ls) > 12 else "")


def _shape(p: dict[str, Any] | None) -> str:
    if not p:
        return "-"
    return f"{p['leader_epochs']}/{p['min_isr_size']}/{p['offline']}" + (" ELR" if p["elr_seen"] else "")
