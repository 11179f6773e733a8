"""What one simulated machine sees of the simulation: its node's
environment, never the cluster (as each node of Kafka's Raft simulation is
handed its own network channel).

A :class:`~reference_impl.sim.host.Host` gets a :class:`NodeEnv`: the clock
of the event loop, the network to send on, the settings and voters a new
incarnation of its node starts with, the rng that seeds it, and a
:class:`TraceSink` for what the node tells the glass box (trace events, a
crash). The simulation is that sink; the host knows it only as one, so
``host.py`` imports nothing of ``simulation.py``.
"""

from __future__ import annotations

import random
from typing import Any

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.effects import AppendTrace, HwTrace, ProduceTrace
from reference_impl.core.messages import BrokerEndpoint

from .events import EventLoop
from .network import Network


class TraceSink:
    """Where a node's trace events and crashes go (the simulation's glass
    box). A compiled base class, so a host's calls are native ones."""

    def trace(self, nid: int, kind: str, data: dict) -> None:
        raise NotImplementedError

    # The typed hot events (effects.AppendTrace): a sink that can read
    # their fields overrides these; by default they are any other event.
    # ``nid`` is the node id as the host holds it boxed (``Host._src``), an
    # int typed ``Any``: compiled, an ``int`` parameter is boxed again by a
    # sink that hands it on (the invariant monitor takes an object), on
    # every append and HW move
    def trace_append(self, nid: Any, ev: AppendTrace) -> None:
        self.trace(nid, ev.kind, ev.data)

    def trace_hw(self, nid: Any, ev: HwTrace) -> None:
        self.trace(nid, ev.kind, ev.data)

    def trace_produce(self, nid: Any, ev: ProduceTrace) -> None:
        self.trace(nid, ev.kind, ev.data)

    def node_crashed(self, nid: int, error: str, tb: str) -> None:
        raise NotImplementedError


class NodeEnv:
    """One machine's environment in the simulation."""

    def __init__(self, node_id: int, loop: EventLoop, net: Network, config: ProtocolConfig,
                 voters: tuple[int, ...], rng: random.Random, sink: TraceSink) -> None:
        self.node_id = node_id
        self.loop = loop
        self.net = net
        self.config = config
        self.voters = voters
        self.rng = rng
        self.sink = sink
        self.endpoint = BrokerEndpoint(node_id, f"n{node_id}.sim", 9092)
