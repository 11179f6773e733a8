"""The glass-box invariant monitor: protocol invariants checked on trace events.

It reads the events nodes emit (docs/architecture.md, "Trace events") — streamed
from the simulator as they happen, or merged from a real run's
``nodes/*/trace.jsonl`` — and reports every violation with the step, time,
node and seed that exposed it. State is a handful of dicts per partition and
replica, so one pass over the trace is enough (it never re-scans).

A replica's log is tracked as *epoch runs*: ``[(start_offset, leader_epoch), ...]``
plus its LEO. An ``append`` event carries ``epochs: [[epoch, start], ...]``
for the batches it covers (the core emits it, so both runtimes' traces have
it; a follower's fetch can span an epoch change); only an older trace
without it falls back to the event's single ``epoch``. Batches carry the leader epoch they were written in, so two
replicas agree on a prefix exactly when their runs agree on it (Log Matching,
seed 000 "Leader epochs & epoch-based truncation"); a ``loaded`` event rebuilds
the runs from the leader-epoch checkpoint.

Invariants (with the seed text they come from):

* ``hw-above-leo``: HW <= LEO on every replica (seed 003, "The Three Watermarks").
* ``hw-regressed``: a leader's HW never moves back during its leadership (seed
  000, maybeIncrementHighWatermark is monotonic). A follower takes the leader's
  HW and may legitimately see it lower after a leader change (seed 002), and a
  restart begins a new replica lifetime.
* ``isr-not-subset`` / ``leader-not-in-isr``: ISR ⊆ replicas and the leader is in
  its ISR (seed 001).
* ``leader-epoch-regressed`` / ``partition-epoch-regressed``: epochs never go
  back on a broker or in a controller's replay (seed 000, PartitionRegistration).
* ``leader-completeness``: a new leader holds every batch committed (below the
  highest HW any leader reached) in earlier epochs (seed 003, "if the current
  Leader fails and a new Leader is elected from the ISR, the new Leader is
  guaranteed to have all messages below HW"). A violation is marked
  ``by_design`` when Kafka 4.4 breaks the promise itself: the leader was
  elected as the *last known leader* (no ISR or ELR member left; Kafka's
  ``PartitionChangeBuilder.electAnyLeader`` returns
  ``ElectionResult(lastKnownElr[0], unclean=true)`` when
  ``canElectLastKnownLeader`` holds: 4.4.0's class file, lines 269-270 and
  287-315 by its line table, the same as trunk's source of October 2024),
  and it lacks the batches because it lost power since, dropping what it had
  not fsynced, and has not rejoined the ISR from another leader since (so
  nothing but the power loss took them). Kafka elects it all the same,
  after an unclean shutdown too: ``handleBrokerUncleanShutdown`` takes the
  broker out of ISR and ELR only (ReplicationControlManager), not out of
  LastKnownELR, and its unfencing elects it (``handleBrokerUnfenced``).
  Still a violation (acknowledged writes are gone); ``by_design`` says Kafka
  does the same (:mod:`checkers.expected_loss`).
* ``log-matching``: below its own HW a replica agrees with the committed prefix
  (same offset and epoch => same batch); a committed prefix never changes.
* ``committed-truncated``: a replica never truncates committed entries it
  holds (KIP-101: epoch-based truncation stops at the divergence point; the
  pre-KIP-101 truncation to the local HW is exactly what breaks this). A
  ``full`` truncation (restart at a new log start) is exempt.
* ``isr-expanded-early``: a follower joins the leader's (maximal) ISR only with
  LEO >= the leader's HW and >= the leader-epoch start offset (seed 000,
  isFollowerInSync). The follower's LEO is the last one its own trace
  reported, which in the simulator is exactly its fetch offset; across a real
  run's merged traces it is approximate.
* ``elr-in-isr``, ``elr-not-replica``, ``elr-with-isr-at-min``: KIP-966's ELR
  invariants (seed 002, "ELR invariants": ELR ∩ ISR = ∅, and a non-empty ELR
  means the ISR is under min ISR).
* ``metadata-divergence``: two controllers replaying the same partition epoch
  disagree (KRaft log matching, seed 004).
* ``two-raft-leaders``: two quorum leaders in one Raft epoch (election safety).
* ``node-crash``: the reference implementation raised an exception (simulator).
"""

from __future__ import annotations

import heapq
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Final, Iterable, Iterator

Runs = list[tuple[int, int]]  # (start offset, leader epoch), ascending

