"""One timing table (harness/config/timings.py), in Kafka's property names,
from which every runtime's settings derive: a fault means the same on the
simulator, the reference on real processes and Kafka."""

from __future__ import annotations

from dataclasses import fields

from harness.config import TestConfig
from harness.config.timings import (FETCH_TIMEOUT, SIM_DIFFERENCES, TIMINGS, groups, kafka_settings,
                                    reference_settings)
from harness.dbs.kafka import props
from harness.dbs.reference.db import node_settings
from harness.dbs.reference.db import protocol_config as reference_config
from harness.runtimes.sim import protocol_config as sim_config
from reference_impl.core.config import ProtocolConfig

NODES = [props.NodePlan("n1", 1, ("broker",), "h1", 9092, 0), props.NodePlan("c1", 101, ("controller",), "h2", 0, 9093)]


def _kafka(brokers: int, **overrides: str) -> dict[str, str]:
    return props.server_properties(NODES[0], NODES, "/d", brokers=brokers, rf=1, min_isr=1, partitions=1,
                                   variants={}, overrides=overrides)


def test_the_simulator_runs_the_reference_settings_but_for_its_written_differences():
    for cfg in (TestConfig(backend="sim", seed=1), TestConfig(backend="sim", seed=1, brokers=2, rf=2, min_isr=1,
                                                               sub_via="subscribe")):
        real = cfg.model_copy(update={"backend": "local"})
        sim, ref = sim_config(cfg), reference_config(real)
        differ = {k.replace(".", "_") for k in SIM_DIFFERENCES}
        timing = {f.name for f in fields(ProtocolConfig)} - {"min_insync_replicas", "default_replication_factor",
                                                              "variants"} - differ
        assert {k: getattr(sim, k) for k in timing} == {k: getattr(ref, k) for k in timing}
        assert {k: getattr(sim, k.replace(".", "_")) for k in SIM_DIFFERENCES} == \
            {k: v for k, (v, why) in SIM_DIFFERENCES.items() if why}
        assert sim.request_timeout_ms == 30000 and ref.request_timeout_ms == 5000
        assert (sim.replica_lag_time_max_ms, ref.replica_lag_time_max_ms) == (5000, 3000)
        assert sim.offsets_topic_replication_factor == min(3, cfg.brokers)


def test_kafka_reads_every_entry_of_the_table_by_its_own_name():
    p = _kafka(brokers=5)
    assert {k: p[k] for k in TIMINGS} == {k: str(v) for k, v in TIMINGS.items()}
    assert {k: p[k] for k in groups(5)} == {k: str(v) for k, v in groups(5).items()} == {
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "3"}


def test_the_reference_takes_kafkas_fetch_timeout_as_its_one_request_timeout():
    ref = reference_settings(3)
    assert FETCH_TIMEOUT not in ref and ref["request.timeout.ms"] == str(TIMINGS[FETCH_TIMEOUT])
    assert {k: v for k, v in ref.items() if k != "request.timeout.ms"} == \
        {k: v for k, v in kafka_settings(3).items() if k != FETCH_TIMEOUT}
    assert ProtocolConfig.from_properties(ref).request_timeout_ms == 5000


def test_the_reference_nodes_are_started_with_the_table_and_the_group_coordinator():
    args = node_settings(TestConfig(brokers=2, rf=2, min_isr=1))
    given = dict(a.split("=", 1) for a in args[1::2])
    assert set(args[0::2]) == {"--set"}
    assert {k: given[k] for k in reference_settings(2)} == reference_settings(2)
    assert given["offsets.topic.replication.factor"] == "2"


def test_a_tests_protocol_setting_wins_over_the_table():
    cfg = TestConfig(backend="sim", seed=1, protocol={"replica_lag_time_max_ms": 9000})
    assert sim_config(cfg).replica_lag_time_max_ms == 9000
    assert reference_config(cfg.model_copy(update={"backend": "local"})).replica_lag_time_max_ms == 9000
    assert _kafka(3, **{"replica.lag.time.max.ms": "9000"})["replica.lag.time.max.ms"] == "9000"
