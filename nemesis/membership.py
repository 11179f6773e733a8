"""Membership changes: a broker decommissioned, then a broker added in its
place, as an operator changes a KRaft cluster's brokers. Kafka's documented
way to remove a broker: move its replicas to other brokers
(AlterPartitionReassignments, KIP-455), shut it down cleanly, then
unregister it (UnregisterBroker, KIP-631: ``kafka-cluster.sh unregister``),
so the controller forgets its registration (every runtime sends it: the
simulator's admin endpoint, ``harness.dbs.admin`` on real hosts, to the
reference controller and to Kafka 4.4's alike). Adding a broker is starting one
whose id the controller does not know: it registers as new and takes
replicas only when a reassignment (or a new topic) gives it some.

The steps run on the runtime's clock (``Cluster.after``), so the simulator
moves and removes in virtual time and real processes in real time:

1. ``start``: for every partition the broker replicates, a reassignment
   that swaps it for a broker outside the partition's set (the same spare
   for all of them when one fits); refused (``skipped``) when some
   partition has no broker to move to;
2. once no partition lists the broker as a replica (looked at every
   ``POLL_MS``, for at most ``MOVE_WAIT_MS``; after that the removal is
   abandoned and the broker keeps running), a clean shutdown;
3. once it is down (a kill after ``SHUTDOWN_GRACE_MS``), UnregisterBroker.

``stop`` abandons whatever step has not run and starts the broker again if
it is down: a broker the controller no longer knows registers afresh (its
old logs are of partitions it no longer replicates).
"""

from __future__ import annotations

import random
from typing import Any, Callable, Protocol, cast, runtime_checkable

from .control import Cluster, Observer, Reassignments

POLL_MS = 500
MOVE_WAIT_MS = 60_000
SHUTDOWN_GRACE_MS = 30_000


@runtime_checkable
class Unregisters(Protocol):
    """Node control of a runtime with :attr:`Capability.UNREGISTER`."""

    def unregister(self, node: str) -> None:
        """Ask the controller to forget the broker's registration (KIP-631)."""
        ...


def replica_table(obs: Observer) -> dict[str, list[str]]:
    """Every partition's replicas as the observer reads them (a partition
    with none known left out)."""
    return {k: r for k in obs.keys() if (r := obs.replicas_of(k))}


def settled_replicas(reps: dict[str, list[str]]) -> dict[str, list[str]]:
    """The partitions of a :func:`replica_table` no reassignment is
    moving. Metadata lists a moving partition's target and leaving
    replicas together (KIP-455), more than the replication factor (the
    fewest replicas any partition lists), and a plan made from that union
    would grow the partition; those wait for the move to end."""
    rf = min((len(r) for r in reps.values()), default=0)
    return {k: r for k, r in reps.items() if len(r) == rf}


