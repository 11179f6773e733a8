"""Every plot of the run page, drawn into the run directory, and what the
page says beside them. One plot failing (a malformed trace, an odd history)
becomes a warning on the page, never a missing report."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from checkers.history.op import Op

from . import diagnostics as dg
from .cycles import render_cycles
from .plots import Interval, latency_plot, latency_quantiles_plot, pairs, rate_plot
from .trace_plots import MAX_PANELS, hw_leo_plot, isr_leader_plot, lost_writes_plot, panels
from .traces import TraceView, read_traces


def _try(warnings: list[str], what: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - reported on the page, the rest still renders
        warnings.append(f"{what}: {type(e).__name__}: {e}")
        return None


def lost_examples(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Lost acknowledged writes the checkers named (every acks level), once each."""
    seen: set[tuple[Any, Any, Any]] = set()
    out = []
    cands = [e for d in (result.get("durability") or {}).values() if isinstance(d, dict)
             for e in d.get("lost_examples") or []]
    for t, exs in (result.get("anomalies") or {}).items():
        if str(t).startswith(("lost-write", "lost-acked-write", "lost-acks")) and isinstance(exs, list):
            cands += exs
    for e in cands:
        if isinstance(e, dict) and "key" in e and isinstance(e.get("offset"), int):
            k = (str(e["key"]), e["offset"], e.get("op"))
            if k not in seen:
                seen.add(k)
                out.append(e)
    return out


def traces(run_dir: Path, ops: list[Op], test: dict[str, Any], warnings: list[str]) -> TraceView | None:
    """The nodes' traces, read once for the plots and the story."""
    return _try(warnings, "reading node traces", read_traces, run_dir, ops, test)


