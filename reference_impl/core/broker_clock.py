"""The broker's clocks for the call being handled, and the earliest deadline
created since the node last asked.

Every part of the broker (the replica manager, its purgatories, its replica
fetchers, its lifecycle) shares one :class:`BrokerClock`: Kafka's scheduler
and purgatories run on monotonic time (heartbeat interval, isr-expiration
and HW-checkpoint schedules, delayed produce and fetch, controlled-shutdown
wait) while replica lag and request timeouts read the wall clock
(docs/architecture.md, "Clocks"). A deadline kept on the monotonic clock is
armed as a wall-clock ``Timer`` at ``deadline + skew``.
"""

from __future__ import annotations

from typing import Final

#: "no deadline noted" (larger than any time a run reaches)
NO_DEADLINE: Final = 1 << 62


class BrokerClock:
    def __init__(self) -> None:
        #: the monotonic time of the current call, and wall minus monotonic
        self.mono = 0
        self.skew = 0
        self._soonest = NO_DEADLINE

    def set(self, now: int, mono: int | None) -> None:
        """Take the current call's clocks (``mono=None``: the two agree)."""
        m = now if mono is None else mono
        self.mono = m
        self.skew = now - m

    def note_deadline(self, at: int) -> None:
        """Remember that a (wall-clock) deadline was just created."""
        if at < self._soonest:
            self._soonest = at

    def take_soonest(self) -> int | None:
        """The earliest deadline noted since the last call, and forget it."""
        at, self._soonest = self._soonest, NO_DEADLINE
        return None if at == NO_DEADLINE else at
