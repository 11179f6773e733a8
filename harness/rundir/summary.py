"""``summary.json``: the few facts about a run that an index of thousands of
runs shows (name, start, duration, db, backend, nemesis, verdict, acks=all
writes acknowledged and lost, anomaly types).

A run writes it when its verdict is known (both runtimes call
:func:`write_summary` after results.json); ``kraftwerk serve`` builds it on
first sight for runs made before it existed (:func:`load_summary`), so the
index reads one small file per run instead of test.json and results.json
(a 1M-op run's results.json is megabytes of checker detail). A summary older
than its run's results.json (a re-check) is rebuilt.

Only the standard library is imported here: the simulator's worker
processes call it after every seed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

SUMMARY = "summary.json"
#: bumped when a field is added or changes meaning; older files are rebuilt
FORMAT = 2


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _started(run_dir: Path, test: dict[str, Any]) -> str:
    """ISO-8601 UTC start: test.json's ``started``, else the directory name's
    ``YYYYmmddTHHMMSS`` stamp (the store names runs so), else its mtime."""
    s = test.get("started")
    if isinstance(s, str) and s:
        return s
    stamp = run_dir.name.split("-", 1)[0]
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.strptime(stamp, "%Y%m%dT%H%M%S"))
    except ValueError:
        try:
            return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(run_dir.stat().st_mtime))
        except OSError:
            return ""


def _shape(test: dict[str, Any]) -> dict[str, Any]:
    """Name, runtime, db, backend, nemesis and seed from either runtime's
    test.json (the simulator nests its options under ``options``)."""
    if test.get("kraftwerk") == "sim":
        o = test.get("options") if isinstance(test.get("options"), dict) else {}
        return {"name": o.get("test_name", "sim"), "runtime": "sim", "db": "reference", "backend": "sim",
                "nemesis": list(o.get("nemesis") or []), "seed": test.get("seed"),
                "acks": o.get("acks"), "variants": o.get("variants") or {}}
    return {"name": test.get("name"), "runtime": test.get("runtime", "local"), "db": test.get("db"),
            "backend": test.get("backend"),
            "nemesis": list(test.get("nemesis") or []) + ([f"scenario:{test['scenario']}"] if test.get("scenario") else []),
            "seed": test.get("seed"), "acks": test.get("acks"), "variants": test.get("variants") or {}}


def build_summary(run_dir: str | Path) -> dict[str, Any]:
    """The summary of one run directory, from test.json and results.json
    (either may be missing: a run still going, or one that failed early)."""
    run_dir = Path(run_dir)
    test = _read(run_dir / "test.json")
    test = test if isinstance(test, dict) else {}
    res = _read(run_dir / "results.json")
    res = res if isinstance(res, dict) else None
    shape = _shape(test)
    out: dict[str, Any] = {"format": FORMAT, **shape,
                           "name": str(shape.get("name") or run_dir.parent.name),
                           "started": _started(run_dir, test)}
    if res is None:
        out.update(valid=None, state="running" if not (run_dir / "error.txt").exists() else "error")
        return out
    stats = res.get("stats") if isinstance(res.get("stats"), dict) else {}
    durability: dict[str, Any] = {}
    for mode, d in (res.get("durability") or {}).items():
        if isinstance(d, dict) and (d.get("sent") or d.get("acked")):
            durability[str(mode)] = {k: d.get(k) for k in ("sent", "acked", "lost", "lost_rate")}
    differs = resolution_differs(test.get("schedule"))
    if differs:
        out["resolution_differs"] = differs
    out.update(
        state="done",
        valid=res.get("valid"),
        duration_s=stats.get("duration_s"),
        wall_s=stats.get("wall_s"),
        ops=stats.get("ops"),
        durability=durability,
        anomaly_types=[str(t) for t in (res.get("anomaly_types") or [])],
        error=str(res["error"])[:300] if res.get("error") else None,
    )
    return out


def resolution_differs(schedule: Any) -> list[dict[str, Any]]:
    """The replayed starts whose state-named target (a leader, the
    controller, an ISR state, a scripted scenario's roles) named other
    nodes than the recorded run's (``recorded_nodes``, or a scenario's
    ``recorded_cut``; ``nemesis.faults.Fault.replay``), and the
    decommissions whose recorded moves did not fit the replicas as they
    were (``recorded_moves``): where a replay on real processes met
    another cluster state than the recording."""
    out = []
    for e in schedule if isinstance(schedule, list) else ():
        if isinstance(e, dict) and isinstance(e.get("recorded_nodes"), list):
            out.append({"at_ms": e.get("at_ms"), "fault": e.get("fault"), "recorded": e["recorded_nodes"],
                        "now": e.get("isolated", e.get("nodes", []))})
        elif isinstance(e, dict) and isinstance(e.get("recorded_moves"), dict):  # a decommission planned again
            out.append({"at_ms": e.get("at_ms"), "fault": e.get("fault"), "recorded": _moves(e["recorded_moves"]),
                        "now": _moves(e.get("moves") or {})})
        elif isinstance(e, dict) and isinstance(e.get("recorded_cut"), list):  # a scenario's cut, renamed by role
            out.append({"at_ms": e.get("at_ms"), "fault": e.get("fault"), "recorded": _links(e["recorded_cut"]),
                        "now": _links(e.get("cut") or [])})
    return out


def _moves(moves: Any) -> list[str]:
    """A decommission's moves, each as ``key>replicas`` (``t0-1>n2/n3/n1``)."""
    return [f"{k}>{'/'.join(map(str, v))}" for k, v in sorted(moves.items()) if isinstance(v, list)] \
        if isinstance(moves, dict) else []


def _links(cut: list[Any]) -> list[str]:
    """A cut's links, each once, as ``a-b`` (``a`` before ``b``)."""
    return sorted({"-".join(sorted(map(str, pair))) for pair in cut if isinstance(pair, (list, tuple))})


def differs_line(differs: list[dict[str, Any]]) -> str:
    """One line for a run's output: which targets resolved otherwise."""
    each = "; ".join(f"{d['fault']} at {int(d['at_ms'] or 0) / 1000:.1f}s: recorded {','.join(d['recorded']) or '-'}"
                     f", now {','.join(d['now']) or '-'}" for d in differs[:4])
    more = f" (+{len(differs) - 4} more)" if len(differs) > 4 else ""
    return f"replay: {len(differs)} target(s) resolved differently from the recording: {each}{more}"


def write_summary(run_dir: str | Path) -> dict[str, Any]:
    """Build and write ``summary.json`` (atomically); returns it."""
    run_dir = Path(run_dir)
    s = build_summary(run_dir)
    tmp = run_dir / f".{SUMMARY}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(s, sort_keys=True, default=str), encoding="utf-8")
    os.replace(tmp, run_dir / SUMMARY)
    return s


def load_summary(run_dir: str | Path) -> dict[str, Any]:
    """The stored summary if it is current, else a fresh one, written back
    when the directory allows (a read-only results store still gets its
    index, built in memory)."""
    run_dir = Path(run_dir)
    path = run_dir / SUMMARY
    s = _read(path)
    if isinstance(s, dict) and s.get("format") == FORMAT and s.get("state") == "done":
        try:
            if path.stat().st_mtime >= (run_dir / "results.json").stat().st_mtime:
                return s
        except OSError:
            pass
    if not (run_dir / "results.json").exists():
        return build_summary(run_dir)  # not final yet: never cached
    try:
        return write_summary(run_dir)
    except OSError:
        return build_summary(run_dir)
