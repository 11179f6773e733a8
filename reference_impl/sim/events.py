"""The deterministic event loop: virtual time in integer milliseconds and a
heap of ``(time, seq, callback, args)``.

Why a sequence number: two events due at the same millisecond run in the order
they were scheduled, never in an order that depends on comparing callbacks, so
one seed always yields one schedule (the property every replay relies on).
"""

from __future__ import annotations

import gc
import heapq
from heapq import heappush
from typing import Any, Callable


_GC_GEN0 = 50_000


class EventLoop:
    def __init__(self) -> None:
        self.now: int = 0
        self._seq = 0
        self._heap: list[tuple[int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self.steps = 0

    def at(self, when: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at virtual time ``when`` (never in the past)."""
        if when < self.now:
            when = self.now
        seq = self._seq = self._seq + 1
        heappush(self._heap, (int(when), seq, fn, args))

    def after(self, delay: int, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + max(0, int(delay)), fn, *args)

    def run_until(self, until: int, stop: Callable[[], bool] | None = None) -> None:
        """Run every event due at or before ``until``; then time is ``until``.

        ``stop`` is consulted after each event so scripted tests can wait for
        a condition ("until broker 2 leads t-0") without guessing times.
        """
        # The loop allocates many short-lived containers (messages, effect
        # lists, trace dicts) that die young without cycles; the default
        # gen-0 threshold (700) runs the cyclic collector every few events
        # and rescans the run's growing long-lived state. A larger gen-0
        # threshold while the loop runs costs nothing in behaviour (nothing
        # here depends on when garbage is collected) and saves about 6%.
        thresholds = gc.get_threshold()
        if thresholds[0] and thresholds[0] < _GC_GEN0:
            gc.set_threshold(_GC_GEN0, *thresholds[1:])
        try:
            self._run(until, stop)
        finally:
            if thresholds[0] and thresholds[0] < _GC_GEN0:
                gc.set_threshold(*thresholds)

    def _run(self, until: int, stop: Callable[[], bool] | None) -> None:
        heap = self._heap
        pop = heapq.heappop
        if stop is None:
            # the hot loop: the step count is kept locally and stored once
            steps = self.steps
            try:
                while heap and heap[0][0] <= until:
                    when, _, fn, args = pop(heap)
                    self.now = when
                    steps += 1
                    fn(*args)
            finally:
                self.steps = steps
        else:
            while heap and heap[0][0] <= until:
                when, _, fn, args = pop(heap)
                self.now = when
                self.steps += 1
                fn(*args)
                if stop():
                    return
        if until > self.now:
            self.now = until

    def pending(self) -> int:
        return len(self._heap)
