"""Run the checkers on a run directory and write results.json.

The checkers (``checkers.check.check_history``) own the verdict; this module
only loads the history, calls them with what the run knows, adds the harness's
own statistics, and makes sure a results.json exists even when a checker fails
(then ``valid: "unknown"`` with the reason — never a silent pass).
"""

from __future__ import annotations

import importlib
import inspect
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from checkers.history.jsonl import read_jsonl
from checkers.history.op import Op
from harness import store


def history_stats(ops: list[Op]) -> dict[str, Any]:
    """Counts the report shows next to the checkers' verdict."""
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


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Pass only the keyword arguments the checker accepts."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(*args, **kwargs)
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return fn(*args, **kwargs)
    return fn(*args, **{k: v for k, v in kwargs.items() if k in params})


def check_run(run_dir: Path, engine: str = "python", test: dict[str, Any] | None = None) -> dict[str, Any]:
    run_dir = Path(run_dir)
    warnings: list[str] = []
    ops = read_jsonl(run_dir / store.HISTORY, warnings)
    if test is None and (run_dir / store.TEST).exists():
        test = store.read_json(run_dir / store.TEST)
    stats = history_stats(ops)
    try:
        mod = importlib.import_module("checkers.check")
        result = _call(
            mod.check_history,
            ops,
            model="queue",
            engine=engine,
            test=test,
            run_dir=run_dir,
            nodes_dir=run_dir / "nodes",
        )
        if not isinstance(result, dict):
            raise TypeError(f"check_history returned {type(result).__name__}")
    except ModuleNotFoundError as e:
        result = _unknown(f"checker not available ({e.name})")
    except Exception as e:  # a checker crash is an unknown verdict, with the reason
        result = _unknown(f"checker failed: {type(e).__name__}: {e}")
        result["checkers"]["harness"] = {"traceback": traceback.format_exc()[-4000:]}
    result.setdefault("valid", "unknown")
    result.setdefault("anomaly_types", [])
    result.setdefault("anomalies", {})
    result.setdefault("durability", {})
    result.setdefault("checkers", {})
    result["stats"] = {**stats, **(result.get("stats") or {})}
    fr = final_read_coverage(ops, (test or {}).get("keys"))
    if fr is not None:
        result["checkers"]["final-reads"] = fr
        if fr["valid"] != True and result.get("valid") is True:  # noqa: E712
            # nothing lost among what could be read, but some keys could not
            # be read at all: their acknowledged writes are unverified
            result["valid"] = "unknown"
    if warnings:
        result.setdefault("warnings", []).extend(warnings)
    store.write_json(run_dir / store.RESULTS, result)
    return result


def final_read_coverage(ops: list[Op], keys: list[str] | None = None) -> dict[str, Any] | None:
    """Did every key get a complete final read (an ``ok`` poll with
    ``final: true``)? A key without one is *unverified*: the durability
    checker cannot tell lost from unreadable there. None if the history has
    no final reads at all (e.g. a partial history)."""
    invoked: set[str] = set()
    complete: set[str] = set()
    for op in ops:
        if op.f != "poll" or not op.extra.get("final"):
            continue
        key = op.extra.get("key")
        if key is None:
            continue
        if op.type == "invoke":
            invoked.add(str(key))
        elif op.type == "ok":
            complete.add(str(key))
    if not invoked:
        return None
    wanted = set(keys) if keys else invoked
    missing = sorted(wanted - complete)
    return {
        "valid": True if not missing else "unknown",
        "keys": len(wanted),
        "complete": len(wanted & complete),
        "incomplete_keys": missing,
        "rule": "every key needs a complete final read before its acknowledged writes count as verified",
    }


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
