"""One KRaft controller driven by hand-made broker requests (imported by the
tests as ``tests.core.controllerkit``): node 100 is the only voter, brokers
0-2 are played by the test, and topic ``t`` (one partition, RF 3, min ISR 2)
exists once the brokers are registered and unfenced."""

from __future__ import annotations

import random

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.controller import ControllerRole
from reference_impl.core.messages import (
    BrokerEndpoint,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreateTopicsRequest,
    Errors,
    NewTopic,
    TopicPartition,
)
from reference_impl.core.metadata import PartitionRegistration
from reference_impl.core.raft.testkit import Loop
from reference_impl.core.storage import StoredState

TP = TopicPartition("t", 0)
CTL = 100
BROKERS = (0, 1, 2)


class OneController:
    def __init__(self, config: ProtocolConfig, rng_seed: int) -> None:
        self.loop = Loop(latency=1)
        self.loop.add(CTL, ControllerRole(CTL, config, (CTL,), StoredState(), random.Random(rng_seed)))
        assert self.loop.run_until_true(lambda: self.ctl.is_active, 10_000)
        self.epochs: dict[int, int] = {}
        self.inc = 0
        for b in BROKERS:
            self.register(b, -1)
        for b in BROKERS:
            self.hb(b)
        resp = self.ask(CreateTopicsRequest("c", (NewTopic("t", 1, 3, (("min.insync.replicas", "2"),)),)), 0)
        assert resp.results[0].error == Errors.NONE

    @property
    def ctl(self) -> ControllerRole:
        return self.loop.nodes[CTL]  # type: ignore[return-value]

    @property
    def part(self) -> PartitionRegistration:
        return self.ctl.image.partitions[TP]

    def ask(self, req, src):
        """Deliver ``req`` from ``src`` and return the controller's answer to it."""
        n = len(self.loop.sent)
        self.loop.deliver(CTL, req, src)
        self.loop.run_until_true(lambda: any(d == src for (_t, _s, d, _m) in self.loop.sent[n:]), 2000)
        return next(m for (_t, _s, d, m) in self.loop.sent[n:] if d == src)

    def register(self, b: int, previous: int) -> None:
        """A new incarnation of ``b`` registering with ``previous`` broker epoch (-1: unclean)."""
        self.inc += 1
        r = self.ask(BrokerRegistrationRequest(b, f"i{self.inc}", BrokerEndpoint(b, "h", 1), previous), b)
        assert r.error == Errors.NONE
        self.epochs[b] = r.broker_epoch

    def hb(self, b: int, **kw):
        return self.ask(BrokerHeartbeatRequest(b, self.epochs[b], self.ctl.image.offset, **kw), b)

    def elections(self) -> list[dict]:
        return [ev.data for _t, _n, ev in self.loop.traces if ev.kind == "election"]