MAX_EXAMPLES_PER_KIND: Final = 20

#: an event field that is not there (``observe_hw``'s role), as distinct from None
_ABSENT: Final = object()


@dataclass
class Violation:
    kind: str
    message: str
    t: Any  # as the event spelt it
    node: Any
    step: int
    seed: Any = None
    tp: str | None = None
    #: leader-completeness: the election kind that made the leader, the
    #: committed offsets it lacked ([from, to)), and whether Kafka 4.4 makes
    #: the same loss (with why, in words)
    election: str | None = None
    lost_range: list[int] | None = None
    by_design: bool = False
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = f" {self.tp}" if self.tp else ""
        return f"[seed {self.seed} step {self.step} t={self.t}ms node {self.node}{where}] {self.kind}: {self.message}"


def _int(x: Any) -> int:
    """``int(x)``, without the call when ``x`` already is one: compiled,
    ``int(x)`` of an untyped value is a generic call of the type, and the
    append and HW handlers convert five values per event."""
    if type(x) is int:
        return x
    return int(x)


def clip(runs: Runs, end: int) -> Runs:
    """The runs of the prefix [0, end)."""
    return [r for r in runs if r[0] < end]


def is_clip(kept: list[Any], runs: list[Any], end: int) -> bool:
    """Whether ``kept == clip(runs, end)``, item by item as list equality
    compares (identity first), with no list made: a leader's committed
    prefix is mostly unchanged by its next HW move (no new epoch run).
    Its lists are of untyped items: compiled, a ``tuple[int, int]`` item is
    unboxed when read and boxed again (a new tuple) to compare by identity."""
    j = 0
    n = len(kept)
    for r in runs:
        start: int = r[0]
        if start < end:
            if j == n:
                return False
            k = kept[j]
            if k is not r and k != r:
                return False
            j += 1
    return j == n


def first_disagreement(a: Runs, b: Runs, end: int) -> int | None:
    """The lowest offset below ``end`` whose epoch differs between ``a`` and
    ``b``, or None if they agree on [0, end). Offsets before the first run of
    a list are unknown (log start) and compared only where both know them."""
    if a == b:
        return None  # the common case: a replica whose log agrees run for run
    pts = sorted({r[0] for r in a if r[0] < end} | {r[0] for r in b if r[0] < end})
    for p in pts:
        ea, eb = _epoch_at(a, p), _epoch_at(b, p)
        if ea is not None and eb is not None and ea != eb:
            return p
    return None


def _epoch_at(runs: Runs, off: int) -> int | None:
    e = None
    for s, ep in runs:
        if s <= off:
            e = ep
        else:
            break
    return e


@dataclass
class _Replica:
    runs: Runs = field(default_factory=list)
    #: the LEO, -1 while unknown (an offset is never negative): a plain int,
    #: held unboxed when compiled, where an Optional one boxed every LEO
    #: set (an int object made per append and per HW event past 256)
    leo: int = -1
    hw: int = -1
    role: str = "unknown"
    leader_hw: int = -1  # HW within the current leadership term
    leader_epoch: int = -1
    partition_epoch: int = -1
    epoch_start: int | None = None  # leader-epoch start offset (leader role)
    maximal: tuple[int, ...] = ()  # the leader's last (maximal) ISR
    leo_t: Any = None  # when the LEO was last set (a violation names it)
    #: its partition's committed prefix (``InvariantMonitor._committed[tp]``,
    #: never replaced once made), kept here once found: every HW event reads
    #: it, and a lookup by the partition's name was one more per event
    committed: _Committed | None = field(default=None, repr=False, compare=False)
    #: ``runs`` (this list, at this length) was found equal to the committed
    #: runs ``agreed_with`` (a list never changed in place): until either
    #: changes, they agree below any HW (:meth:`InvariantMonitor.observe_hw`)
    agreed_runs: Runs | None = field(default=None, repr=False, compare=False)
    agreed_len: int = field(default=-1, repr=False, compare=False)
    agreed_with: Runs | None = field(default=None, repr=False, compare=False)


class _RepSlot:
    """A replica :meth:`InvariantMonitor._rep` found, with the node and
    partition name objects it was found by (compared by identity: the same
    objects come with every event of a replica, the simulator's node id
    boxed once per host and the partition's name once per partition; any
    other object for the same key only misses, and is looked up)."""

    def __init__(self, node: Any, tp: str, rep: _Replica) -> None:
        self.node = node
        self.tp = tp
        self.rep = rep


