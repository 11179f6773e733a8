"""The Metadata observer asks the cluster once for the looks of one
decision: a state target's resolution reads the ISR, leader and replicas
of every partition within a moment, and on Kafka each ask may take 4 s when
brokers do not answer, which played replayed schedules seconds late (63 s
once). One answer stands for ``FRESH_S``; then it is asked again."""

from __future__ import annotations

import time

from harness.dbs.parts import MetadataObserver, Topology
from harness.config import TestConfig

asks: list[str] = []


def test_the_looks_of_one_moment_share_one_ask_and_a_later_look_asks_again():
    topo = Topology.of(TestConfig().layout())
    obs = MetadataObserver(topo, lambda: asks.append("ask") or "127.0.0.1:1", ["t0-0", "t0-1"])
    assert obs.isr_of("t0-0") == [] and obs.leader_of("t0-0") is None and obs.isr_of("t0-1") == []
    assert asks == ["ask"]  # nobody answers: that too stands for the moment
    time.sleep(obs.FRESH_S)
    obs.leader_of("t0-1")
    assert asks == ["ask", "ask"]
