"""Who may hold a connection slot, and whose unfinished frame gives way when
memory runs short: bookkeeping only (no sockets), so its rules are tested as
plain functions. :mod:`.listener` applies them.

Slots (``max.connections``, ``max.connections.per.ip``): as Kafka 4.4's
``ConnectionQuotas.inc`` (``kafka/network/SocketServer.scala``, lines
1405-1420 of the 4.0 source), a connection from an address that already
holds its cap is refused at once. Past the total cap Kafka's acceptor waits
for a free slot (``waitForConnectionSlot``), and its processors close the
least recently used connection only to make room for the inter-broker
listener (``closeExcessConnections``, ``Selector.lowestPriorityChannel``).
Here one port serves clients and peers and the waiting would be a wait behind
whoever holds the slots, so past the total cap a newcomer is admitted when
its address holds at least two fewer slots than the address holding the
most, which gives up its least recently active one: no address can shut out
one that holds fewer, however many sockets it opens.

Memory (``queued.max.request.bytes``): Kafka allocates a request's whole
buffer from a pool when its size is read (``NetworkReceive.readFrom``) and
mutes a channel the pool cannot serve. Here a frame's bytes are counted as
they arrive, and when all unfinished frames together pass the bound, the
connection holding the most is closed, which may be the one that just read:
a small request never waits behind someone's half-sent large one.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Callable, Hashable

from .limits import Limits


@dataclass(frozen=True)
class Admission:
    """What :meth:`SlotQuotas.admit` decided: ``refused`` is "" when the
    connection got its slot, else which cap refused it; ``evict`` is the
    connection that gave up its slot for this one."""

    refused: str = ""
    evict: Any = None


class SlotQuotas:
    """Open connections by peer address, least recently active first."""

    def __init__(self, limits: Limits, max_connections: int | None = None) -> None:
        self.limits = limits
        #: the total cap, lowered when the process cannot open that many files
        self.max_connections = max_connections or limits.max_connections
        self.by_address: dict[str, collections.OrderedDict[Hashable, None]] = {}
        self.address_of: dict[Hashable, str] = {}

    @property
    def open(self) -> int:
        return len(self.address_of)

    def held(self, address: str) -> int:
        return len(self.by_address.get(address, ()))

    def admit(self, conn: Hashable, address: str) -> Admission:
        """Give ``conn`` (from ``address``) a slot, refuse it, or give it the
        least recently active slot of the address holding the most."""
        count = self.held(address)
        if count >= self.limits.max_for(address):
            return Admission("max.connections.per.ip")
        evict = None
        if self.open >= self.max_connections:
            biggest = max(self.by_address, key=lambda a: len(self.by_address[a]))
            if len(self.by_address[biggest]) < count + 2:
                return Admission("max.connections")
            evict = next(iter(self.by_address[biggest]))
            self.release(evict)
        self.by_address.setdefault(address, collections.OrderedDict())[conn] = None
        self.address_of[conn] = address
        return Admission(evict=evict)

    def touch(self, conn: Hashable) -> None:
        """``conn`` did something: it is now its address's most recently active."""
        address = self.address_of.get(conn)
        if address is not None:
            self.by_address[address].move_to_end(conn)

    def release(self, conn: Hashable) -> None:
        address = self.address_of.pop(conn, None)
        if address is None:
            return
        slots = self.by_address[address]
        del slots[conn]
        if not slots:
            del self.by_address[address]


class BufferBudget:
    """Bytes of unfinished frames each connection holds, against one bound."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held: dict[Hashable, int] = {}
        self.total = 0

    def set(self, conn: Hashable, nbytes: int, close: Callable[[Any], None]) -> None:
        """``conn`` now holds ``nbytes``; while the total is past the bound,
        ``close`` the connection holding the most (which releases it here)."""
        self.total += nbytes - self.held.get(conn, 0)
        if nbytes:
            self.held[conn] = nbytes
        else:
            self.held.pop(conn, None)
        while self.total > self.limit and self.held:
            victim = max(self.held, key=self.held.__getitem__)
            before = self.total
            close(victim)
            if self.total == before:  # a close that did not release: never loop
                self.release(victim)

    def release(self, conn: Hashable) -> None:
        self.total -= self.held.pop(conn, 0)