#: how many replicas :meth:`InvariantMonitor._rep` keeps at hand (a 3-broker,
#: 3-partition seed has 9; past this many a miss is looked up, not kept)
_REP_SLOTS: Final = 16


@dataclass
class _Committed:
    hw: int = 0
    runs: Runs = field(default_factory=list)


class InvariantMonitor:
    """Feed events with :meth:`observe`; read :attr:`violations` (first
    ``MAX_EXAMPLES_PER_KIND`` per kind) and :attr:`counts` (all)."""

    def __init__(self, seed: Any = None, min_isr: Any = None) -> None:
        self.seed = seed
        self._min_isr = min_isr
        self.step = 0
        self.violations: list[Violation] = []
        self.counts: dict[str, int] = {}
        # node -> partition -> replica: two lookups by keys whose hashes are
        # cached, not a (node, partition) tuple built and hashed per event
        self._replicas: dict[Any, dict[str, _Replica]] = {}
        #: the replica :meth:`_rep` found last, by identity of its node and
        #: partition name: a replica's append and HW events mostly come in
        #: a row, and the two lookups were ~0.6% of a simulated seed. Any
        #: change of ``_replicas`` forgets it (:meth:`_forget_last`)
        self._last_node: Any = None
        self._last_tp: str | None = None
        self._last_rep: _Replica | None = None
        #: the replicas :meth:`_rep` found before, each with its node and
        #: partition name objects (up to ``_REP_SLOTS``), searched by identity
        #: when the last one is not it: a seed's appends and HW moves rotate
        #: over every replica (the leader's, then each follower's), so the
        #: last one alone missed two events in three, each two dict lookups
        #: (~1% of a simulated seed). Forgotten with the last one
        self._slots: list[_RepSlot] = []
        self._committed: dict[str, _Committed] = {}
        self._replica_sets: dict[str, tuple[int, ...]] = {}
        self._ctrl: dict[tuple[Any, str], tuple[int, int]] = {}
        self._meta_at_epoch: dict[tuple[str, int], tuple[Any, ...]] = {}
        self._raft_leaders: dict[int, Any] = {}
        self._raft_hw: dict[Any, int] = {}
        # what makes a leader-completeness violation by design: the election
        # kind of each (partition, leader epoch) as the first controller told
        # it, each node's last power loss that dropped entries (t, count),
        # and the (node, partition)s that rejoined the ISR under another
        # leader since that power loss (the newest partition epoch's ISR)
        self._elections: dict[tuple[str, int], str] = {}
        self._power_lost: dict[Any, tuple[Any, int]] = {}
        self._rejoined: set[tuple[Any, str]] = set()
        self._newest_isr: dict[str, tuple[int, tuple[int, ...]]] = {}
        self.by_design: dict[str, int] = {}

    # -- helpers -----------------------------------------------------------------------------
    def _violate(self, kind: str, ev: dict[str, Any], msg: str, tp: str | None = None) -> Violation:
        return self._violate_at(kind, ev.get("node"), ev.get("t", -1), msg, tp)

    def _violate_at(self, kind: str, node: Any, t: Any, msg: str, tp: str | None = None) -> Violation:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        v = Violation(kind, msg, t, node, self.step, self.seed, tp)
        if self.counts[kind] <= MAX_EXAMPLES_PER_KIND:
            self.violations.append(v)
        return v

    def min_isr(self, tp: str) -> Any:
        m = self._min_isr
        if m is None or isinstance(m, int):
            return m
        topic = tp.rsplit("-", 1)[0]
        return m.get(topic)

    def _rep(self, node: Any, tp: str) -> _Replica:
        last = self._last_rep
        if last is not None and tp is self._last_tp and node is self._last_node:
            return last
        found: _Replica | None = None
        slots = self._slots
        for s in slots:
            if s.tp is tp and s.node is node:
                found = s.rep
                break
        if found is None:
            r = self._rep_lookup(node, tp)
            if len(slots) < _REP_SLOTS:
                slots.append(_RepSlot(node, tp, r))
        else:
            r = found
        self._last_node = node
        self._last_tp = tp
        self._last_rep = r
        return r

    def _forget_last(self) -> None:
        self._last_node = None
        self._last_tp = None
        self._last_rep = None
        self._slots.clear()

    def _rep_lookup(self, node: Any, tp: str) -> _Replica:
        by_tp = self._replicas.get(node)
        if by_tp is None:
            by_tp = self._replicas[node] = {}
        r = by_tp.get(tp)
        if r is None:
            r = by_tp[tp] = _Replica()
        return r

    def _find(self, node: Any, tp: str) -> _Replica | None:
        by_tp = self._replicas.get(node)
        return None if by_tp is None else by_tp.get(tp)

    @property
    def valid(self) -> bool:
        return not self.counts

    def summary(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "steps": self.step,
            "counts": dict(sorted(self.counts.items())),
            "violations": [v.to_dict() for v in self.violations],
            **({"by_design": dict(sorted(self.by_design.items()))} if self.by_design else {}),
        }

    # -- the stream ------------------------------------------------------------------------------
    def observe(self, ev: dict[str, Any]) -> None:
        kind = ev.get("kind")
        # the frequent kinds by direct (native) call, the rest by the table;
        # an append or HW event counts its step in observe_append / observe_hw
        if kind == "append":
            self._append(ev.get("node"), ev.get("t", -1), ev)
        elif kind == "hw":
            self._hw(ev.get("node"), ev.get("t", -1), ev)
        else:
            self.step += 1
            h = _HANDLERS.get(kind)
            if h is not None:
                h(self, ev)

    def observe_data(self, node: Any, t: int, kind: str, data: dict[str, Any]) -> None:
        """:meth:`observe` for an event its runtime has not stamped: node,
        time and kind given apart, ``data`` as the core made it (no ``t``,
        ``seq``, ``node`` or ``kind`` key of its own). The simulator's path
        for its most frequent kinds (appends, HWs, produces: ~90% of a seed's
        events), where stamping each dict first cost ~3% of a seed. The same
        checks and verdicts as :meth:`observe` on the stamped event."""
        if kind == "append":
            self._append(node, t, data)
        elif kind == "hw":
            self._hw(node, t, data)
        else:
            self.step += 1
            h = _HANDLERS.get(kind)
            if h is not None:
                h(self, {"t": t, "node": node, "kind": kind, **data})

    # The simulator's typed hot events (reference_impl.core.effects.AppendTrace):
    # the same checks and verdicts as observe_data on their data dicts,
    # given the values, so no dict is built, boxed and read per event
    # (observe_append and observe_hw are below, with the dict events' readers).

    def observe_produce(self) -> None:
        """A ``produce`` event: a step, and no check of its own."""
        self.step += 1

    def observe_all(self, events: Iterable[dict[str, Any]]) -> "InvariantMonitor":
        for ev in events:
            self.observe(ev)
        return self

    # -- lifetimes ---------------------------------------------------------------------------------
    def _on_node_start(self, ev: dict[str, Any]) -> None:
        node = ev.get("node")
        self._replicas.pop(node, None)
        self._forget_last()
        for key in [k for k in self._ctrl if k[0] == node]:
            del self._ctrl[key]
        self._raft_hw.pop(node, None)

    def _on_node_stop(self, ev: dict[str, Any]) -> None:
        """A power loss that dropped entries (the simulator's ``lost_entries``)
        is remembered until the node rejoins an ISR it was out of."""
        node = ev.get("node")
        lost = int(ev.get("lost_entries", 0) or 0)
        if ev.get("reason") == "power-loss" and lost > 0:
            self._power_lost[node] = (ev.get("t", -1), lost)
            self._rejoined = {k for k in self._rejoined if k[0] != node}

    def _on_election(self, ev: dict[str, Any]) -> None:
        key = (str(ev["tp"]), int(ev.get("leader_epoch", -1)))
        if key not in self._elections:
            self._elections[key] = str(ev.get("data_kind"))

    # -- partition logs ------------------------------------------------------------------------------
    def _on_loaded(self, ev: dict[str, Any]) -> None:
        tp = str(ev["tp"])
        r = _Replica()
        self._replicas.setdefault(ev.get("node"), {})[tp] = r
        self._forget_last()
        leo = int(ev.get("leo", 0))
        r.leo, r.leo_t = leo, ev.get("t")
        r.hw = int(ev.get("hw", -1))
        epochs = ev.get("epochs") or []
        r.runs = [(int(s), int(e)) for e, s in epochs if int(s) < leo]
        if r.hw > leo:
            self._violate("hw-above-leo", ev, f"loaded with HW {r.hw} > LEO {leo}", tp)

    def _append(self, node: Any, t: Any, ev: dict[str, Any]) -> None:
        base, count = _int(ev["base"]), _int(ev["count"])
        self.observe_append(node, t, str(ev["tp"]), base, count, _int(ev["epoch"]), ev.get("epochs"),
                            _int(ev.get("leo", base + count)))

    def observe_append(self, node: Any, t: Any, tp: str, base: int, count: int, epoch: int, epochs: Any,
                       leo: int) -> None:
        """An ``append`` event, a step, and its checks, given its values
        (:meth:`_append` reads them from the event; the simulator gives its
        typed events' own, ``effects.AppendTrace``: one call a step, where a
        wrapper counted the step and called the checks). ``epochs`` None:
        the batches are of one epoch, ``[[epoch, base]]``
        (``AppendTrace.one_run``), checked the same."""
        self.step += 1
        r = self._rep(node, tp)
        gap = r.leo >= 0 and base != r.leo
        if not gap and r.runs and (not epochs or len(epochs) == 1):
            # the common case: one more batch of the log's last epoch, at its LEO
            if r.runs[-1][1] == (_int(epochs[0][0]) if epochs else epoch):
                r.leo, r.leo_t = leo, t
                return
        if gap:
            self._violate_at("append-not-at-leo", node, t, f"batch at {base} appended to a log whose LEO is {r.leo}", tp)
            if base < max(r.leo, 0):
                r.runs = clip(r.runs, base)
        # runs of the appended range: the runtime's "epochs" (one per epoch
        # change among the batches) when present, else the event's one epoch
        new_runs = [(int(s), int(e)) for e, s in epochs or [(epoch, base)]]
        for i, (s, e) in enumerate(new_runs):
            if r.runs and r.runs[-1][1] == e and not (gap and i == 0):
                continue
            if r.runs and r.runs[-1][1] > e:
                self._violate_at("epoch-regressed-in-log", node, t, f"batch of epoch {e} appended after epoch {r.runs[-1][1]}", tp)
            r.runs.append((s, e))
        r.leo, r.leo_t = leo, t

    def _on_truncate(self, ev: dict[str, Any]) -> None:
        tp = str(ev["tp"])
        node = ev.get("node")
        r = self._rep(node, tp)
        to = int(ev["to"])
        c = self._committed.get(tp)
        if c is not None and ev.get("reason") != "full" and to < c.hw and r.leo >= 0:
            held_end = min(c.hw, r.leo)
            if to < held_end and first_disagreement(r.runs, c.runs, held_end) is None:
                self._violate("committed-truncated", ev,
                              f"truncation ({ev.get('reason')}) to {to} removed committed offsets [{to}, {held_end}) "
                              f"it held (committed HW {c.hw})", tp)
        r.runs = [] if ev.get("reason") == "full" else clip(r.runs, to)
        r.leo, r.leo_t = to, ev.get("t")
        if r.hw > to:
            r.hw = to

    def _hw(self, node: Any, t: Any, ev: dict[str, Any]) -> None:
        leo = ev.get("leo")
        self.observe_hw(node, t, str(ev["tp"]), _int(ev["hw"]), -1 if leo is None else _int(leo),
                        ev.get("role", _ABSENT))

    def observe_hw(self, node: Any, t: Any, tp: str, hw: int, leo: int, role: Any) -> None:
        """An ``hw`` event, a step, and its checks, given its values (as
        :meth:`observe_append`; ``leo`` -1: the event names none, as
        ``_Replica.leo``, so a native int is passed, not an Optional boxed
        per event; ``role`` :data:`_ABSENT`: the event names none, the
        replica's own holds)."""
        self.step += 1
        r = self._rep(node, tp)
        if leo >= 0:
            r.leo, r.leo_t = leo, t
        # the LEO narrowed to an int and the role compared once: compiled,
        # an Optional attribute and an untyped role compare generically
        # (a call each), on every HW event
        r_leo = r.leo
        if r_leo >= 0 and hw > r_leo:
            self._violate_at("hw-above-leo", node, t, f"HW {hw} > LEO {r_leo}", tp)
        if role is _ABSENT:
            role = r.role
        leader = isinstance(role, str) and role == "leader"
        if leader:
            if hw < r.leader_hw:
                self._violate_at("hw-regressed", node, t, f"leader HW went back from {r.leader_hw} to {hw}", tp)
            r.leader_hw = max(r.leader_hw, hw)
        r.hw = hw
        c = r.committed
        if c is None:
            c = self._committed.get(tp)
            if c is None:
                c = self._committed[tp] = _Committed()
            r.committed = c
        end = min(hw, c.hw)
        if end > 0:
            runs = r.runs
            if runs is r.agreed_runs and len(runs) == r.agreed_len and c.runs is r.agreed_with:
                d = None  # equal lists, neither changed since: first_disagreement's first answer
            else:
                d = first_disagreement(runs, c.runs, end)
                if d is None and runs == c.runs:
                    r.agreed_runs, r.agreed_len, r.agreed_with = runs, len(runs), c.runs
            if d is not None:
                self._violate_at("log-matching", node, t,
                              f"below its HW {hw} the {role} holds epoch {_epoch_at(r.runs, d)} at offset {d}, "
                              f"the committed batch there has epoch {_epoch_at(c.runs, d)}", tp)
        if leader and hw > c.hw:
            c.hw = hw
            if not is_clip(c.runs, r.runs, hw):  # the same runs kept: no list made per HW move
                c.runs = clip(r.runs, hw)

    # -- leadership ----------------------------------------------------------------------------------
    def _epochs(self, ev: dict[str, Any], r: _Replica, tp: str) -> None:
        le = int(ev.get("leader_epoch", -1))
        pe = ev.get("partition_epoch")
        if le < r.leader_epoch:
            self._violate("leader-epoch-regressed", ev, f"leader epoch {le} after {r.leader_epoch}", tp)
        r.leader_epoch = max(r.leader_epoch, le)
        if pe is not None:
            pe = int(pe)
            if pe < r.partition_epoch:
                self._violate("partition-epoch-regressed", ev, f"partition epoch {pe} after {r.partition_epoch}", tp)
            r.partition_epoch = max(r.partition_epoch, pe)

    def _on_become_leader(self, ev: dict[str, Any]) -> None:
        tp = str(ev["tp"])
        node = ev.get("node")
        r = self._rep(node, tp)
        self._epochs(ev, r, tp)
        if "leo" in ev:
            r.leo, r.leo_t = int(ev["leo"]), ev.get("t")
        isr = [int(x) for x in ev.get("isr", [])]
        if isr and node not in isr:
            self._violate("leader-not-in-isr", ev, f"became leader with ISR {isr}", tp)
        r.epoch_start = int(ev["leo"]) if "leo" in ev else (r.leo if r.leo >= 0 else None)
        r.maximal = tuple(isr)
        r.role = "leader"
        r.leader_hw = int(ev.get("hw", -1))
        c = self._committed.get(tp)
        if c is not None and c.hw > 0:
            leo = max(r.leo, 0)
            d = first_disagreement(r.runs, c.runs, min(leo, c.hw))
            if leo < c.hw or d is not None:
                lost_from = d if d is not None else leo
                v = self._violate("leader-completeness", ev,
                                  f"new leader (epoch {ev.get('leader_epoch')}) lacks committed offsets "
                                  f"[{lost_from}, {c.hw}) (its LEO {leo})", tp)
                self._judge_completeness(v, node, tp, int(ev.get("leader_epoch", -1)), lost_from, c.hw)
                # rebase: what this leader holds is the partition's history from now on
                c.hw = lost_from
                c.runs = clip(c.runs, lost_from)

    def _judge_completeness(self, v: Violation, node: Any, tp: str, leader_epoch: int, lost_from: int,
                            hw: int) -> None:
        """Mark a leader-completeness violation by design when Kafka 4.4
        loses the same batches (the module docstring says when)."""
        v.election = self._elections.get((tp, leader_epoch))
        v.lost_range = [lost_from, hw]
        power = self._power_lost.get(node)
        if v.election != "last-known-leader" or power is None or (node, tp) in self._rejoined:
            return
        v.by_design = True
        self.by_design[v.kind] = self.by_design.get(v.kind, 0) + 1
        t, lost = power
        at = f"{t / 1000:.1f} s" if isinstance(t, (int, float)) else f"t={t}"
        v.why = (f"broker {node} lost power at {at} ({lost} log entries not fsynced) and, with no ISR or ELR "
                 f"member left, was elected {tp}'s last known leader without committed offsets [{lost_from}, {hw})")

    def _on_become_follower(self, ev: dict[str, Any]) -> None:
        tp = str(ev["tp"])
        r = self._rep(ev.get("node"), tp)
        self._epochs(ev, r, tp)
        r.role = "follower"
        r.leader_hw = -1

    def _on_isr(self, ev: dict[str, Any]) -> None:
        tp = str(ev["tp"])
        node = ev.get("node")
        isr = [int(x) for x in ev.get("isr", [])]
        maximal = [int(x) for x in ev.get("maximal_isr", isr)]
        if node not in isr and node not in maximal:
            self._violate("leader-not-in-isr", ev, f"leader's ISR {isr} does not contain it", tp)
        if not set(isr) <= set(maximal):
            self._violate("isr-not-subset", ev, f"ISR {isr} not within maximal ISR {maximal}", tp)
        reps = self._replica_sets.get(tp)
        if reps and not set(maximal) <= set(reps):
            self._violate("isr-not-subset", ev, f"maximal ISR {maximal} not within replicas {list(reps)}", tp)
        lr = self._find(node, tp)
        if lr is not None and lr.role == "leader":
            for m in maximal:
                if m in lr.maximal or m == node:
                    continue
                f = self._find(m, tp)
                if f is None or f.leo < 0:
                    continue
                if lr.epoch_start is not None and f.leo < lr.epoch_start:
                    self._violate("isr-expanded-early", ev,
                                  f"replica {m} joined the ISR at LEO {f.leo}, below the leader-epoch start "
                                  f"offset {lr.epoch_start} (epoch {ev.get('leader_epoch')})", tp)
                elif f.leo < lr.hw:
                    self._violate("isr-expanded-early", ev,
                                  f"replica {m} joined the ISR at LEO {f.leo}, below the leader's HW {lr.hw} "
                                  f"(its LEO last moved at t={f.leo_t})", tp)
            lr.maximal = tuple(maximal)

    # -- controllers --------------------------------------------------------------------------------------
    def _on_partition_metadata(self, ev: dict[str, Any]) -> None:
        tp = str(ev["tp"])
        node = ev.get("node")
        le, pe = int(ev.get("leader_epoch", -1)), int(ev.get("partition_epoch", -1))
        reps = tuple(int(x) for x in ev.get("replicas", []))
        isr = tuple(int(x) for x in ev.get("isr", []))
        elr = tuple(int(x) for x in ev.get("elr", []) or [])
        leader = int(ev.get("leader", -1))
        if reps:
            self._replica_sets[tp] = reps
        prev = self._ctrl.get((node, tp))
        if prev is not None:
            if le < prev[0]:
                self._violate("leader-epoch-regressed", ev, f"controller replayed leader epoch {le} after {prev[0]}", tp)
            if pe < prev[1]:
                self._violate("partition-epoch-regressed", ev,
                              f"controller replayed partition epoch {pe} after {prev[1]}", tp)
        self._ctrl[(node, tp)] = (le, pe)
        if reps and not set(isr) <= set(reps):
            self._violate("isr-not-subset", ev, f"ISR {list(isr)} not within replicas {list(reps)}", tp)
        if leader >= 0 and leader not in isr:
            self._violate("leader-not-in-isr", ev, f"leader {leader} not in ISR {list(isr)}", tp)
        if set(elr) & set(isr):
            self._violate("elr-in-isr", ev, f"ELR {list(elr)} overlaps ISR {list(isr)}", tp)
        if reps and not set(elr) <= set(reps):
            self._violate("elr-not-replica", ev, f"ELR {list(elr)} not within replicas {list(reps)}", tp)
        m = self.min_isr(tp)
        if elr and m is not None and len(isr) >= m:
            self._violate("elr-with-isr-at-min", ev, f"ELR {list(elr)} non-empty while ISR {list(isr)} >= min ISR {m}", tp)
        self._note_rejoins(tp, pe, leader, isr)
        state = (leader, le, isr, elr, reps)
        key = (tp, pe)
        seen = self._meta_at_epoch.get(key)
        if seen is None:
            self._meta_at_epoch[key] = state
        elif seen != state:
            self._violate("metadata-divergence", ev,
                          f"partition epoch {pe}: (leader, leader epoch, ISR, ELR, replicas) = {state} here, {seen} elsewhere", tp)

    def _note_rejoins(self, tp: str, pe: int, leader: int, isr: tuple[int, ...]) -> None:
        """A node that lost power and joins the ISR of the newest partition
        epoch under another leader (an AlterPartition expansion: it caught
        up) holds the committed log again; an election that puts the
        elected node alone in the ISR is no such proof."""
        newest = self._newest_isr.get(tp)
        if newest is not None and pe <= newest[0]:
            return
        before = newest[1] if newest is not None else ()
        for n in isr:
            if n not in before and n != leader and n in self._power_lost:
                self._rejoined.add((n, tp))
        self._newest_isr[tp] = (pe, isr)

    def _on_raft_state(self, ev: dict[str, Any]) -> None:
        if ev.get("role") != "leader":
            return
        ep = int(ev.get("epoch", -1))
        node = ev.get("node")
        prev = self._raft_leaders.get(ep)
        if prev is None:
            self._raft_leaders[ep] = node
        elif prev != node:
            self._violate("two-raft-leaders", ev, f"nodes {prev} and {node} both lead quorum epoch {ep}")

    def _on_raft_commit(self, ev: dict[str, Any]) -> None:
        node = ev.get("node")
        hw = int(ev.get("high_watermark", -1))
        prev = self._raft_hw.get(node, -1)
        if hw < prev:
            self._violate("raft-hw-regressed", ev, f"metadata-log HW went back from {prev} to {hw}")
        self._raft_hw[node] = max(prev, hw)

    def _on_node_crash(self, ev: dict[str, Any]) -> None:
        self._violate("node-crash", ev, str(ev.get("error")))


