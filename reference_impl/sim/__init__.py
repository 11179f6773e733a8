"""Deterministic discrete-event simulator driving the sans-IO core.

Virtual time, one seeded rng, a faultable network, disks with page caches,
skewed clocks, seeded nemesis schedules and librdkafka-like clients; see
docs/architecture.md ("The simulator").
"""

from .options import SimOptions, SimOptionsError
from .simulation import Simulation

__all__ = ["SimOptions", "SimOptionsError", "Simulation"]
