"""Each partition's leader over time, and the cluster's state at a moment,
from the glass box: ``nodes/<node>/trace.jsonl`` (docs/architecture.md,
"Trace events").

The reference controllers trace ``partition_metadata`` as they replay each
committed partition record, Kafka's observer (``nodes/observer``) as it sees
a partition's metadata change. Every controller replays the same records,
and a restarted one replays old ones again, so a partition's states are
keyed by partition epoch and each is kept once, at the earliest time any
node traced it; in partition-epoch order they are the partition's history.
``broker_fenced``/``broker_unfenced``/``broker_unregistered`` say the
controller's view of each broker, ``node_start``/``node_stop``/``node_crash``
its process (reference nodes only), ``raft_state`` the quorum.

Kafka's observer ends each look at the partitions' metadata with an
``observer_poll`` mark (``part`` "metadata", ``ok``: whether a broker
answered). Between two answered looks the state held as last seen; where
no look was answered for longer than :data:`BLIND_GAP_MS` (no broker
answered, or the observer did not look) the timeline is no evidence:
:meth:`Timeline.blind_stretches`. A trace without marks (the reference
controllers', which trace every committed record; an older run's observer)
has none.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

#: the kinds read; every other line (appends, HWs, produces: most of a
#: trace) is skipped without being parsed
KINDS = (b'"partition_metadata"', b'"broker_fenced"', b'"broker_unfenced"', b'"broker_unregistered"',
         b'"node_start"', b'"node_stop"', b'"node_crash"', b'"raft_state"', b'"observer_poll"')
#: no answered metadata look for longer than this: the observer was blind
#: (it looks every few hundred ms and gives an ask up after 1.5 s,
#: ``harness.dbs.kafka.observe.PART_TIMEOUT_MS``)
BLIND_GAP_MS = 2000


@dataclass
class PartitionState:
    """A partition's registration as the controllers committed it."""

    leader: int
    isr: list[int]
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    replicas: list[int] = field(default_factory=list)
    last_known_leader: int = -1
    partition_epoch: int = -1

    @classmethod
    def of(cls, e: dict[str, Any]) -> "PartitionState":
        def ints(x: Any) -> list[int]:
            return [int(v) for v in x] if isinstance(x, list) else []

        return cls(int(e.get("leader", -1)), ints(e.get("isr")), ints(e.get("elr")), ints(e.get("last_known_elr")),
                   ints(e.get("replicas")), int(e.get("last_known_leader", -1) if e.get("last_known_leader")
                                                is not None else -1),
                   int(e.get("partition_epoch", -1)))

    def as_dict(self) -> dict[str, Any]:
        return {"leader": self.leader, "isr": self.isr, "elr": self.elr, "last_known_elr": self.last_known_elr,
                "replicas": self.replicas, "last_known_leader": self.last_known_leader}


