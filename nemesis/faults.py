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
                   from the clients)
kill               one, minority, majority, all, primaries, controller: SIGKILL;
                   the stop restarts every dead node
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
story              leader-churn, last-replica-standing, isr-crash,
                   expand-race: compositions of the above that tell one
                   of the seeds' failure narratives (``nemesis.stories``)
=================  ===========================================================

Targets ``one``/``minority``/``majority``/``all`` count every node of the
cluster (brokers and controllers), so ``kill:majority`` takes the same
number of nodes on every runtime. Every fault is driven through the cluster
contract (``nemesis.control``) and nothing else; a fault needing a capability
the runtime lacks is refused before the run starts (:func:`check_supported`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, cast

from . import partition as grudges
from .control import Capability, Cluster, TornWrites, require
from .stories import STORIES, Record, Story, Timings

C = Capability

NODE_TARGETS = ("one", "minority", "majority", "all", "primaries", "controller")


@dataclass(frozen=True)
class Kind:
    """One kind of fault: where its targets come from and what it needs."""

    name: str
    targets: tuple[str, ...]  # every target it accepts
    usual: tuple[str, ...]  # drawn from when none is given
    needs: tuple[Capability, ...]
    op_name: str  # the history's start-<op_name> / stop-<op_name>


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("partition", grudges.SHAPES, grudges.NODE_SHAPES, (C.PARTITION,), "partition"),
    Kind("kill", NODE_TARGETS, ("one", "minority", "majority", "all"), (C.KILL,), "kill"),
    Kind("terminate", NODE_TARGETS, ("one", "minority"), (C.TERMINATE,), "terminate"),
    Kind("pause", NODE_TARGETS, ("one", "minority", "majority"), (C.PAUSE,), "pause"),
    Kind("clock", NODE_TARGETS, ("one", "minority", "majority"), (C.CLOCK,), "clock"),
    Kind("clock-strobe", NODE_TARGETS, ("one", "minority", "majority"), (C.CLOCK_STROBE,), "clock"),
    Kind("lose-unfsynced", NODE_TARGETS, ("majority", "all"), (C.POWER_LOSS,), "lose-unfsynced"),
    Kind("torn-write", NODE_TARGETS, ("majority", "all"), (C.TORN_WRITE,), "lose-unfsynced"),
    Kind("latency", ("all",), ("all",), (C.LATENCY,), "latency"),
    Kind("loss", ("all",), ("all",), (C.LOSS,), "loss"),
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

#: names for several faults at once
GROUPS = {
    "none": (),
    "all": ("partition", "partition:primaries", "partition:controller", "partition:clients", "kill",
            "kill:primaries", "kill:controller", "pause", "clock", "clock-strobe", "story:leader-churn",
            "story:expand-race"),
}


class UnknownFault(ValueError):
    """A fault name outside the vocabulary; the message is one line."""


@dataclass(frozen=True)
class FaultSpec:
    """One entry of a nemesis mix: a kind and, optionally, a fixed target."""

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


def expand(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """A mix as given (names, groups, aliases, comma lists) -> canonical
    fault names, each once, in order."""
    out: list[str] = []
    for raw in names:
        for n in (s.strip() for s in raw.split(",")):
            if not n:
                continue
            for m in GROUPS.get(n, (n,)):
                out.append(parse(m).name)
    return tuple(dict.fromkeys(out))


def check_supported(names: tuple[str, ...], runtime: str, have: frozenset[Capability]) -> None:
    """Refuse, before a run starts, any fault the runtime cannot make."""
    for n in names:
        require(runtime, have, KINDS[parse(n).kind].needs, n)


def pick_nodes(nodes: list[str], spec: str, rng: random.Random) -> list[str]:
    """Jepsen's node specs: one, minority, majority, all."""
    ns = list(nodes)
    rng.shuffle(ns)
    n = len(ns)
    k = {"one": 1, "minority": max(1, (n - 1) // 2), "majority": n // 2 + 1, "all": n}[spec]
    return sorted(ns[:k])


def resolve_nodes(target: str, cluster: Cluster, rng: random.Random) -> tuple[list[str], dict[str, Any]]:
    """The nodes a node target names *now* (a leader is whoever leads then),
    and what to record about the choice."""
    obs = cluster.observer
    if target == "primaries":
        keys = obs.keys()
        key = rng.choice(keys) if keys else None
        leader = obs.leader_of(key) if key is not None else None
        return ([leader] if leader else []), {"key": key}
    if target == "controller":
        c = obs.active_controller()
        return ([c] if c else []), {}
    return pick_nodes(cluster.nodes.node_names(), target, rng), {}


class Fault:
    """One fault of a mix, bound to a cluster: ``start()`` applies it and
    says what it did; ``stop()`` heals every fault of its kind (idempotent,
    so the final heal can always run)."""

    def __init__(self, spec: FaultSpec, cluster: Cluster, rng: random.Random, timings: Timings = Timings(),
                 record: Record | None = None) -> None:
        self.spec = spec
        self.cluster = cluster
        self.rng = rng
        self.story = Story(cluster, rng, timings, spec.name, record)

    @property
    def op_name(self) -> str:
        return self.spec.op_name

    def start(self) -> dict[str, Any]:
        target = self.rng.choice(self.spec.targets())
        return {"target": target, **_STARTS[self.spec.kind](self, target)}

    def stop(self) -> dict[str, Any]:
        return _STOPS[self.spec.kind](self)

    def replay(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Apply a recorded start (``nemesis.replay``) as it was: the same
        nodes, cut, offsets, not a new draw. A story's start and each of its
        steps (``step-partition``) apply their recorded cut and nodes; a
        story start recorded without its cut (an older schedule) is told
        again from its start."""
        done = {k: v for k, v in entry.items() if k not in ("at_ms", "f", "fault")}
        kind, c = self.spec.kind, self.cluster
        if kind == "story" and ("cut" in entry or "step" in entry):
            return self.story.replay(entry)
        if kind == "story":
            return self.story.start(entry.get("story") or entry.get("target", ""))
        if kind == "partition":
            c.net.cut([(a, b) for a, b in entry.get("cut", [])])
        elif kind in ("kill", "terminate", "pause", "lose-unfsynced", "torn-write"):
            act = self._act()
            for n in entry.get("nodes", []):
                act(n)
        elif kind == "clock":
            for n, ms in entry.get("offsets_ms", {}).items():
                c.clock.set_offset(n, int(ms))
        elif kind == "clock-strobe":
            for n in entry.get("nodes", []):
                c.clock.strobe(n, entry["delta_ms"], entry["period_ms"], entry["duration_ms"])
        elif kind == "latency":
            c.net.set_latency(grudges.links(c.nodes.node_names()), entry["ms"], entry["jitter_ms"])
        elif kind == "loss":
            c.net.set_loss(grudges.links(c.nodes.node_names()), entry["probability"])
        return done

    # -- starts ------------------------------------------------------------------------
    def _partition(self, shape: str) -> dict[str, Any]:
        c = self.cluster
        if shape in grudges.NODE_SHAPES:
            cut, desc = grudges.shaped(shape, c.nodes.node_names(), self.rng)
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

    def _signal(self, target: str) -> dict[str, Any]:
        nodes, desc = resolve_nodes(target, self.cluster, self.rng)
        act = self._act()
        for n in nodes:
            act(n)
        return {**desc, "nodes": nodes}

    def _clock(self, target: str) -> dict[str, Any]:
        nodes, desc = resolve_nodes(target, self.cluster, self.rng)
        offsets = {n: self.rng.choice((-1, 1)) * self.rng.randint(100, 60_000) for n in nodes}
        for n, ms in offsets.items():
            self.cluster.clock.set_offset(n, ms)
        return {**desc, "nodes": nodes, "offsets_ms": offsets}

    def _strobe(self, target: str) -> dict[str, Any]:
        nodes, desc = resolve_nodes(target, self.cluster, self.rng)
        delta, period = self.rng.randint(50, 5_000), self.rng.choice((10, 50, 100))
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

    # -- stops ---------------------------------------------------------------------------
    def _heal(self) -> dict[str, Any]:
        self.cluster.net.cut([])
        return {"healed": True}

    def _restart(self) -> dict[str, Any]:
        dead = self.cluster.nodes.dead_nodes()
        for n in dead:
            self.cluster.nodes.start(n)
        return {"restarted": dead}

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
}


def make_faults(names: list[str] | tuple[str, ...], cluster: Cluster, rng: random.Random,
                timings: Timings = Timings(), record: Record | None = None) -> dict[str, Fault]:
    """One bound fault per name of the mix, each with its own seeded rng;
    ``record`` writes a story's follow-up steps to the history."""
    return {n: Fault(parse(n), cluster, random.Random(rng.getrandbits(64)), timings, record) for n in names}
