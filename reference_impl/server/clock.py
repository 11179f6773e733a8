"""The node's clocks: wall time advanced by the monotonic clock, plus an offset
the clock nemesis can change while the node runs (through the control
endpoint), and the monotonic clock, which the offset never moves (a JVM's
``System.nanoTime`` beside its ``currentTimeMillis``; the core reads each
timer from the clock Kafka reads it from). libfaketime cannot be used on Python processes (it also fakes
``time.monotonic`` and breaks asyncio: notes/faults-on-this-machine.md), so the
skew is injected here, at the one place the core gets its ``now``.
"""

from __future__ import annotations

import time


class Clock:
    def __init__(self, offset_ms: int = 0) -> None:
        self._wall0 = time.time() * 1000.0
        self._mono0 = time.monotonic()
        self.offset_ms = int(offset_ms)

    def wall_ms(self) -> int:
        """Unskewed wall-clock milliseconds (monotonic since start)."""
        return int(self._wall0 + (time.monotonic() - self._mono0) * 1000.0)

    def wall_us(self) -> int:
        """Unskewed wall-clock microseconds, on the same base as :meth:`wall_ms`.

        Trace events of different node processes are merged by this: within
        one millisecond a follower's append and the leader's reaction to the
        fetch that followed it would otherwise tie, and a tie can put effect
        before cause (a loopback round trip takes tens of microseconds)."""
        return int(self._wall0 * 1000.0 + (time.monotonic() - self._mono0) * 1_000_000.0)

    def mono_ms(self) -> int:
        """The node's monotonic clock in milliseconds: unskewed, never jumps
        (the same base as :meth:`wall_ms`, so with no offset the two agree)."""
        return self.wall_ms()

    def now_ms(self) -> int:
        """What the node believes the wall-clock time is."""
        return self.wall_ms() + self.offset_ms

    def set_offset(self, offset_ms: int) -> None:
        self.offset_ms = int(offset_ms)

    def shift(self, delta_ms: int) -> None:
        self.offset_ms += int(delta_ms)
