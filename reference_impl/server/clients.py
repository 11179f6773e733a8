"""Kafka client connections: each request goes to the core as soon as it
arrives (:mod:`.wire` turns it into the core's messages), and the answers
go back in request order (Kafka's guarantee), however the core's replies
interleave.

A client that pipelines gets :data:`MAX_QUEUED_PER_CONNECTION` requests
waiting for answers before the node stops reading it (Kafka mutes a channel
while its one request is in flight); the listener stops reading one whose
answers it does not read. A request the core has not answered well past its
own timeout is answered REQUEST_TIMED_OUT by :meth:`Clients.expire_overdue`,
so one lost reply cannot wedge a connection's queue.

No client request is served before the broker has caught up with the
metadata log (its own current registration replayed): Kafka's BrokerServer
(4.4, ``startup``) waits for the initial catch-up before
``socketServer.enableRequestProcessing`` starts its acceptors. A broker that
answered first would tell a client a topic it has not replayed yet does not
exist (UNKNOWN_TOPIC_OR_PARTITION), and librdkafka keeps that answer. Until
then a client's first frame is kept and its connection read no further
(:meth:`Clients.serve_waiting` takes them up).
"""

from __future__ import annotations

import collections
import logging
import time
import traceback
from typing import Any, Callable

from . import wire
from .listener import Connection

log = logging.getLogger("kraftwerk.clients")

#: requests of one connection waiting for their answers before the node stops reading it
MAX_QUEUED_PER_CONNECTION = 1000
#: why a connection is held back (listener.Connection.hold)
_FULL = "answers owed"
_CATCHING_UP = "broker catching up"


class ClientSession:
    """One Kafka client connection and its in-order answer queue."""

    __slots__ = ("cid", "conn", "clients", "pending", "by_seq", "seq", "closed", "early")
    #: a client's bytes always count against queued.max.request.bytes
    trusted = False

    def __init__(self, cid: int, conn: Connection, clients: "Clients") -> None:
        self.cid = cid
        self.conn = conn
        self.clients = clients
        self.pending: collections.deque[tuple[int, wire.Pending]] = collections.deque()
        self.by_seq: dict[int, wire.Pending] = {}
        self.seq = 0
        self.closed = False
        #: the frame read before the broker caught up, served once it has
        self.early: bytes | bytearray | None = None

    def accept_size(self, size: int) -> bool:
        if 8 <= size <= self.clients.max_request_bytes:  # socket.request.max.bytes
            return True
        self.clients.counters["bad_frames"] += 1
        log.info("closing client connection: frame size %d", size)
        return False

    def on_frame(self, frame: bytes | bytearray) -> bool:
        return self.clients.on_request(self, frame)

    def owes(self) -> bool:
        return bool(self.pending)

    def on_close(self) -> None:
        self.closed = True
        self.clients.sessions.pop(self.cid, None)


