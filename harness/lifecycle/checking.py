"""Run the checkers on a run directory and write results.json.

The checkers (``checkers.check.check_history``) own the verdict — including
which keys a final read covered (:mod:`checkers.final_reads`), so a real run
and a simulated one are judged by the same code; this module only loads the
history, calls them with what the run knows (test.json: sub_via, txn,
strict_acks1, keys), adds the availability checker over the run directory
(``checkers.availability``: liveness after the final heal, the evidence
table), adds the harness's own statistics, and makes sure a results.json
exists even when a checker fails (then ``valid: "unknown"`` with the reason
as its ``cause`` — never a silent pass).
"""

from __future__ import annotations

import importlib
import json
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import reference_impl  # noqa: F401  its compiled line reader, when built (reference_impl.accel)
from checkers.availability import check_run_dir, merge_availability, set_cause
from checkers.check import check_history, trace_invariants
from checkers.history.jsonl import read_jsonl
from checkers.history.op import Op
from checkers.queue.scan import MalformedOp, scan_jsonl
from harness.rundir import store


def history_stats(ops: list[Op]) -> dict[str, Any]:
    """Counts the report shows next to the checkers' verdict (of a list of
    operations; a scanned history has them from
    :class:`checkers.queue.scan.ClientStats`)."""
    by: Counter[str] = Counter()
    acks: Counter[str] = Counter()
    for op in ops:
        if op.process == "nemesis" or op.type == "invoke":
            continue
        by[f"{op.f}:{op.type}"] += 1
        if op.f == "send":
            acks[f"acks={op.extra.get('acks', '?')}:{op.type}"] += 1
    return {
        "ops": sum(1 for o in ops if o.type == "invoke"),
        "history_length": len(ops),
        "by_f_type": dict(sorted(by.items())),
        "sends_by_acks": dict(sorted(acks.items())),
        "nemesis_ops": sum(1 for o in ops if o.process == "nemesis") // 2,
    }


def _read(run_dir: Path, warnings: list[str]) -> tuple[Any, dict[str, Any]]:
    """The history scanned into columns (:func:`checkers.queue.scan.scan_jsonl`,
    the path ``kraftwerk check`` takes) and the statistics above, from the
    same pass. A history whose values the queue checker cannot use is read
    as operations instead, so the checker's own error is reported below as
    before."""
    try:
        scan = scan_jsonl(run_dir / store.HISTORY, warnings)
    except MalformedOp:
        warnings.clear()
        ops = read_jsonl(run_dir / store.HISTORY, warnings)
        return ops, history_stats(ops)
    return scan, scan.clients.result(scan.stats)


def check_run(run_dir: Path, engine: str = "inline", test: dict[str, Any] | None = None) -> dict[str, Any]:
    run_dir = Path(run_dir)
    warnings: list[str] = []
    ops, stats = _read(run_dir, warnings)
    if test is None and (run_dir / store.TEST).exists():
        test = store.read_json(run_dir / store.TEST)
    try:
        result = check_history(ops, model="queue", engine=engine, test=test,
                               invariants=trace_invariants(run_dir, test))
        merge_availability(result, check_run_dir(run_dir, test))
    except Exception as e:  # a checker crash is an unknown verdict, with the reason
        result = _unknown(f"checker failed: {type(e).__name__}: {e}")
        result["checkers"]["harness"] = {"traceback": traceback.format_exc()[-4000:]}
    result.setdefault("valid", "unknown")
    result.setdefault("anomaly_types", [])
    result.setdefault("anomalies", {})
    result.setdefault("durability", {})
    result.setdefault("checkers", {})
    result["stats"] = {**stats, **(result.get("stats") or {})}
    faults = node_faults(run_dir)
    if faults:
        result["node_faults"] = faults
        warnings += [f"node {f['node']}: log directory failed ({f['error']}); it halted, as Kafka's broker does"
                     for f in faults]
    if warnings:
        result.setdefault("warnings", []).extend(warnings)
    set_cause(result)
    store.write_json(run_dir / store.RESULTS, result)
    return result


def node_faults(run_dir: Path) -> list[dict[str, Any]]:
    """Faults of the nodes' own machines seen in their traces: a log directory
    that failed (disk full, I/O error) makes the node halt, which the history
    shows only as unavailability; the result names it."""
    out: list[dict[str, Any]] = []
    for trace in sorted(Path(run_dir).glob("nodes/*/trace.jsonl")):
        try:
            with open(trace, "rb") as f:
                for line in f:
                    if b'"log_dir_failure"' not in line:
                        continue
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    out.append({"node": trace.parent.name, "t": ev.get("t"), "error": ev.get("error"),
                                "errno": ev.get("errno"), "dir": ev.get("dir")})
        except OSError:
            continue
    return out


def _unknown(reason: str) -> dict[str, Any]:
    return {
        "valid": "unknown",
        "anomaly_types": [],
        "anomalies": {},
        "durability": {},
        "checkers": {},
        "error": reason,
    }


def export_edn(run_dir: Path) -> bool:
    """history.edn for Jepsen's tools, when the EDN writer exists."""
    try:
        mod = importlib.import_module("checkers.history.edn")
    except ModuleNotFoundError:
        return False
    ops = read_jsonl(Path(run_dir) / store.HISTORY)
    try:
        mod.write_edn(Path(run_dir) / "history.edn", ops)
    except Exception:
        return False
    return True
