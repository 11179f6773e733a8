"""The story of a failure, told at the top of an invalid or unknown run's
page in words a person reads in ten seconds: what was lost or went wrong
(the first examples, with their keys and offsets), when those writes were
acknowledged, which truncation or election removed them (from the nodes'
traces: which node, which epoch), which faults were active then, which
variant or setting allowed it, and the commands that replay and shrink it.

Every time is in seconds since the history's start (the first operation),
as everywhere on the page; the simulator's trace clock is the history's,
a real run's traces are aligned by :mod:`harness.report.traces`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.glossary import describe
from checkers.history.op import Op
from harness.config import TestConfig
from reference_impl.core.config import Variants

from .faults import Interval, active_at
from .replay import replay_command, shrink_command
from .traces import TraceView

MAX_LOST = 3
MAX_EVENTS = 5
MAX_OTHER = 3
MAX_FAULTS = 4
#: what switching a variant away from Kafka 4.4's behaviour allows (docs/architecture.md "Variants")
VARIANT_WORDS: dict[str, str] = {
    "kip101": "KIP-101 off: a follower truncates its log to its high watermark when it becomes a follower, "
              "rather than where its log diverges from the leader's, so it can drop acknowledged records",
    "kip966": "KIP-966 off: no eligible leader replicas, so the last replica left in the ISR is re-elected "
              "even after it lost its unflushed tail",
    "min_isr_hw_gate": "min-ISR high-watermark gate off (before KAFKA-15583, Kafka 3.6 and earlier): the high "
                       "watermark advances while the ISR is below min ISR",
    "unclean_election": "unclean leader election on: a replica outside the ISR may become leader, "
                        "missing acknowledged records",
    "strict_isr_expand": "strict ISR expansion off: a follower rejoins the ISR before it reaches the leader "
                         "epoch's start offset",
    "maximal_isr": "maximal ISR off (pre-KIP-497): the leader uses an ISR change before the controller "
                   "commits it",
    "producer_sequence_checks": "producer sequence checks off: a retried batch is appended again",
}
TRUNCATE_WHY = {"hw": "to its high watermark (the rule without KIP-101)",
                "diverging-epoch": "where its log diverged from the new leader's epoch",
                "full": "to nothing (the whole log)"}


@dataclass
class Line:
    """One sentence of the story: a label, the text, op links."""

    kind: str  # lost | cause | other | unknown | fault | config | replay | shrink
    label: str
    text: str
    ops: list[int] = field(default_factory=list)
    code: str = ""  # a command to copy


def secs(t: float | None) -> str:
    return "?" if t is None else f"{t:.3f} s"


def _op_times(ops: list[Op]) -> dict[int, float]:
    return {o.index: o.time / 1e9 for o in ops}


def _lost(result: dict[str, Any]) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, tuple[int, int]]]:
    """The lost examples per acks level (acks=all first) and each level's
    (lost, acked)."""
    out: list[tuple[str, dict[str, Any]]] = []
    totals: dict[str, tuple[int, int]] = {}
    dur = result.get("durability") or {}
    for level in sorted(dur, key=lambda m: (m != "acks=all", m)):
        d = dur[level]
        if not isinstance(d, dict) or not d.get("lost"):
            continue
        totals[level] = (int(d["lost"]), int(d.get("acked") or 0))
        out += [(level, e) for e in d.get("lost_examples") or [] if isinstance(e, dict)]
    return out, totals


def lost_lines(result: dict[str, Any], times: dict[int, float]) -> tuple[list[Line], list[dict[str, Any]]]:
    """What was lost, and the examples (with their acknowledgement time)."""
    examples, totals = _lost(result)
    lines = []
    for level, (lost, acked) in totals.items():
        lines.append(Line("lost", "Lost", f"{lost} of {acked} acknowledged {level} writes "
                                          f"({lost / acked:.2%})." if acked else f"{lost} {level} writes."))
    shown = []
    for level, e in examples[:MAX_LOST]:
        t = times.get(e.get("op")) if isinstance(e.get("op"), int) else None
        shown.append({**e, "acked_at": t, "level": level})
        where = f"{e.get('key')} offset {e.get('offset')}" if e.get("offset") is not None else str(e.get("key"))
        lines.append(Line("lost", "", f"{where} (value {e.get('value')}), acknowledged at {secs(t)}"
                                      + ("" if level == "acks=all" else f" ({level})"),
                          [e["op"]] if isinstance(e.get("op"), int) else []))
    if examples[MAX_LOST:]:
        lines[-1].text += f"; {len(examples) - MAX_LOST} more examples below"
    return lines, shown


def _elections(view: TraceView) -> dict[tuple[str, Any], dict[str, Any]]:
    return {(e["tp"], e["leader_epoch"]): e for e in view.elections}


def removal_events(view: TraceView, tp: str, offsets: list[int], since: float) -> list[dict[str, Any]]:
    """The truncations that cut the lost offsets out of ``tp``'s logs and the
    leaders elected without them, in time order, from ``since`` on."""
    lo, hi = min(offsets), max(offsets)
    out = []
    for tr in view.truncations:
        if tr["tp"] == tp and tr["t"] >= since and isinstance(tr["to"], int) and tr["to"] <= hi and \
                (not isinstance(tr.get("leo_before"), int) or tr["leo_before"] > lo):
            out.append({"what": "truncate", **tr})
    elected = _elections(view)
    for ld in view.leaders:
        if ld["tp"] == tp and ld["t"] >= since and isinstance(ld.get("leo"), int) and ld["leo"] <= hi:
            el = elected.get((tp, ld["leader_epoch"]), {})
            out.append({"what": "leader", **ld, "t": min(ld["t"], el.get("t", ld["t"])),
                        "election": el.get("kind"), "lost": sum(1 for o in offsets if o >= ld["leo"])})
    out.sort(key=lambda e: e["t"])
    return out


def _event_text(e: dict[str, Any]) -> str:
    if e["what"] == "leader":
        kind = f"{e['election']} election" if e.get("election") else "election"
        return (f"{e['node']} was elected leader of {e['tp']} in epoch {e['leader_epoch']} ({kind}) with its "
                f"log ending at offset {e['leo']}, without the lost record{'s' if e.get('lost', 1) > 1 else ''}")
    why = TRUNCATE_WHY.get(str(e.get("reason")), f"({e.get('reason')})")
    before = f" from {e['leo_before']}" if isinstance(e.get("leo_before"), int) else ""
    return f"{e['name']} truncated {e['tp']} to offset {e['to']}{before}, {why}"


def cause_lines(view: TraceView | None, shown: list[dict[str, Any]]) -> tuple[list[Line], list[float]]:
    """The truncations and elections that removed the lost examples, and
    the times they happened at."""
    if not shown:
        return [], []
    if view is None or not view.files:
        return [Line("cause", "How", "The nodes left no traces, so the truncation or election that removed "
                                     "them is not known here: see the timeline around the acknowledgements.")], []
    by_tp: dict[str, list[dict[str, Any]]] = {}
    for e in shown:
        if isinstance(e.get("offset"), int):
            by_tp.setdefault(str(e.get("key")), []).append(e)
    lines: list[Line] = []
    when: list[float] = []
    for tp, exs in by_tp.items():
        since = min((e["acked_at"] for e in exs if e["acked_at"] is not None), default=0.0)
        events = removal_events(view, tp, [e["offset"] for e in exs], since)
        for ev in _merge_followers(events)[:MAX_EVENTS]:
            lines.append(Line("cause", "How" if not lines else "", f"{ev['at']}: {ev['text']}."))
            when.append(ev["t"])
        if not events:
            lines.append(Line("cause", "How" if not lines else "",
                              f"No truncation or election in the traces removed {tp}'s lost offsets after "
                              f"{secs(since)}: the records may never have reached a replica's log."))
    return lines, when


def _merge_followers(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One sentence per event; followers truncating to one offset right
    after an election are told together."""
    out: list[dict[str, Any]] = []
    for ev in events:
        prev = out[-1] if out else None
        if prev is not None and ev["what"] == "truncate" and prev.get("what") == "truncate" and \
                prev["to"] == ev["to"] and prev.get("reason") == ev.get("reason") and prev.get("after_leader"):
            prev["names"].append(ev["name"])
            prev["times"].append(ev["t"])
            prev["text"] = (f"{' and '.join(prev['names'])} truncated {ev['tp']} to offset {ev['to']}, "
                            f"following the new leader")
            prev["at"] = ", ".join(secs(t) for t in prev["times"])
            continue
        after = bool(out) and out[-1].get("what") == "leader"
        out.append({**ev, "text": _event_text(ev), "at": secs(ev["t"]), "names": [ev.get("name")],
                    "times": [ev["t"]], "after_leader": after})
    return out


