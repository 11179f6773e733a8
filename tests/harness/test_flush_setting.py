"""``--flush-messages N`` is ``log.flush.interval.messages`` on every
runtime and db: the reference's nodes, the simulator's brokers and Kafka's
server.properties (``--kafka-config`` still wins there). Before, the
simulator and db kafka ignored it, so a power loss of every node lost every
acknowledged write whatever the flag said."""

from __future__ import annotations

import json
from pathlib import Path

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


def _acked_sends_invoked_before_the_last_power_loss(run_dir: Path) -> tuple[int, int]:
    """(acknowledged sends invoked before the run's last power loss of
    some node, those invoked after it), read from the run's history."""
    (path,) = run_dir.rglob("history.jsonl")
    ops = [json.loads(line) for line in path.read_text().splitlines()]
    loss = max(o["time"] for o in ops if o["process"] == "nemesis" and o["f"] == "start-lose-unfsynced"
               and o["value"].get("nodes"))
    invoked: dict[object, int] = {}
    before = after = 0
    for o in ops:
        if o["f"] != "send":
            continue
        if o["type"] == "invoke":
            invoked[o["process"]] = o["time"]
        elif o["type"] == "ok":
            before, after = (before + 1, after) if invoked[o["process"]] < loss else (before, after + 1)
    return before, after


def test_an_fsync_per_message_keeps_every_acknowledged_write_through_power_losses_of_every_node(tmp_path):
    """Finding 10's schedule in the simulator (docs/findings/)."""
    base = dict(backend="sim", nemesis=["lose-unfsynced"], nemesis_interval=5, time_limit=25, seed=12)
    lost = run_seed(TestConfig(**base), 12, tmp_path / "a")["durability"]["acks=all"]
    kept = run_seed(TestConfig(**base, flush_messages=1), 12, tmp_path / "b")["durability"]["acks=all"]
    # every write invoked before the last power loss of every node is lost;
    # those invoked after it (the final phase's probes, one per partition,
    # and any send the cluster's recovery answered in time) are not
    before, after = _acked_sends_invoked_before_the_last_power_loss(tmp_path / "a")
    assert lost["acked"] == before + after and after >= 2
    assert lost["lost"] == before > 0
    assert kept["acked"] > 0 and kept["lost"] == 0
