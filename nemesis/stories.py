"""Stories: faults that tell the start of one of the seeds' failure narratives
at a random moment, so a seed search reaches them in tens, not thousands, of
seeds. Each is a composition of the basic faults (cuts, kills, power loss)
on roles the protocol's state names when the story starts (a partition's
leader ``L``, its followers), with follow-up steps on the runtime's own
clock (``Cluster.step_after``: virtual time in the simulator).

============================  ===============================================
leader-churn                  isolate L; once a successor leads, isolate it
                              too a few ms later (rapid leader changes)
last-replica-standing         cut L from the other brokers (not the
                              controllers) until it leads alone, then
                              power-loss it (seed 002)
isr-crash                     cut one follower F from L until it leaves the
                              ISR, then kill L and the other followers
                              (seed 003, unclean election)
expand-race                   fence a follower (cut from the controllers)
                              while it keeps replicating, then isolate L and
                              unfence it (strict ISR expansion)
============================  ===============================================

``--scenario`` (``nemesis.scenarios``) plays one such narrative as a fixed
script; a story is a fault of the random mix, as often as the schedule draws
it. Its stop heals every cut and restarts every node it took down.

Every follow-up step that acts is a nemesis operation of the history,
``step-partition`` (a story's history name is ``partition``) with the
story's fault, the step and what it did (``cut``, ``nodes``), recorded by the
runtime's ``record`` (an invocation and a completion, both ``info``, at the
moment the step acts), identically on both runtimes. A schedule
(``nemesis.replay``) therefore holds the steps, and a replay applies the
start's cut and each step as recorded instead of telling the story again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

from . import partition as grudges
from .control import Cluster

STORIES = ("leader-churn", "last-replica-standing", "isr-crash", "expand-race")

#: the history's name of a story's follow-up step (a story is a ``partition``)
STEP_OP = "step-partition"

#: ``record(f, value)``: write one nemesis operation (invocation and
#: completion) to the runtime's history
Record = Callable[[str, dict[str, Any]], None]


def step_ops(value: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The values of a step's two history operations, as every nemesis
    operation has them: the invocation names the fault, the completion
    says what was done (so a replayed step records the same pair)."""
    return {"fault": value["fault"]}, value


@dataclass(frozen=True)
class Timings:
    """The protocol timeouts a story waits on (the runtime's settings)."""

    lag_ms: int = 5000  # replica.lag.time.max.ms
    session_ms: int = 4000  # broker.session.timeout.ms
    interval_ms: int = 10_000  # the nemesis interval: a story's steps fit in it


