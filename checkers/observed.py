"""Rules on what an outside observer saw of real Kafka (``nodes/observer/
trace.jsonl``, written by ``harness.dbs.kafka.observe``), for the fixed
bugs whose effect is a state, not a lost record.

* ``stale-raft-leader``: a controller's ``quorum-state`` names it leader of
  epoch *e* while a voter names a leader of an epoch above *e*, for longer
  than a fixed leader keeps such a file: it resigns once no majority has
  fetched within ``controller.quorum.fetch.timeout.ms`` (KIP-595), and
  persists its candidacy within a further election timeout (Resigned is not
  written down; the timeout is drawn from [1, 2] x
  ``controller.quorum.election.timeout.ms``); so the bound is fetch timeout +
  2 x election timeout + two observer polls. KAFKA-15489: until 3.7.0 a leader
  cut from the other voters never resigned. Only the file of the process
  that wrote it counts: a node restarted shows its previous life's file
  until it writes its own (``fresh`` false), and a node down or paused is not
  a leader. Nor is a process shutting down (``stopping``: sent a SIGTERM):
  Kafka 4.4's graceful shutdown of the raft client (up to 5 s,
  ``KafkaRaftClientDriver.initiateShutdown``) keeps a Resigned leader
  Resigned (``KafkaRaftClient.pollResigned`` only waits for the shutdown,
  lines 3154-3157, where otherwise its election timeout would write epoch
  + 1 unattached, lines 3158-3165), and Resigned is never written down
  (``QuorumState.transitionToResigned``: a memory-only transition); its
  claim counts until the SIGTERM, so a leader stale for longer than the
  bound before it is still found. A claim lasts from the first look that
  found it stale to the last look that still did (``quorum_poll`` events
  mark each look at the files; a trace without them counts to the look
  that found it over): a gap in the observer's looks is not evidence (seed
  2003 on Kafka: the looks stalled 6.3 s behind the poll's asks to brokers
  out of reach, and c1's claim, seen once and over 0.8 s later by its own
  log, was counted for the whole gap).
* ``hw-advanced-under-min-isr``: three consecutive polls saw a partition's
  ISR below ``min.insync.replicas`` (one leader, one leader epoch) and its
  high watermark rose between the first two. The third poll rules out an
  ISR that grew back between a poll's metadata and its watermark read.
  KAFKA-15583: until 3.7.0 the leader advanced the HW whatever the ISR's
  size, so records with fewer than min ISR copies were committed and read.

The verdict has the invariant monitor's shape (``valid``, ``counts``,
``violations``), so :func:`checkers.check.trace_invariants` folds it in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import orjson

STALE_RAFT_LEADER = "stale-raft-leader"
HW_UNDER_MIN_ISR = "hw-advanced-under-min-isr"
RULES = (STALE_RAFT_LEADER, HW_UNDER_MIN_ISR)

#: Kafka's own defaults, for a trace without an ``observer_start`` event
DEFAULTS = {"fetch_timeout_ms": 2000, "election_timeout_ms": 1000, "interval_ms": 250}
EXAMPLES = 20


def stale_bound_ms(settings: dict[str, Any]) -> int:
    """How long a fixed release's leader may still name itself leader after
    another voter leads a higher epoch (see the module's docstring)."""
    s = {**DEFAULTS, **{k: v for k, v in settings.items() if isinstance(v, int)}}
    return s["fetch_timeout_ms"] + 2 * s["election_timeout_ms"] + 2 * s["interval_ms"]


@dataclass
class _Voter:
    alive: bool = False
    leader: Any = None
    epoch: int = -1
    fresh: bool = True
    stopping: bool = False


@dataclass
class StaleLeaders:
    """The ``stale-raft-leader`` rule over ``quorum_state`` events."""

    bound_ms: int
    voters: dict[str, _Voter] = field(default_factory=dict)
    #: node -> (since, its epoch, the higher epoch) while it is stale
    open: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    found: list[dict[str, Any]] = field(default_factory=list)
    #: node -> the last look (``quorum_poll``) that found its open claim still stale
    seen: dict[str, int] = field(default_factory=dict)
    #: the trace marks each look at the files (``quorum_poll``)
    looks: bool = False

    def looked(self, t: int) -> None:
        """A look at every file ended at ``t``: each open claim was still stale then."""
        self.looks = True
        for node in self.open:
            self.seen[node] = t

    def feed(self, ev: dict[str, Any]) -> None:
        node, t = str(ev.get("node")), int(ev["t"])
        if ev.get("alive") is False:
            self.voters[node] = _Voter()
        else:
            self.voters[node] = _Voter(True, ev.get("leader"), int(ev.get("epoch", -1)), bool(ev.get("fresh", True)),
                                       bool(ev.get("stopping", False)))
        top = max((v.epoch for v in self.voters.values() if v.alive and v.leader is not None), default=-1)
        for name, v in self.voters.items():
            claims = v.alive and v.fresh and not v.stopping and v.leader == name
            if claims and v.epoch < top:
                self.open.setdefault(name, (t, v.epoch, top))
            elif name in self.open:
                self._close(name, t)

    def _close(self, node: str, t: int) -> None:
        since, epoch, top = self.open.pop(node)
        last = self.seen.pop(node, since)
        t = max(last, since) if self.looks else t
        if t - since > self.bound_ms:
            self.found.append({"kind": STALE_RAFT_LEADER, "node": node, "t": since, "step": 0, "tp": None,
                               "message": f"{node} named itself leader of quorum epoch {epoch} for {t - since} ms while "
                                      f"epoch {top} had a leader (bound {self.bound_ms} ms)"})

    def end(self, t: int) -> None:
        for node in list(self.open):
            self._close(node, t)


@dataclass
class SmallIsrHw:
    """The ``hw-advanced-under-min-isr`` rule over ``small_isr`` samples."""

    min_isr: Any
    last: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seen: set[tuple[str, int]] = field(default_factory=set)
    found: list[dict[str, Any]] = field(default_factory=list)

    def feed(self, ev: dict[str, Any]) -> None:
        tp = str(ev["tp"])
        run = [s for s in self.last.get(tp, []) if s["poll"] >= int(ev["poll"]) - 2][-2:] + [ev]
        self.last[tp] = run
        if len(run) < 3:
            return
        a, b, c = run
        same = {(s["leader"], s["leader_epoch"]) for s in run}
        if ([s["poll"] for s in run] != [a["poll"], a["poll"] + 1, a["poll"] + 2] or len(same) != 1
                or not all(s.get("small") for s in run)):
            return
        if isinstance(a.get("hw"), int) and isinstance(b.get("hw"), int) and b["hw"] > a["hw"]:
            key = (tp, int(a["leader_epoch"]))
            if key not in self.seen:
                self.seen.add(key)
                self.found.append({
                    "kind": HW_UNDER_MIN_ISR, "node": "observer", "t": b["t"], "tp": tp, "step": 0,
                    "message": f"{tp}: HW {a['hw']} -> {b['hw']} with ISR {b['isr']} below min ISR "
                           f"{self.min_isr if self.min_isr is not None else '?'} (leader {b['leader']}, "
                           f"leader epoch {b['leader_epoch']})"})


def hw_under_min_isr_in_trace(events: Iterable[dict[str, Any]], min_isr: int) -> list[dict[str, Any]]:
    """``hw-advanced-under-min-isr`` on a trace whose leaders report their
    own state (the reference implementation's: ``isr`` events with the
    committed ISR, ``hw`` events of role leader), exactly, without sampling:
    a leader's HW rose while its committed ISR had fewer than ``min_isr``
    members. Once per (node, partition, leader epoch). The model's switch
    ``kip966=off`` does this on purpose (Kafka before 3.7.0), so the same
    schedule can be compared on the model and on a release."""
    isr: dict[tuple[Any, str], tuple[int, int]] = {}  # (node, tp) -> (ISR size, leader epoch)
    hw: dict[tuple[Any, str], int] = {}
    seen: set[tuple[Any, str, int]] = set()
    found = []
    for ev in events:
        kind = ev.get("kind")
        if kind == "isr" and ev.get("state", "committed") == "committed":
            isr[(ev.get("node"), str(ev["tp"]))] = (len(ev.get("isr") or ()), int(ev.get("leader_epoch", -1)))
        elif kind == "hw" and ev.get("role") == "leader":
            key = (ev.get("node"), str(ev["tp"]))
            new, old = int(ev["hw"]), hw.get(key)
            hw[key] = new
            size, le = isr.get(key, (min_isr, -1))
            if old is not None and new > old and size < min_isr and (key[0], key[1], le) not in seen:
                seen.add((key[0], key[1], le))
                found.append({"kind": HW_UNDER_MIN_ISR, "node": key[0], "t": ev.get("t"), "tp": key[1], "step": 0,
                              "message": f"{key[1]}: leader {key[0]}'s HW {old} -> {new} with a committed ISR of "
                                         f"{size} below min ISR {min_isr} (leader epoch {le})"})
        elif kind == "node_start":
            node = ev.get("node")
            for key in [k for k in hw if k[0] == node]:
                hw.pop(key, None)
    return found


def check_observed(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Both rules over an observer's events in time order."""
    stale: StaleLeaders | None = None
    small: SmallIsrHw | None = None
    last_t = 0
    for ev in events:
        kind = ev.get("kind")
        last_t = max(last_t, int(ev.get("t", 0) or 0))
        if kind == "observer_start":
            stale = StaleLeaders(stale_bound_ms(ev))
            small = SmallIsrHw(ev.get("min_isr"))
        elif kind == "quorum_state":
            stale = stale or StaleLeaders(stale_bound_ms({}))
            stale.feed(ev)
        elif kind == "quorum_poll":
            stale = stale or StaleLeaders(stale_bound_ms({}))
            stale.looked(int(ev["t"]))
        elif kind == "small_isr":
            small = small or SmallIsrHw(None)
            small.feed(ev)
    if stale is not None:
        stale.end(last_t)
    found = (stale.found if stale else []) + (small.found if small else [])
    counts: dict[str, int] = {}
    for v in found:
        counts[v["kind"]] = counts.get(v["kind"], 0) + 1
    return {"valid": not found, "counts": counts, "violations": found[:EXAMPLES * len(RULES)]}


def check_observer_trace(run_dir: str | Path) -> dict[str, Any] | None:
    """:func:`check_observed` over ``<run>/nodes/observer/trace.jsonl``, or
    None when the run has no observer (the simulator, the reference db)."""
    path = Path(run_dir) / "nodes" / "observer" / "trace.jsonl"
    if not path.is_file():
        return None
    events = []
    with open(path, "rb") as f:
        for line in f:
            try:
                ev = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a torn last line
            if isinstance(ev, dict) and ev.get("kind") in ("observer_start", "quorum_state", "small_isr"):
                events.append(ev)
    events.sort(key=lambda e: int(e.get("t_us") or int(e.get("t", 0) or 0) * 1000))
    return check_observed(events)


def merge(summary: dict[str, Any], observed: dict[str, Any] | None) -> dict[str, Any]:
    """The invariant monitor's summary with the observer's findings added."""
    if not observed or not observed["counts"]:
        return summary
    counts = dict(summary.get("counts") or {})
    for k, n in observed["counts"].items():
        counts[k] = counts.get(k, 0) + n
    return {**summary, "valid": False, "counts": dict(sorted(counts.items())),
            "violations": list(summary.get("violations") or []) + observed["violations"]}
