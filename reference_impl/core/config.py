"""Protocol configuration: the seeds' keys with Kafka's defaults, plus the
protocol *variants* that switch historical behaviours back on.

Kafka spells keys with dots (``replica.lag.time.max.ms``); the dataclass uses
the same words with underscores, and :meth:`ProtocolConfig.from_properties`
accepts either spelling, so a server.properties file maps one to one.

Variants (ARCHITECTURE.md, principle 2). Each defaults to today's Kafka:

* ``kip101`` on — epoch-based truncation. Off: a follower truncates to its HW
  when it becomes a follower (the pre-KIP-101 data loss of seed 003).
* ``kip966`` on — ELR (eligible leader replicas, LastKnownELR, the
  controller emptying the ISR, unclean-restart fencing at registration). Off:
  no ELR, so the last-replica-standing loss of seed 002 is possible. What
  Kafka 4.0+ does formatted with ``eligible.leader.replicas.version=0``, and
  every release before 4.0; it does not touch the HW rule below.
* ``min_isr_hw_gate`` on — the HW does not advance while the committed ISR is
  smaller than the effective min ISR (KAFKA-15583, Kafka's
  Partition.maybeIncrementLeaderHW since 3.7.0, whatever ELR's setting).
  Off: the HW advances under min ISR, as Kafka 3.6 and earlier did, so an
  acks=all produce to a shrunk ISR ends NOT_ENOUGH_REPLICAS_AFTER_APPEND
  instead of waiting.
* ``unclean_election`` off — when on, the controller may elect an out-of-sync
  replica when ISR (and ELR) are empty (overrides
  ``unclean.leader.election.enable`` for every topic).
* ``strict_isr_expand`` on — ISR expansion also requires the follower's LEO to
  reach the leader-epoch start offset. Off: only LEO >= HW is checked.
* ``maximal_isr`` on — ISR changes take effect only once the controller
  commits them: a pending shrink keeps the old ISR for the HW, a pending
  expansion does not count for the min-ISR gate or acks=all (KIP-497 and
  seed 002's example). Off: the leader applies both a shrink and an
  expansion locally before the controller commits them (the pre-KIP-497
  leader), so the HW may advance on an ISR the controller never wrote.
* ``producer_sequence_checks`` on — a leader checks an idempotent
  producer's batch against the producer id's state (Kafka's
  ProducerAppendInfo.checkSequence, KIP-98): a retried batch it already
  holds is answered with the original offsets, not appended again. Off: the
  leader appends every batch as it comes (a broker without idempotence), so
  a producer's retry of a request whose answer was lost appends it twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Final, Mapping

VARIANT_NAMES: Final = ("kip101", "kip966", "min_isr_hw_gate", "unclean_election", "strict_isr_expand",
                         "maximal_isr", "producer_sequence_checks")
#: ``unclean.recovery.strategy`` values, Kafka's spelling (seed 002)
RECOVERY_STRATEGIES: Final = ("Aggressive", "Balanced", "None")


class ConfigError(ValueError):
    """A bad key, value or variant. The message is one line meant for users."""


@dataclass(frozen=True, slots=True)
class Variants:
    kip101: bool = True
    kip966: bool = True
    min_isr_hw_gate: bool = True
    unclean_election: bool = False
    strict_isr_expand: bool = True
    maximal_isr: bool = True
    producer_sequence_checks: bool = True

    def with_overrides(self, overrides: Mapping[str, bool]) -> "Variants":
        for name in overrides:
            if name not in VARIANT_NAMES:
                raise ConfigError(f"unknown variant {name!r} (known: {', '.join(VARIANT_NAMES)})")
        return replace(self, **dict(overrides))

    @staticmethod
    def parse_assignment(text: str) -> tuple[str, bool]:
        """Parse ``NAME=on|off`` (also true/false/1/0) as given to ``--variant``."""
        name, sep, value = text.partition("=")
        name = name.strip()
        if not sep:
            raise ConfigError(f"variant {text!r} must look like NAME=on|off")
        if name not in VARIANT_NAMES:
            raise ConfigError(f"unknown variant {name!r} (known: {', '.join(VARIANT_NAMES)})")
        v = value.strip().lower()
        if v in ("on", "true", "1", "yes"):
            return name, True
        if v in ("off", "false", "0", "no"):
            return name, False
        raise ConfigError(f"variant {name!r}: value {value!r} is not on/off")

    def as_dict(self) -> dict[str, bool]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class ProtocolConfig:
    """Broker and controller settings, Kafka's defaults unless noted.

    Times are milliseconds. Topic-level keys (``min.insync.replicas``,
    ``unclean.leader.election.enable``) are defaults that CreateTopics configs
    override per topic.
    """

    replica_lag_time_max_ms: int = 30000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    eligible_leader_replicas_enabled: bool = True
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_backoff_ms: int = 1000
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    #: flush after this many messages; 0 = never (Kafka's default: rely on replication)
    log_flush_interval_messages: int = 0
    request_timeout_ms: int = 30000
    alter_partition_retry_backoff_ms: int = 50
    controller_quorum_election_timeout_ms: int = 1000
    controller_quorum_fetch_timeout_ms: int = 2000
    controller_quorum_election_backoff_max_ms: int = 1000
    default_replication_factor: int = 1
    num_partitions: int = 1
    #: KIP-966 unclean recovery (seed 002, "Config changes"): with the manager
    #: on, a partition whose ISR and ELR are gone elects the replica with the
    #: longest log instead of an arbitrary live one. Kafka's default: off.
    unclean_recovery_manager_enabled: bool = False
    #: Aggressive | Balanced | None (Kafka's spelling; default Balanced)
    unclean_recovery_strategy: str = "Balanced"
    #: how long a recovery waits for GetReplicaLogInfo answers (seed 002: 5 min)
    unclean_recovery_timeout_ms: int = 300000
    #: CreateTopics limits of the active controller (Kafka 4.4 has them as
    #: constants, not settings: ReplicationControlManager.MAX_PARTITIONS_PER_BATCH
    #: and QuorumController.MAX_RECORDS_PER_USER_OP, both 10000): the
    #: partitions one request may ask for in all, and the metadata records
    #: one user operation may append. A request past either is refused
    #: whole with POLICY_VIOLATION (core/controller/replication_control.py).
    max_partitions_per_batch: int = 10000
    max_records_per_user_op: int = 10000
    #: the group coordinator's settings (Kafka's defaults)
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    variants: Variants = field(default_factory=Variants)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], variants: Variants | None = None) -> "ProtocolConfig":
        """Build from server.properties-style keys (dots or underscores).

        Unknown keys raise :class:`ConfigError`, so a typo never silently runs
        with a default.
        """
        known = {f.name: f for f in fields(cls) if f.name != "variants"}
        values: dict[str, Any] = {}
        for raw_key, raw in props.items():
            key = raw_key.strip().replace(".", "_").replace("-", "_")
            if key not in known:
                raise ConfigError(f"unknown config key {raw_key!r}")
            default = getattr(cls(), key)
            values[key] = _coerce(raw_key, raw, default)
            if key == "unclean_recovery_strategy":
                # Kafka spells the values Aggressive/Balanced/None; accept any case
                by_lower = {v.lower(): v for v in RECOVERY_STRATEGIES}
                values[key] = by_lower.get(str(raw).strip().lower(), str(raw))
        cfg = cls(**values)
        if variants is not None:
            cfg = replace(cfg, variants=variants)
        cfg.validate()
        return cfg

    def with_variants(self, **overrides: bool) -> "ProtocolConfig":
        return replace(self, variants=self.variants.with_overrides(overrides))

    def validate(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, int) and not isinstance(v, bool) and v < 0:
                raise ConfigError(f"{f.name.replace('_', '.')} must not be negative (got {v})")
        if self.min_insync_replicas < 1:
            raise ConfigError("min.insync.replicas must be at least 1")
        if self.offsets_topic_num_partitions < 1 or self.offsets_topic_replication_factor < 1:
            raise ConfigError("offsets.topic.num.partitions and offsets.topic.replication.factor must be at least 1")
        if self.max_partitions_per_batch < 1 or self.max_records_per_user_op < 1:
            raise ConfigError("max.partitions.per.batch and max.records.per.user.op must be at least 1")
        if self.unclean_recovery_strategy not in RECOVERY_STRATEGIES:
            raise ConfigError(
                f"unclean.recovery.strategy must be one of {', '.join(RECOVERY_STRATEGIES)}"
                f" (got {self.unclean_recovery_strategy!r})"
            )

    def recovery_strategy_for(self, topic_configs: Mapping[str, str] | None = None) -> str | None:
        """The KIP-966 unclean-recovery strategy for a topic, or ``None`` when
        unclean recovery is not in use (``unclean.recovery.manager.enabled``
        off, or KIP-966 itself off: then :meth:`unclean_allowed` decides the
        old random election).

        Seed 002 ("Unclean recovery", compatibility): unclean leader election
        enabled (topic/broker ``unclean.leader.election.enable`` or the
        ``unclean_election`` variant) maps to ``Aggressive``; otherwise the
        configured ``unclean.recovery.strategy`` applies, whose default
        ``Balanced`` is what ``unclean.leader.election.enable=false`` maps to."""
        if not (self.unclean_recovery_manager_enabled and self.elr_enabled()):
            return None
        if self.unclean_allowed(topic_configs):
            return "Aggressive"
        return self.unclean_recovery_strategy

    def unclean_allowed(self, topic_configs: Mapping[str, str] | None = None) -> bool:
        """Unclean election for a topic: the variant forces it on, otherwise
        the topic's ``unclean.leader.election.enable`` or the broker default."""
        if self.variants.unclean_election:
            return True
        if topic_configs and "unclean.leader.election.enable" in topic_configs:
            return topic_configs["unclean.leader.election.enable"].lower() == "true"
        return self.unclean_leader_election_enable

    def min_isr_for(self, topic_configs: Mapping[str, str] | None = None) -> int:
        if topic_configs and "min.insync.replicas" in topic_configs:
            return int(topic_configs["min.insync.replicas"])
        return self.min_insync_replicas

    def elr_enabled(self) -> bool:
        return self.variants.kip966 and self.eligible_leader_replicas_enabled


def _coerce(key: str, raw: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s in ("true", "1", "yes", "on"):
            return True
        if s in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key}: {raw!r} is not a boolean")
    if isinstance(default, int):
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ConfigError(f"{key}: {raw!r} is not an integer") from None
    return raw