def _example_words(e: Any, times: dict[int, float]) -> tuple[str, list[int]]:
    """An anomaly example as a phrase: its message, or its key, offset,
    values and the times of its operations."""
    if not isinstance(e, dict):
        return str(e)[:200], []
    if e.get("message"):
        return str(e["message"]), []
    parts = []
    if e.get("key") is not None:
        parts.append(f"on {e['key']}" + (f" offset {e['offset']}" if e.get("offset") is not None else ""))
    for k in ("value", "values", "expected", "got"):
        if e.get(k) is not None:
            v = e[k]
            parts.append(f"{k} " + (", ".join(map(str, v)) if isinstance(v, list) else str(v)))
    ops = [i for i in ([e["op"]] if isinstance(e.get("op"), int) else []) + list(e.get("ops") or [])
           if isinstance(i, int) and not isinstance(i, bool)][:4]
    if ops:
        parts.append("ops " + ", ".join(f"{i} at {secs(times.get(i))}" for i in ops))
    return " ".join(parts) or "see the anomalies below", ops


def other_lines(result: dict[str, Any], view: TraceView | None, times: dict[int, float],
                bad: set[str], skip: set[str]) -> tuple[list[Line], list[float]]:
    """The first example of each failing anomaly type not told already
    (invariant violations at their trace time, on the page's clock)."""
    lines, when = [], []
    anomalies = result.get("anomalies") or {}
    for t in [t for t in anomalies if str(t) in bad and str(t) not in skip][:MAX_OTHER]:
        exs = anomalies[t]
        exs = exs.get("examples", [exs]) if isinstance(exs, dict) else (exs if isinstance(exs, list) else [exs])
        if not exs:
            continue
        e = exs[0]
        text, ops = _example_words(e, times)
        prefix = ""
        after = ""
        if isinstance(e, dict) and isinstance(e.get("t"), (int, float)) and "step" in e:  # an invariant: trace ms
            t_s = (e["t"] - (view.offset_ms if view else 0.0)) / 1000.0
            when.append(t_s)
            node = view.name(e.get("node")) if view else str(e.get("node"))
            prefix = f"{secs(t_s)}, {node}" + (f", {e['tp']}" if e.get("tp") else "") + ": "
            after = _election_before(view, e.get("tp"), t_s)
        more = f" ({len(exs) - 1} more)" if len(exs) > 1 else ""
        meaning = describe(str(t))
        lines.append(Line("other", str(t), f"{prefix}{text}{more}.{after}" + (f" ({meaning})" if meaning else ""),
                          ops))
        when += [times[i] for i in ops if i in times]
    return lines, when


