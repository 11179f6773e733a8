"""What every part of the broker shares: the clocks of the call being
handled, the earliest deadline created since the node last asked, the
broker epoch and the request correlation ids.

The replica manager, its purgatories, its replica fetchers and its
lifecycle hold one :class:`BrokerContext`, a plain object the compiled build
reads natively (a part reading these through a protocol of the broker would
look each up by name, on every fetch it sends and every tick). Kafka's
scheduler and purgatories run on monotonic time (heartbeat interval,
isr-expiration and HW-checkpoint schedules, delayed produce and fetch,
controlled-shutdown wait) while replica lag and request timeouts read the
wall clock (docs/architecture.md, "Clocks"). A deadline kept on the
monotonic clock is armed as a wall-clock ``Timer`` at ``deadline + skew``.
"""

from __future__ import annotations

from typing import Final

from .messages import NodeId

#: "no deadline noted" (larger than any time a run reaches). The largest
#: int mypyc holds unboxed (63-bit signed): ``1 << 62`` is one more, a heap
#: int, and every comparison of a deadline with it (after each message, in
#: ``Node._arm`` and ``note_deadline``) took mypyc's slow path, boxing the
#: other side (~200 instructions each)
NO_DEADLINE: Final = (1 << 62) - 1


class BrokerContext:
    def __init__(self, node_id: NodeId) -> None:
        self.node_id = node_id
        #: the monotonic time of the current call, and wall minus monotonic
        self.mono = 0
        self.skew = 0
        #: this broker's registration (BrokerLifecycleManager sets it); -1 until registered
        self.broker_epoch = -1
        #: the earliest deadline noted since the node last took it
        #: (:meth:`take_soonest`; ``Node._arm`` reads and resets it inline
        #: after every message)
        self.soonest = NO_DEADLINE
        self._corr = 0

    def set_clock(self, now: int, mono: int | None) -> None:
        """Take the current call's clocks (``mono=None``: the two agree)."""
        m = now if mono is None else mono
        self.mono = m
        self.skew = now - m

    def note_deadline(self, at: int) -> None:
        """Remember that a (wall-clock) deadline was just created."""
        if at < self.soonest:
            self.soonest = at

    def take_soonest(self) -> int:
        """The earliest deadline noted since the last call (``NO_DEADLINE``:
        none), and forget it. A native int, not an Optional: the node asks
        after every message, and boxing it was an allocation each time."""
        at, self.soonest = self.soonest, NO_DEADLINE
        return at

    def next_correlation_id(self) -> int:
        """One counter for every request the broker sends (fetches,
        AlterPartition, forwarded admin requests)."""
        self._corr += 1
        return self._corr
