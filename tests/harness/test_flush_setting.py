"""``--flush-messages N`` is ``log.flush.interval.messages`` on every
runtime and db: the reference's nodes, the simulator's brokers and Kafka's
server.properties (``--kafka-config`` still wins there). Before, the
simulator and db kafka ignored it, so a power loss of every node lost every
acknowledged write whatever the flag said."""

from __future__ import annotations

from harness.config import TestConfig
from harness.dbs.kafka.db import server_overrides
from harness.dbs.reference.db import node_config
from harness.lifecycle.runner import run_seed
from harness.runtimes.sim import protocol_config


def test_every_runtime_takes_the_flush_interval():
    cfg = TestConfig(db="kafka", backend="netns", flush_messages=1)
    assert server_overrides(cfg) == {"log.flush.interval.messages": "1"}
    assert server_overrides(cfg.model_copy(update={"kafka_config": ["log.flush.interval.messages=5"]})) == \
        {"log.flush.interval.messages": "5"}
    assert server_overrides(TestConfig(db="kafka", backend="netns")) == {}
    assert node_config(TestConfig(flush_messages=1))["log.flush.interval.messages"] == "1"
    assert protocol_config(TestConfig(backend="sim", flush_messages=1)).log_flush_interval_messages == 1
    assert protocol_config(TestConfig(backend="sim")).log_flush_interval_messages == 0


def test_an_fsync_per_message_keeps_every_acknowledged_write_through_power_losses_of_every_node(tmp_path):
    """Finding 10's schedule in the simulator (docs/findings/)."""
    base = dict(backend="sim", nemesis=["lose-unfsynced"], nemesis_interval=5, time_limit=25, seed=12)
    lost = run_seed(TestConfig(**base), 12, tmp_path / "a")["durability"]["acks=all"]
    kept = run_seed(TestConfig(**base, flush_messages=1), 12, tmp_path / "b")["durability"]["acks=all"]
    # every write before the last power loss is lost; the final phase's probe
    # writes (one per partition, after the heal) are not
    assert lost["acked"] > 0 and lost["acked"] - 2 <= lost["lost"] < lost["acked"]
    assert kept["acked"] > 0 and kept["lost"] == 0
