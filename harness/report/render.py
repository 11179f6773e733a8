"""Render index.html (Jinja2, autoescaped: every value that came from a history
or a node is text, never markup) plus latency-raw.png and rate.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from checkers.history.jsonl import read_jsonl
from harness import store

from .plots import fault_intervals, latency_plot, rate_plot

MAX_EXAMPLES = 5
MAX_EXAMPLE_CHARS = 600

_env = Environment(
    loader=PackageLoader("harness.report", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _short(x: Any) -> str:
    s = x if isinstance(x, str) else json.dumps(x, default=str, sort_keys=True)
    return s if len(s) <= MAX_EXAMPLE_CHARS else s[:MAX_EXAMPLE_CHARS] + " …"


def _verdict(valid: Any) -> tuple[str, str]:
    if valid is True:
        return "VALID", "valid"
    if valid is False:
        return "INVALID", "invalid"
    return "UNKNOWN", "unknown"


def _anomalies(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    anomalies = result.get("anomalies") or {}
    types = list(result.get("anomaly_types") or []) + [t for t in anomalies if t not in (result.get("anomaly_types") or [])]
    for t in types:
        ex = anomalies.get(t, [])
        if isinstance(ex, dict):
            count = ex.get("count", len(ex))
            ex = ex.get("examples", [ex])
        elif isinstance(ex, list):
            count = len(ex)
        else:
            count, ex = 1, [ex]
        rows.append({"type": str(t), "count": count, "examples": [_short(e) for e in list(ex)[:MAX_EXAMPLES]]})
    return rows


def _durability(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for mode, d in sorted((result.get("durability") or {}).items()):
        if not isinstance(d, dict):
            continue
        rate = d.get("lost_rate")
        rows.append({
            "mode": str(mode),
            "acked": d.get("acked"),
            "lost": d.get("lost"),
            "lost_rate": f"{rate:.4%}" if isinstance(rate, (int, float)) else rate,
            "bad": bool(d.get("lost")),
            "extra": {k: _short(v) for k, v in d.items()
                      if k not in ("acked", "lost", "lost_rate") and not isinstance(v, (list, dict))},
            "examples": [_short(e) for e in (d.get("lost_examples") or [])[:3]],
        })
    return rows


def _logs(run_dir: Path) -> list[str]:
    nodes = run_dir / "nodes"
    if not nodes.is_dir():
        return []
    # node logs and traces, not the data files (Kafka segments are *.log too)
    found = [p for p in nodes.glob("*") if p.is_file()] + [p for p in nodes.glob("*/*") if p.is_file()]
    return sorted(str(p.relative_to(run_dir)) for p in found if p.suffix in (".log", ".jsonl", ".json"))


def render_report(run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    warnings: list[str] = []
    ops = read_jsonl(run_dir / store.HISTORY, warnings)
    test = store.read_json(run_dir / store.TEST) if (run_dir / store.TEST).exists() else {}
    result = store.read_json(run_dir / store.RESULTS) if (run_dir / store.RESULTS).exists() else {"valid": "unknown"}
    intervals = fault_intervals(ops)
    latency_plot(ops, intervals, run_dir / "latency-raw.png")
    rate_plot(ops, intervals, run_dir / "rate.png")
    label, css = _verdict(result.get("valid"))
    files = [f for f in ("history.jsonl", "history.edn", "results.json", "test.json", "nemesis.jsonl", "timeline.html")
             if (run_dir / f).exists()]
    html = _env.get_template("index.html.j2").render(
        title=f"{test.get('name', run_dir.parent.name)} — {run_dir.name}",
        verdict=label,
        verdict_class=css,
        error=result.get("error"),
        config=[(str(k), _short(v)) for k, v in test.items()],
        anomalies=_anomalies(result),
        durability=_durability(result),
        stats=[(str(k), _short(v)) for k, v in (result.get("stats") or {}).items()],
        checkers=[(str(k), _short(v)) for k, v in (result.get("checkers") or {}).items()],
        intervals=[
            {"fault": iv.fault, "start": f"{iv.start:.2f}", "stop": "—" if iv.stop is None else f"{iv.stop:.2f}",
             "value": _short(iv.value)}
            for iv in intervals
        ],
        files=files,
        logs=_logs(run_dir),
        warnings=list(result.get("warnings") or []) + warnings,
    )
    out = run_dir / store.INDEX
    out.write_text(html, encoding="utf-8")
    return out
