"""The node's one listening port: connection slots, deadlines and the
memory of unfinished frames, for clients and peers alike (bounds in
:mod:`.limits`, slot and memory rules in :mod:`.quotas`).

Every connection reads length-prefixed frames. Its first four bytes say
what it is: :data:`.rpc.MAGIC` opens a peer connection (a hello frame, then
messages, :class:`.rpc.PeerInbound`), anything else is a Kafka client's
first request size (:class:`.clients.ClientSession`). A :class:`Session` gets
each complete frame; the connection owns the bytes until then.

Reading is done into one scratch buffer the whole listener shares (asyncio's
``BufferedProtocol``: the loop reads into it and calls back at once, and
nothing of it is kept across calls), so a connection costs memory only for
the unfinished frame it holds and the answers its client has not taken yet;
both count against ``queued.max.request.bytes`` (an authenticated peer's
frames do not: the cluster's own nodes, as Kafka spares its inter-broker
listener). Past it, the connection holding the most is closed.

Deadlines, checked by one sweep a few times a second:

* ``connections.handshake.timeout.ms`` from accept until the first complete
  frame (a client's first request, a peer's hello after the magic);
* ``socket.request.read.timeout.ms`` from a frame's first byte to its last;
* ``connections.max.idle.ms`` with nothing read and nothing owed, or with
  answers its client has not read (the node stops reading from a connection
  whose unread answers pass :data:`MAX_UNREAD_REPLY_BYTES`).

A deadline runs only while the node is reading the connection: a client
held back because it has too many requests waiting for answers is not the
client's stall.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import resource
import socket
from typing import Any, Callable, Protocol

from .limits import Limits, peer_address
from .quotas import BufferBudget, SlotQuotas
from .rpc import MAGIC

log = logging.getLogger("kraftwerk.listener")

#: answered bytes a client has not read before the node stops reading its requests
MAX_UNREAD_REPLY_BYTES = 16 * 1024 * 1024
#: what one read takes from the kernel (asyncio's own read size)
SCRATCH_BYTES = 256 * 1024
#: frames one connection may hand on in one turn of the loop; the rest of
#: what it sent waits behind every other connection that is ready (a client
#: that pipelines thousands of small requests does not stall the others)
FRAMES_PER_TURN = 32
#: files a node keeps open besides its connections (log segments, trace,
#: checkpoints, peers' outbound sockets, the control endpoint)
RESERVED_FILES = 256


class Session(Protocol):
    """What a connection hands its frames to (client or peer)."""

    #: frames from the cluster's own authenticated nodes: not counted against the memory bound
    trusted: bool

    def accept_size(self, size: int) -> bool:
        """Whether a frame of ``size`` bytes may be read (False closes)."""
        ...

    def on_frame(self, frame: bytes | bytearray) -> bool:
        """One complete frame (False closes the connection)."""
        ...

    def owes(self) -> bool:
        """Whether answers are still owed (then the connection is not idle)."""
        ...

    def on_close(self) -> None:
        """The connection is gone."""
        ...


class Listener:
    """The listening port and every connection accepted on it."""

    def __init__(
        self,
        limits: Limits,
        open_client: Callable[["Connection"], Session],
        open_peer: Callable[["Connection"], Session],
        counters: collections.Counter,
    ) -> None:
        self.limits = limits
        self.open_client = open_client
        self.open_peer = open_peer
        self.counters = counters
        self.quotas = SlotQuotas(limits)
        self.budget = BufferBudget(limits.queued_max_request_bytes)
        self.conns: set[Connection] = set()
        self.scratch = memoryview(bytearray(SCRATCH_BYTES))
        self.server: asyncio.AbstractServer | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self.tick = min(1.0, max(0.05, min(limits.handshake_timeout_ms, limits.request_read_timeout_ms,
                                             limits.idle_ms) / 4000.0))

    async def start(self, addresses: list[str], port: int) -> None:
        self.quotas.max_connections = _fit_open_files(self.limits.max_connections)
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: Connection(self), addresses, port, reuse_address=True,
                                               backlog=self.limits.listen_backlog)
        self._sweeper = loop.call_later(self.tick, self._sweep)

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self.server is not None:
            self.server.close()
        for c in list(self.conns):
            c.close("node stopping", abort=False)

    def status(self) -> dict[str, Any]:
        return {"open": self.quotas.open, "addresses": len(self.quotas.by_address),
                "buffered_bytes": self.budget.total, "max_connections": self.quotas.max_connections}

    # -- called by connections --------------------------------------------------

    def admit(self, conn: "Connection") -> bool:
        decision = self.quotas.admit(conn, conn.address)
        if decision.refused:
            self.counters["refused_connections_per_ip" if decision.refused == "max.connections.per.ip"
                          else "refused_connections"] += 1
            return False
        if decision.evict is not None:
            self.counters["evicted_connections"] += 1
            decision.evict.close(f"slot given to {conn.address}")
        self.conns.add(conn)
        return True

    def forget(self, conn: "Connection") -> None:
        self.conns.discard(conn)
        self.quotas.release(conn)
        self.budget.release(conn)

    def holds(self, conn: "Connection", nbytes: int) -> None:
        """``conn`` holds ``nbytes`` now (unfinished frames, unread answers)."""
        if self.budget.total - self.budget.held.get(conn, 0) + nbytes > self.budget.limit:
            for c in list(self.budget.held):  # answers drain without telling us: count them afresh first
                if c is not conn:
                    self.budget.set(c, c.holding(), self._evict_buffer)
        self.budget.set(conn, nbytes, self._evict_buffer)

    def _evict_buffer(self, conn: "Connection") -> None:
        self.counters["buffer_evicted"] += 1
        conn.close("it holds the most past queued.max.request.bytes")

    # -- deadlines --------------------------------------------------------------

    def _sweep(self) -> None:
        now = asyncio.get_running_loop().time()
        idle = self.limits.idle_ms / 1000.0
        for c in list(self.conns):
            expired = c.expired(now, idle)
            if expired:
                self.counters[expired] += 1
                c.close(expired.replace("_", " "))
            elif c.unread:
                c.account()
        self._sweeper = asyncio.get_running_loop().call_later(self.tick, self._sweep)


class Connection(asyncio.BufferedProtocol):
    """One accepted socket: the frame it is reading, its deadlines, its session."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.address = ""
        self.session: Session | None = None
        self.closed = False
        self._head = b""
        self._size: int | None = None
        self._buf = bytearray()
        self._backlog = bytearray()
        self._holds: set[str] = set()
        self._handshake_by: float | None = None
        self._frame_by: float | None = None
        self.last_active = 0.0
        self._unread_since: float | None = None
        #: answer bytes the transport still holds (the client has not taken them)
        self.unread = 0

    # -- asyncio's protocol -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.address = peer_address(str(peer[0])) if peer else ""
        if not self.listener.admit(self):
            self.closed = True
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.set_write_buffer_limits(high=MAX_UNREAD_REPLY_BYTES)
        now = self._now()
        self.last_active = now
        self._handshake_by = now + self.listener.limits.handshake_timeout_ms / 1000.0

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.listener.scratch

    def buffer_updated(self, nbytes: int) -> None:
        self._consume(self.listener.scratch[:nbytes])

    def eof_received(self) -> bool:
        return False  # the client is done sending: Kafka closes such a connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def pause_writing(self) -> None:
        self._unread_since = self._now()
        self.hold("unread answers")

    def resume_writing(self) -> None:
        self._unread_since = None
        self.account()
        self.release("unread answers")

    # -- what sessions call -----------------------------------------------------

    def write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)
            self.last_active = self._now()
            self.account()

    def hold(self, reason: str) -> None:
        """Read nothing more until :meth:`release` of every reason."""
        if not self._holds and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._holds.add(reason)

    def release(self, reason: str) -> None:
        if reason not in self._holds:
            return
        self._holds.discard(reason)
        if self._holds or self.closed or self.transport is None:
            return
        if self._frame_by is not None:  # the stall was ours: the frame's deadline starts again
            self._frame_by = self._now() + self.listener.limits.request_read_timeout_ms / 1000.0
        self.transport.resume_reading()
        if self._backlog:
            asyncio.get_running_loop().call_soon(self._read_backlog)

    def close(self, reason: str, abort: bool = True) -> None:
        """Close now: reset (``abort``, for a connection that took too much),
        or end it in order when nothing is left to send. Answers not yet
        taken are dropped either way, as Kafka drops a closed channel's
        responses: a client that reads nothing cannot keep them in memory."""
        if self.closed:
            return
        log.debug("closing connection from %s: %s", self.address, reason)
        transport = self.transport
        self._end()
        if transport is None:
            return
        if abort or transport.get_write_buffer_size():
            transport.abort()
        else:
            transport.close()

    def holding(self) -> int:
        """Bytes this connection holds against queued.max.request.bytes."""
        if self.transport is not None and not self.closed:
            self.unread = self.transport.get_write_buffer_size()
        trusted = self.session is not None and self.session.trusted
        return self.unread + (0 if trusted else len(self._buf) + len(self._backlog))

    def account(self) -> None:
        if not self.closed:
            self.listener.holds(self, self.holding())

    # -- deadlines --------------------------------------------------------------

    def expired(self, now: float, idle: float) -> str:
        """The deadline this connection has passed ("" if none)."""
        if self._unread_since is not None and now - self._unread_since > idle:
            return "unread_closed"
        if self._holds:
            return ""
        if self._handshake_by is not None and now > self._handshake_by:
            return "handshake_timeouts"
        if self._frame_by is not None and now > self._frame_by:
            return "frame_read_timeouts"
        if self._size is None and not self._head and now - self.last_active > idle and not (
                self.session is not None and self.session.owes()):
            return "idle_closed"
        return ""

    # -- reading frames -----------------------------------------------------------

    def _consume(self, data: memoryview) -> None:
        pos, end = 0, len(data)
        frames = 0
        while pos < end and not self.closed:
            if frames == FRAMES_PER_TURN and not self._holds:
                self.hold("turn")
                asyncio.get_running_loop().call_soon(self.release, "turn")
            if self._holds:
                self._backlog += data[pos:]
                self.account()
                return
            if self._size is None:
                if self._frame_by is None:
                    self._frame_by = self._now() + self.listener.limits.request_read_timeout_ms / 1000.0
                take = min(4 - len(self._head), end - pos)
                self._head += bytes(data[pos:pos + take])
                pos += take
                if len(self._head) == 4:
                    self._begin_frame()
                continue
            need = self._size - len(self._buf)
            if not self._buf and end - pos >= need:
                frame: bytes | bytearray = bytes(data[pos:pos + need])
                pos += need
            else:
                take = min(need, end - pos)
                self._buf += data[pos:pos + take]
                pos += take
                self.account()
                if self.closed or len(self._buf) < self._size:
                    continue
                frame, self._buf = self._buf, bytearray()
                self.account()
            frames += 1
            self._complete(frame)

    def _begin_frame(self) -> None:
        head, self._head = self._head, b""
        if self.session is None:
            if head == MAGIC:
                self.session = self.listener.open_peer(self)
                self._frame_by = None
                return
            self.session = self.listener.open_client(self)
        size = int.from_bytes(head, "big", signed=True)
        if not self.session.accept_size(size):
            self.close(f"frame of {size} bytes", abort=False)
            return
        self._size = size

    def _complete(self, frame: bytes | bytearray) -> None:
        self._size = None
        self._frame_by = None
        self._handshake_by = None
        self.last_active = self._now()
        self.listener.quotas.touch(self)
        assert self.session is not None
        if not self.session.on_frame(frame):
            self.close("refused frame", abort=False)

    def _read_backlog(self) -> None:
        if self.closed or self._holds or not self._backlog:
            return
        data, self._backlog = self._backlog, bytearray()
        self.account()
        self._consume(memoryview(data))

    def _end(self) -> None:
        if self.closed and self.session is None:
            return
        self.closed = True
        self.listener.forget(self)
        self._buf = bytearray()
        self._backlog = bytearray()
        session, self.session = self.session, None
        if session is not None:
            session.on_close()

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()


def _fit_open_files(max_connections: int) -> int:
    """max.connections as this process can hold it: the soft limit on open
    files is raised towards the hard one if it is short; what still does not
    fit lowers the cap (logged), so a flood meets the cap, not EMFILE on a
    log segment (which would halt the node as a failed log directory)."""
    want = max_connections + RESERVED_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < want:
        fit = max(1, soft - RESERVED_FILES)
        log.warning("max.connections %d lowered to %d: the process may open %d files", max_connections, fit, soft)
        return fit
    return max_connections
