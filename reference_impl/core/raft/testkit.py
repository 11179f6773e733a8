"""An in-memory, deterministic message loop for a handful of sans-IO nodes.

In the spirit of Kafka's ``RaftEventSimulationTest``: nodes exchange messages
through a queue ordered by virtual time, disks keep a page cache and a durable
copy (so a "power loss" can drop what was never fsynced), and links can be cut.
It drives anything with ``start/handle/tick`` returning effects — a bare
:class:`~.replica.RaftReplica` or a node composing a replica and a controller.

This is a test kit, not the simulator: no clock skew, no latency
distributions, no client model. Randomness comes only from the ``rng`` the
caller passes to the nodes it builds.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from ..effects import (
    Effect,
    FileDelete,
    FileWrite,
    Fsync,
    Halt,
    LogAppend,
    LogTruncate,
    LogTruncateFully,
    Reply,
    Send,
    Timer,
    TraceEvent,
)
from ..messages import NodeId
from ..storage import StoredState


class SansIONode(Protocol):
    def start(self, now: int) -> list[Effect]: ...

    def handle(self, msg: Any, now: int, src: NodeId | None = None) -> list[Effect]: ...

    def tick(self, now: int) -> list[Effect]: ...


@dataclass
class MemoryDisk:
    """Logs and files with a page cache: ``cache`` is what the process sees,
    ``durable`` what survives a power loss."""

    cache: StoredState = field(default_factory=StoredState)
    durable: StoredState = field(default_factory=StoredState)

    def apply(self, e: Effect) -> None:
        c = self.cache
        if isinstance(e, LogAppend):
            c.logs.setdefault(e.log, []).extend(e.entries)
        elif isinstance(e, LogTruncate):
            start = c.log_start_offsets.get(e.log, 0)
            del c.logs.setdefault(e.log, [])[max(e.offset - start, 0) :]
        elif isinstance(e, LogTruncateFully):
            c.logs[e.log] = []
            c.log_start_offsets[e.log] = e.start_offset
        elif isinstance(e, FileWrite):
            c.files[e.path] = e.data
        elif isinstance(e, FileDelete):
            c.files.pop(e.path, None)
        elif isinstance(e, Fsync):
            self._sync(e.target)

    def _sync(self, target: str | None) -> None:
        c, d = self.cache, self.durable
        names = [target] if target is not None else list(set(c.logs) | set(c.files) | set(d.files))
        for n in names:
            if n in c.logs or n in d.logs:
                d.logs[n] = list(c.logs.get(n, []))
                if n in c.log_start_offsets:
                    d.log_start_offsets[n] = c.log_start_offsets[n]
            if n in c.files:
                d.files[n] = c.files[n]
            elif n in d.files and target is None:
                del d.files[n]

    def after_crash(self, lose_unfsynced: bool) -> StoredState:
        """What a restarted process finds: the page cache after a process
        crash, only the durable copy after a power loss."""
        if lose_unfsynced:
            self.cache = self.durable.copy()
        return self.cache.copy()


@dataclass(order=True)
class _Event:
    at: int
    seq: int
    kind: str = field(compare=False)  # "msg" | "tick"
    dst: NodeId = field(compare=False)
    src: NodeId | None = field(compare=False, default=None)
    msg: Any = field(compare=False, default=None)


class Loop:
    """Delivers messages and timers among ``nodes`` in virtual time.

    ``latency`` is the one-way delay of every message. ``cut(a, b)`` drops
    everything between a and b (both ways); ``isolate(a)`` cuts a from all.
    ``drop`` may be set to any predicate ``(src, dst, msg) -> bool``.
    """

    def __init__(self, latency: int = 1) -> None:
        self.now = 0
        self.latency = latency
        self.nodes: dict[NodeId, SansIONode] = {}
        self.disks: dict[NodeId, MemoryDisk] = {}
        self.down: set[NodeId] = set()
        self.cuts: set[frozenset[NodeId]] = set()
        self.drop: Callable[[NodeId | None, NodeId, Any], bool] | None = None
        self.traces: list[tuple[int, NodeId, TraceEvent]] = []
        self.replies: list[tuple[int, NodeId, Any]] = []
        self.sent: list[tuple[int, NodeId | None, NodeId, Any]] = []
        self.on_effects: Callable[[NodeId, list[Effect]], None] | None = None
        self._q: list[_Event] = []
        self._seq = 0
        self._timer_at: dict[NodeId, int] = {}

    # -- membership ------------------------------------------------------

    def add(self, node_id: NodeId, node: SansIONode, disk: MemoryDisk | None = None) -> None:
        self.nodes[node_id] = node
        self.disks.setdefault(node_id, disk or MemoryDisk())
        self.down.discard(node_id)
        self._apply(node_id, node.start(self.now))

    def crash(self, node_id: NodeId) -> None:
        self.down.add(node_id)
        self._timer_at.pop(node_id, None)

    def restart(self, node_id: NodeId, build: Callable[[StoredState], SansIONode], lose_unfsynced: bool = False) -> SansIONode:
        self.crash(node_id)
        stored = self.disks[node_id].after_crash(lose_unfsynced)
        node = build(stored)
        self.add(node_id, node)
        return node

    def cut(self, a: NodeId, b: NodeId) -> None:
        self.cuts.add(frozenset((a, b)))

    def isolate(self, a: NodeId) -> None:
        for b in self.nodes:
            if b != a:
                self.cut(a, b)

    def heal(self) -> None:
        self.cuts.clear()
        self.drop = None

    # -- driving -----------------------------------------------------------

    def deliver(self, dst: NodeId, msg: Any, src: NodeId | None = None) -> list[Effect]:
        """Hand ``msg`` to ``dst`` now (bypassing the network) and apply the effects."""
        effects = self.nodes[dst].handle(msg, self.now, src)
        self._apply(dst, effects)
        return effects

    def run_for(self, ms: int) -> None:
        self.run_until(self.now + ms)

    def run_until(self, t: int, until: Callable[[], bool] | None = None) -> bool:
        while self._q and self._q[0].at <= t:
            ev = heapq.heappop(self._q)
            self.now = max(self.now, ev.at)
            if ev.dst in self.down or ev.dst not in self.nodes:
                continue
            node = self.nodes[ev.dst]
            if ev.kind == "tick":
                if self._timer_at.get(ev.dst) != ev.at:
                    continue
                del self._timer_at[ev.dst]
                self._apply(ev.dst, node.tick(self.now))
            else:
                if self._blocked(ev.src, ev.dst, ev.msg):
                    continue
                self._apply(ev.dst, node.handle(ev.msg, self.now, ev.src))
            if until is not None and until():
                return True
        self.now = max(self.now, t)
        return until() if until is not None else False

    def run_until_true(self, cond: Callable[[], bool], limit_ms: int = 60_000) -> bool:
        return self.run_until(self.now + limit_ms, cond) or cond()

    # -- internals ---------------------------------------------------------

    def _blocked(self, src: NodeId | None, dst: NodeId, msg: Any) -> bool:
        if src is not None and frozenset((src, dst)) in self.cuts:
            return True
        if src is not None and src in self.down:
            return False
        return self.drop is not None and self.drop(src, dst, msg)

    def _push(self, ev: _Event) -> None:
        heapq.heappush(self._q, ev)

    def _apply(self, node_id: NodeId, effects: list[Effect]) -> None:
        if self.on_effects is not None:
            self.on_effects(node_id, effects)
        disk = self.disks[node_id]
        for e in effects:
            if isinstance(e, Send):
                self._seq += 1
                self.sent.append((self.now, node_id, e.dst, e.msg))
                if frozenset((node_id, e.dst)) in self.cuts:
                    continue
                if self.drop is not None and self.drop(node_id, e.dst, e.msg):
                    continue
                self._push(_Event(self.now + self.latency, self._seq, "msg", e.dst, node_id, e.msg))
            elif isinstance(e, Timer):
                at = max(e.at, self.now)
                cur = self._timer_at.get(node_id)
                if cur is None or at < cur or cur < self.now:
                    self._timer_at[node_id] = at
                    self._seq += 1
                    self._push(_Event(at, self._seq, "tick", node_id))
            elif isinstance(e, Reply):
                self.replies.append((self.now, node_id, e.msg))
            elif isinstance(e, TraceEvent):
                self.traces.append((self.now, node_id, e))
            elif isinstance(e, Halt):
                pass
            else:
                disk.apply(e)
