"""What a real run hands the availability checker (:mod:`checkers.availability`):
the liveness bound from the db's settings, the probe writes of the final
phase, the wall clock of the history's time 0 (``clock.json``: the nodes'
traces and logs are on the wall clock, the history on the monotonic one)
and, after the final reads, a snapshot of the cluster (``final-state.json``):
which nodes run, the quorum's leader, each broker's registration, and what
a Metadata request says of the partitions and of the unfenced brokers.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

import generator as g
from checkers.availability import LivenessBound, liveness_bound
from checkers.availability.snapshot import CLOCK, FINAL_STATE
from harness.config import TestConfig
from harness.config.kafka import parse_overrides
from harness.config.timings import kafka_settings
from harness.dbs.reference.db import protocol_config
from harness.rundir import store
from harness.runtimes.sim import client_config, sim_bound
from harness.runtimes.sim import protocol_config as sim_protocol_config
from nemesis.faults import clock_hold_ms
from workloads.probes import probe_generator

#: how long a node's process takes to start, the bound's first term: a
#: reference node starts in about a second; a JVM broker takes seconds more,
#: and recovers its logs after an unclean shutdown (Kafka 4.4 on netns here:
#: about 8 s from the start to its registration)
START_MS = {"reference": 3000, "kafka": 15000, "external": 0}
#: the queue workload's producers (workloads/queue.py): metadata refresh and
#: request timeout (``min(message.timeout.ms, 5000)``)
CLIENT_REFRESH_MS = 2000
CLIENT_REQUEST_TIMEOUT_MS = 5000


def bound_for(cfg: TestConfig) -> LivenessBound:
    """The liveness bound of a real run (``checkers.availability.bound``)
    from the settings its nodes run with; a simulated run's from its
    protocol and simulated clients' settings (``harness.runtimes.sim``)."""
    if cfg.backend == "sim":
        return sim_bound(sim_protocol_config(cfg), client_config(cfg), clock_hold_ms(cfg.faults()), cfg.start_delay_ms)
    if cfg.db == "kafka":
        props: dict[str, Any] = {**kafka_settings(cfg.brokers), **parse_overrides(cfg.kafka_config)}
    elif cfg.db == "reference":
        props = {f: getattr(protocol_config(cfg), f) for f in (
            "controller_quorum_fetch_timeout_ms", "controller_quorum_election_timeout_ms",
            "controller_quorum_election_backoff_max_ms", "broker_session_timeout_ms",
            "broker_heartbeat_interval_ms", "replica_fetch_backoff_ms", "replica_fetch_wait_max_ms")}
    else:
        props = {}
    return liveness_bound(props, start_ms=START_MS.get(cfg.db, 0), client_refresh_ms=CLIENT_REFRESH_MS,
                          client_request_timeout_ms=CLIENT_REQUEST_TIMEOUT_MS,
                          clock_ms=clock_hold_ms(cfg.faults()))


def probes(cfg: TestConfig) -> g.Gen | None:
    """The final phase's probe writes (queue workload, acks=all threads),
    for as long as the bound (:func:`workloads.probes.probe_generator`)."""
    if cfg.workload != "queue":
        return None
    threads = [t for t in range(cfg.concurrency) if cfg.acks_for_thread(t) == "all"]
    return probe_generator(cfg.keys(), threads, bound_for(cfg).total_ms / 1000.0, cfg.idempotent_for_thread)


def rules(cfg: TestConfig) -> dict[str, Any]:
    """The election rules the run's nodes follow, for the cause of an
    unavailable partition."""
    overrides = parse_overrides(cfg.kafka_config) if cfg.db == "kafka" else {}
    unclean = bool(cfg.variants.get("unclean_election")) or str(
        overrides.get("unclean.leader.election.enable", "")).lower() == "true"
    strategy = None
    if cfg.db == "reference":
        pc = protocol_config(cfg)
        unclean = unclean or pc.unclean_allowed()
        strategy = pc.recovery_strategy_for()
    return {"unclean_election": unclean, "elr": bool(cfg.variants.get("kip966", True)),
            "recovery_strategy": strategy}


def write_clock(run_dir: Path, history_ns_now: int) -> None:
    """``clock.json``: the wall clock (ms) at the history's time 0."""
    store.write_json(run_dir / CLOCK, {"history_zero_unix_ms": time.time() * 1000.0 - history_ns_now / 1e6})


def write_final_state(run_dir: Path, cfg: TestConfig, db: Any, history_ns_now: int) -> None:
    """``final-state.json`` after the final reads, through the cluster
    contract and one Metadata request; best effort (whatever fails is left
    out: the checker says what it could not see)."""
    c = getattr(db, "cluster", None)  # an external cluster has no contract: nothing to snapshot
    if c is None:
        return
    out: dict[str, Any] = {"t_ns": history_ns_now, "ids": {n: i for n, i, _ in cfg.layout()},
                           "brokers": list(c.nodes.brokers()), "controllers": list(c.nodes.controllers()),
                           "rules": rules(cfg), "min_isr": cfg.min_isr}
    for name, fn in (("dead", lambda: list(c.nodes.dead_nodes())), ("paused", lambda: list(c.nodes.paused_nodes())),
                     ("active_controller", c.observer.active_controller),
                     ("broker_epochs", lambda: {b: c.observer.broker_epoch(b) for b in c.nodes.brokers()}),
                     ("metadata", lambda: _metadata(db.client_bootstrap()))):
        try:
            out[name] = fn()
        except Exception as e:  # noqa: BLE001 - a cluster in any state: say what failed
            out.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"[:300]
    store.write_json(run_dir / FINAL_STATE, out)


def _metadata(bootstrap: str) -> dict[str, Any]:
    """One Metadata request: the brokers it lists (the unfenced ones) and
    each partition's leader and ISR."""
    md = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000}).list_topics(timeout=10)
    parts = {f"{t}-{p}": {"leader": pm.leader, "isr": list(pm.isrs), "replicas": list(pm.replicas)}
             for t, tm in md.topics.items() for p, pm in tm.partitions.items()}
    return {"brokers": sorted(md.brokers), "partitions": parts}
