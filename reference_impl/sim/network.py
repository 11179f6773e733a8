"""The simulated network: per-link latency and loss, FIFO delivery per link
(TCP), and partitions expressed as *grudges*.

A grudge is a set of directed ``(src, dst)`` pairs whose messages are dropped,
so any shape is one value (the shapes themselves are ``nemesis.partition``'s,
named by the cluster contract, ``control.SimNetwork``). Endpoints are node ids (int) and client names (str), so
client <-> node links can be cut like any other. A message is checked when it
is sent and again when it would arrive: a partition that starts while a
message is in flight drops it, as an iptables DROP rule would.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable

from heapq import heappush
from math import log as _log

from .events import EventLoop

Endpoint = Hashable


@dataclass(frozen=True)
class LinkProfile:
    """Latency = ``min_ms`` + an exponential with mean ``jitter_ms`` (rounded);
    ``loss`` is the probability a message is dropped."""

    min_ms: int = 1
    jitter_ms: float = 1.0
    loss: float = 0.0

    def sample(self, rng: random.Random) -> int:
        extra = rng.expovariate(1.0 / self.jitter_ms) if self.jitter_ms > 0 else 0.0
        return self.min_ms + int(extra)


class Network:
    def __init__(self, loop: EventLoop, rng: random.Random, default: LinkProfile | None = None) -> None:
        self.loop = loop
        self.rng = rng
        self.default = default or LinkProfile()
        self.links: dict[tuple[Endpoint, Endpoint], LinkProfile] = {}
        self.grudge: set[tuple[Endpoint, Endpoint]] = set()
        #: src -> dst -> when its last message arrives (FIFO per link). Two
        #: lookups by endpoint, not one by ``(src, dst)``: a tuple key is a
        #: tuple to make and hash and, when found, to compare item by item
        self._last_arrival: dict[Endpoint, dict[Endpoint, int]] = {}
        self._receivers: dict[Endpoint, Callable[[Endpoint, Any], None]] = {}
        self.taps: list[Callable[[Endpoint, Endpoint, Any], None]] = []
        self.sent = 0
        self.dropped = 0
        self.delivered = 0
        # the arrival callback, bound once: taking ``self._arrive`` per
        # message made a bound-method object each time
        self._arrive_fn: Callable[[Endpoint, Endpoint, Any], None] = self._arrive
        # the generator's draw, bound once: ``rng.random()`` looked the method
        # up by name on every message
        self._random: Callable[[], float] = rng.random

    def attach(self, endpoint: Endpoint, receive: Callable[[Endpoint, Any], None]) -> None:
        self._receivers[endpoint] = receive

    def set_link(self, src: Endpoint, dst: Endpoint, profile: LinkProfile) -> None:
        self.links[(src, dst)] = profile

    # -- partitions --------------------------------------------------------
    def cut(self, pairs: Iterable[tuple[Endpoint, Endpoint]]) -> None:
        self.grudge.update(pairs)

    def heal(self) -> None:
        self.grudge.clear()

    def heal_pairs(self, pairs: Iterable[tuple[Endpoint, Endpoint]]) -> None:
        self.grudge.difference_update(pairs)

    def blocked(self, src: Endpoint, dst: Endpoint) -> bool:
        return (src, dst) in self.grudge

    # -- delivery ------------------------------------------------------------
    def send(self, src: Endpoint, dst: Endpoint, msg: Any) -> None:
        self.sent += 1
        if self.taps:
            for tap in self.taps:
                tap(src, dst, msg)
        grudge = self.grudge
        if grudge and (src, dst) in grudge:
            self.dropped += 1
            return
        links = self.links
        prof = links.get((src, dst), self.default) if links else self.default
        if prof.loss and self._random() < prof.loss:
            self.dropped += 1
            return
        # LinkProfile.sample, inlined: random.expovariate(1 / jitter) is
        # -log(1 - random()) / (1 / jitter), computed here the same way
        jitter = prof.jitter_ms
        extra = -_log(1.0 - self._random()) / (1.0 / jitter) if jitter > 0 else 0.0
        loop = self.loop
        arrive = loop.now + prof.min_ms + int(extra)
        last_arrival = self._last_arrival.get(src)
        if last_arrival is None:
            last_arrival = self._last_arrival[src] = {}
        last = last_arrival.get(dst, 0)
        if arrive < last:
            arrive = last  # FIFO per link, like one TCP connection
        last_arrival[dst] = arrive
        # EventLoop.at, inlined: arrive is never in the past
        seq = loop._seq = loop._seq + 1
        bucket = loop._buckets.get(arrive)
        if bucket is None:
            loop._buckets[arrive] = [(seq, self._arrive_fn, (src, dst, msg))]
            heappush(loop._times, arrive)
        else:
            bucket.append((seq, self._arrive_fn, (src, dst, msg)))

    def _arrive(self, src: Endpoint, dst: Endpoint, msg: Any) -> None:
        if self.grudge and (src, dst) in self.grudge:
            self.dropped += 1
            return
        recv = self._receivers.get(dst)
        if recv is None:
            self.dropped += 1
            return
        self.delivered += 1
        recv(src, msg)