@dataclass
class Timeline:
    """Partition states and broker/node events on the history's clock (ns)."""

    #: per partition, (t_ns, state) in partition-epoch order
    partitions: dict[str, list[tuple[int, PartitionState]]] = field(default_factory=dict)
    #: (t_ns, broker id, "fenced" | "unfenced" | "unregistered", broker epoch)
    fencing: list[tuple[int, int, str, int]] = field(default_factory=list)
    #: (t_ns, node name, "start" | "stop" | "crash")
    lifecycle: list[tuple[int, str, str]] = field(default_factory=list)
    #: (t_ns, raft epoch, node, role)
    raft: list[tuple[int, int, Any, str]] = field(default_factory=list)
    #: Kafka's observer's metadata looks: (t_ns, answered), in time order
    #: (empty: a trace without marks, complete by itself)
    looks: list[tuple[int, bool]] = field(default_factory=list)
    files: int = 0

    def blind_stretches(self, end_ns: int | None = None,
                        gap_ms: float = BLIND_GAP_MS) -> list[tuple[int, int, str]]:
        """The stretches (from_ns, to_ns, why) longer than ``gap_ms`` with no
        answered metadata look, from the first look to the last (or to
        ``end_ns``, the history's end, when later): between them the
        timeline holds the last state seen, which may be stale. ``why`` is
        "no broker answered" when the observer looked in the stretch and got
        no answer, "no look made" when it made no look at all.
        No stretch in a trace without marks."""
        if not self.looks:
            return []
        gap = int(gap_ms * 1_000_000)
        out: list[tuple[int, int, str]] = []
        prev, failed = self.looks[0][0], False
        for t, ok in self.looks:
            if not ok:
                failed = True
                continue
            if t - prev > gap:
                out.append((prev, t, "no broker answered" if failed else "no look made"))
            prev, failed = t, False
        last = max(self.looks[-1][0], end_ns if end_ns is not None else 0)
        if last - prev > gap:
            out.append((prev, last, "no broker answered" if failed else "no look made"))
        return out

    def leaderless_spans(self, key: str, start_ns: int, end_ns: int, stop_ns: int) -> list[tuple[int, int]]:
        """The leaderless stretches :meth:`leaderless_ms` measures, whole:
        the one under way at ``start`` and those begun within (start, end),
        each to its end (``stop`` at most)."""
        entries = self.partitions.get(key) or []
        out = []
        for i, (t, st) in enumerate(entries):
            nxt = entries[i + 1][0] if i + 1 < len(entries) else stop_ns
            if st.leader < 0 and nxt > start_ns and t < end_ns:
                out.append((t, min(nxt, stop_ns)))
        return out

    def state_at(self, key: str, t_ns: int) -> PartitionState | None:
        """The partition's registration at ``t_ns`` (None before the first)."""
        entries = self.partitions.get(key)
        if not entries:
            return None
        i = bisect_right([t for t, _ in entries], t_ns)
        return entries[i - 1][1] if i else None

    def leaderless_ms(self, key: str, start_ns: int, end_ns: int, stop_ns: int) -> float | None:
        """The longer of the leaderless stretch under way at ``start``
        (measured to its end, ``stop`` at most) and the longest one that
        began within (start, end), up to ``end``; None when no state is
        known for the partition (before its first state it is unknown, not
        leaderless)."""
        entries = self.partitions.get(key)
        if not entries:
            return None
        worst = 0
        for i, (t, st) in enumerate(entries):
            nxt = entries[i + 1][0] if i + 1 < len(entries) else stop_ns
            if st.leader >= 0 or nxt <= start_ns or t >= end_ns:
                continue
            worst = max(worst, min(nxt, stop_ns) - start_ns if t <= start_ns else min(nxt, end_ns) - t)
        return worst / 1e6

    def leader_for_good_ms(self, key: str, from_ns: int) -> float | None:
        """ms from ``from_ns`` until the partition had a leader for good: the
        end of its last leaderless stretch after ``from_ns`` (0 if it had
        none; None if it ended leaderless, or no state is known)."""
        entries = self.partitions.get(key)
        if not entries:
            return None
        if entries[-1][1].leader < 0:
            return None
        last = 0.0
        for i, (t, st) in enumerate(entries):
            if st.leader < 0 and i + 1 < len(entries) and entries[i + 1][0] > from_ns:
                last = max(last, (entries[i + 1][0] - from_ns) / 1e6)
        return last

    def fenced_at(self, t_ns: int) -> dict[int, str]:
        """Each broker's last fencing state at ``t_ns`` (the controllers' view)."""
        out: dict[int, str] = {}
        for t, b, what, _ in self.fencing:
            if t <= t_ns:
                out[b] = what
        return out

    def running_at(self, t_ns: int) -> dict[str, bool]:
        """Each node's process at ``t_ns`` as its own trace says (started,
        or stopped/crashed); a node killed outright leaves no line."""
        out: dict[str, bool] = {}
        for t, n, what in self.lifecycle:
            if t <= t_ns:
                out[n] = what == "start"
        return out

    def quorum_leader_at(self, t_ns: int) -> Any:
        """The node that last became quorum leader at or before ``t_ns``, at
        the highest epoch seen (None if none traced)."""
        best: tuple[int, Any] | None = None
        for t, epoch, node, role in self.raft:
            if t <= t_ns and role == "leader" and (best is None or epoch >= best[0]):
                best = (epoch, node)
        return best[1] if best else None


