"""Each Kafka node's ``server.properties``, written from the test config.

The settings the reference broker takes from the same config map one to one
(min.insync.replicas, default.replication.factor, unclean.leader.election.enable,
replica.lag.time.max.ms, the broker session and heartbeat, log.flush.*), with
the same timings and group coordinator (``harness.config.timings``), so a
scenario means the same thing on both dbs. Variants map where Kafka has a setting
(the whole table, settings and releases: ``harness.config.kafka.VARIANT_MEANINGS``):
``unclean_election`` is ``unclean.leader.election.enable``; ``kip966`` is the
``eligible.leader.replicas.version`` feature, which is set when the storage
is formatted (:func:`format_features`). A setting Kafka cannot behave as is
refused before anything starts (``harness.config.kafka.check_variants``).
``--kafka-config KEY=VALUE`` overrides win over everything.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.kafka import PROTOCOL_ONLY, parse_overrides
from harness.config.timings import kafka_settings
from harness.dbs.kafka import releases
from harness.errors import UsageError

#: small machines: few threads, no auto-created topics, one transaction log
#: partition (the timings and the group coordinator are every db's:
#: ``harness.config.timings``)
SMALL = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.replica.fetchers": "1",
    "background.threads": "2",
    "auto.create.topics.enable": "false",
    "transaction.state.log.num.partitions": "1",
    # Kafka's defaults: no fsync of its own, the page cache and replication
    # are the durability (the reference broker's default too)
    "log.flush.interval.messages": "9223372036854775807",
    "log.flush.interval.ms": "9223372036854775807",
    "log.flush.scheduler.interval.ms": "9223372036854775807",
}


@dataclass(frozen=True)
class NodePlan:
    """One node: name, Kafka node.id, roles, where it listens."""

    name: str
    node_id: int
    roles: tuple[str, ...]
    host: str
    port: int  # PLAINTEXT (brokers)
    controller_port: int  # CONTROLLER (controllers)


def refuse_protocol_only(variants: dict[str, bool]) -> None:
    for name in PROTOCOL_ONLY:
        if name in variants:
            raise UsageError(
                f"variant {name} exists only in the reference implementation (Kafka 4.4 always behaves as "
                f"{name}=on): drop it for --db kafka"
            )


def format_features(variants: dict[str, bool], version: str) -> list[str]:
    """``kafka-storage format --feature`` values for ``version``: KIP-966's
    ELR on unless the kip966 variant is off (the reference's default is on),
    where the release has the feature (:mod:`.releases`, from 4.0)."""
    return releases.format_features(version, variants)


def quorum_voters(nodes: list[NodePlan]) -> str:
    return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in nodes if "controller" in n.roles)


def server_properties(node: NodePlan, nodes: list[NodePlan], data_dir: str, *, brokers: int, rf: int,
                      min_isr: int, partitions: int, variants: dict[str, bool],
                      overrides: dict[str, str]) -> dict[str, str]:
    """The node's settings, in the order they are written."""
    internal_rf = str(min(3, brokers))
    listeners = []
    if "broker" in node.roles:
        listeners.append(f"PLAINTEXT://{node.host}:{node.port}")
    if "controller" in node.roles:
        listeners.append(f"CONTROLLER://{node.host}:{node.controller_port}")
    p: dict[str, str] = {
        "process.roles": ",".join(r for r in ("broker", "controller") if r in node.roles),
        "node.id": str(node.node_id),
        "controller.quorum.voters": quorum_voters(nodes),
        "controller.listener.names": "CONTROLLER",
        "listeners": ",".join(listeners),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": data_dir,
    }
    if "broker" in node.roles:
        p["advertised.listeners"] = f"PLAINTEXT://{node.host}:{node.port}"
        p["inter.broker.listener.name"] = "PLAINTEXT"
    p.update({
        "min.insync.replicas": str(min_isr),
        "default.replication.factor": str(rf),
        "num.partitions": str(partitions),
        "unclean.leader.election.enable": "true" if variants.get("unclean_election") else "false",
        "transaction.state.log.replication.factor": internal_rf,
        "transaction.state.log.min.isr": str(min(2, brokers)),
        "share.coordinator.state.topic.replication.factor": internal_rf,
        "share.coordinator.state.topic.min.isr": str(min(2, brokers)),
    })
    p.update(kafka_settings(brokers))
    p.update(SMALL)
    p.update(overrides)
    return p


def render(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())
