"""A strobe on real processes flips its node's clock on a thread of its
own, as the simulator flips it on its loop: the nemesis goes on at once,
the nodes of one strobe flip together, and a reset ends it."""

from __future__ import annotations

import threading
import time

from harness.dbs.parts import SteppedClock


class Offsets(SteppedClock):
    """The offsets a clock was set to, per node (no node behind them)."""

    def __init__(self) -> None:
        self.seen: dict[str, list[int]] = {}
        self.lock = threading.Lock()

    def set_offset(self, node: str, ms: int) -> None:
        with self.lock:
            self.seen.setdefault(node, []).append(ms)


def test_a_strobe_returns_at_once_flips_its_nodes_together_and_ends_at_zero():
    clock = Offsets()
    for n in ("n1", "n2"):
        clock.strobe(n, 500, 10, 300)
    assert sum(len(v) for v in clock.seen.values()) <= 4  # both started, neither run through
    # a strobe of 300 ms ends at 0: waited for with a busy machine's margin, not a fixed 0.6 s
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(t.name in ("strobe-n1", "strobe-n2") for t in threading.enumerate()):
        time.sleep(0.05)
    for n in ("n1", "n2"):
        assert clock.seen[n][0] == 500 and clock.seen[n][-1] == 0 and len(clock.seen[n]) > 10


def test_a_reset_ends_a_strobe_under_way():
    clock = Offsets()
    clock.strobe("n1", 500, 10, 2000)
    time.sleep(0.1)
    clock.reset("n1")
    after = len(clock.seen["n1"])
    time.sleep(0.2)
    assert clock.seen["n1"][-1] == 0 and len(clock.seen["n1"]) == after  # nothing after the reset
