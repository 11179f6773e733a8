"""Deterministic discrete-event simulator driving the sans-IO core.

Virtual time, one seeded rng, a faultable network, disks with page caches,
skewed clocks and librdkafka-like clients, and the cluster contract over
them (``control.SimCluster``); the harness drives it as a runtime (see
docs/architecture.md, "The simulator").
"""

from .control import SimCluster
from .simulation import Simulation

__all__ = ["SimCluster", "Simulation"]
