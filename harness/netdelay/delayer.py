"""The process that delays queued packets: one per node host, for the run.

``python -m harness.netdelay.delayer --queue Q`` binds NFQUEUE number Q
in its network namespace (:mod:`harness.netdelay.nfqueue`) and holds
each packet an iptables rule of :mod:`harness.runtimes.net.latency` queues
there for the delay written in the packet's mark (``decode_mark``: ms and
jitter, set by the rule just before it), then accepts it.

Why it is correct for TCP: each packet's release time is its arrival plus
the asked delay plus a uniform draw in ±jitter (the local proxy's rule,
:mod:`harness.runtimes.proxy`), but never earlier than the release of the
packet of the same flow before it (protocol, addresses, ports:
``nfqueue.flow_of``), so jitter never reorders a connection's segments (a
reorder would look like loss to TCP and trigger spurious retransmits),
while different connections are delayed independently.

Why it is fast enough: packets are read in batches without blocking, kept
in one heap by release time, and the verdicts due at one moment go out in
one netlink write; GSO packets are queued whole. ``bench/latency_accuracy.py``
prints the rate it sustains and the delay it adds.

What ends it: SIGTERM/SIGINT, or its lease (:mod:`harness.rundir.lease`):
the harness that started it dying. Packets still held when it exits are
dropped by the kernel with the queue (TCP retransmits them); the rules use
``--queue-bypass``, so once no process holds the queue its packets pass
undelayed rather than being lost.
"""

from __future__ import annotations

import argparse
import heapq
import random
import select
import signal
import sys
import time

from harness.rundir import lease
from harness.netdelay.mark import decode_mark
from harness.netdelay.nfqueue import PacketQueue, QueueError, flow_of

#: stale per-flow entries are dropped once the table holds this many
FLOW_TABLE_PRUNE = 4096
#: a verdict this close to its time is sent now rather than after one more sleep
EARLY_S = 0.0002


class Scheduler:
    """Release times per packet: pure (clock and randomness passed in), so
    FIFO per flow and the jitter bounds are tested without a kernel."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.heap: list[tuple[float, int, int]] = []  # (due, sequence, packet id)
        self.last: dict[bytes, float] = {}  # flow -> its latest release time
        self._seq = 0

    def due_time(self, now: float, mark: int, flow: bytes) -> float:
        ms, jitter = decode_mark(mark)
        delay = ms + (self.rng.uniform(-jitter, jitter) if jitter else 0.0)
        due = max(now + max(0.0, delay) / 1000.0, self.last.get(flow, 0.0))
        self.last[flow] = due
        return due

    def add(self, now: float, packet_id: int, mark: int, flow: bytes) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (self.due_time(now, mark, flow), self._seq, packet_id))
        if len(self.last) > FLOW_TABLE_PRUNE:
            self.last = {f: t for f, t in self.last.items() if t > now}

    def pop_due(self, now: float) -> list[int]:
        """Packet ids whose time has come, in release order."""
        out = []
        while self.heap and self.heap[0][0] <= now + EARLY_S:
            out.append(heapq.heappop(self.heap)[2])
        return out

    def wait(self, now: float, idle: float = 1.0) -> float:
        """How long to sleep before the next release (``idle`` with none)."""
        return max(0.0, self.heap[0][0] - now) if self.heap else idle


def serve(queue: PacketQueue, sched: Scheduler) -> None:
    """Read, schedule and release packets until a signal ends the loop."""
    fd = queue.fileno()
    while True:
        # select's timeout is in microseconds (poll and epoll round to ms)
        if select.select([fd], [], [], sched.wait(time.monotonic()))[0]:
            now = time.monotonic()
            for p in queue.read():
                sched.add(now, p.packet_id, p.mark, flow_of(p.head))
        queue.accept(sched.pop_due(time.monotonic()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="delayer", description="hold NFQUEUE packets for the delay in their mark")
    ap.add_argument("--queue", type=int, required=True, help="NFQUEUE number to bind (0..65535)")
    ap.add_argument("--maxlen", type=int, default=16384, help="packets the kernel holds before it drops")
    ap.add_argument("--seed", type=int, default=None, help="jitter's random seed")
    args = ap.parse_args(argv)
    lease.arm()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(0))
    try:
        queue = PacketQueue(args.queue, maxlen=args.maxlen)
    except (QueueError, OSError) as e:
        print(f"delayer: cannot bind queue {args.queue}: {e.strerror or e}", file=sys.stderr)
        return 4
    print(f"delayer: queue {args.queue} bound", flush=True)
    try:
        serve(queue, Scheduler(random.Random(args.seed)))
    finally:
        queue.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