def also_line(result: dict[str, Any], bad: set[str], told: set[str]) -> list[Line]:
    """The other failing anomaly types, with their counts, on one line
    (the anomalies table below has their examples)."""
    counts: dict[str, int] = {}
    for c in (result.get("checkers") or {}).values():
        if isinstance(c, dict):
            for t, n in (c.get("counts") or {}).items():
                if isinstance(n, int):
                    counts[str(t)] = max(counts.get(str(t), 0), n)
    rest = [str(t) for t in (result.get("anomaly_types") or []) if str(t) in bad and str(t) not in told]
    if not rest:
        return []
    return [Line("other", "Also", ", ".join(f"{t} ×{counts[t]}" if t in counts else t for t in rest)
                 + " (in the anomalies below).")]


def _election_before(view: TraceView | None, tp: Any, t: float, within: float = 10.0) -> str:
    """The last election of ``tp`` up to ``t`` (a truncation follows the
    leader change that caused it), as a sentence, or nothing."""
    if view is None or not isinstance(tp, str):
        return ""
    before = [ld for ld in view.leaders if ld["tp"] == tp and t - within <= ld["t"] <= t + 0.05]
    if not before:
        return ""
    ld = before[-1]
    el = _elections(view).get((tp, ld["leader_epoch"]), {})
    kind = f"{el['kind']} election" if el.get("kind") else "election"
    return (f" It followed {secs(min(ld['t'], el.get('t', ld['t'])))}: {ld['node']} elected leader of {tp} in "
            f"epoch {ld['leader_epoch']} ({kind}), its log ending at {ld['leo']}.")


def fault_lines(intervals: list[Interval], t0: float | None, t1: float | None) -> list[Line]:
    """The faults active between the first acknowledgement and the last
    removal (or at the anomalies' times)."""
    if t0 is None:
        return []
    active = active_at(intervals, t0, t1)
    if not active:
        return [Line("fault", "Faults", f"No fault was active between {secs(t0)} and {secs(t1)}.")]
    parts = [f"{iv.name}" + (f": {iv.targets}" if iv.targets else "") +
             f", {iv.start:.3f}–{'end' if iv.stop is None else f'{iv.stop:.3f}'} s" for iv in active[:MAX_FAULTS]]
    more = f"; {len(active) - MAX_FAULTS} more" if len(active) > MAX_FAULTS else ""
    return [Line("fault", "Faults", "Active then: " + "; ".join(parts) + more + ".")]