class Story:
    """One story of a mix, bound to a cluster."""

    def __init__(self, cluster: Cluster, rng: random.Random, timings: Timings, fault: str = "story",
                 record: Record | None = None) -> None:
        self.cluster = cluster
        self.rng = rng
        self.timings = timings
        #: the fault's name in the mix (what a step's record says it belongs to)
        self.fault = fault
        self.record = record
        self.name = ""
        self.token = 0
        self.cut: set[tuple[str, str]] = set()

    def _later(self, delay_ms: int, fn: Callable[[], None]) -> None:
        token = self.token

        def run() -> None:
            if token == self.token:
                fn()
        self.cluster.step_after(delay_ms, run)

    def _add_cut(self, pairs: set[tuple[str, str]]) -> None:
        self.cut |= pairs
        self.cluster.net.cut(self.cut)

    def _step(self, step: str, **done: Any) -> None:
        """A follow-up step acted: record it (``STEP_OP``) with what it did."""
        if self.record is not None:
            self.record(STEP_OP, {"fault": self.fault, "story": self.name, "step": step, **done})

    def _set_cut(self, step: str) -> None:
        self.cluster.net.cut(self.cut)
        self._step(step, cut=grudges.as_lists(self.cut))

    def _act(self, step: str, nodes: list[str]) -> None:
        act = {"kill": self.cluster.nodes.kill, "power-loss": self.cluster.nodes.power_loss}[step]
        for n in nodes:
            act(n)
        self._step(step, nodes=list(nodes))

    def replay(self, entry: dict[str, Any]) -> dict[str, Any]:
        """A recorded start or step applied as it was (the same cut, the
        same nodes), with no follow-ups of its own: the schedule holds them."""
        self.token += 1
        done = {k: v for k, v in entry.items() if k not in ("at_ms", "nominal_ms", "f", "fault")}
        self.name = str(entry.get("story", self.name))
        if "cut" in entry:
            self.cut = {(a, b) for a, b in entry["cut"]}
            self.cluster.net.cut(self.cut)
        act = {"kill": self.cluster.nodes.kill, "power-loss": self.cluster.nodes.power_loss}.get(entry.get("step", ""))
        if act is not None:
            for n in entry.get("nodes", []):
                act(n)
        return done

    def _roles(self) -> tuple[str | None, str | None, list[str]]:
        """(key, leader, replicas) of a random partition with a known leader."""
        obs = self.cluster.observer
        keys = [k for k in obs.keys() if obs.leader_of(k)]
        if not keys:
            return None, None, []
        key = self.rng.choice(keys)
        return key, obs.leader_of(key), obs.replicas_of(key) or self.cluster.nodes.brokers()

    def start(self, name: str) -> dict[str, Any]:
        self.token += 1
        self.name = name
        key, leader, reps = self._roles()
        if leader is None:
            return {"story": name, "skipped": "no partition has a known leader"}
        followers = [r for r in reps if r != leader]
        wait_lag = min(int(self.timings.lag_ms * 1.5), int(self.timings.interval_ms * 0.8))
        value: dict[str, Any] = {"story": name, "key": key, "leader": leader}
        getattr(self, "_" + name.replace("-", "_"))(key, leader, followers, wait_lag, value)
        value["cut"] = grudges.as_lists(self.cut)
        return value

    def stop(self) -> dict[str, Any]:
        self.token += 1
        self.cut = set()
        self.cluster.net.cut([])
        dead = self.cluster.nodes.dead_nodes()
        for n in dead:
            self.cluster.nodes.start(n)
        return {"healed": True, "restarted": dead}

    # -- the stories ---------------------------------------------------------------------------
    def _leader_churn(self, key: str, leader: str, followers: list[str], wait_lag: int, value: dict) -> None:
        nodes = self.cluster.nodes.node_names()
        self._add_cut(grudges.isolate(leader, nodes))

        def successor() -> None:
            new = self.cluster.observer.leader_of(key)
            if new is None or new == leader:
                self._later(5, successor)
                return
            def isolate_successor() -> None:
                self.cut |= grudges.isolate(new, nodes)
                self._set_cut("isolate-successor")
            self._later(self.rng.randint(0, 30), isolate_successor)
        self._later(5, successor)

    def _last_replica_standing(self, key: str, leader: str, followers: list[str], wait_lag: int,
                               value: dict) -> None:
        others = [b for b in self.cluster.nodes.brokers() if b != leader]
        self._add_cut(grudges.complete_grudge([[leader], others]))
        self._later(wait_lag, lambda: self._act("power-loss", [leader]))

    def _isr_crash(self, key: str, leader: str, followers: list[str], wait_lag: int, value: dict) -> None:
        laggard = self.rng.choice(followers) if followers else leader
        value["laggard"] = laggard
        self._add_cut(grudges.complete_grudge([[laggard], [leader]]))
        victims = sorted({leader, *followers} - {laggard})

        self._later(wait_lag, lambda: self._act("kill", victims))

    def _expand_race(self, key: str, leader: str, followers: list[str], wait_lag: int, value: dict) -> None:
        fenced = self.rng.choice(followers) if followers else leader
        value["fenced"] = fenced
        fence = grudges.complete_grudge([[fenced], self.cluster.nodes.controllers()])
        self._add_cut(fence)

        def swap() -> None:
            self.cut -= fence
            self.cut |= grudges.isolate(leader, self.cluster.nodes.node_names())
            self._set_cut("unfence-isolate-leader")
        self._later(min(int(self.timings.session_ms * 1.5), int(self.timings.interval_ms * 0.8)), swap)
