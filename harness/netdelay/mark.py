"""The delay a packet carries to the delayer: its netfilter mark.

The iptables rule that queues a delayed link's packet sets its mark to
``ms << 16 | jitter_ms`` just before (:mod:`harness.runtimes.net.latency`),
so the rules are the whole state and the delayer needs no configuration.
"""

from __future__ import annotations

import math

#: the NFQUEUE number the delayer binds (per network namespace; 7029 has no meaning)
QUEUE = 7029
MAX_MS = 0xFFFF


def encode_mark(ms: float, jitter_ms: float) -> int:
    """The packet mark that asks the delayer for ``ms ± jitter_ms``."""
    for what, v in (("latency", ms), ("jitter", jitter_ms)):
        if not math.isfinite(v) or v < 0 or round(v) > MAX_MS:
            raise ValueError(f"{what} {v} ms: a kernel backend delays a link by 0..{MAX_MS} ms "
                             "(a link slower than that is a partition)")
    return (round(ms) << 16) | round(jitter_ms)


def decode_mark(mark: int) -> tuple[int, int]:
    """(ms, jitter_ms) from a packet mark set by :func:`encode_mark`."""
    return (mark >> 16) & 0xFFFF, mark & 0xFFFF
