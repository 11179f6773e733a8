"""The asyncio runtime: one core ``Node`` per OS process.

It owns no protocol logic. Its one port (:mod:`.listener`, with the bounds of
:mod:`.limits`) hands Kafka requests to :mod:`.clients`, which turns them into
the core's client messages (:mod:`.wire`), and peer messages to the core
(:mod:`.rpc`). It calls
``node.handle`` / ``node.tick`` with the node's clock (:mod:`.clock`), and
carries out the returned effects *in list order* (core/effects.py): storage
effects on :class:`.disk.DiskStore`, ``Send`` over the RPC, ``Reply`` to the
waiting client connection, ``Timer`` as one loop timer (the earliest asked
for), ``TraceEvent`` as a JSONL line, ``Halt`` as the end of a controlled
shutdown.

Responses on one client connection go out in request order (Kafka's
guarantee), but requests are handed to the core as soon as they arrive, so a
pipelining producer is not held to one request per replication round trip.

Listeners bind loopback addresses only, unless ``allow_non_loopback``
(:mod:`.addresses`), and the control endpoint runs only with the cluster secret.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import random
import signal
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any

from reference_impl.core import effects as fx
from reference_impl.core import messages as m
from reference_impl.core.config import ProtocolConfig
from reference_impl.core.node import Node
from reference_impl.core.storage import CLEAN_SHUTDOWN, METADATA_LOG
from reference_impl.trace_format import encode_trace_line, stamp

from .addresses import AddressError, checked_bind
from .clients import Clients
from .clock import Clock
from .codec import CodecError
from .control import serve_control
from .disk import DiskStore
from .limits import Limits
from .listener import Connection, Listener
from .rpc import Peer, PeerInbound

log = logging.getLogger("kraftwerk.node")

_RESERVED_TRACE_KEYS = frozenset({"t", "t_us", "node_t", "node", "kind"})
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
    #: connection slots, deadlines and frame memory (limits.py: Kafka's settings)
    limits: Limits = field(default_factory=Limits)
    #: listen (and serve control) on addresses that are not loopback (addresses.py)
    allow_non_loopback: bool = False
    #: trace.jsonl, node.log and node.pid; default ``data_dir``. Apart when
    #: the data directory is a filesystem that loses un-fsynced writes
    #: (``kraftwerk fs``): the glass-box trace must survive the power loss.
    log_dir: str | None = None

    @property
    def logs(self) -> str:
        return self.log_dir or self.data_dir


class NodeRuntime:
    def __init__(self, opts: NodeOptions, node_factory: Any = None) -> None:
        self.opts = opts
        self.clock = Clock(opts.clock_offset_ms)
        self.disk = DiskStore(opts.data_dir, opts.storage_mode, opts.segment_bytes)
        self._node_factory = node_factory
        self.node: Any = None
        self.addresses: dict[int, tuple[str, int]] = {**opts.voters, **opts.peer_addresses}
        self.peers: dict[int, Peer] = {}
        self.counters: collections.Counter = collections.Counter()
        self.clients = Clients(lambda msg: self.deliver(msg, None), self.counters, self._halted_now,
                               opts.config.request_timeout_ms, opts.limits.max_request_bytes, self._caught_up)
        self.listener = Listener(opts.limits, self.clients.open, self._open_peer, self.counters)
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
        self.started_at = time.time()
        self.clean_start = False
        self.incarnation_id = uuid.uuid4().hex

    # -- start-up ---------------------------------------------------------------

    def _make_node(self, stored: Any) -> Any:
        if self._node_factory is not None:
            return self._node_factory(self, stored)
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
        listen, control_at = self._bind_addresses()  # before anything is read or written
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
        await self.listener.start(listen, o.listen[1])
        control = None
        if o.control is not None:
            control = await serve_control(control_at, o.control[1], self._control, o.secret)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.begin_shutdown, sig.name)
        loop.call_later(1.0, self._expire_overdue)
        self._call("start", lambda now, mono: self.node.start(now, mono))
        await self._halted.wait()
        # backstop: whatever happens while closing sockets, the process ends
        watchdog = threading.Timer(15.0, _hard_exit, (self.exit_code,))
        watchdog.daemon = True
        watchdog.start()
        self.listener.close()
        if control is not None:
            control.close()
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
                self.clients.reply(e.msg)
            elif t is fx.Timer:
                self._arm(e.at)
            elif isinstance(e, fx.TraceEvent):  # its subclasses too (AppendTrace, HwTrace, ProduceTrace)
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
        if not self.clients.serving:
            self.clients.serve_waiting()

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

    def _open_peer(self, conn: Connection) -> PeerInbound:
        def on_hello(nid: int, host: str, port: int) -> None:
            if nid not in self.opts.voters:
                self.addresses.setdefault(nid, (host, port))

        def on_message(src: int, msg: Any) -> None:
            self._sniff(msg)
            self.deliver(msg, src)

        def on_error(why: str) -> None:
            self.counters["bad_rpc_frames"] += 1
            log.warning("closing peer connection from %s: %s", conn.address, why)

        return PeerInbound(on_hello, on_message, on_error, self.opts.secret, self.opts.limits.queued_max_request_bytes)

    # -- listeners and clients ----------------------------------------------------

    def _bind_addresses(self) -> tuple[list[str], list[str]]:
        """What the port and the control endpoint bind: loopback unless
        allowed (the CLI says so first, in one line; this holds for any caller)."""
        o = self.opts
        listen, _ = checked_bind("--listen", o.listen[0], o.listen[1], o.allow_non_loopback)
        if o.control is None:
            return listen, []
        if not o.secret:
            raise AddressError("--control needs --secret-file: a control endpoint never runs without a token")
        control, _ = checked_bind("--control", o.control[0], o.control[1], o.allow_non_loopback)
        return listen, control

    def _halted_now(self) -> bool:
        return self._halted.is_set()

    def _expire_overdue(self) -> None:
        self.clients.expire_overdue()
        if not self._halted.is_set():
            asyncio.get_running_loop().call_later(1.0, self._expire_overdue)

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
            "errors": self.errors + self.clients.errors,
            "counters": dict(self.counters),
            "connections": self.listener.status(),
            "shutting_down": self._shutting_down,
        }

    def _caught_up(self) -> bool:
        """Whether client requests are served yet (clients.py says why):
        a node with no broker role has nothing to catch up on."""
        broker = getattr(self.node, "broker", None)
        return broker is None or broker.metadata_caught_up

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
