"""The availability checker's judgement and how it joins a results object
(the package docstring says what it checks and why)."""

from __future__ import annotations

from typing import Any

from checkers import expected_loss
from checkers.verdict import UNKNOWN, Verdict, combine

from .bound import LivenessBound
from .cause import FinalState, classify
from .evidence import fault_rows, heal_row
from .facts import HistoryFacts
from .leaders import Timeline

POLICIES = ("auto", "strict", "report")
#: the anomaly names: a partition stuck (or of unknown cause), and one down by design
STUCK, DESIGN = "unavailable", "unavailable-by-design"


def _judge(key: str, facts: HistoryFacts, final: dict[str, Any], bound: LivenessBound | None) -> dict[str, Any]:
    """Whether ``key`` was available after the heal, and by what evidence."""
    attempts = facts.after_heal.get(key, [])
    got = final.get("write_after_ms")
    out: dict[str, Any] = {**final, "final_read": facts.final_reads.get(key), "attempts": len(attempts)}
    errors = sorted({_err(a.error) for a in attempts if a.type not in (None, "ok")})
    if errors:
        out["errors"] = errors
    if attempts:
        out["judged_by"] = "acks=all write"
        out["available"] = got is not None and (bound is None or got <= bound.total_ms)
    elif key in facts.final_reads:
        out["judged_by"] = "final read"
        out["available"] = facts.final_reads[key] == "ok"
    else:
        out["judged_by"] = None
        out["available"] = None
    return out


def _err(e: Any) -> str:
    if isinstance(e, list):
        return str(e[-1]) if e else "?"
    return str(e) if e is not None else "no answer"


def check_availability(facts: HistoryFacts, keys: list[str], *, bound: LivenessBound | None = None,
                       timeline: Timeline | None = None, state: FinalState | None = None,
                       policy: str = "auto") -> dict[str, Any]:
    """The availability checker's result (module docstring): ``valid``,
    the per-partition judgement after the heal, the unavailable ones with
    their cause, and the evidence table (``rows``, ``final``)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown liveness policy {policy!r} (expected one of {', '.join(POLICIES)})")
    heal = facts.heal_ns
    keys = list(dict.fromkeys([*keys, *facts.acked_all]))
    rows = fault_rows(facts, keys, timeline)
    final = heal_row(facts, keys, timeline)
    out: dict[str, Any] = {"policy": policy, "bound": bound.as_dict() if bound else None,
                           "heal_s": round(heal / 1e9, 3) if heal is not None else None,
                           "state": state.source if state is not None else None,
                           "traces": timeline.files if timeline is not None else 0,
                           "rows": rows, "final": final}
    blind = timeline.blind_stretches(facts.end_ns) if timeline is not None and timeline.looks else None
    if blind is not None:
        out["observer_blind"] = [{"from_s": round(a / 1e9, 3), "to_s": round(b / 1e9, 3), "why": why}
                                 for a, b, why in blind]
    if final is None:
        out.update(valid=True, partitions={}, unavailable=[], note="no final phase in the history: not judged")
        return out
    parts = {k: _judge(k, facts, final["partitions"][k], bound) for k in keys}
    down = []
    for k, p in parts.items():
        if p["available"] is False:
            c = classify(k, state, p.get("errors", []))
            late = p.get("write_after_ms")
            if late is not None:
                c.text = f"its first acks=all write was accepted {late / 1000:.1f} s after the heal: " + c.text
            c.text += _stale_words(blind, state)
            p["cause"] = c.as_dict()
            down.append({"key": k, **c.as_dict()})
    out["partitions"] = parts
    out["unavailable"] = down
    out["valid"] = _verdict(down, policy)
    if down:
        by_text: dict[str, list[str]] = {}
        for d in down:
            by_text.setdefault(d["text"], []).append(d["key"])
        out["cause"] = "; ".join(f"{', '.join(ks)} unavailable after the heal: {t}" for t, ks in by_text.items())
    return out


def _stale_words(blind: list[tuple[int, int, str]] | None, state: FinalState | None) -> str:
    """Words for a cause read from traced state taken inside a blind stretch
    of Kafka's observer: the state is the last one seen before it, which
    may be stale. Words only: the verdict stays what the cause makes it,
    since the state is still the last evidence there is and the snapshot
    after the final reads (``final-state.json``) does not rest on the
    observer; the unknown path is for a cause that cannot be told at all."""
    if not blind or state is None or state.t_ns is None or "traces" not in state.source:
        return ""
    for a, b, why in blind:
        if a <= state.t_ns <= b:
            return (f" (the observer was blind {a / 1e9:.1f}-{b / 1e9:.1f} s, {why}: the partitions' state at "
                    f"{state.t_ns / 1e9:.1f} s is the last it saw, at {a / 1e9:.1f} s)")
    return ""


def _verdict(down: list[dict[str, Any]], policy: str) -> Verdict:
    if not down or policy == "report":
        return True
    if policy == "strict":
        return False
    if any(d["by_design"] is False for d in down):
        return False
    return UNKNOWN if any(d["by_design"] is None for d in down) else True


def merge_availability(res: dict[str, Any], av: dict[str, Any]) -> dict[str, Any]:
    """Fold the availability result into a results object, in place: the
    evidence table as ``availability``, the verdict part as
    ``checkers.availability``, each unavailable partition as an anomaly
    (``unavailable``, or ``unavailable-by-design``), ``valid`` combined,
    and ``cause`` set (:func:`unknown_cause`)."""
    table = {k: av.get(k) for k in ("bound", "heal_s", "rows", "final")}
    if "observer_blind" in av:
        table["observer_blind"] = av["observer_blind"]
    res["availability"] = table
    out = {k: v for k, v in av.items() if k not in ("rows", "final", "observer_blind")}
    res.setdefault("checkers", {})["availability"] = out
    down = av.get("unavailable") or []
    if down:
        anomalies = res.setdefault("anomalies", {})
        counts: dict[str, int] = {}
        for d in down:
            kind = DESIGN if d.get("by_design") is True else STUCK
            anomalies.setdefault(kind, []).append(d)
            counts[kind] = counts.get(kind, 0) + 1
        failing = {k for k in counts if _fails(k, av.get("policy", "auto"))}
        out.update(counts=counts, bad_anomaly_types=sorted(failing),
                   allowed_anomaly_types=sorted(set(counts) - failing))
        res["anomaly_types"] = sorted(set(res.get("anomaly_types") or []) | set(counts))
    res["valid"] = combine([res.get("valid"), av.get("valid")])
    set_cause(res)
    return res


def _fails(kind: str, policy: str) -> bool:
    """Whether unavailability of this kind fails the run under ``policy``
    (a stuck one of undetermined cause makes it unknown, and is counted
    with the stuck ones)."""
    return policy == "strict" or (policy == "auto" and kind == STUCK)


def set_cause(res: dict[str, Any]) -> dict[str, Any]:
    """``cause`` beside the verdict: why it is unknown, or, when a partition
    was unavailable after the heal, why; and when acknowledged writes were
    lost the way Kafka 4.4 loses them, that too (``loss_by_design``,
    :mod:`checkers.expected_loss`), in place. Every way of checking a run
    ends here, so the judgement sees every checker's verdict."""
    cause = unknown_cause(res) if res.get("valid") not in (True, False) else None
    av = (res.get("checkers") or {}).get("availability") or {}
    if cause is None and av.get("cause"):
        cause = av["cause"]
    lost = expected_loss.judge(res)
    if lost is not None:
        res["loss_by_design"] = lost
    else:
        res.pop("loss_by_design", None)
    words = expected_loss.cause_words(res)
    if words:
        cause = f"{cause}; {words}" if cause else words
    if cause:
        res["cause"] = cause
    else:
        res.pop("cause", None)
    return res