class Decommission:
    """One decommission at a time; ``stop`` abandons the rest of it."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.token = 0
        self.node: str | None = None
        #: what the follow-up steps did, for the stop's record
        self.done: list[str] = []

    def plan(self, rng: random.Random) -> tuple[str | None, dict[str, list[str]], str]:
        """The broker to remove and, per partition it replicates, its new
        replica list; (None, {}, why) when no broker can go."""
        nodes = self.cluster.nodes
        down = set(nodes.dead_nodes())
        live = sorted(b for b in nodes.brokers() if b not in down)
        for node in rng.sample(live, len(live)):
            moves, _ = self.moves_for(node, rng)
            if moves is not None:
                return node, moves, ""
        return None, {}, "no broker whose every partition has a broker to move to"

    def moves_for(self, node: str, rng: random.Random) -> tuple[dict[str, list[str]] | None, str]:
        """Per partition ``node`` replicates now, its replica list with
        ``node`` swapped for a live broker outside it; (None, why) when a
        move of one of them is under way or one has no broker to move to."""
        nodes, obs = self.cluster.nodes, self.cluster.observer
        down = set(nodes.dead_nodes())
        live = sorted(b for b in nodes.brokers() if b not in down)
        every = replica_table(obs)
        settled = settled_replicas(every)
        if any(node in r and k not in settled for k, r in every.items()):
            return None, f"a move of a partition of {node} is under way"
        moves: dict[str, list[str]] = {}
        for k in sorted(settled):
            reps = settled[k]
            if node not in reps:
                continue
            spare = [b for b in live if b != node and b not in reps]
            if not spare:
                return None, f"{k} has no broker to move {node}'s replica to"
            moves[k] = [rng.choice(spare) if r == node else r for r in reps]
        return moves, ""

    def fits(self, node: str, moves: dict[str, list[str]]) -> bool:
        """Whether recorded ``moves`` remove ``node`` from the replicas as
        they are now: one move per partition listing it, each swapping it
        alone for a broker outside the set (a replay on a runtime that
        placed the replicas otherwise does not fit)."""
        now = {k: r for k, r in replica_table(self.cluster.observer).items() if node in r}
        return set(now) == set(moves) and all(
            len(moves[k]) == len(r) and set(r) - set(moves[k]) == {node} and node not in moves[k]
            for k, r in now.items())

    def start(self, node: str, moves: dict[str, list[str]]) -> None:
        self.token += 1
        self.node, self.done = node, []
        move = cast(Reassignments, self.cluster.nodes)
        for key, replicas in sorted(moves.items()):
            move.reassign(key, replicas)
        self._later(self.token, lambda: self._wait_moved(self.token, node, 0))

    def stop(self) -> dict[str, Any]:
        self.token += 1
        node, done = self.node, list(self.done)
        self.node, self.done = None, []
        added: list[str] = []
        out: dict[str, Any] = {"steps": done, "added": added}
        if node is not None and node in self.cluster.nodes.dead_nodes():
            self.cluster.nodes.start(node)
            added.append(node)
        elif node is not None and "moved" in done and "shut-down" not in done:
            # told to shut down and not down yet: started again once down, so
            # the broker comes back after the stop on every runtime (Kafka's
            # controlled shutdown outlasted the stop by seconds where the
            # model's was over, and the broker stayed down until a later heal)
            token = self.token
            self._later(token, lambda: self._start_when_down(token, node, 0))
            out["starts_when_down"] = node
        return out

    def _start_when_down(self, token: int, node: str, waited: int) -> None:
        nodes = self.cluster.nodes
        if node in nodes.dead_nodes():
            nodes.start(node)
        elif waited < SHUTDOWN_GRACE_MS:
            self._later(token, lambda: self._start_when_down(token, node, waited + POLL_MS))

    def _later(self, token: int, fn: Callable[[], None]) -> None:
        def run() -> None:
            if token == self.token:
                fn()
        self.cluster.after(POLL_MS, run)

    def _wait_moved(self, token: int, node: str, waited: int) -> None:
        obs = self.cluster.observer
        if any(node in obs.replicas_of(k) for k in obs.keys()):
            if waited < MOVE_WAIT_MS:
                self._later(token, lambda: self._wait_moved(token, node, waited + POLL_MS))
            else:
                self.done.append("moves-incomplete")
            return
        self.done.append("moved")
        self.cluster.nodes.terminate(node)
        self._later(token, lambda: self._wait_down(token, node, 0))

    def _wait_down(self, token: int, node: str, waited: int) -> None:
        nodes = self.cluster.nodes
        if node not in nodes.dead_nodes():
            if waited < SHUTDOWN_GRACE_MS:
                self._later(token, lambda: self._wait_down(token, node, waited + POLL_MS))
                return
            nodes.kill(node)
        self.done.append("shut-down")
        try:
            cast(Unregisters, nodes).unregister(node)
        except Exception as e:  # a step on a timer: its failure is told by the stop's record
            self.done.append(f"unregister-failed: {type(e).__name__}: {e}"[:200])
            return
        self.done.append("unregistered")