def _lines(run_dir: Path) -> Iterator[tuple[str, bytes]]:
    """The lines of every trace file that name a kind read here, found by
    searching each file for the kinds (rare: a few hundred lines of a
    megabyte) rather than by splitting it into lines."""
    for f in sorted((run_dir / "nodes").glob("*/trace.jsonl")):
        try:
            data = f.read_bytes()
        except OSError:
            continue
        starts: set[int] = set()
        for k in KINDS:
            i = data.find(k)
            while i >= 0:
                start = data.rfind(b"\n", 0, i) + 1
                starts.add(start)
                nl = data.find(b"\n", i)
                i = data.find(k, nl) if nl >= 0 else -1
        for start in sorted(starts):
            end = data.find(b"\n", start)
            yield f.parent.name, data[start:] if end < 0 else data[start:end]


def read_timeline(run_dir: str | Path, offset_ms: float = 0.0) -> Timeline:
    """The timeline of a run directory's traces; ``offset_ms`` is the
    traces' clock at history time 0 (0 for the simulator, whose traces
    and history share virtual time)."""
    run_dir = Path(run_dir)
    events = []
    files: set[str] = set()
    for name, line in _lines(run_dir):
        files.add(name)
        try:
            e = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a killed node's torn last line
        if isinstance(e, dict) and isinstance(e.get("t"), (int, float)):
            if e.get("kind") == "observer_poll" and e.get("part") != "metadata":
                continue  # the watermarks' and the quorum's looks say nothing of the leaders
            e["_name"] = name
            events.append(e)
    tl = timeline_of(events, offset_ms)
    tl.files = len(files)
    return tl


def timeline_of(events: Iterable[dict[str, Any]], offset_ms: float = 0.0) -> Timeline:
    """The timeline of trace events (each with ``t`` in ms on the traces'
    clock and ``kind``; ``_name`` the node's name where known)."""
    tl = Timeline()
    first: dict[tuple[str, int], tuple[int, PartitionState]] = {}
    seen_fencing: dict[tuple[int, int, str], int] = {}

    def ns(t: float) -> int:
        return int(round((t - offset_ms) * 1_000_000))

    for e in events:
        kind, t = e.get("kind"), ns(e["t"])
        if kind == "partition_metadata" and isinstance(e.get("tp"), str):
            st = PartitionState.of(e)
            k = (e["tp"], st.partition_epoch)
            if k not in first or t < first[k][0]:
                first[k] = (t, st)
        elif kind in ("broker_fenced", "broker_unfenced", "broker_unregistered"):
            what = kind.split("_", 1)[1]
            fk = (int(e.get("broker", -1)), int(e.get("broker_epoch", -1)), what)
            if fk not in seen_fencing or t < seen_fencing[fk]:
                seen_fencing[fk] = t
        elif kind in ("node_start", "node_stop", "node_crash"):
            tl.lifecycle.append((t, str(e.get("_name", e.get("node"))), kind.split("_", 1)[1]))
        elif kind == "raft_state":
            tl.raft.append((t, int(e.get("epoch", -1)), e.get("node"), str(e.get("role"))))
        elif kind == "observer_poll" and e.get("part") == "metadata":
            tl.looks.append((t, e.get("ok") is True))
    for (tp, _epoch), (t, st) in sorted(first.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        tl.partitions.setdefault(tp, []).append((t, st))
    for tp, entries in tl.partitions.items():
        # epoch order is the partition's order; a state first traced late
        # (a lagging controller) takes effect no earlier than its successor
        # was known: keep the times non-decreasing
        for i in range(len(entries) - 2, -1, -1):
            if entries[i][0] > entries[i + 1][0]:
                entries[i] = (entries[i + 1][0], entries[i][1])
    tl.fencing = sorted((t, b, what, ep) for (b, ep, what), t in seen_fencing.items())
    tl.lifecycle.sort()
    tl.raft.sort(key=lambda r: (r[0], r[1]))
    tl.looks.sort()
    return tl
