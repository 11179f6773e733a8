"""The availability checker over a run directory (real runs, ``kraftwerk
check``): the history, the traces, and what the harness wrote beside them.

* ``clock.json``: the wall clock at the history's time 0 (real runs: the
  traces and logs are on the wall clock); absent in the simulator, whose
  traces and history share virtual time;
* ``final-state.json``: the harness's snapshot after the final reads (which
  nodes run, the quorum leader, each broker's registration, a Metadata
  request's partitions and unfenced brokers), by node name;
* test.json's ``liveness`` (the policy) and ``liveness_bound``.

The state a cause is read from is the partitions' committed metadata from
the traces at the moment the bound ran out (the controllers', or Kafka's
observer's), else the snapshot's Metadata; the brokers' and the quorum's
from the snapshot, the controllers' fencing records where traced.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .bound import LivenessBound
from .cause import BrokerState, FinalState
from .checker import check_availability
from .facts import HistoryFacts
from .gather import facts_of_jsonl
from .leaders import PartitionState, Timeline, read_timeline

CLOCK = "clock.json"
FINAL_STATE = "final-state.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def trace_offset_ms(run_dir: Path) -> float:
    """The traces' clock at history time 0 (0: one clock, the simulator's)."""
    v = _read(run_dir / CLOCK).get("history_zero_unix_ms")
    return float(v) if isinstance(v, (int, float)) else 0.0


def state_from_snapshot(snap: dict[str, Any], timeline: Timeline | None, at_ns: int | None) -> FinalState | None:
    """The cluster's state for the cause: partitions from the traces at
    ``at_ns`` where traced, else from the snapshot's Metadata; brokers and
    quorum from the snapshot (module docstring). None without either."""
    ids: dict[str, int] = {str(k): int(v) for k, v in (snap.get("ids") or {}).items()}
    names = {i: n for n, i in ids.items()}
    if not snap and timeline is None:
        return None
    fs = FinalState(rules=dict(snap.get("rules") or {}), min_isr=int(snap.get("min_isr") or 1),
                    source="final-state.json" if snap else "traces")
    fs.t_ns = at_ns
    md = snap.get("metadata") or {}
    for key, p in (md.get("partitions") or {}).items():
        fs.partitions[key] = PartitionState(int(p.get("leader", -1)), [int(x) for x in p.get("isr") or []],
                                            replicas=[int(x) for x in p.get("replicas") or []])
    if timeline is not None and at_ns is not None:
        for key in timeline.partitions:
            st = timeline.state_at(key, at_ns)
            if st is not None:
                fs.partitions[key] = st
        fs.source = (fs.source + " and traces").strip()
    _brokers(fs, snap, names, timeline, at_ns)
    if "active_controller" in snap:
        fs.quorum_leader = snap["active_controller"]
    if "dead" in snap:
        dead, paused = set(snap.get("dead") or []), set(snap.get("paused") or [])
        fs.controllers = {n: "down" if n in dead else "paused" if n in paused else "running"
                          for n in snap.get("controllers") or []}
    return fs


def _brokers(fs: FinalState, snap: dict[str, Any], names: dict[int, str], timeline: Timeline | None,
             at_ns: int | None) -> None:
    dead, paused = set(snap.get("dead") or []), set(snap.get("paused") or [])
    epochs = snap.get("broker_epochs") or {}
    listed = (snap.get("metadata") or {}).get("brokers")
    fenced = timeline.fenced_at(at_ns if at_ns is not None else 1 << 62) if timeline is not None else {}
    for name in snap.get("brokers") or []:
        if name not in {n for n in names.values()}:
            continue
        bid = next(i for i, n in names.items() if n == name)
        st = BrokerState(name)
        if "dead" in snap:
            st.running = name not in dead and name not in paused
        if name in epochs:
            st.registered = epochs[name] is not None
        if bid in fenced:
            st.fenced = fenced[bid] != "unfenced"
        elif isinstance(listed, list) and st.registered:
            st.fenced = bid not in listed  # Metadata lists the unfenced brokers
        fs.brokers[bid] = st


def check_run_dir(run_dir: str | Path, test: dict[str, Any] | None = None,
                  facts: HistoryFacts | None = None) -> dict[str, Any]:
    """:func:`checkers.availability.check_availability` over a run
    directory (module docstring)."""
    run_dir = Path(run_dir)
    test = test if test is not None else _read(run_dir / "test.json")
    if facts is None:
        facts = facts_of_jsonl(run_dir / "history.jsonl")
    timeline = read_timeline(run_dir, trace_offset_ms(run_dir)) if (run_dir / "nodes").is_dir() else None
    if timeline is not None and not timeline.files:
        timeline = None
    bound = LivenessBound.from_dict(test["liveness_bound"]) if isinstance(test.get("liveness_bound"), dict) else None
    heal = facts.heal_ns
    at = heal + bound.total_ms * 1_000_000 if heal is not None and bound is not None else None
    snap = _read(run_dir / FINAL_STATE)
    state = state_from_snapshot(snap, timeline, at if at is not None else facts.end_ns)
    keys = [str(k) for k in test.get("keys") or []]
    return check_availability(facts, keys, bound=bound, timeline=timeline, state=state,
                              policy=str(test.get("liveness") or "auto"))
