"""The nodes' settings that differ from Kafka's defaults, kept once, in
Kafka's property names, and the table each runtime derives from them.

Kafka's defaults assume clusters that run for months; a test runs for tens
of seconds, so the timeouts that decide when a follower leaves the ISR and
when a broker is fenced are shortened, and the group coordinator starts at
once on a small offsets topic. One table (:data:`TIMINGS`, :func:`groups`)
says what; each runtime takes it as its nodes read settings:

* db kafka (:func:`kafka_settings`): the table as it is, in
  ``server.properties``.
* db reference on real processes (:func:`reference_settings`): the same
  values, with one key renamed: the reference has one request timeout for
  every request between nodes (``request.timeout.ms``, the follower's fetch
  included), where Kafka's follower fetches with ``replica.socket.timeout.ms``
  (the request timeout ``ReplicaFetcherBlockingSend``/``BrokerBlockingSender``
  gives its ``NetworkClient``).
* the simulator (:func:`sim_settings`): the reference's, in the
  ``ProtocolConfig`` spelling, but for :data:`SIM_DIFFERENCES` (a 5 s
  replica lag and Kafka's 30 s request timeout, each with its reason).

A test's ``protocol`` settings win over all of these.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final, Mapping

#: timeouts for runs of tens of seconds (Kafka 4.4's default in each comment):
#: a follower leaves the ISR after 3 s behind, a broker is fenced after 4 s
#: without heartbeats, a follower's fetch request times out after 5 s
TIMINGS: Final[Mapping[str, int]] = MappingProxyType({
    "replica.lag.time.max.ms": 3000,  # 30000
    "broker.session.timeout.ms": 4000,  # 9000
    "broker.heartbeat.interval.ms": 500,  # 2000
    "replica.fetch.backoff.ms": 200,  # 1000
    "replica.socket.timeout.ms": 5000,  # 30000
    # Kafka's defaults, written out: the quorum's timeouts the stories and
    # the clock faults are sized against, the same on every runtime
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
})

#: Kafka's name for the follower's fetch request timeout, which the
#: reference calls ``request.timeout.ms`` (one timeout for every request)
FETCH_TIMEOUT: Final = "replica.socket.timeout.ms"

#: where the simulator runs another value than the reference, and why
SIM_DIFFERENCES: Final[Mapping[str, tuple[int, str]]] = MappingProxyType({
    "replica.lag.time.max.ms": (
        5000,
        "the simulator's seeds were found and are pinned with 5 s: with 3 s their histories change, and the "
        "decommission seeds of tests/sim/test_decommission.py acknowledge fewer writes than their test asks; a "
        "simulated follower is never late by the host's scheduling, so its ISR shrinks only under faults either "
        "way",
    ),
    "request.timeout.ms": (
        30000,
        "Kafka's default: the reference ends a controlled shutdown the controller never answers after its "
        "request timeout, so with 5 s a stuck shutdown would always end cleanly before the 30 s grace that "
        "ends it in a kill, and the simulator would never reach that unclean shutdown "
        "(tests/nemesis/test_grace_kill.py); on real processes a loaded host may stall a fetch for seconds, "
        "which the simulated network never does",
    ),
})


def groups(brokers: int) -> dict[str, int]:
    """The group coordinator as tests run it: no delay before the first
    rebalance (Kafka: 3000 ms), one offsets partition (Kafka: 50) replicated
    as the internal topics of a small cluster (Kafka: 3)."""
    return {
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 1,
        "offsets.topic.replication.factor": min(3, brokers),
    }


def kafka_settings(brokers: int) -> dict[str, str]:
    """db kafka's settings: the table as it is, as ``server.properties`` values."""
    return {k: str(v) for k, v in {**TIMINGS, **groups(brokers)}.items()}


def reference_settings(brokers: int) -> dict[str, str]:
    """The reference broker's settings on real processes (``--set`` values):
    the table, with the follower's fetch timeout under the reference's one
    request timeout."""
    return {("request.timeout.ms" if k == FETCH_TIMEOUT else k): v for k, v in kafka_settings(brokers).items()}


def sim_settings(brokers: int) -> dict[str, int]:
    """The simulator's settings (``ProtocolConfig`` names): the reference
    broker's, but for :data:`SIM_DIFFERENCES`."""
    props = {**reference_settings(brokers), **{k: str(v) for k, (v, _) in SIM_DIFFERENCES.items()}}
    return {k.replace(".", "_"): int(v) for k, v in props.items()}


def kafka_mapped(brokers: int) -> dict[str, int]:
    """The simulator's protocol settings (``ProtocolConfig`` names) that
    put Kafka's timeouts on the model: where the simulator runs another
    value than the nodes on real processes (:data:`SIM_DIFFERENCES`), the
    value db kafka runs (the reference's spelling: Kafka's follower fetch
    timeout as the one request timeout), so a schedule searched on the
    model meets the timeouts it will meet on Kafka (``kraftwerk hunt``)."""
    ref = reference_settings(brokers)
    return {k.replace(".", "_"): int(ref[k]) for k in SIM_DIFFERENCES if k in ref}
