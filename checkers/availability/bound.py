"""How long after the final heal a partition may take to accept an acks=all
write again, from the run's own settings.

After the final heal every node runs, every link is whole and every clock is
reset. What still stands between a client and an acknowledged acks=all write
is a chain of timers, each bounded by a setting the run chose; the bound is
their sum, each term the worst case of one step:

0. ``clock``: a clock the heal set back holds the timers a node keeps on
   its wall clock until the clock has caught up with the latest time it
   showed: a KRaft follower's fetch timeout (Kafka's ``Timer.update`` keeps
   the larger time: ``Timer.java`` lines 155-156, which ``FollowerState``'s
   ``hasFetchTimeoutExpired`` calls, lines 116-117), a replica fetch backoff
   (``DelayedItem``'s due time is ``Time.SYSTEM.milliseconds`` plus the
   delay, ``DelayedItem.scala`` line 28), a request's timeout (from its
   send's wall time). The term is the largest backward step the run's clock
   faults can make (``nemesis.faults.clock_hold_ms``), 0 without them.
1. ``start``: the healed nodes' processes start (the runtime's allowance: 0
   in the simulator, a few seconds for a reference process, more for a JVM
   that recovers its logs after an unclean shutdown).
2. ``quorum``: a controller quorum that lost its leader notices it only
   after ``controller.quorum.fetch.timeout.ms`` without a fetch answered, and
   elects one within ``controller.quorum.election.timeout.ms`` plus a backoff
   of at most ``controller.quorum.election.backoff.max.ms`` if the first
   round splits its votes (Kafka's KafkaRaftClient; the reference's
   ``core/raft``).
3. ``session``: a broker whose previous incarnation the controller still
   counts as live is refused registration (DUPLICATE_BROKER_REGISTRATION)
   until that session expires, ``broker.session.timeout.ms`` after its last
   heartbeat (ClusterControlManager); it registers again a heartbeat later
   and is unfenced at a later heartbeat once it caught up with the metadata
   log: two ``broker.heartbeat.interval.ms``. The controller elects a leader
   for a leaderless partition at the unfencing itself.
4. ``isr``: with acks=all the leader needs ``min.insync.replicas`` members in
   its ISR. A follower fetches from the new leader twice (one round learns
   the leader epoch and truncates, one reaches the end of the log), each
   waiting ``replica.fetch.backoff.ms`` after an error and at most
   ``replica.fetch.wait.max.ms`` in the leader's purgatory, then the leader's
   AlterPartition (sent at once, resent within a heartbeat interval) adds it.
5. ``client``: the producer learns the new leader at its next metadata
   refresh (the workload's ``topic.metadata.refresh.interval.ms``, or the
   simulated client's refresh backoff), and a request it had sent into a cut
   that the heal ended may be answered only at its ``request.timeout.ms``.

The bound is no promise Kafka documents: it says how long a run waits
before it calls a partition that has a live eligible replica stuck.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

#: Kafka's defaults for the settings the bound reads (Kafka 4.4's
#: ``KRaftConfigs``, ``QuorumConfig``, ``ReplicationConfigs``)
KAFKA_DEFAULTS: dict[str, int] = {
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.election.backoff.max.ms": 1000,
    "broker.session.timeout.ms": 9000,
    "broker.heartbeat.interval.ms": 2000,
    "replica.fetch.backoff.ms": 1000,
    "replica.fetch.wait.max.ms": 500,
}


def _ms(props: Mapping[str, Any], key: str) -> int:
    """A setting in ms from Kafka-style properties (dots or underscores)."""
    for k in (key, key.replace(".", "_")):
        if k in props:
            try:
                return int(props[k])
            except (TypeError, ValueError):
                break
    return KAFKA_DEFAULTS[key]


@dataclass(frozen=True)
class LivenessBound:
    """The bound and its terms, in milliseconds (module docstring)."""

    start_ms: int
    quorum_ms: int
    session_ms: int
    isr_ms: int
    client_ms: int
    clock_ms: int = 0

    @property
    def total_ms(self) -> int:
        return self.clock_ms + self.start_ms + self.quorum_ms + self.session_ms + self.isr_ms + self.client_ms

    def as_dict(self) -> dict[str, int]:
        return {"total_ms": self.total_ms, "clock_ms": self.clock_ms, "start_ms": self.start_ms,
                "quorum_ms": self.quorum_ms, "session_ms": self.session_ms, "isr_ms": self.isr_ms,
                "client_ms": self.client_ms}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LivenessBound":
        return cls(*(int(d.get(k, 0)) for k in ("start_ms", "quorum_ms", "session_ms", "isr_ms", "client_ms",
                                                  "clock_ms")))


def liveness_bound(props: Mapping[str, Any], *, start_ms: int, client_refresh_ms: int,
                   client_request_timeout_ms: int, clock_ms: int = 0) -> LivenessBound:
    """The bound for a run whose brokers and controllers use ``props``
    (Kafka property names, Kafka's defaults for what is missing), whose
    nodes take ``start_ms`` to start, and whose producers refresh metadata
    every ``client_refresh_ms`` and give a request up after
    ``client_request_timeout_ms``, and whose clock faults may set a clock
    back by ``clock_ms``."""
    heartbeat = _ms(props, "broker.heartbeat.interval.ms")
    fetch_round = _ms(props, "replica.fetch.backoff.ms") + _ms(props, "replica.fetch.wait.max.ms")
    return LivenessBound(
        start_ms=int(start_ms),
        quorum_ms=(_ms(props, "controller.quorum.fetch.timeout.ms")
                   + _ms(props, "controller.quorum.election.timeout.ms")
                   + _ms(props, "controller.quorum.election.backoff.max.ms")),
        session_ms=_ms(props, "broker.session.timeout.ms") + 2 * heartbeat,
        isr_ms=2 * fetch_round + heartbeat,
        client_ms=int(client_refresh_ms) + int(client_request_timeout_ms),
        clock_ms=int(clock_ms),
    )