def replication_facts(view: TraceView | None, lost: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """What the page says of the traces, without drawing; and the panels."""
    if view is None or not view.files:
        return {"traces": False}, []
    tps, left_out = panels(view, {str(x["key"]) for x in lost})
    return {"traces": True, "files": view.files, "events": view.events, "left_out": left_out,
            "max_panels": MAX_PANELS, "offset_ms": view.offset_ms,
            "elections": [{**e, "leader": view.name(e["leader"])} for e in view.elections
                          if e["kind"] != "clean"][:40],
            "elections_total": len(view.elections),
            "truncations": len(view.truncations), "bad_lines": view.bad_lines}, tps


def _replication(run_dir: Path, view: TraceView | None, lost: list[dict[str, Any]],
                 intervals: list[Interval], end: float, warnings: list[str]) -> dict[str, Any]:
    out, tps = replication_facts(view, lost)
    if view is None or not out["traces"]:
        return out
    if tps and view.hw:
        out["hw_leo"] = _try(warnings, "hw-leo.png", hw_leo_plot, view, tps, intervals, end,
                             run_dir / "hw-leo.png") is None and (run_dir / "hw-leo.png").exists()
    if tps and view.meta:
        out["isr_leader"] = _try(warnings, "isr-leader.png", isr_leader_plot, view, tps, intervals, end,
                                 run_dir / "isr-leader.png") is None and (run_dir / "isr-leader.png").exists()
    return out


def _diagnostics(run_dir: Path, ops: list[Op], prs: list[tuple[Op, Op]], intervals: list[Interval], end: float,
                 warnings: list[str]) -> dict[str, Any]:
    q = _try(warnings, "queue facts", dg.facts, ops, prs)
    if q is None or not q.acked:
        return {"queue": False}
    out: dict[str, Any] = {"queue": True}
    lag = _try(warnings, "realtime lag", dg.realtime_lag, q)
    if lag:
        worst = _try(warnings, "realtime-lag.png", dg.lag_plot, lag, intervals, end, run_dir / "realtime-lag.png")
        if worst:
            out["lag"] = True
            out["worst_lag"] = [{"key": k, "lag": f"{v:.3f}"} for k, v in sorted(worst.items(), key=lambda kv: -kv[1])[:10]]
    series = _try(warnings, "unseen", dg.unseen_series, q)
    if series is not None:
        _try(warnings, "unseen.png", dg.unseen_plot, *series, intervals, end, run_dir / "unseen.png")
        out["unseen"] = (run_dir / "unseen.png").exists()
        out["unseen_final"] = series[1][-1] if series[1] else 0
        out["unseen_peak"] = max(series[1], default=0)
    counts = _try(warnings, "consume counts", dg.consume_counts, q)
    if counts:
        _try(warnings, "consume-counts.png", dg.consume_plot, counts, run_dir / "consume-counts.png")
        out["consume"] = [{"times": k, "records": counts[k]} for k in sorted(counts)]
    out["info"] = _try(warnings, "info resolution", dg.info_resolution, q) or []
    return out


def _checker_lag(result: dict[str, Any]) -> dict[str, str] | None:
    """The queue checker's own worst realtime lag (its reading counts every
    poll, final reads included), shown beside the plot's."""
    w = ((result.get("checkers") or {}).get("queue") or {}).get("worst_realtime_lag")
    if not isinstance(w, dict) or not isinstance(w.get("lag"), (int, float)):
        return None
    t = w.get("time")
    return {"key": str(w.get("key")), "lag": f"{w['lag']:.3f}", "process": str(w.get("process")),
            "time": f"{t:.3f}" if isinstance(t, (int, float)) else "?"}


def draw_all(run_dir: Path, ops: list[Op], test: dict[str, Any], result: dict[str, Any],
             intervals: list[Interval], warnings: list[str], view: TraceView | None = None,
             bad: set[str] | None = None) -> dict[str, Any]:
    """Draw every plot; returns the page's context for them."""
    end = max((o.time for o in ops), default=0) / 1e9
    prs = pairs(ops)
    _try(warnings, "latency-raw.png", latency_plot, ops, intervals, run_dir / "latency-raw.png", prs)
    _try(warnings, "latency-quantiles.png", latency_quantiles_plot, ops, intervals, run_dir / "latency-quantiles.png",
         prs)
    _try(warnings, "rate.png", rate_plot, ops, intervals, run_dir / "rate.png")
    lost = lost_examples(result)
    replication = _replication(run_dir, view, lost, intervals, end, warnings)
    lost_tps: list[str] = []
    if lost:
        lost_tps = _try(warnings, "lost-writes.png", lost_writes_plot, ops, lost, view, intervals, end,
                        run_dir / "lost-writes.png") or []
    return {
        "drawn": True,
        "replication": replication,
        "lost": {"drawn": bool(lost_tps), "shown": len(lost), "total": _total_lost(result), "partitions": lost_tps},
        "diagnostics": {**_diagnostics(run_dir, ops, prs, intervals, end, warnings),
                        "checker_worst_lag": _checker_lag(result)},
        "cycles": _try(warnings, "cycles", render_cycles, result, ops, run_dir, bad) or [],
    }


def _total_lost(result: dict[str, Any]) -> int:
    return sum(int(d.get("lost") or 0) for d in (result.get("durability") or {}).values() if isinstance(d, dict))


def undrawn(result: dict[str, Any], ops: list[Op], view: TraceView | None, warnings: list[str],
            bad: set[str] | None = None) -> dict[str, Any]:
    """The page's context without drawing a plot (a summary page, written
    for every seed of a batch: ``kraftwerk report`` or ``serve`` draws
    them): the cycles' explained steps, the traces' counts."""
    replication, _ = replication_facts(view, lost_examples(result))
    return {
        "drawn": False,
        "replication": replication,
        "lost": {"drawn": False, "shown": 0, "total": _total_lost(result), "partitions": []},
        "diagnostics": {"queue": False, "checker_worst_lag": _checker_lag(result)},
        "cycles": _try(warnings, "cycles", render_cycles, result, ops, None, bad) or [],
    }
