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
        # The loop allocates many short-lived objects (messages, effect
        # lists, trace dicts) that reference counting frees at once; few are
        # in a cycle (a 60 s run leaves tens to ~1,500 cyclic objects, more
        # with kills: a stopped node's state). The cyclic collector would still walk the young objects
        # every few hundred allocations, and the run's growing long-lived
        # state (history, logs) on every older pass: about 5% of the run.
        # So it is off while the loop runs and back on after; nothing here
        # depends on when garbage is collected.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._run(until, stop)
        finally:
            if was_enabled:
                gc.enable()

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
