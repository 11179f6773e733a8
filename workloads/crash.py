"""Client crashes (Jepsen's ``--crash-clients``): a client process is killed
in the middle of an operation and replaced.

Jepsen's Kafka test crashes a random client every ``crash-client-interval``
seconds divided by the concurrency (30 s by default), so each client is
crashed about once per interval. Here the generator marks the next
operation due after each crash time with ``"crash": ms`` (seeded), and the
client dies that many milliseconds into the operation, whatever is in
flight then (:meth:`workloads.queue.QueueClient.crash`): queued and
unanswered requests are purged without waiting (what a killed process's
requests already on the wire do, they still do), a transaction is left open
(its coordinator aborts it when the replacement registers the same
transactional id: fencing). The operation completes ``info`` with error
``crashed``; the interpreter gives the thread a new process and a fresh
client, as after any ``info``.
"""

from __future__ import annotations

from dataclasses import dataclass

import generator as g

#: a crash lands within this many ms of the operation's start: most sends
#: are answered within it, so some die before their answer and some after
MAX_CRASH_MS = 100


@dataclass(frozen=True)
class CrashClients(g.Gen):
    """Marks the first operation due at or after each crash time."""

    gen: g.Gen | None
    period_ns: int
    next_ns: int

    def op(self, ctx: g.Context):
        if self.gen is None:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        o, g2 = r
        if o == g.PENDING or o.get("time", ctx.time) < self.next_ns:
            return o, CrashClients(g2, self.period_ns, self.next_ns)
        o = {**o, "crash": ctx.rng.randint(0, MAX_CRASH_MS)}
        return o, CrashClients(g2, self.period_ns, self.next_ns + self.period_ns)

    def is_inert(self) -> bool:
        return self.gen is None or self.gen.is_inert()

    def update(self, ctx: g.Context, event: dict) -> g.Gen:
        g2 = self.gen.update(ctx, event) if self.gen is not None else None
        return self if g2 is self.gen else CrashClients(g2, self.period_ns, self.next_ns)


def crash_clients(gen: g.Gen, interval_s: float, concurrency: int) -> g.Gen:
    """``gen`` with one crash every ``interval_s / concurrency`` seconds."""
    period = max(1, int(interval_s * g.NS / max(1, concurrency)))
    return CrashClients(gen, period, period)
