"""Internal RPC between nodes: length-prefixed msgpack frames over TCP.

Nodes share one listening port for clients and peers: a peer connection opens
with the 4 bytes :data:`MAGIC`, which read as a Kafka request size would be
over 1 GB and therefore never start a client frame. It then sends a hello
frame ``(node id, host, port, token)`` (the token proves it knows the cluster
secret, :mod:`.auth`; a node with a secret closes a connection whose hello
lacks it before reading anything else) and one ``(src, message)`` frame per
``Send``.

Inbound, the node's listener (:mod:`.listener`) reads the frames and
:class:`PeerInbound` decodes them.

Each node keeps one outbound connection per peer (:class:`Peer`), reconnecting
with exponential backoff. Messages are one-way: a reply is another ``Send``
from the other side over its own outbound connection, so a lost connection
loses messages exactly like a network would; the core retries on its timers.
Messages waiting for a connection expire after the request timeout.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import time
from typing import Any, Callable

from . import auth
from .codec import FRAME, MAX_FRAME, REGISTRY, CodecError

MAGIC = b"KWRP"
#: a hello is four small fields: a longer one is not a peer's
MAX_HELLO_BYTES = 4096
#: a peer that stops reading (SIGSTOP, a partition that blackholes) must not
#: grow our memory without bound: beyond this many unsent bytes, messages are
#: dropped as a network would drop them
MAX_UNSENT_BYTES = 64 * 1024 * 1024
log = logging.getLogger("kraftwerk.rpc")


class Peer:
    """The one outbound connection to a peer node."""

    def __init__(
        self,
        self_id: int,
        self_addr: tuple[str, int],
        peer_id: int,
        resolve: Callable[[int], tuple[str, int] | None],
        request_timeout_ms: int = 30000,
        max_queue: int = 10000,
        secret: bytes | None = None,
    ) -> None:
        self.token = auth.token(secret, auth.RPC)
        self.self_id = self_id
        self.self_addr = self_addr
        self.peer_id = peer_id
        self.resolve = resolve
        self.request_timeout = request_timeout_ms / 1000.0
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque(maxlen=max_queue)
        self.writer: asyncio.StreamWriter | None = None
        self.wakeup = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.connected = False
        self.closed = False
        self.sent = 0
        self.dropped = 0

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run(), name=f"peer-{self.peer_id}")

    def send(self, msg: Any) -> None:
        data = REGISTRY.dumps((self.self_id, msg))
        frame = FRAME.pack(len(data)) + data
        if self.writer is not None and self.connected and not self.queue:
            if self.writer.transport.get_write_buffer_size() > MAX_UNSENT_BYTES:
                self.dropped += 1
                return
            try:
                self.writer.write(frame)
                self.sent += 1
                return
            except (ConnectionError, RuntimeError):
                self.connected = False
        if len(self.queue) == self.queue.maxlen:
            self.dropped += 1
        self.queue.append((time.monotonic(), frame))
        self.wakeup.set()

    async def _run(self) -> None:
        backoff = 0.05
        while not self.closed:
            addr = self.resolve(self.peer_id)
            if addr is None:
                self._expire()
                await asyncio.sleep(0.2)
                continue
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(*addr), timeout=2.0)
            except (OSError, asyncio.TimeoutError):
                self._expire()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            backoff = 0.05
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                # a blackholed link (iptables DROP, a paused peer) must fail the
                # connection within the request timeout so a fresh one is tried
                if hasattr(socket, "TCP_USER_TIMEOUT"):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(self.request_timeout * 1000))
            hello = REGISTRY.dumps((self.self_id, self.self_addr[0], self.self_addr[1], self.token))
            writer.write(MAGIC + FRAME.pack(len(hello)) + hello)
            self.writer = writer
            self.connected = True
            log.info("connected to node %d at %s:%d", self.peer_id, *addr)
            closed = asyncio.get_running_loop().create_task(reader.read(1))
            try:
                while not self.closed:
                    self._expire()
                    while self.queue:
                        _, frame = self.queue.popleft()
                        writer.write(frame)
                        self.sent += 1
                    await writer.drain()
                    self.wakeup.clear()
                    waiter = asyncio.get_running_loop().create_task(self.wakeup.wait())
                    done, _ = await asyncio.wait({waiter, closed}, return_when=asyncio.FIRST_COMPLETED)
                    if closed in done:
                        waiter.cancel()
                        raise ConnectionResetError("peer closed the connection")
            except (OSError, ConnectionError, RuntimeError) as e:
                log.info("connection to node %d lost: %s", self.peer_id, e)
            finally:
                self.connected = False
                self.writer = None
                closed.cancel()
                writer.close()
            await asyncio.sleep(backoff)

    def _expire(self) -> None:
        cutoff = time.monotonic() - self.request_timeout
        while self.queue and self.queue[0][0] < cutoff:
            self.queue.popleft()
            self.dropped += 1

    async def close(self) -> None:
        """Stop for good. Bounded: Python 3.11's wait_for can swallow a
        cancellation that races with a completing connect, so the loop also
        checks ``closed`` and we never wait on the task for long."""
        self.closed = True
        if self.task is not None:
            self.task.cancel()
            await asyncio.wait({self.task}, timeout=1.0)
        if self.writer is not None:
            self.writer.close()


class PeerInbound:
    """One inbound peer connection's frames after :data:`MAGIC` (a
    :class:`.listener.Session`): the hello first, then messages. A malformed
    frame, or a hello without the cluster's token, is reported to
    ``on_error`` and closes the connection before anything else is read."""

    def __init__(
        self,
        on_hello: Callable[[int, str, int], None],
        on_message: Callable[[int, Any], None],
        on_error: Callable[[str], None],
        secret: bytes | None = None,
        max_frame: int = MAX_FRAME,
    ) -> None:
        """``max_frame``: the largest frame of a peer that is not trusted."""
        self.on_hello = on_hello
        self.on_message = on_message
        self.on_error = on_error
        self.secret = secret
        self.max_frame = max_frame
        self.greeted = False

    @property
    def trusted(self) -> bool:
        """A peer that proved the cluster secret: one of the cluster's own
        nodes, whose frames are as large as the protocol makes them (up to
        :data:`.codec.MAX_FRAME`) and not counted against the listener's
        memory bound. Without a secret nobody is trusted."""
        return self.greeted and bool(self.secret)

    def accept_size(self, size: int) -> bool:
        limit = (MAX_FRAME if self.trusted else self.max_frame) if self.greeted else MAX_HELLO_BYTES
        if 0 < size <= limit:
            return True
        self.on_error(f"frame of {size} bytes exceeds the limit of {limit}" if size > 0 else "empty frame")
        return False

    def on_frame(self, frame: bytes | bytearray) -> bool:
        try:
            self.feed(frame)
        except CodecError as e:
            self.on_error(str(e))
            return False
        return True

    def feed(self, frame: bytes | bytearray) -> None:
        """Decode one frame and hand it on; raises :class:`CodecError`."""
        obj = REGISTRY.loads(frame)
        if not isinstance(obj, tuple):
            raise CodecError("frame is not a tuple")
        if not self.greeted:
            if len(obj) not in (3, 4) or not isinstance(obj[0], int) or not isinstance(obj[1], str) or not isinstance(obj[2], int):
                raise CodecError("bad hello frame")
            if not auth.check(self.secret, auth.RPC, obj[3] if len(obj) == 4 else None):
                raise CodecError(f"peer claiming node {obj[0]} failed authentication")
            self.on_hello(obj[0], obj[1], obj[2])
            self.greeted = True
            return
        if len(obj) != 2 or not isinstance(obj[0], int):
            raise CodecError("bad message frame")
        self.on_message(obj[0], obj[1])

    def owes(self) -> bool:
        return False  # messages are one-way: nothing is owed on this connection

    def on_close(self) -> None:
        pass
