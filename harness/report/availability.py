"""The run page's availability section: results.json's ``availability``
table (checkers/availability) as rows of the page, one per fault change and
one for the final heal, a column per partition, and where Kafka's observer
was blind the stretches and the figures they touch (``observer_blind``,
each row's and partition's ``note``)."""

from __future__ import annotations

from typing import Any

#: partitions drawn as columns; more are left to results.json
MAX_KEYS = 8
MAX_ROWS = 200


def _s(ms: Any) -> str:
    return "—" if ms is None else f"{ms / 1000:.1f} s"


def section(result: dict[str, Any]) -> dict[str, Any] | None:
    """The section's rows, or None when the run has no availability table."""
    av = result.get("availability")
    if not isinstance(av, dict) or not isinstance(av.get("rows"), list):
        return None
    final = av.get("final") if isinstance(av.get("final"), dict) else None
    keys = sorted({k for r in av["rows"] + ([final] if final else []) for k in (r.get("partitions") or {})})
    shown = keys[:MAX_KEYS]
    rows = []
    for r in av["rows"][:MAX_ROWS]:
        parts = r.get("partitions") or {}
        rows.append({"at": f"{r.get('t_s', 0):.3f}", "event": r.get("event", ""), "skipped": r.get("skipped"),
                     "cells": [(_s((parts.get(k) or {}).get("leaderless_ms")),
                                _s((parts.get(k) or {}).get("no_write_ms"))) for k in shown]})
    judged = ((result.get("checkers") or {}).get("availability") or {}).get("partitions") or {}
    heal = None
    if final:
        parts = final.get("partitions") or {}
        heal = {"at": f"{final.get('t_s', 0):.3f}",
                "cells": [(_s((parts.get(k) or {}).get("leader_after_ms")),
                           "never" if (parts.get(k) or {}).get("write_after_ms") is None and judged.get(k, {}).get(
                               "attempts") else _s((parts.get(k) or {}).get("write_after_ms"))) for k in shown],
                "down": [k for k in shown if judged.get(k, {}).get("available") is False]}
    bound = (av.get("bound") or {}).get("total_ms")
    return {"blind": _blind(av, shown), "columns": shown, "more_keys": len(keys) - len(shown), "rows": rows,
            "more_rows": max(0, len(av["rows"]) - MAX_ROWS), "heal": heal,
            "bound": _s(bound) if bound is not None else None,
            "unavailable": [f"{d.get('key')}: {d.get('text')}" for d in
                            ((result.get("checkers") or {}).get("availability") or {}).get("unavailable") or []]}


def _blind(av: dict[str, Any], shown: list[str]) -> list[str]:
    """The observer's blind stretches, then the figures of the partitions
    shown that one touches, each note once (an outage spans rows)."""
    out = [f"{b.get('from_s', 0):.1f}-{b.get('to_s', 0):.1f} s ({b.get('why')})"
           for b in av.get("observer_blind") or [] if isinstance(b, dict)]
    final = av.get("final") if isinstance(av.get("final"), dict) else None
    for r in av["rows"] + ([final] if final else []):
        parts = r.get("partitions") or {}
        out += [f"{k}: {parts[k]['note']}" for k in shown if isinstance(parts.get(k), dict) and parts[k].get("note")]
    return list(dict.fromkeys(out))