class Clients:
    """Every client session of a node, and the routing of the core's replies to them."""

    def __init__(
        self,
        deliver: Callable[[Any], None],
        counters: collections.Counter,
        halted: Callable[[], bool],
        request_timeout_ms: int,
        max_request_bytes: int,
        caught_up: Callable[[], bool] = lambda: True,
    ) -> None:
        self.deliver = deliver
        self.counters = counters
        self.halted = halted
        self.request_timeout_ms = request_timeout_ms
        self.max_request_bytes = max_request_bytes
        self.sessions: dict[int, ClientSession] = {}
        self.errors = 0
        self._next_cid = 0
        self._caught_up = caught_up
        #: latched: once the broker has caught up it serves for the rest of its life
        self.serving = False
        self._waiting: list[ClientSession] = []

    def open(self, conn: Connection) -> ClientSession:
        self._next_cid += 1
        s = ClientSession(self._next_cid, conn, self)
        self.sessions[s.cid] = s
        return s

    def on_request(self, s: ClientSession, frame: bytes | bytearray) -> bool:
        """Handle one request frame; False closes the connection."""
        if not self.serving and not self._start_serving():
            s.early = frame
            s.conn.hold(_CATCHING_UP)
            self._waiting.append(s)
            return True
        try:
            d = wire.decode_request(frame)
        except wire.UnsupportedVersion as e:
            self.counters["unsupported_version"] += 1
            resp = wire.unsupported_version_response(e)
            if resp is None:
                return False
            s.seq += 1
            p = wire.Pending(wire.Decoded(18, 0, e.correlation_id, None, None), total=0)
            p.extra["raw"] = resp
            s.pending.append((s.seq, p))
            self._flush(s)
            return True
        except wire.ProtocolError as e:
            self.counters["bad_frames"] += 1
            log.info("closing client connection: %s", e)
            return False
        s.seq += 1
        seq, cid = s.seq, s.cid
        try:
            p = wire.translate(d, lambda i: (cid, seq, i))
        except wire.ProtocolError as e:
            self.counters["bad_frames"] += 1
            log.info("closing client connection: %s", e)
            return False
        self.counters[f"api{d.api_key}"] += 1
        if not p.expects_response:
            # acks=0: Kafka sends nothing back and the core replies nothing, so
            # nothing may wait in the in-order queue for it
            for _, msg in p.parts:
                self.deliver(msg)
            return True
        p.arrived = time.monotonic()
        s.pending.append((seq, p))
        s.by_seq[seq] = p
        for _, msg in p.parts:
            if self.halted():
                break
            self.deliver(msg)
        self._flush(s)
        return True

    def _start_serving(self) -> bool:
        self.serving = self._caught_up()
        return self.serving

    def serve_waiting(self) -> None:
        """Once the broker has caught up, take up the connections that
        waited: each one's first frame, then what it sent meanwhile."""
        if not self._waiting or not self._start_serving():
            return
        waiting, self._waiting = self._waiting, []
        for s in waiting:
            frame, s.early = s.early, None
            if s.closed or frame is None:
                continue
            if not self.on_request(s, frame):
                s.conn.close("refused frame", abort=False)
                continue
            s.conn.release(_CATCHING_UP)

    def reply(self, msg: Any) -> None:
        """A core reply: its ``ref`` names the session, request and part."""
        ref = getattr(msg, "ref", None)
        if not (isinstance(ref, tuple) and len(ref) == 3):
            return
        cid, seq, idx = ref
        s = self.sessions.get(cid)
        if s is None:
            return
        p = s.by_seq.get(seq)
        if p is None:
            return
        p.results[idx] = msg
        if p.done:
            self._flush(s)

    def expire_overdue(self) -> None:
        """Safety net: a request unanswered well past its timeout gets
        REQUEST_TIMED_OUT. Each expiry is logged: it means the core dropped a
        request."""
        now = time.monotonic()
        grace = self.request_timeout_ms / 1000.0 + 5.0
        for s in list(self.sessions.values()):
            for _, p in list(s.pending):
                if not p.done and p.arrived and now - p.arrived > grace + _timeout_s(p):
                    n = p.expire()
                    if n:
                        self.counters["expired_requests"] += 1
                        log.warning("api %d request unanswered for %.0fs: %d parts timed out", p.decoded.api_key,
                                    now - p.arrived, n)
            self._flush(s)

    def _flush(self, s: ClientSession) -> None:
        self._write_answered(s)
        if s.closed:
            return
        if len(s.pending) >= MAX_QUEUED_PER_CONNECTION:
            s.conn.hold(_FULL)
        else:
            s.conn.release(_FULL)

    def _write_answered(self, s: ClientSession) -> None:
        while s.pending and s.pending[0][1].done:
            seq, p = s.pending.popleft()
            s.by_seq.pop(seq, None)
            if not p.expects_response:
                continue
            raw = p.extra.get("raw")
            try:
                data = raw if raw is not None else p.encode()
            except Exception:
                self.errors += 1
                log.error("cannot encode response to api %d:\n%s", p.decoded.api_key, traceback.format_exc())
                s.conn.close("unencodable response")
                return
            s.conn.write(data)


def _timeout_s(p: wire.Pending) -> float:
    """The request's own timeout (produce, create topics), fetch wait or
    JoinGroup's rebalance timeout (the join waits for every member)."""
    body = p.decoded.body
    for attr in ("timeout_ms", "max_wait_ms", "rebalance_timeout_ms"):
        v = getattr(body, attr, None)
        if isinstance(v, int) and v > 0:
            return v / 1000.0
    return 0.0