#: event kind -> handler, for every kind but ``append`` and ``hw`` (most of
#: the events: :meth:`InvariantMonitor.observe` calls theirs directly); keyed
#: by Any: a kind read from a trace file may be anything
_HANDLERS: dict[Any, Callable[[InvariantMonitor, dict[str, Any]], None]] = {
    "node_start": InvariantMonitor._on_node_start,
    "node_stop": InvariantMonitor._on_node_stop,
    "election": InvariantMonitor._on_election,
    "loaded": InvariantMonitor._on_loaded,
    "truncate": InvariantMonitor._on_truncate,
    "become_leader": InvariantMonitor._on_become_leader,
    "become_follower": InvariantMonitor._on_become_follower,
    "isr": InvariantMonitor._on_isr,
    "partition_metadata": InvariantMonitor._on_partition_metadata,
    "raft_state": InvariantMonitor._on_raft_state,
    "raft_commit": InvariantMonitor._on_raft_commit,
    "node_crash": InvariantMonitor._on_node_crash,
}


# -- reading real runs' traces -------------------------------------------------------------------------


class TraceError(ValueError):
    """A trace event the monitor cannot read (a field of the wrong type or
    missing); the message names ``file:line``."""


def _located_events(run_dir: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``file:line``, event) of every ``nodes/*/trace.jsonl`` merged by
    time, at the finest stamp each runtime writes: ``t_us`` (the server:
    microseconds of one host's wall clock) else ``t`` in ms; then ``seq``
    (the simulator's total order); then node directory and line order.
    Lines that are not JSON objects are skipped (a node killed mid-write
    leaves a torn last line); an object whose time stamps are not numbers
    is a :class:`TraceError`.

    Millisecond ties matter: a follower's append and the leader's ISR
    expansion triggered by the fetch right after it often share a
    millisecond, and ordering them the wrong way round reads as an early
    ISR expansion that never happened."""
    files = sorted(Path(run_dir).glob("nodes/*/trace.jsonl"))

    def one(i: int, p: Path) -> Iterator[tuple[int, int, int, int, str, dict[str, Any]]]:
        with open(p, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f):
                try:
                    ev = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(ev, dict):
                    where = f"{p}:{n + 1}"
                    try:
                        t_us = ev.get("t_us")
                        if t_us is None:
                            t_us = int(ev.get("t", 0) or 0) * 1000
                        key = (int(t_us), int(ev.get("seq", 0) or 0))
                    except (TypeError, ValueError) as e:
                        raise TraceError(f"{where}: bad time stamp ({e})") from None
                    yield (key[0], key[1], i, n, where, ev)

    for _, _, _, _, where, ev in heapq.merge(*[one(i, p) for i, p in enumerate(files)]):
        yield where, ev


def iter_trace_dir(run_dir: str | Path) -> Iterator[dict[str, Any]]:
    """The events of a run directory's traces in merged order (see
    :func:`_located_events`)."""
    for _, ev in _located_events(run_dir):
        yield ev


def check_trace_dir(run_dir: str | Path, seed: Any = None, min_isr: Any = None) -> dict[str, Any]:
    """Run the monitor over a run directory's traces; returns
    :meth:`InvariantMonitor.summary`. An event the monitor cannot read
    raises :class:`TraceError` naming its file and line."""
    mon = InvariantMonitor(seed=seed, min_isr=min_isr)
    for where, ev in _located_events(run_dir):
        try:
            mon.observe(ev)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            what = f"missing field {e}" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
            raise TraceError(f"{where}: unreadable {ev.get('kind')!r} event ({what})") from None
    return mon.summary()
