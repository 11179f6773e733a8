"""Swarm testing: each seed draws its own nemesis from the mix (a random
subset of the fault kinds, the interval, sequential or overlapping, the
client rate), so a seed explores a configuration no one wrote by hand, and
faults that mask each other in a full mix are sometimes apart (Groce et al.,
"Swarm Testing", ISSTA 2012).

The draw is a pure function of the seed and the mix it draws from, and the
result is recorded in the run's test.json (``nemesis``, ``nemesis_interval``,
``nemesis_mode``, ``rate`` and ``swarm_of``, the mix drawn from): running
the seed again with ``--swarm`` draws the same, and ``--schedule
test.json`` replays it exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from .faults import FaultSpec

INTERVALS_S = (1.0, 2.0, 3.0, 5.0, 8.0, 13.0)
RATE_FACTORS = (0.5, 1.0, 2.0)


@dataclass(frozen=True)
class Draw:
    """What one seed's swarm drew."""

    faults: tuple[FaultSpec, ...]
    interval_s: float
    mode: str
    rate_factor: float

    def settings(self, rate: float, mix: tuple[FaultSpec, ...]) -> dict[str, Any]:
        return {"nemesis": list(self.faults), "nemesis_interval": self.interval_s, "nemesis_mode": self.mode,
                "rate": rate * self.rate_factor, "swarm_of": list(mix)}


def draw(mix: tuple[FaultSpec, ...], seed: int) -> Draw:
    """A subset of ``mix`` (each fault kept with probability 1/2, as the
    swarm paper's features are; at least one, in the mix's order) and the
    schedule's parameters, from the seed alone."""
    rng = random.Random(f"swarm-{seed}")
    picked = [f for f in mix if rng.random() < 0.5] or [rng.choice(mix)]
    return Draw(tuple(picked), rng.choice(INTERVALS_S), rng.choice(("sequential", "overlap")),
                rng.choice(RATE_FACTORS))
