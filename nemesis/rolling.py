"""Rolling restarts: every node of a set, one at a time, shut down cleanly
(SIGTERM: Kafka's controlled shutdown moves its leaderships first), started
again, and waited for until it is back in sync before the next one goes, as
an operator rolls a cluster through an upgrade. Kafka documents this as the
way to restart a cluster without unavailability (controlled shutdown, one
broker at a time). Its steps run on the runtime's clock (``Cluster.after``),
so the simulator rolls in virtual time and real processes in real time.
"""

from __future__ import annotations

from typing import Callable

from .control import Cluster

#: how often a step looks at the cluster again
POLL_MS = 200
#: a node still running this long after its SIGTERM is killed (the
#: simulator's and the server's own grace for a controlled shutdown)
SHUTDOWN_GRACE_MS = 30_000


def in_sync(cluster: Cluster, node: str) -> bool:
    """The broker runs, its running incarnation has registered (so the
    controller has fenced the previous one out of the ISRs), a controller
    is active, and it is in the ISR of every partition it replicates.
    Without the registration the ISR may be the previous incarnation's:
    a controller failover renews every registered broker's session, so a
    restarted broker can wait out many failovers refused as a duplicate
    while the metadata still lists its old self in sync."""
    obs = cluster.observer
    return (node not in cluster.nodes.dead_nodes() and obs.broker_epoch(node) is not None
            and obs.active_controller() is not None
            and all(node in obs.isr_of(k) for k in obs.keys() if node in obs.replicas_of(k)))


def back_in_sync(cluster: Cluster, node: str) -> bool | None:
    """In sync by the broker's own metadata (:meth:`Observer.own_isrs`):
    it runs, has registered, and its own metadata lists it in the ISR of
    every partition it replicates. One look is enough: its metadata holds
    its registration, which took the previous incarnation out of every ISR
    and ELR after an unclean shutdown (KIP-966), so only the leader's later
    expansion, once it caught up, can have put it back. None where the
    runtime cannot ask one broker alone (:func:`in_sync` then, twice)."""
    obs = cluster.observer
    if node in cluster.nodes.dead_nodes() or obs.broker_epoch(node) is None:
        return False  # (asked first: a starting broker does not answer, and the ask waits)
    own = obs.own_isrs(node)
    if own is None:
        return None
    if not own:
        return False
    return all(node in own.get(k, ()) for k in obs.keys() if node in obs.replicas_of(k))


class Roll:
    """One rolling restart at a time; ``stop`` abandons the rest of it."""

    def __init__(self, cluster: Cluster, terminating: Callable[[str], None] = lambda node: None) -> None:
        self.cluster = cluster
        #: told of each node the roll sends a SIGTERM, before it is sent (the
        #: nemesis's ledger of unclean shutdowns judges how it ended)
        self.terminating = terminating
        self.token = 0
        #: nodes restarted by the current roll, in order
        self.restarted: list[str] = []

    def start(self, order: list[str]) -> None:
        self.token += 1
        self.restarted = []
        self._step(self.token, list(order), 0)

    def stop(self) -> None:
        self.token += 1

    def _later(self, token: int, fn: Callable[[], None]) -> None:
        def run() -> None:
            if token == self.token:
                fn()
        self.cluster.after(POLL_MS, run)

    def _step(self, token: int, order: list[str], i: int) -> None:
        if i >= len(order):
            return
        node = order[i]
        self.terminating(node)
        self.cluster.nodes.terminate(node)
        self._wait_down(token, order, i, 0)

    def _wait_down(self, token: int, order: list[str], i: int, waited: int) -> None:
        nodes, node = self.cluster.nodes, order[i]
        if node not in nodes.dead_nodes():
            if waited < SHUTDOWN_GRACE_MS:
                self._later(token, lambda: self._wait_down(token, order, i, waited + POLL_MS))
                return
            nodes.kill(node)
        nodes.start(node)
        self.restarted.append(node)
        self._later(token, lambda: self._wait_back(token, order, i))

    def _wait_back(self, token: int, order: list[str], i: int) -> None:
        node = order[i]
        back = in_sync(self.cluster, node) if node in self.cluster.nodes.brokers() else (
            node not in self.cluster.nodes.dead_nodes() and self.cluster.observer.active_controller() is not None)
        if back:
            self._step(token, order, i + 1)
        else:
            self._later(token, lambda: self._wait_back(token, order, i))
