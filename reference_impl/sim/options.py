"""Options of one simulated test, validated before anything starts.

Everything that shapes a run is here and goes into ``test.json``, so a seed plus
this object replays the run exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from reference_impl.core.config import ConfigError, ProtocolConfig, Variants

from .nemesis import NemesisError, expand

ACKS_MODES = ("all", "1", "mixed")


class SimOptionsError(ValueError):
    """Bad input; the message is one line for the user."""


@dataclass(frozen=True)
class SimOptions:
    test_name: str = "sim"
    brokers: int = 3
    controllers: int = 3
    topics: int = 1
    partitions: int = 3
    rf: int = 3
    min_isr: int = 2
    acks: str = "all"
    #: acks=all producers are idempotent (producer id + per-partition
    #: sequence numbers, so the broker drops a retried duplicate); acks=1
    #: producers never are (Kafka requires acks=all for idempotence)
    idempotent: bool = False
    time_limit_s: float = 60.0
    rate: float = 100.0
    nemesis: tuple[str, ...] = ("all",)
    nemesis_interval_s: float = 10.0
    variants: tuple[tuple[str, bool], ...] = ()
    producers: int = 8
    consumers: int = 1
    warmup_s: float = 2.0
    final_wait_s: float = 15.0
    final_read_s: float = 20.0
    setup_timeout_s: float = 30.0
    latency_ms: int = 1
    jitter_ms: float = 2.0
    clock_drift: float = 0.0
    #: protocol settings (ProtocolConfig keys) for the simulated cluster: Kafka's
    #: defaults except for timeouts shortened so that faults play out within a
    #: minute of simulated time
    config: tuple[tuple[str, Any], ...] = (
        ("replica_lag_time_max_ms", 5000),
        ("broker_session_timeout_ms", 4000),
        ("broker_heartbeat_interval_ms", 500),
        ("replica_fetch_backoff_ms", 200),
    )

    # -- derived --------------------------------------------------------------------------
    def variant_obj(self) -> Variants:
        return Variants().with_overrides(dict(self.variants))

    def protocol_config(self) -> ProtocolConfig:
        props = dict(self.config)
        props.setdefault("min_insync_replicas", self.min_isr)
        props.setdefault("default_replication_factor", self.rf)
        return ProtocolConfig.from_properties(props, variants=self.variant_obj())

    def faults(self) -> tuple[str, ...]:
        return expand(list(self.nemesis))

    def topic_names(self) -> list[str]:
        return [f"t{i}" for i in range(self.topics)]

    def validate(self) -> "SimOptions":
        def bad(msg: str) -> None:
            raise SimOptionsError(msg)

        if self.brokers < 1:
            bad(f"--brokers must be at least 1 (got {self.brokers})")
        if self.controllers < 1:
            bad(f"--controllers must be at least 1 (got {self.controllers})")
        if self.topics < 1:
            bad(f"--topics must be at least 1 (got {self.topics})")
        if self.partitions < 1:
            bad(f"--partitions must be at least 1 (got {self.partitions})")
        if self.rf < 1:
            bad(f"--rf must be at least 1 (got {self.rf})")
        if self.rf > self.brokers:
            bad(f"--rf {self.rf} is larger than --brokers {self.brokers}")
        if self.min_isr < 1:
            bad(f"--min-isr must be at least 1 (got {self.min_isr})")
        if self.min_isr > self.rf:
            bad(f"--min-isr {self.min_isr} is larger than --rf {self.rf}")
        if self.acks not in ACKS_MODES:
            bad(f"--acks must be one of {', '.join(ACKS_MODES)} (got {self.acks!r})")
        for name, v in (("--time-limit", self.time_limit_s), ("--nemesis-interval", self.nemesis_interval_s),
                        ("--rate", self.rate), ("final wait", self.final_wait_s), ("final read", self.final_read_s),
                        ("warmup", self.warmup_s)):
            if v < 0:
                bad(f"{name} must not be negative (got {v:g})")
        if self.time_limit_s == 0:
            bad("--time-limit must be positive")
        if self.producers < 1 or self.consumers < 0:
            bad("need at least one producer and no negative consumer count")
        try:
            self.faults()
        except NemesisError as e:
            bad(str(e))
        try:
            self.protocol_config()
        except ConfigError as e:
            bad(str(e))
        return self

    def with_(self, **kw: Any) -> "SimOptions":
        return replace(self, **kw)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["nemesis"] = list(self.nemesis)
        d["nemesis_faults"] = list(self.faults())
        d["variants"] = self.variant_obj().as_dict()
        d["config"] = dict(self.config)
        return d
