"""Per-node clocks: a node's ``now`` is virtual time scaled by its drift plus
an offset (``node = vt * (1 + drift) + offset``).

Nodes ask for timers in their own time; the runtime converts back to virtual
time to schedule them. A clock bump changes the offset (and may move a node's
clock backwards, as a wall-clock jump does: Kafka's ``time.milliseconds()`` is
the wall clock). The node's monotonic clock (``mono_time``, Kafka's
``time.nanoseconds()``) runs at the same rate but never jumps: the offset is
the wall clock's alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class NodeClock:
    offset_ms: int = 0
    drift: float = 0.0  # e.g. 0.001 = runs 0.1% fast

    def node_time(self, vt: int) -> int:
        if not self.drift:
            return vt + self.offset_ms
        return int(vt + vt * self.drift) + self.offset_ms

    def mono_time(self, vt: int) -> int:
        """The node's monotonic clock: drift, no offset (a clock bump never moves it)."""
        if not self.drift:
            return vt
        return int(vt + vt * self.drift)

    def virtual_time(self, node_ms: int) -> int:
        """The earliest virtual time at which this clock reads >= ``node_ms``."""
        if not self.drift and type(node_ms) is int:
            return node_ms - self.offset_ms  # exact: node_time is vt + offset
        vt = math.ceil((node_ms - self.offset_ms) / (1.0 + self.drift))
        # float rounding: nudge until node_time(vt) >= node_ms
        while self.node_time(vt) < node_ms:
            vt += 1
        return vt
