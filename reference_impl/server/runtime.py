"""The asyncio runtime: one core ``Node`` per OS process.

It owns no protocol logic. It turns Kafka wire requests into the core's client
messages (:mod:`.wire`), delivers peer messages (:mod:`.rpc`), calls
``node.handle`` / ``node.tick`` with the node's clock (:mod:`.clock`), and
carries out the returned effects *in list order* (core/effects.py): storage
effects on :class:`.disk.DiskStore`, ``Send`` over the RPC, ``Reply`` to the
waiting client connection, ``Timer`` as one loop timer (the earliest asked
for), ``TraceEvent`` as a JSONL line, ``Halt`` as the end of a controlled
shutdown.

Responses on one client connection go out in request order (Kafka's
guarantee), but requests are handed to the core as soon as they arrive, so a
pipelining producer is not held to one request per replication round trip.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import random
import signal
import socket
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any

from reference_impl.core import effects as fx
from reference_impl.core import messages as m
from reference_impl.core.config import ProtocolConfig
from reference_impl.core.storage import CLEAN_SHUTDOWN, METADATA_LOG
from reference_impl.trace_format import encode_trace_line, stamp

from . import wire
from .clock import Clock
from .codec import CodecError
from .control import serve_control
from .disk import DiskStore
from .rpc import MAGIC, Peer, read_frames

log = logging.getLogger("kraftwerk.node")

_RESERVED_TRACE_KEYS = frozenset({"t", "t_us", "node_t", "node", "kind"})
#: Kafka's socket.request.max.bytes
MAX_REQUEST_BYTES = 100 * 1024 * 1024
#: Kafka's max.connections (Kafka's default is unbounded; a node here shares
#: one process and one port with its peers, so it is bounded)
MAX_CONNECTIONS = 1000
#: Kafka's connections.max.idle.ms
CONNECTIONS_MAX_IDLE_MS = 600_000
#: requests of one connection waiting for their answers before the node stops
#: reading from it (Kafka mutes a channel while its request is in flight; a
#: pipelining client here gets this many)
MAX_QUEUED_PER_CONNECTION = 1000
#: answered bytes a client has not read before the node stops reading its requests
MAX_UNREAD_REPLY_BYTES = 16 * 1024 * 1024
#: a controlled shutdown that has not halted by then ends anyway
SHUTDOWN_GRACE_S = 30.0


@dataclass
class NodeOptions:
    node_id: int
    roles: frozenset[str]
    listen: tuple[str, int]
    voters: dict[int, tuple[str, int]]
    data_dir: str
    config: ProtocolConfig = field(default_factory=ProtocolConfig)
    storage_mode: str = "os"
    control: tuple[str, int] | None = None
    segment_bytes: int = 64 * 1024 * 1024
    clock_offset_ms: int = 0
    seed: int | None = None
    #: the endpoint registered with the controller, hence what Metadata gives
    #: clients (a harness proxy in front of ``listen``); defaults to ``listen``
    advertise: tuple[str, int] | None = None
    #: where this node reaches each peer (per-link proxies); wins over the
    #: endpoints learnt from broker registrations
    peer_addresses: dict[int, tuple[str, int]] = field(default_factory=dict)
    #: the cluster secret (auth.py): peers and control callers must prove it; None: no check
    secret: bytes | None = None
    #: socket.request.max.bytes, max.connections, connections.max.idle.ms
    max_request_bytes: int = MAX_REQUEST_BYTES
    max_connections: int = MAX_CONNECTIONS
    idle_ms: int = CONNECTIONS_MAX_IDLE_MS
    #: trace.jsonl, node.log and node.pid; default ``data_dir``. Apart when
    #: the data directory is a filesystem that loses un-fsynced writes
    #: (``kraftwerk fs``): the glass-box trace must survive the power loss.
    log_dir: str | None = None

    @property
    def logs(self) -> str:
        return self.log_dir or self.data_dir


class _ClientConn:
    """One Kafka client connection and its in-order response queue."""

    __slots__ = ("cid", "writer", "pending", "by_seq", "seq", "closed", "room")

    def __init__(self, cid: int, writer: asyncio.StreamWriter) -> None:
        self.cid = cid
        self.writer = writer
        #: set while the connection may queue another request (backpressure)
        self.room = asyncio.Event()
        self.room.set()
        self.pending: collections.deque[tuple[int, wire.Pending]] = collections.deque()
        self.by_seq: dict[int, wire.Pending] = {}
        self.seq = 0
        self.closed = False


class NodeRuntime:
    def __init__(self, opts: NodeOptions, node_factory: Any = None) -> None:
        self.opts = opts
        self.clock = Clock(opts.clock_offset_ms)
        self.disk = DiskStore(opts.data_dir, opts.storage_mode, opts.segment_bytes)
        self._node_factory = node_factory
        self.node: Any = None
        self.addresses: dict[int, tuple[str, int]] = {**opts.voters, **opts.peer_addresses}
        self.peers: dict[int, Peer] = {}
        self.conns: dict[int, _ClientConn] = {}
        self._open_sockets = 0
        self._next_cid = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._trace_fd: int | None = None
        self._trace_buf: list[bytes] = []
        self._halted = asyncio.Event()
        self._shutting_down = False
        self._dir_failed = False
        self.exit_code = 0
        self.errors = 0
        self.partitions: dict[str, dict[str, Any]] = {}
        self.raft: dict[str, Any] = {}
        self.counters = collections.Counter()
        self.started_at = time.time()
        self.clean_start = False
        self.incarnation_id = uuid.uuid4().hex

    # -- start-up ---------------------------------------------------------------

    def _make_node(self, stored: Any) -> Any:
        if self._node_factory is not None:
            return self._node_factory(self, stored)
        from reference_impl.core.node import Node  # the core's public entry point (docs/architecture.md)

        o = self.opts
        return Node(
            o.node_id,
            roles=set(o.roles),
            config=o.config,
            voters=tuple(sorted(o.voters)),
            stored=stored,
            rng=random.Random(o.seed if o.seed is not None else os.getpid() ^ o.node_id),
            incarnation_id=self.incarnation_id,
            endpoint=m.BrokerEndpoint(o.node_id, *(o.advertise or o.listen)),
        )

    async def run(self) -> int:
        o = self.opts
        loop = asyncio.get_running_loop()
        stored = self.disk.load()
        self.clean_start = self.disk.was_clean
        # Kafka deletes the marker once it has read it: a crash from now on is unclean (KIP-966)
        if CLEAN_SHUTDOWN in stored.files:
            self.disk.delete_file(CLEAN_SHUTDOWN)
            self.disk.fsync(CLEAN_SHUTDOWN)
        for entry in stored.logs.get(METADATA_LOG, ()):
            self._sniff(entry)
        log.info(
            "node %d starting: roles=%s listen=%s:%d clean=%s logs=%d storage=%s",
            o.node_id,
            ",".join(sorted(o.roles)),
            o.listen[0],
            o.listen[1],
            self.clean_start,
            len(stored.logs),
            o.storage_mode,
        )
        for r in self.disk.recovery:
            if r.truncated_bytes or r.dropped_segments:
                log.warning("recovery %s: %d entries kept, %d torn bytes cut", r.log, r.entries, r.truncated_bytes)
        self._trace_fd = os.open(os.path.join(o.logs, "trace.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._write_trace("node_start", {"incarnation": self.incarnation_id, "clean": self.clean_start, "pid": os.getpid()})
        self._flush_trace()
        self.node = self._make_node(stored)
        server = await asyncio.start_server(self._on_conn, o.listen[0], o.listen[1], reuse_address=True, limit=1 << 20)
        control = None
        if o.control is not None:
            control = await serve_control(o.control[0], o.control[1], self._control, o.secret)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.begin_shutdown, sig.name)
        loop.call_later(1.0, self._sweep)
        self._call("start", lambda now, mono: self.node.start(now, mono))
        await self._halted.wait()
        # backstop: whatever happens while closing sockets, the process ends
        watchdog = threading.Timer(15.0, _hard_exit, (self.exit_code,))
        watchdog.daemon = True
        watchdog.start()
        server.close()
        if control is not None:
            control.close()
        for c in list(self.conns.values()):
            c.writer.close()
        if self.peers:
            await asyncio.gather(*(p.close() for p in self.peers.values()), return_exceptions=True)
        self._flush_trace()
        self.disk.close()
        log.info("node %d stopped (exit %d)", o.node_id, self.exit_code)
        return self.exit_code

    # -- driving the core -------------------------------------------------------

    def _call(self, what: str, fn: Any) -> None:
        now = self.clock.now_ms()
        try:
            effects = fn(now, self.clock.mono_ms())
        except Exception as ex:
            self.errors += 1
            log.error("core raised in %s:\n%s", what, traceback.format_exc())
            # the invariant monitor reports node_crash events as violations
            self._write_trace("node_crash", {"error": f"{type(ex).__name__}: {ex}", "in": what})
            self._flush_trace()
            return
        self._apply(effects or ())

    def deliver(self, msg: Any, src: int | None) -> None:
        self.counters[type(msg).__name__] += 1
        self._call(type(msg).__name__, lambda now, mono: self.node.handle(msg, now, src, mono))

    def _apply(self, effects: Any) -> None:
        if self._dir_failed:
            return  # halting: nothing more reaches the disk or a client
        for e in effects:
            t = type(e)
            if t is fx.Send:
                self._send(e.dst, e.msg)
            elif t is fx.Reply:
                self._reply(e.msg)
            elif t is fx.Timer:
                self._arm(e.at)
            elif t is fx.TraceEvent:
                self._trace(e)
            elif t is fx.Halt:
                log.info("halt: %s", e.reason)
                self._flush_trace()
                self._halted.set()
            else:
                try:
                    self.disk.apply(e)
                except (OSError, ValueError, TypeError) as ex:
                    self.errors += 1
                    log.error("storage effect %r failed: %s", type(e).__name__, ex)
                    if isinstance(ex, OSError):
                        self._log_dir_failure(type(e).__name__, ex)
                        return
                if t is fx.LogAppend and e.log == METADATA_LOG:
                    for entry in e.entries:
                        self._sniff(entry)
        self._flush_trace()

    def _log_dir_failure(self, effect: str, ex: OSError) -> None:
        """A disk that fails under the log cannot be trusted: Kafka's
        LogDirFailureChannel takes the directory offline, and a broker whose
        only (or metadata) log directory is offline halts. Nothing after the
        failed effect is applied (no reply acknowledges what was not written);
        a torn tail is truncated by recovery at the next start."""
        if self._dir_failed:
            return
        self._dir_failed = True
        log.error("LogDirFailure: %s failed in %s: %s; halting", effect, self.opts.data_dir, ex)
        self._write_trace("log_dir_failure", {"dir": self.opts.data_dir, "errno": ex.errno or 0,
                                              "error": ex.strerror or str(ex), "effect": effect})
        try:
            self._flush_trace()
        except OSError:
            pass  # the trace shares the failed disk (no --log-dir): node.log still says why
        self.exit_code = 4
        self._halted.set()

    def _arm(self, at: int) -> None:
        if self._timer_at is not None and self._timer_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        delay = max(0.0, (at - self.clock.now_ms()) / 1000.0)
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self._call("tick", lambda now, mono: self.node.tick(now, mono))

    def begin_shutdown(self, reason: str = "SIGTERM") -> None:
        if self._shutting_down:
            return
        self._shutting_down = True
        log.info("controlled shutdown requested (%s)", reason)
        self._call("controlled shutdown", lambda now, mono: self.node.begin_controlled_shutdown(now, mono))
        asyncio.get_running_loop().call_later(SHUTDOWN_GRACE_S, self._shutdown_timeout)

    def _shutdown_timeout(self) -> None:
        if not self._halted.is_set():
            log.warning("controlled shutdown did not finish in %.0fs; stopping", SHUTDOWN_GRACE_S)
            self._halted.set()

    # -- tracing --------------------------------------------------------------

    def _trace(self, e: fx.TraceEvent) -> None:
        # "t" is the unskewed clock, so traces of several nodes merge in real
        # order even under the clock nemesis; "node_t" is what the core saw
        self._write_trace(e.kind, e.data)
        self._observe(e)

    def _write_trace(self, kind: str, data: dict[str, Any]) -> None:
        t_us = self.clock.wall_us()
        rec = {"t": t_us // 1000, "t_us": t_us, "node_t": self.clock.now_ms(), "node": self.opts.node_id, "kind": kind}
        self._trace_buf.append(encode_trace_line(stamp(rec, data, _RESERVED_TRACE_KEYS)))

    def _flush_trace(self) -> None:
        if self._trace_buf and self._trace_fd is not None:
            os.write(self._trace_fd, b"".join(self._trace_buf))
            self._trace_buf.clear()

    def _observe(self, e: fx.TraceEvent) -> None:
        """Keep what the control endpoint reports (roles per partition) from the trace."""
        d = e.data
        if e.kind == "become_leader":
            self.partitions[str(d.get("tp"))] = {"role": "leader", "leader_epoch": d.get("leader_epoch"), "isr": d.get("isr")}
        elif e.kind == "become_follower":
            self.partitions[str(d.get("tp"))] = {"role": "follower", "leader": d.get("leader"), "leader_epoch": d.get("leader_epoch")}
        elif e.kind == "isr":
            p = self.partitions.setdefault(str(d.get("tp")), {"role": "leader"})
            p["isr"] = d.get("isr")
        elif e.kind == "hw":
            p = self.partitions.setdefault(str(d.get("tp")), {})
            p["hw"] = d.get("hw")
            p["leo"] = d.get("leo")
        elif e.kind == "raft_state":
            self.raft = {"epoch": d.get("epoch"), "role": d.get("role"), "leader": d.get("leader")}

    # -- peers ------------------------------------------------------------------

    def _resolve(self, node_id: int) -> tuple[str, int] | None:
        return self.addresses.get(node_id)

    def _sniff(self, obj: Any) -> None:
        """Learn peer addresses from the registrations the protocol already carries."""
        if isinstance(obj, m.MetadataEntry):
            obj = obj.record
        if isinstance(obj, (m.RegisterBrokerRecord, m.BrokerRegistrationRequest)):
            ep = obj.endpoint
            if ep.node_id not in self.opts.peer_addresses:
                self.addresses[ep.node_id] = (ep.host, ep.port)
        elif isinstance(obj, m.RaftFetchResponse):
            for entry in obj.entries:
                self._sniff(entry)

    def _send(self, dst: int, msg: Any) -> None:
        if dst == self.opts.node_id:
            asyncio.get_running_loop().call_soon(self.deliver, msg, dst)
            return
        p = self.peers.get(dst)
        if p is None:
            p = Peer(self.opts.node_id, self.opts.listen, dst, self._resolve, self.opts.config.request_timeout_ms,
                     secret=self.opts.secret)
            self.peers[dst] = p
            p.start()
        try:
            p.send(msg)
        except CodecError as e:
            self.errors += 1
            log.error("cannot encode %s for node %d: %s", type(msg).__name__, dst, e)

    # -- connections --------------------------------------------------------------

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open_sockets >= self.opts.max_connections:
            self.counters["refused_connections"] += 1  # max.connections
            writer.transport.abort()
            return
        self._open_sockets += 1
        try:
            await self._on_open_conn(reader, writer)
        finally:
            self._open_sockets -= 1

    async def _on_open_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            head = await asyncio.wait_for(reader.readexactly(4), self.opts.idle_ms / 1000.0)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError, asyncio.TimeoutError):
            writer.close()
            return
        try:
            if head == MAGIC:
                await self._serve_peer(reader)
            else:
                await self._serve_client(head, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        except asyncio.CancelledError:
            # the loop is shutting down; ending quietly keeps node.log readable
            pass
        except Exception:
            self.errors += 1
            log.error("connection handler failed:\n%s", traceback.format_exc())
        finally:
            writer.close()

    async def _serve_peer(self, reader: asyncio.StreamReader) -> None:
        def on_hello(nid: int, host: str, port: int) -> None:
            if nid not in self.opts.voters:
                self.addresses.setdefault(nid, (host, port))

        def on_message(src: int, msg: Any) -> None:
            self._sniff(msg)
            self.deliver(msg, src)

        try:
            await read_frames(reader, on_hello, on_message, self.opts.secret)
        except CodecError as e:
            self.counters["bad_rpc_frames"] += 1
            log.warning("closing peer connection: %s", e)

    async def _serve_client(self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._next_cid += 1
        conn = _ClientConn(self._next_cid, writer)
        self.conns[conn.cid] = conn
        try:
            while not conn.closed:
                size = int.from_bytes(head, "big", signed=True)
                if size < 8 or size > self.opts.max_request_bytes:
                    self.counters["bad_frames"] += 1
                    log.info("closing client connection: frame size %d", size)
                    return
                frame = await reader.readexactly(size)
                if not self._on_request(conn, frame):
                    return
                await self._backpressure(conn)
                head = await self._next_head(conn, reader)
                if head is None:
                    return
        except asyncio.IncompleteReadError:
            return
        finally:
            conn.closed = True
            conn.room.set()
            self.conns.pop(conn.cid, None)

    async def _backpressure(self, conn: _ClientConn) -> None:
        """Read no further request while this connection has too many waiting
        for answers, or too many answered bytes the client has not read."""
        while len(conn.pending) >= MAX_QUEUED_PER_CONNECTION and not conn.closed:
            conn.room.clear()
            await conn.room.wait()
        if conn.writer.transport.get_write_buffer_size() > MAX_UNREAD_REPLY_BYTES:
            try:
                await asyncio.wait_for(conn.writer.drain(), self.opts.idle_ms / 1000.0)
            except asyncio.TimeoutError:
                conn.closed = True  # read nothing of its answers for connections.max.idle.ms

    async def _next_head(self, conn: _ClientConn, reader: asyncio.StreamReader) -> bytes | None:
        """The next request's size, or None once the connection has been idle
        (nothing read, nothing owed to it) for connections.max.idle.ms."""
        idle = self.opts.idle_ms / 1000.0
        while True:
            try:
                return await asyncio.wait_for(reader.readexactly(4), idle)
            except asyncio.TimeoutError:
                if not conn.pending:
                    self.counters["idle_closed"] += 1
                    return None

    def _on_request(self, conn: _ClientConn, frame: bytes) -> bool:
        """Handle one request frame; False closes the connection."""
        try:
            d = wire.decode_request(frame)
        except wire.UnsupportedVersion as e:
            self.counters["unsupported_version"] += 1
            resp = wire.unsupported_version_response(e)
            if resp is None:
                return False
            conn.seq += 1
            p = wire.Pending(wire.Decoded(18, 0, e.correlation_id, None, None), total=0)
            p.extra["raw"] = resp
            conn.pending.append((conn.seq, p))
            self._flush(conn)
            return True
        except wire.ProtocolError as e:
            self.counters["bad_frames"] += 1
            log.info("closing client connection: %s", e)
            return False
        conn.seq += 1
        seq = conn.seq
        cid = conn.cid
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
                self.deliver(msg, None)
            return True
        p.arrived = time.monotonic()
        conn.pending.append((seq, p))
        conn.by_seq[seq] = p
        for _, msg in p.parts:
            if self._shutting_down and self._halted.is_set():
                break
            self.deliver(msg, None)
        self._flush(conn)
        return True

    def _sweep(self) -> None:
        """Safety net: a client request the core has not answered well past its
        timeout gets REQUEST_TIMED_OUT, so one lost reply cannot wedge a
        connection's in-order queue. Each expiry is logged: it means the core
        dropped a request."""
        now = time.monotonic()
        grace = self.opts.config.request_timeout_ms / 1000.0 + 5.0
        for conn in list(self.conns.values()):
            for _, p in list(conn.pending):
                if not p.done and p.arrived and now - p.arrived > grace + _timeout_s(p):
                    n = p.expire()
                    if n:
                        self.counters["expired_requests"] += 1
                        log.warning("api %d request unanswered for %.0fs: %d parts timed out", p.decoded.api_key, now - p.arrived, n)
            self._flush(conn)
        if not self._halted.is_set():
            asyncio.get_running_loop().call_later(1.0, self._sweep)

    def _reply(self, msg: Any) -> None:
        ref = getattr(msg, "ref", None)
        if not (isinstance(ref, tuple) and len(ref) == 3):
            return
        cid, seq, idx = ref
        conn = self.conns.get(cid)
        if conn is None:
            return
        p = conn.by_seq.get(seq)
        if p is None:
            return
        p.results[idx] = msg
        if p.done:
            self._flush(conn)

    def _flush(self, conn: _ClientConn) -> None:
        self._drain_answered(conn)
        if len(conn.pending) < MAX_QUEUED_PER_CONNECTION:
            conn.room.set()

    def _drain_answered(self, conn: _ClientConn) -> None:
        while conn.pending and conn.pending[0][1].done:
            seq, p = conn.pending.popleft()
            conn.by_seq.pop(seq, None)
            if not p.expects_response:
                continue
            raw = p.extra.get("raw")
            try:
                data = raw if raw is not None else p.encode()
            except Exception:
                self.errors += 1
                log.error("cannot encode response to api %d:\n%s", p.decoded.api_key, traceback.format_exc())
                conn.writer.close()
                conn.closed = True
                return
            try:
                conn.writer.write(data)
            except (ConnectionError, RuntimeError):
                conn.closed = True
                return

    # -- control ----------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        o = self.opts
        return {
            "node_id": o.node_id,
            "pid": os.getpid(),
            "roles": sorted(o.roles),
            "listen": f"{o.listen[0]}:{o.listen[1]}",
            "clock_offset_ms": self.clock.offset_ms,
            "now_ms": self.clock.now_ms(),
            "storage_mode": o.storage_mode,
            "clean_start": self.clean_start,
            "uptime_s": round(time.time() - self.started_at, 3),
            "leader_of": sorted(tp for tp, p in self.partitions.items() if p.get("role") == "leader"),
            "partitions": self.partitions,
            "raft": self.raft,
            # this incarnation's registration (None until the controller accepted it)
            "broker_epoch": self._broker_epoch(),
            "peers": {str(k): {"connected": p.connected, "sent": p.sent, "dropped": p.dropped} for k, p in self.peers.items()},
            "recovery": [r.__dict__ for r in self.disk.recovery],
            "errors": self.errors,
            "counters": dict(self.counters),
            "shutting_down": self._shutting_down,
        }

    def _broker_epoch(self) -> int | None:
        broker = getattr(self.node, "broker", None)
        epoch = broker.broker_epoch if broker is not None else -1
        return epoch if epoch >= 0 else None

    async def _control(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "GET" and path == "/status":
            return 200, self.status()
        if method == "POST" and path == "/clock":
            if not isinstance(body, dict) or not ({"offset_ms", "shift_ms"} & body.keys()):
                return 400, {"error": "give offset_ms or shift_ms"}
            if "offset_ms" in body:
                self.clock.set_offset(int(body["offset_ms"]))
            if "shift_ms" in body:
                self.clock.shift(int(body["shift_ms"]))
            log.info("clock offset now %d ms", self.clock.offset_ms)
            # timers are in node time: re-evaluate at once
            asyncio.get_running_loop().call_soon(self._on_timer)
            return 200, {"clock_offset_ms": self.clock.offset_ms, "now_ms": self.clock.now_ms()}
        if method == "POST" and path == "/power-loss":
            if self.opts.storage_mode != "memory-cache":
                return 409, {"error": "power loss needs --storage-mode=memory-cache"}
            self._flush_trace()
            n = self.disk.power_loss()
            log.warning("power loss: %d files reverted to their last fsync; exiting", n)
            for h in logging.getLogger().handlers:
                h.flush()
            os._exit(137)
        if method == "POST" and path == "/shutdown":
            self.begin_shutdown("control endpoint")
            return 200, {"shutting_down": True}
        return 404, {"error": f"no {method} {path}"}


def _hard_exit(code: int) -> None:
    log.error("shutdown did not complete in 15s after halt; exiting")
    for h in logging.getLogger().handlers:
        h.flush()
    os._exit(code)


def _timeout_s(p: wire.Pending) -> float:
    """The request's own timeout (produce, create topics), fetch wait or
    JoinGroup's rebalance timeout (the join waits for every member)."""
    body = p.decoded.body
    for attr in ("timeout_ms", "max_wait_ms", "rebalance_timeout_ms"):
        v = getattr(body, attr, None)
        if isinstance(v, int) and v > 0:
            return v / 1000.0
    return 0.0


def setup_logging(data_dir: str, node_id: int, verbose: bool = False) -> None:
    os.makedirs(data_dir, exist_ok=True)
    h = logging.FileHandler(os.path.join(data_dir, "node.log"))
    h.setFormatter(logging.Formatter(f"%(asctime)s node-{node_id} %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [h]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)


def run_node(opts: NodeOptions, verbose: bool = False) -> int:
    setup_logging(opts.logs, opts.node_id, verbose)
    with open(os.path.join(opts.logs, "node.pid"), "w") as f:
        f.write(str(os.getpid()))
    return asyncio.run(NodeRuntime(opts).run())