def config_lines(test: dict[str, Any]) -> list[Line]:
    """The variants and settings, away from Kafka's safe defaults, that let
    it happen."""
    base = Variants().as_dict()
    parts = [f"{k}={'on' if v else 'off'} ({VARIANT_WORDS.get(k, 'a protocol variant')})"
             for k, v in sorted((test.get("variants") or {}).items()) if base.get(k) != bool(v)]
    d = TestConfig.model_fields
    if test.get("acks") not in (None, "all"):
        parts.append(f"acks={test['acks']} (a write is acknowledged before every in-sync replica has it)")
    for k, words in (("rf", "replication factor"), ("min_isr", "min ISR")):
        if isinstance(test.get(k), int) and test[k] < d[k].default:
            parts.append(f"{words} {test[k]} (below {d[k].default})")
    if parts:
        return [Line("config", "Allowed by", "; ".join(parts) + ".")]
    return [Line("config", "Allowed by", "The faithful protocol (every variant at Kafka 4.4's behaviour) with "
                                         f"acks={test.get('acks', 'all')}, RF {test.get('rf', '?')}, "
                                         f"min ISR {test.get('min_isr', '?')}: a bug, or a checker's mistake.")]


def unknown_lines(result: dict[str, Any]) -> list[Line]:
    """Why the checkers could not decide, as results.json says it: any
    top-level ``*cause*``/``*reason*`` field, and each undecided checker's."""
    lines = []
    for k, v in result.items():
        if ("cause" in k or "reason" in k) and v not in (None, "", [], {}):
            lines.append(Line("unknown", "Why unknown", _plain(v)))
    for name, c in (result.get("checkers") or {}).items():
        if not isinstance(c, dict) or c.get("valid") in (True, False):
            continue
        why = [_plain(v) for k, v in c.items() if ("cause" in k or "reason" in k) and v not in (None, "", [], {})]
        if name == "final-reads" and c.get("incomplete_keys"):
            why.append("no final read completed on " + ", ".join(map(str, c["incomplete_keys"][:6])))
        lines.append(Line("unknown", "Why unknown" if not lines else "",
                          f"the {name} checker could not decide" + (": " + "; ".join(why) if why else ".")))
    if result.get("error"):
        lines.append(Line("unknown", "Error", _plain(result["error"])))
    return lines or [Line("unknown", "Why unknown", "results.json gives no cause.")]


def _plain(v: Any) -> str:
    """A value from results.json as words, not JSON."""
    if isinstance(v, dict):
        return "; ".join(f"{k}: {_plain(x)}" for k, x in v.items())
    if isinstance(v, list):
        return ", ".join(_plain(x) for x in v)
    return str(v)


def build(result: dict[str, Any], test: dict[str, Any], ops: list[Op], intervals: list[Interval],
          view: TraceView | None, run_dir: Path, bad: set[str]) -> list[Line]:
    """The story's sentences, in reading order; empty for a valid run."""
    valid = result.get("valid")
    if valid is True:
        return []
    times = _op_times(ops)
    lines: list[Line] = []
    if valid is False:
        lost, shown = lost_lines(result, times)
        cause, when = cause_lines(view, shown)
        told = {"lost-acked-write", "lost-write", "unseen", "lost-acks1-write", "lost-acks0-write"} if lost else set()
        if lost:
            other, other_when = also_line(result, bad, told), []
        else:
            other, other_when = other_lines(result, view, times, bad, told)
        lines += lost + cause + other
        if result.get("cause"):  # results.json's own words on why (an unavailable partition's cause)
            lines.append(Line("cause", "Cause", _plain(result["cause"])))
        starts = [e["acked_at"] for e in shown if e.get("acked_at") is not None] + other_when
        ends = when + other_when
        lines += fault_lines(intervals, min(starts, default=None), max(ends + starts, default=None))
        lines += config_lines(test)
    else:
        lines += unknown_lines(result)
    lines.append(Line("replay", "Replay", "", code=replay_command(test, run_dir)))
    shrink = shrink_command(test, run_dir, valid)
    if shrink:
        lines.append(Line("shrink", "Shrink", "", code=shrink))
    return lines
