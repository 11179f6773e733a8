"""One simulated machine: a disk, a clock and (while running) a core ``Node``.

The host is the process lifecycle the faults act on: SIGKILL (the page cache
survives), power loss (it does not), SIGSTOP/SIGCONT (messages and timers queue
until resume), controlled shutdown (the node runs its own shutdown and ends
with ``Halt``), and restart (a fresh ``Node`` built from what the disk holds).
Every incarnation has its own number so that timers armed by a dead process
never fire into its successor.

A restarted broker serves no client before its initial metadata catch-up:
Kafka 4.4's ``BrokerServer.startup`` enables request processing only once
the broker has replayed past its own registration (``BrokerServer.scala``
lines 548-551, 587), and the reference server holds a client's frames until
then (``server/clients.py``). The host does the same: a client's request
(its source a client endpoint's name, not a node id) that reaches a broker
still catching up (``BrokerRole.metadata_caught_up``) is held, in arrival
order, and handed over once a step of the node finds it caught up; the
process dying loses what it held, as its connections die with it, and a
client that closes its connection takes its held requests back. Catching up
is latched for the incarnation, as the server's ``serving`` is, so a
caught-up broker pays one flag test per client message. A first start
holds nothing: the harness sends clients nothing before its setup found
every partition led, and holding the setup's own CreateTopics would only
move every seed's setup, faults or none.
"""

from __future__ import annotations

import random
import traceback
from typing import Any, Callable, Final

from reference_impl.core.effects import (
    AppendTrace,
    FileDelete,
    FileWrite,
    Fsync,
    Halt,
    HwTrace,
    LogAppend,
    LogTruncate,
    LogTruncateFully,
    ProduceTrace,
    Reply,
    Send,
    Timer,
    TraceEvent,
)
from reference_impl.core.messages import ClientFetchResponse, ProduceResponse
from reference_impl.core.node import Node

from .clock import NodeClock
from .disk import Disk
from .env import NodeEnv
from .network import Endpoint, Link, Receiver

#: node ids below this have their link kept in a list by id (``Host._links``);
#: the simulation's are 1.. (brokers) and 101.. (controllers)
_LINKS_BY_ID: Final = 1024

UP: Final = "up"
PAUSED: Final = "paused"
DOWN: Final = "down"

#: the reason ``Simulation.start`` gives each node's first start
FIRST_START: Final = "start"


