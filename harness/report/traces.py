"""What the run page plots from the glass box: the nodes' trace events
(``nodes/<node>/trace.jsonl``, docs/architecture.md "Trace events") read
into time series on the history's clock.

- HW and LEO per replica and partition (``hw``, ``append``, ``truncate``,
  ``loaded``), thinned while reading to the first, lowest, highest and last
  value per time bucket, so a truncation's dip survives and a 1M-op run's
  millions of events become a few thousand points;
- truncations, with the offset they cut to;
- each partition's leader and ISR as the controllers committed them
  (``partition_metadata``, one entry per partition epoch), or as the leaders
  saw them (``become_leader``, ``isr``) where no controller traced;
- elections (``election``, with their kind) and broker fencing.

Clocks: the simulator's trace ``t`` and its history share virtual time. A
real run's trace ``t`` is the host's wall clock while its history counts
from the generator's start; the offset between them is taken from the first
produce a broker answered and the first send the history saw acknowledged
(a few milliseconds early at most: the answer still had to reach the client).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from checkers.history.op import Op

BUCKETS = 1500
#: kinds read; ``produce`` (a third of a run's lines) is skipped unparsed
KINDS = frozenset({"hw", "append", "truncate", "loaded", "partition_metadata", "election", "broker_fenced",
                   "broker_unfenced", "become_leader", "isr", "node_start", "node_stop", "node_crash"})


class Series:
    """A step series thinned per bucket to (first, min, max, last)."""

    __slots__ = ("width", "bucket", "acc", "points")

    def __init__(self, width: float) -> None:
        self.width = width
        self.bucket = -1
        self.acc: list[tuple[float, float]] = []
        self.points: list[tuple[float, float]] = []

    def add(self, t: float, v: float) -> None:
        b = int(t / self.width)
        if b != self.bucket:
            self._flush()
            self.bucket = b
        self.acc.append((t, v))
        if len(self.acc) > 64:  # keep first, min, max, last as we go
            self.acc = _extremes(self.acc)

    def _flush(self) -> None:
        if self.acc:
            self.points.extend(_extremes(self.acc))
            self.acc = []

    def done(self) -> list[tuple[float, float]]:
        self._flush()
        return self.points


def _extremes(acc: list[tuple[float, float]]) -> list[tuple[float, float]]:
    lo = min(acc, key=lambda p: p[1])
    hi = max(acc, key=lambda p: p[1])
    keep = {id(acc[0]): acc[0], id(lo): lo, id(hi): hi, id(acc[-1]): acc[-1]}
    return sorted(keep.values(), key=lambda p: p[0])


@dataclass
class TraceView:
    offset_ms: float = 0.0
    files: int = 0
    events: int = 0
    hw: dict[tuple[str, Any], list[tuple[float, float]]] = field(default_factory=dict)
    leo: dict[tuple[str, Any], list[tuple[float, float]]] = field(default_factory=dict)
    truncations: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    elections: list[dict[str, Any]] = field(default_factory=list)
    fencing: list[dict[str, Any]] = field(default_factory=list)
    lifecycle: list[dict[str, Any]] = field(default_factory=list)
    #: every ``become_leader``: t, tp, node (its name), leader_epoch, leo, hw, isr
    leaders: list[dict[str, Any]] = field(default_factory=list)
    #: a trace's node id -> the node's name (its directory: ``n1``, ``c1``)
    names: dict[Any, str] = field(default_factory=dict)
    bad_lines: int = 0

    def name(self, node: Any) -> str:
        """A node as the fault records and the page say it (``n1``)."""
        return self.names.get(node, str(node))

    @property
    def partitions(self) -> list[str]:
        tps = {tp for tp, _ in self.hw} | {tp for tp, _ in self.leo} | set(self.meta)
        return sorted(tps, key=_tp_order)


def _tp_order(tp: str) -> tuple[str, int]:
    topic, _, p = tp.rpartition("-")
    return (topic, int(p)) if p.isdigit() else (tp, 0)


def _first(seen: dict[Any, dict[str, Any]], key: Any, t: float) -> bool:
    """True if ``key`` is new; a known one seen earlier now only moves back
    to ``t``."""
    known = seen.get(key)
    if known is None:
        return True
    known["t"] = min(known["t"], t)
    return False


def _lines(run_dir: Path) -> Iterator[tuple[Path, bytes]]:
    nodes = run_dir / "nodes"
    if not nodes.is_dir():
        return
    for f in sorted(nodes.glob("*/trace.jsonl")):
        with open(f, "rb") as fh:
            for line in fh:
                yield f, line


def _offset_ms(run_dir: Path, ops: list[Op], test: dict[str, Any]) -> float:
    if test.get("runtime") == "sim" or test.get("kraftwerk") == "sim":  # one clock (older sim runs: "kraftwerk")
        return 0.0
    first_ok = next((o.time / 1e6 for o in ops if o.f == "send" and o.type == "ok"), None)
    if first_ok is None:
        return 0.0
    first_produce = None
    for _, line in _lines(run_dir):
        if b'"produce"' not in line:
            continue
        try:
            e = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if e.get("kind") == "produce" and not e.get("error") and isinstance(e.get("t"), (int, float)):
            first_produce = e["t"] if first_produce is None else min(first_produce, e["t"])
    return float(first_produce - first_ok) if first_produce is not None else 0.0


def read_traces(run_dir: str | Path, ops: list[Op], test: dict[str, Any] | None = None,
                buckets: int = BUCKETS) -> TraceView:
    """Every trace file of the run, in one pass per file."""
    run_dir = Path(run_dir)
    view = TraceView(offset_ms=_offset_ms(run_dir, ops, test or {}))
    end_s = max((o.time for o in ops), default=0) / 1e9
    width = max(end_s, 1.0) / buckets
    hw: dict[tuple[str, Any], Series] = defaultdict(lambda: Series(width))
    leo: dict[tuple[str, Any], Series] = defaultdict(lambda: Series(width))
    # every controller replays the same records: each is kept once, at the
    # earliest time any of them traced it (files are read one after another)
    seen_epochs: dict[tuple[str, int], dict[str, Any]] = {}
    seen_elections: dict[tuple[str, int], dict[str, Any]] = {}
    seen_fencing: dict[tuple[Any, Any, str], dict[str, Any]] = {}
    leader_view: dict[str, dict[str, Any]] = {}
    files: set[Path] = set()
    for f, line in _lines(run_dir):
        files.add(f)
        if b'"kind":"produce"' in line:
            continue
        try:
            e = orjson.loads(line)
        except orjson.JSONDecodeError:
            view.bad_lines += 1  # a killed node's torn last line
            continue
        kind = e.get("kind")
        if kind not in KINDS or not isinstance(e.get("t"), (int, float)):
            continue
        view.events += 1
        t = (e["t"] - view.offset_ms) / 1000.0
        node, tp = e.get("node"), e.get("tp")
        if node not in view.names:
            view.names[node] = f.parent.name
        if kind in ("hw", "append", "loaded", "truncate") and isinstance(tp, str):
            if kind in ("hw", "loaded") and isinstance(e.get("hw"), int):
                hw[(tp, node)].add(t, e["hw"])
            if isinstance(e.get("leo"), int):
                leo[(tp, node)].add(t, e["leo"])
            if kind == "truncate":
                to = e.get("to")
                if isinstance(to, int):
                    leo[(tp, node)].add(t, to)
                view.truncations.append({"t": t, "tp": tp, "node": node, "name": f.parent.name, "to": to,
                                         "leo_before": e.get("leo_before"), "reason": e.get("reason")})
        elif kind == "partition_metadata" and isinstance(tp, str):
            key = (tp, int(e.get("partition_epoch", -1)))
            if _first(seen_epochs, key, t):
                seen_epochs[key] = {"t": t, "leader": e.get("leader"), "isr": list(e.get("isr") or []),
                                    "elr": list(e.get("elr") or []), "leader_epoch": e.get("leader_epoch")}
                view.meta.setdefault(tp, []).append(seen_epochs[key])
        elif kind == "election" and isinstance(tp, str):
            key = (tp, int(e.get("leader_epoch", -1)))
            if _first(seen_elections, key, t):
                seen_elections[key] = {"t": t, "tp": tp, "kind": str(e.get("data_kind") or e.get("election") or "?"),
                                       "leader": e.get("leader"), "leader_epoch": e.get("leader_epoch")}
                view.elections.append(seen_elections[key])
        elif kind in ("broker_fenced", "broker_unfenced"):
            key = (e.get("broker"), e.get("broker_epoch"), kind)
            if _first(seen_fencing, key, t):
                seen_fencing[key] = {"t": t, "broker": e.get("broker"), "fenced": kind == "broker_fenced"}
                view.fencing.append(seen_fencing[key])
        elif kind in ("become_leader", "isr") and isinstance(tp, str):
            if kind == "become_leader":
                view.leaders.append({"t": t, "tp": tp, "node": f.parent.name, "leader_epoch": e.get("leader_epoch"),
                                     "leo": e.get("leo"), "hw": e.get("hw"), "isr": list(e.get("isr") or [])})
            lv = leader_view.setdefault(tp, {"entries": []})
            lv["entries"].append({"t": t, "leader": node, "isr": list(e.get("isr") or []),
                                  "leader_epoch": e.get("leader_epoch")})
        elif kind in ("node_start", "node_stop", "node_crash"):
            view.lifecycle.append({"t": t, "node": node, "kind": kind, "reason": e.get("reason")})
    view.files = len(files)
    return _finish(view, hw, leo, leader_view)


def _finish(view: TraceView, hw: dict[tuple[str, Any], Series], leo: dict[tuple[str, Any], Series],
            leader_view: dict[str, dict[str, Any]]) -> TraceView:
    """The series closed, the leaders' own view where no controller
    traced, every list in time order."""
    view.hw = {k: s.done() for k, s in hw.items()}
    view.leo = {k: s.done() for k, s in leo.items()}
    for tp, lv in leader_view.items():
        if tp not in view.meta:  # no controller traced: the leaders' own view
            view.meta[tp] = sorted(lv["entries"], key=lambda x: x["t"])
    for entries in view.meta.values():
        entries.sort(key=lambda x: x["t"])
    for events in (view.elections, view.fencing, view.truncations, view.leaders):
        events.sort(key=lambda x: x["t"])
    return view
