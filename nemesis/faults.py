"""The fault vocabulary, as data: a fault is a *kind* with a *target*, started
and stopped by the schedule (the timing, ``nemesis/__init__``).

A name on the command line or in a YAML file is ``kind`` (a target drawn per
start from the kind's usual ones) or ``kind:target`` (that target always);
``leader-kill`` and a few others are names for common pairs (:data:`ALIASES`).

=================  ===========================================================
kind               targets
=================  ===========================================================
partition          a shape: isolate-one, halves, majorities-ring, bridge,
                   one-way (over the nodes, ``nemesis.partition``), primaries
                   (a partition leader cut from the other nodes), controller
                   (the active controller cut likewise), clients (a leader cut
                   from the clients), or a protocol-state target (its nodes
                   cut from the others)
kill               one, minority, majority, all, primaries, controller, and
                   the protocol-state targets below: SIGKILL; the stop
                   restarts every dead node
terminate          the same targets: SIGTERM, a controlled shutdown
pause              the same targets: SIGSTOP; the stop resumes them
clock              the same targets: each clock bumped by +/- 0.1..60 s
clock-strobe       the same targets: each clock flipped by 50..5000 ms every
                   10..100 ms for 0.5..2 s
lose-unfsynced     the same targets: power loss, un-fsynced writes gone;
                   the stop restarts every dead node
torn-write         the same targets: power loss, each file keeping a random
                   prefix of its un-fsynced writes (a torn tail); history
                   name lose-unfsynced; the stop restarts every dead node
latency            all (every node-to-node link): 20..250 ms added
loss               all: 5..30% of messages dropped
rolling-restart    brokers, controllers, all: each node in a seeded order
                   shut down cleanly, started again and waited for until
                   back in sync before the next (``nemesis.rolling``);
                   history name terminate; the stop abandons the rest of
                   the roll and starts every node that is down
reassign           swap: a random partition's replica set loses one member
                   and gains a broker outside it (AlterPartitionReassignments,
                   KIP-455, answered by Kafka's and the reference controller;
                   needs more brokers than the replication factor); the
                   stop keeps the new assignment
decommission       one: a broker removed as an operator removes one
                   (``nemesis.membership``): its replicas reassigned to
                   other brokers, then a clean shutdown once they moved,
                   then UnregisterBroker (KIP-631); the stop starts it
                   again, a broker the controller does not know, which
                   registers as new (a broker added); needs more brokers
                   than the replication factor
story              leader-churn, last-replica-standing, isr-crash,
                   expand-race: compositions of the above that tell one
                   of the seeds' failure narratives (``nemesis.stories``);
                   asked for with ``--scenario NAME``, never ``--nemesis``
                   (the mix names ``story:NAME`` internally)
=================  ===========================================================

Protocol-state targets name nodes by what the cluster's own metadata says
when the fault starts (the contract's ``Observer``), as an operator would,
without knowing any bug: ``sole-isr`` (the only ISR member of a partition
whose ISR has shrunk to one), ``out-of-sync`` (a partition's assigned
replicas outside its ISR), ``isr-followers`` (a partition's ISR members
other than its leader) and ``busiest-leader`` (the broker leading the most
partitions). When no partition is in that state the fault does nothing and
says so (``skipped``).

Targets ``one``/``minority``/``majority``/``all`` count every node of the
cluster (brokers and controllers), so ``kill:majority`` takes the same
number of nodes on every runtime. Every fault is driven through the cluster
contract (``nemesis.control``) and nothing else; a fault needing a capability
the runtime lacks is refused before the run starts (:func:`check_supported`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, cast

from . import partition as grudges
from .control import Capability, Cluster, Observer, Reassignments, ShutdownOutcomes, TornWrites, require
from .membership import Decommission, replica_table, settled_replicas
from .rolling import POLL_MS, SHUTDOWN_GRACE_MS, Roll, back_in_sync, in_sync
from .scenarios import Rebinding
from .stories import STORIES, Record, Story, Timings

C = Capability

#: targets the protocol's state names when the fault starts (:func:`state_nodes`)
STATE_TARGETS = ("sole-isr", "out-of-sync", "isr-followers", "busiest-leader")
NODE_TARGETS = ("one", "minority", "majority", "all", "primaries", "controller", *STATE_TARGETS)
#: targets named by the protocol's state when a fault starts, which a replay
#: names again from the cluster as it is then (:meth:`Fault.replay`)
STATE_NAMED = ("primaries", "controller", "clients", *STATE_TARGETS)
#: the node sets a rolling restart goes through
ROLL_TARGETS = ("brokers", "controllers", "all")


@dataclass(frozen=True)
class Kind:
    """One kind of fault: where its targets come from and what it needs."""

    name: str
    targets: tuple[str, ...]  # every target it accepts
    usual: tuple[str, ...]  # drawn from when none is given
    needs: tuple[Capability, ...]
    op_name: str  # the history's start-<op_name> / stop-<op_name>


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("partition", (*grudges.SHAPES, *STATE_TARGETS), grudges.NODE_SHAPES, (C.PARTITION,), "partition"),
    Kind("kill", NODE_TARGETS, ("one", "minority", "majority", "all"), (C.KILL,), "kill"),
    Kind("terminate", NODE_TARGETS, ("one", "minority"), (C.TERMINATE,), "terminate"),
    Kind("pause", NODE_TARGETS, ("one", "minority", "majority"), (C.PAUSE,), "pause"),
    Kind("clock", NODE_TARGETS, ("one", "minority", "majority"), (C.CLOCK,), "clock"),
    Kind("clock-strobe", NODE_TARGETS, ("one", "minority", "majority"), (C.CLOCK_STROBE,), "clock"),
    Kind("lose-unfsynced", NODE_TARGETS, ("majority", "all"), (C.POWER_LOSS,), "lose-unfsynced"),
    Kind("torn-write", NODE_TARGETS, ("majority", "all"), (C.TORN_WRITE,), "lose-unfsynced"),
    Kind("latency", ("all",), ("all",), (C.LATENCY,), "latency"),
    Kind("loss", ("all",), ("all",), (C.LOSS,), "loss"),
    Kind("rolling-restart", ROLL_TARGETS, ("brokers",), (C.TERMINATE, C.KILL), "terminate"),
    Kind("reassign", ("swap",), ("swap",), (C.REASSIGN,), "reassign"),
    Kind("decommission", ("one",), ("one",), (C.REASSIGN, C.TERMINATE, C.UNREGISTER), "decommission"),
    Kind("story", STORIES, STORIES, (C.PARTITION, C.KILL, C.POWER_LOSS), "partition"),
)}

#: names for common kind:target pairs
ALIASES = {
    "leader-kill": "kill:primaries",
    "controller-kill": "kill:controller",
    "partition-leader": "partition:primaries",
    "partition-controller": "partition:controller",
    "partition-clients": "partition:clients",
    "partition-halves": "partition:halves",
    "partition-ring": "partition:majorities-ring",
    "partition-one-way": "partition:one-way",
    "partition-bridge": "partition:bridge",
    "power-loss": "lose-unfsynced",
    "power-loss-one": "lose-unfsynced:one",
    "power-loss-minority": "lose-unfsynced:minority",
    "power-loss-majority": "lose-unfsynced:majority",
    "power-loss-torn": "torn-write",
    **{s: f"story:{s}" for s in STORIES},
}

#: every generic fault: Jepsen's targets and the protocol-state ones, for
#: every kind a runtime makes, power loss of one node or a minority included
#: (a majority's power loss stays opt-in: under Kafka's default flush policy
#: it loses acknowledged writes by design). No story: those tell a known
#: narrative and are asked for by name.
GENERIC = (
    *(f"partition:{t}" for t in (*grudges.NODE_SHAPES, *grudges.ROLE_SHAPES, *STATE_TARGETS)),
    *(f"{k}:{t}" for k in ("kill", "pause") for t in NODE_TARGETS if t != "all"),
    "terminate", *(f"terminate:{t}" for t in ("primaries", "controller", *STATE_TARGETS)),
    *(f"lose-unfsynced:{t}" for t in ("one", "minority", "primaries", *STATE_TARGETS)),
    "clock", "clock-strobe",
)

#: the membership faults, generic too but drawn only where the cluster has a
#: broker to move a replica to (more brokers than the replication factor:
#: ``harness.cli.hunt.both_make``); ``all`` leaves them out, as a cluster of
#: as many brokers as the replication factor cannot make them
MEMBERSHIP = ("reassign", "decommission")

#: names for several faults at once
GROUPS = {
    "none": (),
    "all": GENERIC,
}


#: what a recorded start says it did; an entry with none of these is
#: resolved when replayed (:meth:`Fault.replay`)
RESOLVED = frozenset({"nodes", "cut", "offsets_ms", "ms", "probability", "story", "skipped"})


class UnknownFault(ValueError):
    """A fault name outside the vocabulary; the message is one line."""


@dataclass(frozen=True)
class FaultSpec:
    """One entry of a nemesis mix: a kind and, optionally, a fixed target.

    A mix is parsed into these once, where it enters (the test
    configuration's validation, a recorded schedule's load), and carried
    as such to the schedule and the faults; its :attr:`name` is what the
    history and test.json say."""

    kind: str
    target: str | None = None

    @property
    def name(self) -> str:
        return self.kind if self.target is None else f"{self.kind}:{self.target}"

    @property
    def op_name(self) -> str:
        return KINDS[self.kind].op_name

    def targets(self) -> tuple[str, ...]:
        return (self.target,) if self.target is not None else KINDS[self.kind].usual


#: the largest offset the clock fault sets (either way), and the largest step
#: a strobe flips a clock by: so the largest backward step a heal's reset makes
CLOCK_MAX_OFFSET_MS = 60_000
STROBE_MAX_DELTA_MS = 5_000


def clock_hold_ms(faults: tuple[FaultSpec, ...]) -> int:
    """How long a mix's clock faults may hold a node's wall-clock timers
    after the clocks are set right: a wall clock set back by D leaves every
    timer Kafka keeps on it up to D late (Kafka's ``Timer.update`` keeps the
    larger time, so a KRaft follower's fetch timeout waits for the clock to
    catch up; the replica fetch backoff's due time and a request's send time
    are wall times), and a clock the clock fault set ahead (by up to
    :data:`CLOCK_MAX_OFFSET_MS`), a strobe on top of it (up to
    :data:`STROBE_MAX_DELTA_MS`), goes back by as much when it is reset.
    0 for a mix without clock faults."""
    kinds = {f.kind for f in faults}
    return (CLOCK_MAX_OFFSET_MS if "clock" in kinds else 0) + (STROBE_MAX_DELTA_MS if "clock-strobe" in kinds else 0)


def clock_held_ms(result: dict[str, Any]) -> int:
    """How long the clock changes one nemesis result reports (a start's
    ``offsets_ms`` or a strobe's ``delta_ms``, at its top or per fault of
    a final heal) hold a node's wall-clock timers once reset: a clock set
    ahead by D goes back by D (:func:`clock_hold_ms` says why), a clock set
    back goes forward and holds nothing; a strobe may end up to its delta
    ahead."""
    held = 0
    for v in (result, *(x for x in result.values() if isinstance(x, dict))):
        offsets = v.get("offsets_ms")
        if isinstance(offsets, dict):
            held = max(held, *(int(ms) for ms in offsets.values() if isinstance(ms, (int, float))), 0)
        delta = v.get("delta_ms")
        if isinstance(delta, (int, float)):
            held = max(held, int(delta))
    return held


def known_names() -> list[str]:
    return [*KINDS, *(f"{k.name}:{t}" for k in KINDS.values() for t in k.targets), *ALIASES, *GROUPS]


def parse(name: str) -> FaultSpec:
    """``kind`` or ``kind:target`` (or an alias) -> a spec; unknown names raise."""
    full = ALIASES.get(name, name)
    kind, _, target = full.partition(":")
    k = KINDS.get(kind)
    if k is None or (target and target not in k.targets):
        hint = f"; {kind} targets: {', '.join(k.targets)}" if k is not None else ""
        raise UnknownFault(f"unknown nemesis {name!r} (kinds: {', '.join(KINDS)}; kind:target{hint})")
    return FaultSpec(kind, target or None)


def expand(names: Iterable[str | FaultSpec]) -> tuple[FaultSpec, ...]:
    """A mix as given (names, groups, aliases, comma lists; a spec already
    parsed passes as it is) -> specs, each once, in order."""
    out: list[FaultSpec] = []
    for raw in names:
        if isinstance(raw, FaultSpec):
            out.append(raw)
            continue
        if not isinstance(raw, str):
            raise UnknownFault(f"a nemesis is a fault name, not {raw!r}")
        for n in (s.strip() for s in raw.split(",")):
            if not n:
                continue
            for m in GROUPS.get(n, (n,)):
                out.append(parse(m))
    return tuple(dict.fromkeys(out))


def check_supported(specs: Iterable[FaultSpec], runtime: str, have: frozenset[Capability]) -> None:
    """Refuse, before a run starts, any fault the runtime cannot make."""
    for s in specs:
        require(runtime, have, KINDS[s.kind].needs, s.name)


def pick_nodes(nodes: list[str], spec: str, rng: random.Random) -> list[str]:
    """Jepsen's node specs: one, minority, majority, all."""
    ns = list(nodes)
    rng.shuffle(ns)
    n = len(ns)
    k = {"one": 1, "minority": max(1, (n - 1) // 2), "majority": n // 2 + 1, "all": n}[spec]
    return sorted(ns[:k])


def state_nodes(target: str, obs: Observer, rng: random.Random) -> tuple[list[str], dict[str, Any]]:
    """The nodes a protocol-state target names now (:data:`STATE_TARGETS`),
    from the Observer's metadata, and the partition they were named by.
    Partitions are considered in key order and one in that state is drawn,
    so the same metadata and rng name the same nodes on every runtime."""
    if target == "busiest-leader":
        led: dict[str, int] = {}
        for k in obs.keys():
            leader = obs.leader_of(k)
            if leader:
                led[leader] = led.get(leader, 0) + 1
        if not led:
            return [], {"skipped": "no partition has a known leader"}
        most = max(led.values())
        node = rng.choice(sorted(n for n, c in led.items() if c == most))
        return [node], {"leads": most}
    named: dict[str, tuple[list[str], list[str]]] = {}  # key: (its nodes, the ISR they were named from)
    for k in obs.keys():
        isr, leader = obs.isr_of(k), obs.leader_of(k)
        if target == "sole-isr":
            nodes = list(isr) if len(isr) == 1 else []
        elif target == "out-of-sync":
            nodes = sorted(set(obs.replicas_of(k)) - set(isr)) if isr else []
        else:  # isr-followers
            nodes = sorted(set(isr) - {leader}) if leader in isr else []
        if nodes:
            named[k] = nodes, sorted(isr)
    if not named:
        return [], {"skipped": f"no partition has {target.replace('-', ' ')} nodes"}
    key = rng.choice(sorted(named))
    nodes, isr = named[key]
    return nodes, {"key": key, "isr": isr}  # the ISR seen: it may change a moment later


def resolve_nodes(target: str, cluster: Cluster, rng: random.Random) -> tuple[list[str], dict[str, Any]]:
    """The nodes a node target names *now* (a leader is whoever leads then),
    and what to record about the choice."""
    obs = cluster.observer
    if target in STATE_TARGETS:
        return state_nodes(target, obs, rng)
    if target == "primaries":
        keys = obs.keys()
        key = rng.choice(keys) if keys else None
        leader = obs.leader_of(key) if key is not None else None
        return ([leader] if leader else []), {"key": key}
    if target == "controller":
        c = obs.active_controller()
        return ([c] if c else []), {}
    return pick_nodes(cluster.nodes.node_names(), target, rng), {}


def resolve_again(target: str, cluster: Cluster, rng: random.Random,
                  key: str | None) -> tuple[list[str], dict[str, Any]]:
    """The nodes a recorded state-named target names now, on a replay: the
    leader of the recorded partition (``primaries``), the recorded
    partition's nodes if it is still in that state (an ISR target), else
    a new draw as a start makes (:func:`resolve_nodes`)."""
    obs = cluster.observer
    known = key is not None and key in obs.keys()
    if target in ("primaries", "clients") and known:
        leader = obs.leader_of(str(key))
        return ([leader] if leader else []), {"key": key}
    if target in STATE_TARGETS and target != "busiest-leader" and known:
        nodes, desc = state_nodes(target, _OneKey(obs, str(key)), rng)
        if nodes:
            return nodes, desc
    return resolve_nodes({"clients": "primaries"}.get(target, target), cluster, rng)


class _OneKey:
    """An observer that shows one partition only (:func:`resolve_again`)."""

    def __init__(self, obs: Observer, key: str) -> None:
        self.obs, self.key = obs, key

    def keys(self) -> list[str]:
        return [self.key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.obs, name)


class UncleanLedger:
    """The brokers of unclean shutdowns (kills, power losses) not yet back
    in sync, shared by every fault of one nemesis. A broker is back once
    its own metadata, which holds its new registration, lists it in the
    ISR of every partition it replicates (:func:`back_in_sync`: any other
    broker's may be from before the crash); where a runtime cannot ask one
    broker alone, once any broker's metadata does on two looks ``settle_ms``
    apart.

    A power loss waits until the ledger is empty, and a kill until no
    broker that lost power is left in it: otherwise either joins an
    earlier unclean shutdown into a correlated failure of several replicas
    (one lost its un-fsynced log, another left the ELR for its unclean
    restart), which under Kafka's default flush policy loses acknowledged
    writes by design, as a majority's power loss does. One unclean failure
    at a time is the budget a replicated log that does not fsync is built
    for.

    A SIGTERM is a clean shutdown only if it ends as one: a controlled
    shutdown still running when the grace period ends is killed, before
    it wrote its clean-shutdown marker (Kafka's ``LogManager.shutdown``
    writes ``.kafka_cleanshutdown``, read back by
    ``readBrokerEpochFromCleanShutdownFiles`` at the next start), so the
    broker registers with no previous broker epoch and the controller takes
    it out of the ISR and ELR as after a kill (KIP-966). A broker sent a
    SIGTERM is *stopping* until its shutdown ended; the runtime then says
    how (``ShutdownOutcomes``), and one that went down without its marker
    joins the unclean shutdowns. A power loss waits for stopping brokers
    too: their shutdown may still end in the grace's kill. A runtime that
    cannot tell counts every SIGTERM as unclean until the broker is back in
    sync."""

    def __init__(self) -> None:
        self.unclean: set[str] = set()
        #: the brokers of ``unclean`` that lost power (their un-fsynced tail)
        self.powered: set[str] = set()
        self.generation: dict[str, int] = {}
        self.looking: set[str] = set()
        #: brokers sent a SIGTERM whose shutdown has not been judged yet
        self.stopping: set[str] = set()

    def add(self, nodes: list[str], power: bool = False) -> None:
        for n in nodes:
            self.unclean.add(n)
            if power:
                self.powered.add(n)
            self.generation[n] = self.generation.get(n, 0) + 1

    def terminating(self, cluster: Cluster, nodes: list[str]) -> None:
        """``nodes`` were sent a SIGTERM (only brokers are counted)."""
        self.settle(cluster)
        brokers, dead = set(cluster.nodes.brokers()), set(cluster.nodes.dead_nodes())
        self.stopping.update(n for n in nodes if n in brokers and n not in dead)

    def settle(self, cluster: Cluster) -> None:
        """Judge every stopping broker whose shutdown has ended: without its
        clean-shutdown marker it is an unclean shutdown from now on."""
        if not self.stopping:
            return
        nodes = cluster.nodes
        if not isinstance(nodes, ShutdownOutcomes):
            self.add(sorted(self.stopping))
            self.stopping.clear()
            return
        for n in sorted(self.stopping):
            clean = nodes.last_shutdown_clean(n)
            if clean is None:
                continue
            self.stopping.discard(n)
            if not clean:
                self.add([n])

    def _in_sync(self, cluster: Cluster, n: str) -> bool:
        return in_sync(cluster, n)

    def pending(self, cluster: Cluster, settle_ms: int, power_only: bool = False) -> list[str]:
        """The brokers still out of sync (with ``power_only``, those that
        lost power). A broker its own metadata shows back in every ISR is
        back now (:func:`back_in_sync`); where the runtime cannot ask one
        broker alone, one in sync by any broker's metadata gets its second
        look ``settle_ms`` later."""
        self.settle(cluster)
        for n in sorted(self.unclean - self.looking):
            own = back_in_sync(cluster, n)
            if own:
                self._back(n)
            elif own is None and self._in_sync(cluster, n):
                self.looking.add(n)
                cluster.after(settle_ms, lambda n=n, gen=self.generation[n]: self._confirm(cluster, n, gen))
        return sorted(self.powered if power_only else self.unclean)

    def _confirm(self, cluster: Cluster, n: str, gen: int) -> None:
        self.looking.discard(n)
        if self.generation.get(n) == gen and self._in_sync(cluster, n):
            self._back(n)

    def _back(self, n: str) -> None:
        self.unclean.discard(n)
        self.powered.discard(n)


#: a schedule entry's own fields (``nemesis.replay``), not what its fault did
ENTRY_KEYS = frozenset(("at_ms", "nominal_ms", "f", "fault", "as_recorded"))


class Fault:
    """One fault of a mix, bound to a cluster: ``start()`` applies it and
    says what it did; ``stop()`` heals every fault of its kind (idempotent,
    so the final heal can always run)."""

    def __init__(self, spec: FaultSpec, cluster: Cluster, rng: random.Random, timings: Timings = Timings(),
                 ledger: UncleanLedger | None = None, record: Record | None = None,
                 roles: Rebinding | None = None) -> None:
        self.spec = spec
        self.cluster = cluster
        self.rng = rng
        self.story = Story(cluster, rng, timings, spec.name, record)
        self.timings = timings
        #: unclean shutdowns not yet back in sync, shared by the nemesis's faults
        self.ledger = UncleanLedger() if ledger is None else ledger
        #: a replayed scripted scenario's roles, shared by the nemesis's faults
        self.roles = Rebinding(cluster) if roles is None else roles
        self.roll = Roll(cluster, lambda n: self.ledger.terminating(cluster, [n]))
        self.decommission = Decommission(cluster)
        #: nodes this fault shut down cleanly, until its stop brings them back
        self.terminated: set[str] = set()

    @property
    def op_name(self) -> str:
        return self.spec.op_name

    def reseed(self, rng: random.Random | None) -> None:
        """Draw this start's targets (and its story's steps) from ``rng``:
        the schedule's own generator for the start (``nemesis.draw_rng``),
        so what one start reads of the protocol's state never moves the
        draws of the next."""
        if rng is not None:
            self.rng = self.story.rng = rng

    def start(self, rng: random.Random | None = None) -> dict[str, Any]:
        self.reseed(rng)
        target = self.rng.choice(self.spec.targets())
        return {"target": target, **_STARTS[self.spec.kind](self, target)}

    def stop(self) -> dict[str, Any]:
        return _STOPS[self.spec.kind](self)

    def replay(self, entry: dict[str, Any], rng: random.Random | None = None) -> dict[str, Any]:
        """Apply a recorded start (``nemesis.replay``) as it was: the same
        nodes, cut, offsets, not a new draw. A story's start and each of its
        steps (``step-partition``) apply their recorded cut and nodes, one
        recorded as skipped (no partition had a known leader) does nothing,
        as recorded; a story start recorded without its cut (an older
        schedule) is told again from its start. What is drawn anew (an
        entry with a target alone) comes from ``rng``, the replay's
        generator for that entry. A scripted scenario's step names its
        nodes by role, bound again now (:class:`~nemesis.scenarios.Rebinding`)."""
        self.reseed(rng)
        if "roles" in entry and not entry.get("as_recorded"):
            entry = self.roles.recast(entry)
        done = {k: v for k, v in entry.items() if k not in ENTRY_KEYS}
        kind, c = self.spec.kind, self.cluster
        if kind == "story" and ("cut" in entry or "step" in entry):
            return self.story.replay(entry)
        if kind in MEMBERSHIP and "error" in entry and not set(entry) & RESOLVED:
            return done  # the recorded request failed (refused, timed out): nothing moved there, nor here
        if not set(entry) & RESOLVED:  # a target alone (a search's new fault): resolved now
            target = entry.get("target") or self.rng.choice(self.spec.targets())
            return {"target": target, **_STARTS[kind](self, target)}
        if kind == "story" and "skipped" in entry:
            return done  # the recorded start found nothing to tell it on, and did nothing
        if kind == "story":
            return self.story.start(entry.get("story") or entry.get("target", ""))
        if kind == "rolling-restart":
            self.roll.start(list(entry.get("nodes", [])))
            return done
        if kind == "decommission":
            return self._replay_decommission(entry, done)
        if kind == "reassign":
            return self._replay_reassign(entry, done)
        if entry.get("target") in STATE_NAMED and "skipped" not in entry and not entry.get("as_recorded"):
            return self._replay_state_named(entry, done)
        if kind == "partition":
            c.net.cut([(a, b) for a, b in entry.get("cut", [])])
        elif kind in ("kill", "terminate", "pause", "lose-unfsynced", "torn-write"):
            # through the same guard as a drawn start: an exact replay meets
            # the same state and so the same decision; an edited schedule
            # (explore's mutants) cannot join power losses a draw would not
            res = self._signal(str(entry.get("target", "")), list(entry.get("nodes", [])))
            if "skipped" in res and "skipped" not in done:
                return {**done, "nodes": [], "skipped": res["skipped"]}
        elif kind == "clock":
            for n, ms in entry.get("offsets_ms", {}).items():
                c.clock.set_offset(n, int(ms))
        elif kind == "clock-strobe":
            self._strobe_nodes(entry, list(entry.get("nodes", [])))
        elif kind == "latency":
            c.net.set_latency(grudges.links(c.nodes.node_names()), entry["ms"], entry["jitter_ms"])
        elif kind == "loss":
            c.net.set_loss(grudges.links(c.nodes.node_names()), entry["probability"])
        return done

    def _replay_reassign(self, entry: dict[str, Any], done: dict[str, Any]) -> dict[str, Any]:
        """A recorded swap, replayed: the recorded replica list if the
        partition's replicas are still the recorded ``from`` (an exact
        replay), else the same swap on the replicas as they are now (a
        runtime that placed them otherwise: Kafka starts its round-robin
        at a random broker): the recorded leaving broker out if it is a
        replica (else one drawn), the recorded arriving one in if it is not
        (else a spare drawn); the recorded lists kept beside."""
        key, after, before = entry.get("key"), list(entry.get("nodes") or []), list(entry.get("from") or [])
        if not key or not after:
            return done
        now = replica_table(self.cluster.observer).get(str(key)) or []
        if before and now and now != before and len(now) == len(before):
            out = next((r for r in before if r not in after and r in now), None) or self.rng.choice(now)
            spare = sorted(set(self.cluster.nodes.brokers()) - set(now))
            new = next((r for r in after if r not in before and r not in now), None) or \
                (self.rng.choice(spare) if spare else None)
            if new is None:
                return {**done, "from": now, "nodes": [], "skipped": "no broker outside the replica set",
                        "recorded_nodes": after}
            done = {**done, "from": now, "nodes": [new if r == out else r for r in now], "recorded_nodes": after,
                    "recorded_from": before}
            after = done["nodes"]
        cast(Reassignments, self.cluster.nodes).reassign(str(key), after)
        return done

    def _replay_decommission(self, entry: dict[str, Any], done: dict[str, Any]) -> dict[str, Any]:
        """A recorded decommission, replayed on the same broker: its
        recorded moves if they remove it from the replicas as they are now
        (an exact replay), else moves planned afresh for that broker, the
        recorded ones kept beside (``recorded_moves``)."""
        nodes = list(entry.get("nodes") or [])
        if not nodes:
            return done
        node, moves = nodes[0], dict(entry.get("moves") or {})
        if not self.decommission.fits(node, moves):
            fresh, why = self.decommission.moves_for(node, self.rng)
            if fresh is None:
                return {**done, "nodes": [], "skipped": why, "recorded_nodes": nodes}
            done = {**done, "moves": fresh, "recorded_moves": moves}
            moves = fresh
        self.decommission.start(node, moves)
        return done

    def _replay_state_named(self, entry: dict[str, Any], done: dict[str, Any]) -> dict[str, Any]:
        """A recorded start whose target the protocol's state names (a
        leader, the active controller, :data:`STATE_TARGETS`): its nodes
        are named again from the cluster as it is now (:func:`resolve_again`),
        and the fault applied to them as recorded otherwise (the same
        offsets, strobe, shape of cut). Where the nodes differ from the
        recording the result says so (``recorded_nodes``): on real
        processes the state a replay meets may not be the recorded one; in
        the simulator an exact replay names the same nodes."""
        kind, target = self.spec.kind, str(entry["target"])
        recorded = list(entry.get("isolated", entry.get("nodes", [])))
        nodes, desc = resolve_again(target, self.cluster, self.rng, entry.get("key"))
        out = {**done, **{k: v for k, v in desc.items() if k != "skipped"}}
        if not nodes:
            out.update({"cut": []} if kind == "partition" else {"nodes": []})
            out["skipped"] = desc.get("skipped", "no such node known")
        elif kind == "partition":
            cut = self._cut_around(target, nodes, entry, recorded)
            self.cluster.net.cut(cut)
            out.update(isolated=nodes, cut=grudges.as_lists(cut))
        elif kind == "clock":
            was = dict(entry.get("offsets_ms", {}))
            offsets = list(was.values()) or [0]
            out["offsets_ms"] = was if sorted(was) == sorted(nodes) else \
                {n: int(offsets[i % len(offsets)]) for i, n in enumerate(nodes)}
            for n, ms in out["offsets_ms"].items():
                self.cluster.clock.set_offset(n, ms)
            out["nodes"] = nodes
        elif kind == "clock-strobe":
            self._strobe_nodes(entry, nodes)
            out["nodes"] = nodes
        else:
            res = self._signal(target, nodes)
            out["nodes"] = res["nodes"]
            if "skipped" in res:
                out["skipped"] = res["skipped"]
        if sorted(nodes) != sorted(recorded):
            out["recorded_nodes"] = recorded
        return out

    def _cut_around(self, target: str, nodes: list[str], entry: dict[str, Any],
                    recorded: list[str]) -> grudges.Cut:
        """The cut a state-named partition makes around ``nodes``: the
        recorded one if they are the recorded nodes, else the same shape."""
        if sorted(nodes) == sorted(recorded) and entry.get("cut"):
            return {(a, b) for a, b in entry["cut"]}
        names = self.cluster.nodes.node_names()
        if target in STATE_TARGETS:
            return grudges.complete_grudge([nodes, [n for n in names if n not in nodes]])
        if target == "clients":
            return grudges.from_clients(nodes[0])
        return grudges.isolate(nodes[0], names)

    def _strobe_nodes(self, entry: dict[str, Any], nodes: list[str]) -> None:
        for n in nodes:
            self.cluster.clock.strobe(n, entry["delta_ms"], entry["period_ms"], entry["duration_ms"])

    # -- starts ------------------------------------------------------------------------
    def _partition(self, shape: str) -> dict[str, Any]:
        c = self.cluster
        if shape in grudges.NODE_SHAPES:
            cut, desc = grudges.shaped(shape, c.nodes.node_names(), self.rng)
        elif shape in STATE_TARGETS:
            nodes, desc = resolve_nodes(shape, c, self.rng)
            if not nodes:
                return {**desc, "cut": []}
            others = [n for n in c.nodes.node_names() if n not in nodes]
            cut, desc = grudges.complete_grudge([nodes, others]), {**desc, "isolated": nodes}
        else:
            nodes, desc = resolve_nodes("controller" if shape == "controller" else "primaries", c, self.rng)
            if not nodes:
                return {**desc, "cut": [], "skipped": "no such node known"}
            node = nodes[0]
            cut = grudges.from_clients(node) if shape == "clients" else grudges.isolate(node, c.nodes.node_names())
            desc = {**desc, "isolated": [node]}
        c.net.cut(cut)
        return {**desc, "cut": grudges.as_lists(cut)}

    def _act(self) -> Callable[[str], None]:
        """What a process fault does to each of its nodes."""
        nodes = self.cluster.nodes
        if self.spec.kind == "torn-write":
            return cast(TornWrites, nodes).torn_power_loss
        return {"kill": nodes.kill, "terminate": nodes.terminate, "pause": nodes.pause,
                "lose-unfsynced": nodes.power_loss}[self.spec.kind]

    def _power_refused(self, target: str, nodes: list[str] | None) -> str | None:
        """Why a power loss must not happen now (None: it may). Beside the
        ledger of unclean shutdowns, a power loss may not take a majority
        of any partition's replicas unless its target says so (``majority``,
        ``all``): that loses acknowledged writes by design."""
        waiting = self.ledger.pending(self.cluster, 2 * self.timings.session_ms)
        if waiting:
            return f"an unclean shutdown is not back in sync: {', '.join(waiting)}"
        if self.ledger.stopping:
            return f"a clean shutdown may yet end in the grace's kill: {', '.join(sorted(self.ledger.stopping))}"
        if nodes is None or target in ("majority", "all"):
            return None
        obs = self.cluster.observer
        for k in obs.keys():
            reps = obs.replicas_of(k)
            if len(set(nodes) & set(reps)) > (len(reps) - 1) // 2:
                return f"it would take a majority of {k}'s replicas (opt-in: {self.spec.kind}:majority)"
        return None

    def _terminate_refused(self, nodes: list[str]) -> str | None:
        """Why a clean shutdown of ``nodes`` must wait (None: it may). A
        broker that lost power stays in the ISR until the controller fences
        it or it registers again, and its new incarnation cannot register
        while the old one's session lives (ClusterControlManager refuses a
        duplicate registration; every controller failover starts the
        sessions afresh). Shutting down the other ISR members cleanly then
        leaves the ISR to the broker whose un-fsynced log is gone, the "last
        replica standing" of seed 002 with its data loss not yet known to the
        controller: it is elected (last known leader) and the replicas that
        hold the committed records truncate to it. That loses acknowledged
        writes by design, so it waits as a kill does."""
        powered = self.ledger.pending(self.cluster, 2 * self.timings.session_ms, power_only=True)
        if not powered:
            return None
        obs = self.cluster.observer
        for k in obs.keys():
            isr = list(obs.isr_of(k))
            left = [r for r in isr if r not in nodes]
            if left and len(left) < len(isr) and set(left) <= set(powered):
                return f"it would leave {k}'s ISR to a power loss not back in sync: {', '.join(left)}"
        return None

    def _signal(self, target: str, nodes: list[str] | None = None) -> dict[str, Any]:
        kind, desc = self.spec.kind, {}
        power = kind in ("lose-unfsynced", "torn-write")
        if power and self._power_refused(target, None):
            return {"nodes": [], "skipped": self._power_refused(target, None)}
        if kind == "kill":
            waiting = self.ledger.pending(self.cluster, 2 * self.timings.session_ms, power_only=True)
            if waiting:
                return {"nodes": [], "skipped": f"a power loss is not back in sync: {', '.join(waiting)}"}
        if nodes is None:
            nodes, desc = resolve_nodes(target, self.cluster, self.rng)
        refused = self._power_refused(target, nodes) if power else None
        if kind == "terminate":
            refused = self._terminate_refused(nodes)
        if refused:
            return {**desc, "nodes": [], "skipped": refused}
        if kind in ("kill", "lose-unfsynced", "torn-write"):
            self.ledger.add([n for n in nodes if n in self.cluster.nodes.brokers()], power)
        if kind == "terminate":
            self.terminated.update(nodes)
            self.ledger.terminating(self.cluster, nodes)
        act = self._act()
        for n in nodes:
            act(n)
        return {**desc, "nodes": nodes}

    def _clock(self, target: str) -> dict[str, Any]:
        nodes, desc = resolve_nodes(target, self.cluster, self.rng)
        offsets = {n: self.rng.choice((-1, 1)) * self.rng.randint(100, CLOCK_MAX_OFFSET_MS) for n in nodes}
        for n, ms in offsets.items():
            self.cluster.clock.set_offset(n, ms)
        return {**desc, "nodes": nodes, "offsets_ms": offsets}

    def _strobe(self, target: str) -> dict[str, Any]:
        nodes, desc = resolve_nodes(target, self.cluster, self.rng)
        delta, period = self.rng.randint(50, STROBE_MAX_DELTA_MS), self.rng.choice((10, 50, 100))
        duration = self.rng.randint(500, 2_000)
        for n in nodes:
            self.cluster.clock.strobe(n, delta, period, duration)
        return {**desc, "nodes": nodes, "delta_ms": delta, "period_ms": period, "duration_ms": duration}

    def _latency(self, target: str) -> dict[str, Any]:
        ms = self.rng.choice((20, 50, 100, 250))
        self.cluster.net.set_latency(grudges.links(self.cluster.nodes.node_names()), ms, ms / 2)
        return {"ms": ms, "jitter_ms": ms / 2}

    def _loss(self, target: str) -> dict[str, Any]:
        p = self.rng.choice((0.05, 0.1, 0.3))
        self.cluster.net.set_loss(grudges.links(self.cluster.nodes.node_names()), p)
        return {"probability": p}

    def _story(self, name: str) -> dict[str, Any]:
        return self.story.start(name)

    def _rolling_restart(self, target: str) -> dict[str, Any]:
        nodes = self.cluster.nodes
        pool = {"brokers": nodes.brokers(), "controllers": nodes.controllers(), "all": nodes.node_names()}[target]
        order = sorted(pool)
        self.rng.shuffle(order)
        self.roll.start(order)
        return {"nodes": order}

    def _reassign(self, target: str) -> dict[str, Any]:
        """swap: one replica of a random partition replaced by a broker
        outside its replica set, the order (and so the preferred leader)
        otherwise kept."""
        obs, brokers = self.cluster.observer, self.cluster.nodes.brokers()
        settled = settled_replicas(replica_table(obs))
        if not settled:
            return {"nodes": [], "skipped": "no partition has known replicas outside a move"}
        key = self.rng.choice(sorted(settled))
        before = settled[key]
        spare = sorted(set(brokers) - set(before))
        if not spare:
            return {"key": key, "nodes": [], "skipped": "no broker outside the replica set"}
        out, new = self.rng.choice(before), self.rng.choice(spare)
        after = [new if r == out else r for r in before]
        cast(Reassignments, self.cluster.nodes).reassign(key, after)
        return {"key": key, "from": before, "nodes": after}

    def _decommission(self, target: str) -> dict[str, Any]:
        """one: a broker whose every partition has a broker to move to,
        drawn from the live ones (``nemesis.membership``)."""
        node, moves, why = self.decommission.plan(self.rng)
        if node is None:
            return {"nodes": [], "skipped": why}
        self.decommission.start(node, moves)
        return {"nodes": [node], "moves": moves}

    def _unroll(self) -> dict[str, Any]:
        self.roll.stop()
        return {"rolled": list(self.roll.restarted), **self._restart()}

    # -- stops ---------------------------------------------------------------------------
    def _heal(self) -> dict[str, Any]:
        self.cluster.net.cut([])
        return {"healed": True}

    def _restart(self) -> dict[str, Any]:
        """Start every dead node; a node this fault shut down that is still
        in its controlled shutdown is started once it is down (at the
        latest after the grace that ends in a kill), so no node the
        nemesis stopped stays down for the rest of the test."""
        dead = self.cluster.nodes.dead_nodes()
        for n in dead:
            self.cluster.nodes.start(n)
        for n in sorted(self.terminated - set(dead)):
            self._start_when_down(n, 0)
        self.terminated.clear()
        return {"restarted": dead}

    def _start_when_down(self, node: str, waited: int) -> None:
        if node in self.cluster.nodes.dead_nodes():
            self.cluster.nodes.start(node)
        elif waited <= SHUTDOWN_GRACE_MS:
            self.cluster.after(POLL_MS, lambda: self._start_when_down(node, waited + POLL_MS))

    def _resume(self) -> dict[str, Any]:
        paused = self.cluster.nodes.paused_nodes()
        for n in paused:
            self.cluster.nodes.resume(n)
        return {"resumed": paused}

    def _reset_clocks(self) -> dict[str, Any]:
        up = [n for n in self.cluster.nodes.node_names() if n not in self.cluster.nodes.dead_nodes()]
        for n in up:
            self.cluster.clock.reset(n)
        return {"reset": up}

    def _no_latency(self) -> dict[str, Any]:
        self.cluster.net.set_latency(grudges.links(self.cluster.nodes.node_names()), 0, 0)
        return {"healed": True}

    def _no_loss(self) -> dict[str, Any]:
        self.cluster.net.set_loss(grudges.links(self.cluster.nodes.node_names()), 0.0)
        return {"healed": True}


_STARTS: dict[str, Callable[[Fault, str], dict[str, Any]]] = {
    "partition": Fault._partition,
    "kill": Fault._signal,
    "terminate": Fault._signal,
    "pause": Fault._signal,
    "lose-unfsynced": Fault._signal,
    "torn-write": Fault._signal,
    "clock": Fault._clock,
    "clock-strobe": Fault._strobe,
    "latency": Fault._latency,
    "loss": Fault._loss,
    "story": Fault._story,
    "rolling-restart": Fault._rolling_restart,
    "reassign": Fault._reassign,
    "decommission": Fault._decommission,
}
_STOPS: dict[str, Callable[[Fault], dict[str, Any]]] = {
    "partition": Fault._heal,
    "kill": Fault._restart,
    "terminate": Fault._restart,
    "lose-unfsynced": Fault._restart,
    "torn-write": Fault._restart,
    "pause": Fault._resume,
    "clock": Fault._reset_clocks,
    "clock-strobe": Fault._reset_clocks,
    "latency": Fault._no_latency,
    "loss": Fault._no_loss,
    "story": lambda f: f.story.stop(),
    "rolling-restart": Fault._unroll,
    "reassign": lambda f: {"kept": True},
    "decommission": lambda f: f.decommission.stop(),
}


def make_faults(specs: Iterable[FaultSpec], cluster: Cluster, rng: random.Random,
                timings: Timings = Timings(), record: Record | None = None) -> dict[str, Fault]:
    """One bound fault per spec of the mix, by its name, each with its own
    seeded rng (and, for them all, one record of unclean shutdowns not yet
    back in sync and one binding of a replayed scenario's roles);
    ``record`` writes a story's follow-up steps to the history."""
    ledger, roles = UncleanLedger(), Rebinding(cluster)
    return {s.name: Fault(s, cluster, random.Random(rng.getrandbits(64)), timings, ledger, record, roles)
            for s in specs}