class Host(Receiver):
    """One simulated machine: a node process (or none), its clock and its
    disk; the network's receiver of what arrives for its node."""

    # the host sees its environment (``env.NodeEnv``), never the simulation
    def __init__(self, roles: frozenset[str], env: NodeEnv) -> None:
        self.node_id = env.node_id
        self.roles = roles
        self.env = env
        self.clock = NodeClock()
        self.disk = Disk()
        self.state: str = DOWN
        self.incarnation = 0
        # typed, so the compiled host calls the node's methods natively
        self.node: Node | None = None
        self.queued: list[tuple[str, Any, Any]] = []
        #: True while this incarnation is a broker that has not caught up
        #: (so holds client requests in ``held``, in arrival order)
        self.holding = False
        self.held: list[tuple[Any, Any]] = []
        self.timers: set[int] = set()
        self.halted = False
        self._on_timer_fn: Callable[[int, int], None] = self.on_timer  # bound once
        #: this node's links' FIFO states (``Network.fifos``), for ``send_from``
        self._fifos = env.net.fifos(self.node_id)
        #: the links to other nodes by node id (None: not found yet), each
        #: the network's own (``Network.link``): a Send names its node by a
        #: native int, and a list index finds its link where a lookup by
        #: endpoint in ``_fifos`` was a dict lookup per message
        self._links: list[Link | None] = []
        #: the node id as the network's ``Endpoint`` (an object), made once:
        #: compiled, the int attribute passed where an ``Endpoint`` is taken
        #: is boxed again on every message sent (``apply``)
        self._src: Endpoint = self.node_id

    # -- time ------------------------------------------------------------------
    def now(self) -> int:
        """The node's wall clock (skewed by the clock nemesis)."""
        return self.clock.node_time(self.env.loop.now)

    def mono(self) -> int:
        """The node's monotonic clock (no clock jump moves it)."""
        return self.clock.mono_time(self.env.loop.now)

    def _mono_arg(self, now: int) -> int | None:
        """The ``mono`` a call into the node takes: None while the two
        clocks agree (the node's contract, ``node.py``: the same as
        ``mono == now``), so no int is boxed for it on every call."""
        mono = self.clock.mono_time(self.env.loop.now)
        return None if mono == now else mono

    # -- lifecycle ---------------------------------------------------------------
    def start(self, reason: str = FIRST_START) -> None:
        """Start a fresh process from whatever the disk holds."""
        env = self.env
        self.incarnation += 1
        self.timers = set()
        self.queued = []
        self.halted = False
        stored = self.disk.stored_state()
        self.node = Node(
            self.node_id,
            roles=set(self.roles),
            config=env.config,
            voters=env.voters,
            stored=stored,
            rng=random.Random(env.rng.getrandbits(64)),
            incarnation_id=f"{self.node_id}-{self.incarnation}",
            endpoint=env.endpoint,
        )
        self.held = []
        # a restarted broker holds its clients until caught up; the first
        # start does not: the harness sends clients nothing before its setup
        # found every partition led (module docstring)
        self.holding = self.node.broker is not None and reason != FIRST_START
        self.state = UP
        env.sink.trace(self.node_id, "node_start", {"incarnation": self.incarnation, "reason": reason})
        self._call(lambda n, now, mono: n.start(now, mono))

    def kill(self) -> None:
        """SIGKILL: the process is gone, its page cache is not. Its kernel
        closes its connections (``Network.endpoint_down``): what they held
        is lost, and clients waiting on it hear the close."""
        was = self.state
        self.state = DOWN
        self.node = None
        self.queued = []
        self.held = []  # the process's connections die with it
        self.holding = False
        self.timers = set()
        self.incarnation += 1
        if was != DOWN:
            self.env.net.endpoint_down(self.node_id)

    def power_loss(self) -> dict[str, int]:
        self.kill()
        return self.disk.lose_unfsynced()

    def pause(self) -> None:
        if self.state == UP:
            self.state = PAUSED

    def resume(self) -> None:
        if self.state != PAUSED:
            return
        self.state = UP
        queued, self.queued = self.queued, []
        for kind, a, b in queued:
            if self.state != UP:
                break
            if kind == "msg":
                self.deliver(a, b)
            else:
                self._tick()
        if self.state == UP:
            self._tick()

    def controlled_shutdown(self) -> None:
        if self.state == UP:
            self._call(lambda n, now, mono: n.begin_controlled_shutdown(now, mono))

    # -- inputs --------------------------------------------------------------------
    def deliver(self, src: Any, msg: Any) -> None:
        self.receive(src, msg)

    def receive(self, src: Any, msg: Any) -> None:
        """A message for the node (``Receiver``: the network calls this natively)."""
        state = self.state
        if state == UP:
            if self.holding and not isinstance(src, int):
                self.held.append((src, msg))  # a client's, before catch-up
                return
            self._deliver_now(src, msg)
        elif state == PAUSED:
            self.queued.append(("msg", src, msg))
        # DOWN: the message is lost with the process

    def _deliver_now(self, src: Any, msg: Any) -> None:
        # the hot path: the same as _call(lambda n, now: n.handle(...)), spelt
        # out so that the node's method is called natively
        node = self.node
        assert node is not None, "a host that is up has a node"
        vt = self.env.loop.now
        clock = self.clock
        if not clock.drift:
            # NodeClock.node_time and mono_time without drift, inline: two calls a message
            now = vt + clock.offset_ms
            mono = vt
        else:
            now = clock.node_time(vt)
            mono = clock.mono_time(vt)
        # the sender if a node (a client's name is no NodeId), as the object
        # it is: tested apart, as a ternary on isinstance narrowed ``src`` to
        # an int, unboxed and boxed again on every message from a node
        from_node = isinstance(src, int)
        try:
            # mono None while the clocks agree: _mono_arg, inlined
            effects = node.handle(msg, now, src if from_node else None, None if mono == now else mono)
        except Exception as e:  # a crash of the reference implementation is a finding, not a harness error
            self._crashed(e)
            return
        if effects:
            self.apply(effects)
        if self.holding:
            self._serve_if_caught_up()

    def client_closed(self, client: Any) -> None:
        """``client`` closed its connection to this node (its request timed
        out, a reset, its process died): the requests it left held are never
        handled, as the server skips a closed connection's frames."""
        if self.held:
            self.held = [m for m in self.held if m[0] != client]

    def _serve_if_caught_up(self) -> None:
        """After a step of a broker still holding clients: once it has
        replayed its own registration, hand over what it held, in order."""
        node = self.node
        if self.state != UP or node is None:
            return
        broker = node.broker
        if broker is not None and not broker.metadata_caught_up:
            return
        self.holding = False
        held, self.held = self.held, []
        inc = self.incarnation
        for src, msg in held:
            if self.incarnation != inc or self.state != UP:
                return  # it died (a crash, a halt) on the way: the rest is lost
            self._deliver_now(src, msg)

    def on_timer(self, incarnation: int, vt: int) -> None:
        if incarnation != self.incarnation:
            return
        self.timers.discard(vt)
        if self.state == PAUSED:
            if not any(k == "tick" for k, _, _ in self.queued):
                self.queued.append(("tick", None, None))
            return
        if self.state == UP:
            self._tick()

    def _tick(self) -> None:
        node = self.node
        assert node is not None, "a host that is up has a node"
        try:
            now = self.now()
            effects = node.tick(now, self._mono_arg(now))
        except Exception as e:  # a crash of the reference implementation is a finding, not a harness error
            self._crashed(e)
            return
        self.apply(effects)
        if self.holding:
            self._serve_if_caught_up()

    def _crashed(self, e: Exception) -> None:
        """Record the node's exception (called in the ``except`` block, so
        the traceback is the node's) and take the process down."""
        self.env.sink.node_crashed(self.node_id, f"{type(e).__name__}: {e}", traceback.format_exc(limit=8))
        self.kill()

    # -- effects ---------------------------------------------------------------------
    def _link_to(self, dst: int) -> Link:
        """The network's link from this node to node ``dst``, kept by id
        when ``dst`` is small enough (see ``_links``)."""
        link = self.env.net.link(self._fifos, dst)
        if 0 <= dst < _LINKS_BY_ID:
            links = self._links
            if dst >= len(links):
                links.extend([None] * (dst + 1 - len(links)))
            links[dst] = link
        return link

    def _call(self, fn: Callable[[Any, int, int | None], list[Any]]) -> None:
        node = self.node
        try:
            now = self.now()
            effects = fn(node, now, self._mono_arg(now))
        except Exception as e:  # a crash of the reference implementation is a finding, not a harness error
            self._crashed(e)
            return
        self.apply(effects)
        if self.holding:
            self._serve_if_caught_up()

    def apply(self, effects: list[Any]) -> None:
        if not effects:
            return
        env = self.env
        sink = env.sink
        me = self.node_id
        inc = self.incarnation
        net = env.net
        fifos = self._fifos
        src = self._src
        for eff in effects:
            # isinstance, not type(eff) is ...: it narrows the type, so the
            # compiled code reads the effect's fields natively, not by name
            if isinstance(eff, Send):
                dst = eff.dst
                links = self._links
                link = links[dst] if 0 <= dst < len(links) else None
                if link is None:
                    link = self._link_to(dst)
                net.send_on(link, src, link.dst, eff.msg)  # dst as the link holds it: no int boxed
                continue
            if isinstance(eff, TraceEvent):
                # the typed hot events by their fields (effects.AppendTrace):
                # their data dicts are built only if the sink writes them
                # the node id boxed once (``src``), not ``me`` boxed per event
                if isinstance(eff, AppendTrace):
                    sink.trace_append(src, eff)
                elif isinstance(eff, HwTrace):
                    sink.trace_hw(src, eff)
                elif isinstance(eff, ProduceTrace):
                    sink.trace_produce(src, eff)
                else:
                    sink.trace(me, eff.kind, eff.data)
                continue
            t = type(eff)
            if isinstance(eff, Timer):  # narrowed: eff.at read natively
                vt = self.clock.virtual_time(eff.at)
                loop = env.loop
                if vt < loop.now:
                    vt = loop.now
                timers = self.timers
                if vt not in timers:
                    timers.add(vt)
                    loop.at(vt, self._on_timer_fn, inc, vt)
            elif isinstance(eff, Reply):  # narrowed: eff.msg read natively
                msg = eff.msg
                # the two answers of nearly every Reply read natively; any
                # other by name (a getattr by name was ~130 instructions)
                if isinstance(msg, ProduceResponse):
                    ref: Any = msg.ref
                elif isinstance(msg, ClientFetchResponse):
                    ref = msg.ref
                else:
                    ref = getattr(msg, "ref", None)
                if isinstance(ref, tuple) and ref:
                    net.send_from(fifos, src, ref[0], msg)
            elif (t is LogAppend or t is Fsync or t is FileWrite or t is LogTruncate or t is LogTruncateFully
                  or t is FileDelete):
                # the disk's effects, by identity: compiled, ``t in`` a tuple
                # of the classes was a rich comparison per class tried
                self.disk.apply(eff)
            elif t is Halt:
                self.halted = True
                sink.trace(me, "node_halt", {"incarnation": inc, "reason": eff.reason})
                self.kill()
                return
            else:
                raise TypeError(f"node {me} returned an unknown effect {eff!r}")