def unknown_cause(res: dict[str, Any]) -> str:
    """Why a verdict is unknown, in words, from what each checker said."""
    checkers = res.get("checkers") or {}
    av = checkers.get("availability") or {}
    down = {d["key"]: d for d in av.get("unavailable") or []}
    parts: list[str] = []
    if res.get("error"):
        parts.append(str(res["error"]))
    fr = checkers.get("final-reads") or {}
    if fr.get("valid") not in (True, False, None):
        by_why: dict[str, list[str]] = {}
        for k in fr.get("incomplete_keys") or []:
            why = down.get(k, {}).get("text") or _why_read_failed(av.get("partitions", {}).get(k))
            by_why.setdefault(why, []).append(k)
        for why, ks in by_why.items():
            at = sum((fr.get("unverified_acked_writes") or {}).get(k) or 0 for k in ks)
            parts.append(f"no final read of {', '.join(ks)} completed"
                         + (f" ({at} acknowledged writes unverified)" if at else "") + f": {why}")
    q = checkers.get("queue") or {}
    if q.get("per_key") == "budget-exceeded":
        parts.append("the check's time budget ran out before every key was checked")
    elif q.get("valid") not in (True, False, None):
        parts.append(f"the cycle search ran out of its time budget ({q.get('cycle_search') or 'cycles'})")
    ev = q.get("evidence") or {}
    if ev.get("valid") not in (True, False, None):
        parts.append("no key was checked" if not ev.get("keys_checked") else "no write was acknowledged")
    lin = checkers.get("linearizable") or {}
    if lin.get("valid") not in (True, False, None):
        parts.append(str(lin.get("cause") or "the linearizability search ran out of its budget"))
    proc = checkers.get("processing") or {}
    if proc.get("valid") not in (True, False, None):
        parts.append("an output topic's final read did not complete")
    if av.get("valid") not in (True, False, None) and av.get("cause"):
        parts.append(str(av["cause"]))
    return "; ".join(dict.fromkeys(parts)) or "no checker said why"


def _why_read_failed(p: dict[str, Any] | None) -> str:
    if not p:
        return "the partition's availability was not judged"
    if p.get("available"):
        return (f"the partition took an acks=all write {p['write_after_ms'] / 1000:.1f} s after the heal, so the read "
                "failed on the client's side")
    return "the partition was not seen available after the heal"
