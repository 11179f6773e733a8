"""Render index.html and timeline.html (Jinja2, autoescaped: every value that
came from a history or a node is text, never markup) plus latency-raw.png and
rate.png."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from checkers.check import anomaly_counts
from checkers.glossary import describe
from checkers.history.jsonl import read_jsonl
from harness.rundir import store
from harness.rundir.summary import differs_line, resolution_differs

from .availability import section as availability_section
from .figures import draw_all, traces, undrawn
from .faults import fault_intervals, legend
from .story import build as build_story
from .tables import table
from .timeline import example_ops, timeline_context

MAX_EXAMPLES = 5
MAX_EXAMPLE_CHARS = 600
MAX_INTERVALS = 200
#: bumped when the run page changes: ``kraftwerk serve`` renders again a
#: report that does not carry it (a run made by an older kraftwerk)
REPORT_VERSION = 4
VERSION_MARK = f'<meta name="kraftwerk-report" content="{REPORT_VERSION}">'
#: a summary page (no plots) carries this mark instead, so the site draws
#: the whole report on first view
SUMMARY_VERSION = f"{REPORT_VERSION}-summary"

_env = Environment(
    loader=PackageLoader("harness.report", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def env() -> Environment:
    """The report's Jinja2 environment (autoescaped), for the site's pages."""
    return _env


def _short(x: Any) -> str:
    s = x if isinstance(x, str) else json.dumps(x, default=str, sort_keys=True)
    return s if len(s) <= MAX_EXAMPLE_CHARS else s[:MAX_EXAMPLE_CHARS] + " …"


def _verdict(valid: Any) -> tuple[str, str]:
    if valid is True:
        return "VALID", "valid"
    if valid is False:
        return "INVALID", "invalid"
    return "UNKNOWN", "unknown"


class Clock:
    """The page's one time unit: seconds since the history's start. An op's
    time from the history, a trace time (ms, the traces' clock) through
    the traces' offset, a node id by its name."""

    def __init__(self, ops: list[Any], view: Any) -> None:
        self.op_s = {o.index: o.time / 1e9 for o in ops}
        self.view = view

    def trace_s(self, ms: float) -> float:
        return (ms - (self.view.offset_ms if self.view is not None else 0.0)) / 1000.0

    def node(self, n: Any) -> str:
        return self.view.name(n) if self.view is not None else str(n)


def _words(v: Any) -> str:
    """A value from results.json in words: lists as comma lists, maps as
    ``k=v``, a cycle's steps as its chain of operations; never raw JSON."""
    if isinstance(v, list) and v and all(isinstance(x, dict) and "from" in x and "to" in x for x in v):
        chain = [f"op {v[0].get('from')}"] + [f"—{x.get('type')}→ op {x.get('to')}" for x in v]
        return _short(" ".join(chain))
    if isinstance(v, list):
        return _short(", ".join(_words(x) for x in v)) if v else "none"
    if isinstance(v, dict):
        return _short(", ".join(f"{k}={_words(x)}" for k, x in v.items())) if v else "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return _short(v)


def _example(e: Any, type_: str = "", clock: Clock | None = None) -> dict[str, Any]:
    """One anomaly example as readable ``key: value`` fields plus the op
    indices it names (linked to timeline.html); the run's seed and a ``kind``
    repeating the row's type are left out. An invariant's trace time is
    given in seconds on the page's clock, its node by name, a lost write's
    acknowledgement time beside it."""
    if not isinstance(e, dict):
        return {"fields": [("", _words(e))], "ops": example_ops(e)[:12]}
    fields = []
    for k, v in e.items():
        if k == "seed" or (k == "kind" and v == type_) or (k == "step" and "t" in e):
            continue
        if clock is not None and k == "t" and "step" in e and isinstance(v, (int, float)):
            fields.append(("at", f"{clock.trace_s(v):.3f} s"))
        elif clock is not None and k == "node" and "step" in e:
            fields.append(("node", clock.node(v)))
        else:
            fields.append((str(k), _words(v)))
        if clock is not None and k == "op" and isinstance(v, int) and v in clock.op_s and type_.startswith("lost"):
            fields.append(("acknowledged at", f"{clock.op_s[v]:.3f} s"))
    return {"fields": fields, "ops": example_ops(e)[:12]}


def _anomalies(result: dict[str, Any], clock: Clock | None = None) -> list[dict[str, Any]]:
    rows = []
    anomalies = result.get("anomalies") or {}
    types = list(result.get("anomaly_types") or []) + [t for t in anomalies if t not in (result.get("anomaly_types") or [])]
    counts = anomaly_counts(result)
    bad, allowed = _type_sets(result)
    for t in types:
        ex = anomalies.get(t, [])
        if isinstance(ex, dict):
            count = ex.get("count", len(ex))
            ex = ex.get("examples", [ex])
        elif isinstance(ex, list):
            count = len(ex)
        else:
            count, ex = 1, [ex]
        if isinstance(counts.get(t), int):
            count = max(count, counts[t])
        ex = list(ex)
        shown = ex[:MAX_EXAMPLES]
        rows.append({"type": str(t), "about": describe(str(t)), "count": count,
                     "bad": True if t in bad else (False if t in allowed else None),
                     "examples": [_example(e, str(t), clock) for e in shown],
                     "more": max(0, count - len(shown)) if isinstance(count, int) else 0,
                     "kept": len(ex)})
    rows.sort(key=lambda r: r["bad"] is not True)
    return rows


def _type_sets(result: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(types that fail the run, types allowed) as the checkers name them;
    a type in neither (e.g. a simulator run's checker that only counts) is
    left unmarked rather than guessed."""
    bad = {str(t) for t in (result.get("bad_anomaly_types") or [])}
    allowed: set[str] = set()
    for c in (result.get("checkers") or {}).values():
        if isinstance(c, dict):
            bad.update(str(t) for t in (c.get("bad_anomaly_types") or []))
            allowed.update(str(t) for t in (c.get("allowed_anomaly_types") or []))
            if c.get("valid") is False and not c.get("bad_anomaly_types") and isinstance(c.get("counts"), dict):
                bad.update(str(t) for t, n in c["counts"].items() if n)
    return bad, allowed - bad


def _reasons(result: dict[str, Any]) -> list[str]:
    """One line per reason the verdict is what it is, for the top of the page
    (results.json's ``cause`` first)."""
    valid = result.get("valid")
    out: list[str] = [f"cause: {_short(result['cause'])}"] if result.get("cause") else []
    mentioned: set[str] = set()
    checkers = {k: c for k, c in (result.get("checkers") or {}).items() if isinstance(c, dict)}
    if valid is False:
        for name, c in checkers.items():
            if c.get("valid") is False:
                types = [str(t) for t in (c.get("bad_anomaly_types") or [])] or \
                        [str(t) for t, n in (c.get("counts") or {}).items() if n]
                mentioned.update(types)
                out.append(f"{name} checker: " + (", ".join(types) if types else "invalid"))
        d = (result.get("durability") or {}).get("acks=all")
        if isinstance(d, dict) and d.get("lost"):
            out.insert(0, f"{d['lost']} of {d.get('acked')} acknowledged acks=all writes lost "
                          f"(rate {_pct(d.get('lost_rate'))})")
            mentioned.update({"lost-acked-write", "lost-write", "unseen"})
        _, allowed = _type_sets(result)
        rest = [str(t) for t in (result.get("anomaly_types") or []) if str(t) not in mentioned | allowed]
        if rest:
            out.append("anomalies: " + ", ".join(rest))
        if not out:
            out.append("see the anomalies below")
    elif valid is True:
        d = (result.get("durability") or {}).get("acks=all")
        if isinstance(d, dict) and d.get("acked"):
            out.append(f"none of the {d['acked']} acknowledged acks=all writes was lost")
        types = [str(t) for t in (result.get("anomaly_types") or [])]
        out.append("anomalies found, all allowed: " + ", ".join(types) if types else "no anomalies found")
    else:
        for name, c in checkers.items():
            if c.get("valid") not in (True, False):
                why = c.get("cause") or c.get("cycle_search") or ""
                if name == "final-reads":
                    keys = c.get("incomplete_keys") or list((c.get("unverified_acked_writes") or {}).keys())
                    why = f"no completed final read of {_short(keys)}"
                out.append(f"{name} checker could not decide" + (f": {_short(why)}" if why else ""))
        if not out:
            out.append("no checker result" if not result.get("anomaly_types") else "the checkers could not decide")
    return out


def _pct(x: Any) -> str:
    return f"{x:.3%}" if isinstance(x, (int, float)) and not isinstance(x, bool) else ("—" if x is None else str(x))


def _durability(result: dict[str, Any], clock: Clock | None = None) -> list[dict[str, Any]]:
    """One row per acks level; levels with nothing sent are listed last."""
    rows = []
    for mode, d in sorted((result.get("durability") or {}).items()):
        if not isinstance(d, dict):
            continue
        ci = d.get("lost_rate_ci95")
        delay = d.get("visibility_delay_ms") if isinstance(d.get("visibility_delay_ms"), dict) else {}
        rows.append({
            "mode": str(mode),
            "sent": d.get("sent", "—"),
            "acked": d.get("acked"),
            "indeterminate": d.get("indeterminate", "—"),
            "lost": d.get("lost"),
            "lost_rate": _pct(d.get("lost_rate")),
            "ci": f"{_pct(ci[0])} – {_pct(ci[1])}" if isinstance(ci, list) and len(ci) == 2 else "",
            "failed_visible": d.get("failed_visible", "—"),
            "unacked_visible": d.get("unacked_visible", "—"),
            "delay": (f"p50 {delay.get('p50', 0) / 1000:.3f} / p99 {delay.get('p99', 0) / 1000:.3f} / "
                      f"max {delay.get('max', 0) / 1000:.3f}" if delay.get("count") else "—"),
            "bad": bool(d.get("lost")),
            "empty": not d.get("sent") and not d.get("acked"),
            "examples": [_example(e, "lost", clock) for e in (d.get("lost_examples") or [])[:MAX_EXAMPLES]],
            "more": max(0, d["lost"] - min(MAX_EXAMPLES, len(d.get("lost_examples") or [])))
            if isinstance(d.get("lost"), int) else 0,
        })
    # acks=all first (its losses decide the verdict), then weaker levels; unused levels last
    rows.sort(key=lambda r: (r["empty"], r["mode"] != "acks=all", r["mode"]))
    return rows


def _logs(run_dir: Path) -> list[str]:
    nodes = run_dir / "nodes"
    if not nodes.is_dir():
        return []
    # node logs and traces, not the data files (Kafka segments are *.log too)
    found = [p for p in nodes.glob("*") if p.is_file()] + [p for p in nodes.glob("*/*") if p.is_file()]
    return sorted(str(p.relative_to(run_dir)) for p in found if p.suffix in (".log", ".jsonl", ".json"))


def render_report(run_dir: str | Path, plots: bool = True) -> Path:
    """index.html, timeline.html and every plot of a run directory; with
    ``plots`` off a summary page (the story, the tables, the timeline, no
    plot), which ``kraftwerk serve`` replaces by the whole report on first
    view (its version mark says it is a summary).

    The cyclic collector is off meanwhile (as for a simulator run): a large
    history is millions of live objects, and each collection the report's
    own allocations set off walked all of them."""
    was = gc.isenabled()
    gc.disable()
    try:
        return _render(Path(run_dir), plots)
    finally:
        if was:
            gc.enable()


def render_summary_quietly(run_dir: str | Path) -> str | None:
    """The summary page of a run, best effort (a batch of seeds writes one
    per run): the error in one line, or None."""
    try:
        render_report(run_dir, plots=False)
    except Exception as e:  # noqa: BLE001 - the run's verdict is on disk already
        return f"{type(e).__name__}: {e}"
    return None


def _render(run_dir: Path, plots: bool) -> Path:
    warnings: list[str] = []
    ops = read_jsonl(run_dir / store.HISTORY, warnings)
    test = store.read_json(run_dir / store.TEST) if (run_dir / store.TEST).exists() else {}
    result = store.read_json(run_dir / store.RESULTS) if (run_dir / store.RESULTS).exists() else {"valid": "unknown"}
    differs = resolution_differs(test.get("schedule"))
    if differs:  # a replay that met another cluster state than its recording
        warnings.append(differs_line(differs))
    intervals = fault_intervals(ops)
    view = traces(run_dir, ops, test, warnings)
    bad, _ = _type_sets(result)
    figures = draw_all(run_dir, ops, test, result, intervals, warnings, view, bad) if plots else \
        undrawn(result, ops, view, warnings, bad)
    typed = _as_typed(run_dir)
    story = _try_story(result, test, ops, intervals, view, typed, bad, warnings)
    label, css = _verdict(result.get("valid"))
    name = test.get("name") or (test.get("options") or {}).get("test_name") or run_dir.parent.name
    title = f"{_campaign_cell(run_dir) or name} — {run_dir.name}"
    clock = Clock(ops, view)
    anomalies = _anomalies(result, clock)
    durability = _durability(result, clock)
    focus = [i for a in anomalies for e in a["examples"] for i in e["ops"]]
    focus += [i for d in durability for e in d["examples"] for i in e["ops"]]
    focus += [s["from"] for c in figures["cycles"] for s in c["steps"] if isinstance(s["from"], int)]
    timeline = render_timeline(run_dir, ops, intervals, focus, title=title, verdict=(label, css))
    files = [f for f in ("history.jsonl", "history.edn", "results.json", "test.json", "nemesis.jsonl", "summary.json")
             if (run_dir / f).exists()]
    checkers = {str(k): table(_without(c, ("anomalies", "examples"))) for k, c in (result.get("checkers") or {}).items()}
    html = _env.get_template("index.html.j2").render(
        title=title,
        verdict=label,
        verdict_class=css,
        reasons=_reasons(result),
        # which anomaly types the verdict allowed (checkers/queue/readings.py)
        reading=result.get("reading"),
        timeline=timeline.name,
        summary=_summary(ops, intervals),
        error=result.get("error"),
        config=table(test, limit=120),
        anomalies=anomalies,
        durability=durability,
        stats=table(result.get("stats") or {}),
        checkers=checkers,
        intervals=[
            {"kind": iv.kind, "name": iv.name, "colour": iv.colour, "start": f"{iv.start:.3f}",
             "stop": "" if iv.skipped else ("end" if iv.stop is None else f"{iv.stop:.3f}"),
             "skipped": iv.skipped, "targets": iv.targets}
            for iv in intervals[:MAX_INTERVALS]
        ],
        fault_legend=legend(intervals),
        availability=availability_section(result),
        intervals_more=max(0, len(intervals) - MAX_INTERVALS),
        files=files,
        logs=_logs(run_dir),
        warnings=list(result.get("warnings") or [])[:20] + warnings[:20],
        fig=figures,
        ops_total=len(ops),
        report_version=REPORT_VERSION if plots else SUMMARY_VERSION,
        story=story,
        run_dir=str(typed),
        failing=_failing(result),
    )
    out = run_dir / store.INDEX
    out.write_text(html, encoding="utf-8")
    return out


def _as_typed(run_dir: Path) -> Path:
    """The run directory as a person in the current directory types it:
    relative when it lies below it (``results/queue/...``), else as given."""
    try:
        return run_dir.resolve().relative_to(Path.cwd().resolve())
    except (ValueError, OSError):
        return run_dir


def _campaign_cell(run_dir: Path) -> str | None:
    """``campaign NAME · k=v, ...`` for a run of a campaign's cell (its
    directory under the campaign's, campaign.json two levels up), so the
    page is named by the cell's parameters, not its directory."""
    try:
        camp = json.loads((run_dir.parent.parent / "campaign.json").read_text(encoding="utf-8"))
        for c in camp.get("cells") or []:
            dirs = {str(r).split("/", 1)[0] for r in c.get("run_dirs") or []}
            if c.get("test_name") == run_dir.parent.name or dirs == {run_dir.parent.name}:
                params = ", ".join(f"{k}={v}" for k, v in (c.get("params") or {}).items())
                return f"campaign {camp.get('name')} · {params or c.get('id')}"
    except (OSError, ValueError, AttributeError, TypeError):
        pass
    return None


def _try_story(result: dict[str, Any], test: dict[str, Any], ops: list[Any], intervals: list[Any],
               view: Any, run_dir: Path, bad: set[str], warnings: list[str]) -> list[Any]:
    """The story of the failure; a malformed input is a warning, never a
    missing page."""
    try:
        return build_story(result, test, ops, intervals, view, run_dir, bad)
    except Exception as e:  # noqa: BLE001 - reported on the page, the rest still renders
        warnings.append(f"story: {type(e).__name__}: {e}")
        return []


def _failing(result: dict[str, Any]) -> str:
    """The checkers that failed and their anomaly types, on one line."""
    parts = []
    for name, c in (result.get("checkers") or {}).items():
        if isinstance(c, dict) and c.get("valid") is False:
            types = [str(t) for t in (c.get("bad_anomaly_types") or [])] or \
                    [str(t) for t, n in (c.get("counts") or {}).items() if n]
            parts.append(f"{name} ({', '.join(types)})" if types else str(name))
    return "; ".join(parts)


def _without(obj: Any, keys: tuple[str, ...]) -> Any:
    """A checker's output less its examples (the anomaly table shows those)."""
    return {k: v for k, v in obj.items() if k not in keys} if isinstance(obj, dict) else obj


def _summary(ops: list[Any], intervals: list[Any]) -> str:
    clients = [o for o in ops if o.process != "nemesis" and o.type != "invoke"]
    by = {t: sum(1 for o in clients if o.type == t) for t in ("ok", "fail", "info")}
    end = max((o.time for o in ops), default=0) / 1e9
    n = sum(1 for iv in intervals if not iv.skipped)
    skipped = len(intervals) - n
    return (f"{len(clients)} client operations over {end:.1f} s ({by['ok']} ok, {by['fail']} fail, "
            f"{by['info']} indeterminate); {n} fault interval{'' if n == 1 else 's'}"
            + (f", {skipped} fault{'' if skipped == 1 else 's'} skipped" if skipped else ""))


def render_timeline(run_dir: str | Path, ops: list[Any], intervals: list[Any], focus: list[int],
                    title: str = "", verdict: tuple[str, str] = ("", "")) -> Path:
    """timeline.html for a run directory; ``focus`` are anomaly example op
    indices, which get a window of context when the history is long."""
    ctx = timeline_context(ops, intervals, focus)
    out = Path(run_dir) / "timeline.html"
    out.write_text(_env.get_template("timeline.html.j2").render(
        title=title, verdict=verdict[0], verdict_class=verdict[1], **ctx), encoding="utf-8")
    return out
