"""The simulated network: per-link latency, FIFO delivery per link, and
partitions expressed as *grudges*, with TCP's answer to each fault.

A grudge is a set of directed ``(src, dst)`` pairs that are cut (the shapes
themselves are ``nemesis.partition``'s, named by the cluster contract,
``control.SimNetwork``). Endpoints are node ids (int) and client names (str),
so client <-> node links can be cut like any other.

What a cut does is what TCP does under the harness's iptables rules
(``harness/net/iptables.py``):

* ``drop`` (the default): the packets are dropped and TCP retransmits them.
  A message that meets a cut link (when it would arrive, so one in flight as
  the cut starts is caught too) is *held* on its connection, in order, and
  every later message of that connection queues behind it. After the heal
  the held messages arrive at the connection's first retransmission at or
  after the heal: Linux retransmits the oldest unacknowledged segment after
  ``RTO_MIN_MS`` and doubles the wait each time (``TCP_RTO_MIN`` 200 ms,
  ``TCP_RTO_MAX`` 120 s; the RTO of a LAN connection is the minimum), so a
  long cut is followed by a wait of up to about as long again.
* ``reject`` (``--net-cut reject``): TCP is refused with a reset. The
  message is lost and the connection with it: the sender's requests on it
  fail at once (a client endpoint hears it, :meth:`Network.watch`).
* random loss (``set_loss``): a lost packet is retransmitted after an RTO
  (doubling while the retransmissions are lost too), so a message arrives
  late, and the messages behind it on the link wait for it; none is lost.

Which connection a message travels on (:data:`HeldKey`): the one its
owner (the endpoint whose request it is or answers) keeps to its peer for
the message's channel, as Kafka's ``NetworkClient`` sends a request and
reads its answer on the requester's connection. Kafka's brokers use a
client of their own for the KRaft quorum (``KafkaRaftManager`` builds a
``NetworkClient`` for ``KafkaNetworkChannel``) and others for the rest, so
the quorum's messages (the core's ``RAFT_MESSAGES``) are the :data:`RAFT`
channel. The broker lifecycle's registrations and heartbeats are the
:data:`LIFECYCLE` channel: Kafka 4.4.0's ``BrokerServer.startup`` gives the
``BrokerLifecycleManager`` a ``NodeToControllerChannelManager`` of its own
("heartbeat", ``BrokerServer.scala`` lines 442-457 of
``kafka_2.13-4.4.0.jar``) whose retry timeout is
``broker.heartbeat.interval.ms`` (line 449), and
``NodeToControllerChannelManagerImpl.buildNetworkClient`` makes that the
``NetworkClient``'s request timeout (the smaller of it and
``controller.socket.timeout.ms``, ``NodeToControllerChannelManagerImpl.java``
line 126 of ``kafka-server-4.4.0.jar``), so a heartbeat held by a cut is
given up, with its connection, a heartbeat interval later, and the first
heartbeat after the heal goes on a new connection. Everything else (replica
fetches, AlterPartition, client requests) is the :data:`RPC` channel. Held
or not, delivery stays FIFO per directed link (the reference server's
internal RPC, ``reference_impl/server/rpc.py``, keeps one connection per
peer).

A connection dies when its owner gives up on a request on it: Kafka
4.4.0's ``NetworkClient.handleTimedOutRequests``
(``clients/src/main/java/org/apache/kafka/clients/NetworkClient.java``)
closes the connection to a node whose in-flight request outlived its request
timeout and fails every request in flight on it through
``cancelInFlightRequests``, as ``handleDisconnections`` does for a
connection the peer closed (the response handler sees a disconnect, which
``KafkaNetworkChannel.sendOnCompleted``,
``raft/src/main/java/org/apache/kafka/raft/KafkaNetworkChannel.java``,
turns into BROKER_NOT_AVAILABLE for the raft client; read as compiled
classes of the 4.4.0 jars); librdkafka's ``rd_kafka_broker_timeout_scan`` does the same
(``socket.max.fails`` 1: one timed-out request takes the connection down
with ``rd_kafka_broker_fail``). The next request opens a new connection.
What the dead connection held is never delivered. The core's nodes cannot
be told of a disconnect (a lost request is theirs to time out on their own
timers), so for them the network applies the channel's request timeout
itself (:attr:`Network.lifetime_ms`: the core's raft resend timeout, on
which it gives a fetch up and sends another, the heartbeat interval on
the lifecycle's channel, and the nodes' ``request.timeout.ms``): a held
connection whose oldest message waited longer is gone, with all it held, and what was sent on the link after that
went on a new connection. The timeout runs on the wall clock of the
connection's owner (the endpoint that sent the request; an answer travels on
the connection of the endpoint it answers), as ``NetworkClient.poll`` and
``KafkaRaftClient.poll`` read ``time.milliseconds()``: a node whose clock is
set back keeps its connection (and its request) longer, exactly as long as
its own raft client waits for the answer, so a request is lost only when
its sender has given it up. Retransmissions are the kernel's, on virtual
time.

The simulated clients close their connections themselves
(:meth:`Network.close`), and a process that dies takes its connections with
it (:meth:`Network.endpoint_down`): each client with a request in flight to
it hears the close (a :class:`ConnectionLost` sent from the dead node, so it
queues behind what the node sent before and is held by a cut like any
data). A paused process's kernel still takes what is sent to it: the host
queues it until the process runs again (``host.py``).

What is not modelled: a one-way cut stops only its direction (TCP would
soon stall the other too, its acknowledgements being cut); a new
connection's handshake (its first message waits no SYN retransmission); a
closed socket's unsent data, which Linux would still send after the heal
(here a closed connection delivers nothing more).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Final, Hashable, Iterable

from math import log as _log

from reference_impl.core.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from reference_impl.core.raft.replica import FETCH_RESEND_MS, RAFT_MESSAGES

from .events import Event, EventLoop

Endpoint = Hashable

#: Linux's ``TCP_RTO_MIN`` and ``TCP_RTO_MAX``: the first retransmission
#: waits the minimum (a LAN connection's RTO), each next one twice the last
RTO_MIN_MS: Final = 200
RTO_MAX_MS: Final = 120_000

#: the channels a message can travel on (see the module docstring)
RAFT: Final = 0
RPC: Final = 1
LIFECYCLE: Final = 2
_RAFT_TYPES: Final = frozenset(RAFT_MESSAGES)
_LIFECYCLE_TYPES: Final = frozenset({BrokerRegistrationRequest, BrokerRegistrationResponse,
                                     BrokerHeartbeatRequest, BrokerHeartbeatResponse})

#: librdkafka's names for a connection's end, as a request's handler sees
#: them (``rd_kafka_broker_fail``'s error): the peer reset or closed it, or
#: another request on it timed out
TRANSPORT: Final = "_TRANSPORT"
TIMED_OUT: Final = "_TIMED_OUT"


@dataclass(frozen=True)
class ConnectionLost:
    """A connection's end as a simulated client sees it: sent from a dead
    node as its FIN, and handed to the handler of each request that was in
    flight on the connection (``error``: :data:`TRANSPORT` or
    :data:`TIMED_OUT`)."""

    error: str


@dataclass(frozen=True)
class LinkProfile:
    """Latency = ``min_ms`` + an exponential with mean ``jitter_ms`` (rounded);
    ``loss`` is the probability a packet is lost (and retransmitted)."""

    min_ms: int = 1
    jitter_ms: float = 1.0
    loss: float = 0.0

    def sample(self, rng: random.Random) -> int:
        extra = rng.expovariate(1.0 / self.jitter_ms) if self.jitter_ms > 0 else 0.0
        return self.min_ms + int(extra)


def first_retransmission(since: int, now: int) -> int:
    """When data first sent at ``since`` and lost since is retransmitted
    next, at or after ``now``: after ``RTO_MIN_MS``, then after twice the
    last wait each time, up to ``RTO_MAX_MS``."""
    t, rto = since + RTO_MIN_MS, RTO_MIN_MS
    while t < now:
        rto = min(2 * rto, RTO_MAX_MS)
        t += rto
    return t


def retransmission_delay(random01: Callable[[], float], loss: float) -> int:
    """How much later than its first try a packet arrives on a link that
    loses each transmission with probability ``loss`` (< 1): one RTO per
    lost transmission, doubling."""
    delay, rto = 0, RTO_MIN_MS
    while True:
        delay += rto
        if random01() >= loss:
            return delay
        rto = min(2 * rto, RTO_MAX_MS)


class _Held:
    """What one connection holds while its link is cut: ``(when it met the
    cut, the owner's wall clock then, message)`` in order; ``due`` is the
    planned retransmission (or look at the request timeout), -1 while none
    is planned (the link is still cut)."""

    def __init__(self) -> None:
        self.msgs: list[tuple[int, int, Any]] = []
        self.due = -1


class _Fifo:
    """One directed link: when its last message arrives (its delivery
    order), and the receiver of its destination, kept here so that an
    arrival finds it without a lookup by endpoint (:meth:`Network.attach`
    updates every link to an endpoint it attaches; None: none attached).
    ``dst`` is the destination as the object the link was made for: a
    sender that holds the link by a native node id passes this to
    :meth:`Network.send_on`, not its id boxed again per message."""

    def __init__(self, recv: "Receiver | None", dst: Endpoint) -> None:
        self.last: int = 0
        self.recv = recv
        self.dst = dst


#: a directed link's state, as a sender that keeps its links holds it (:meth:`Network.link`)
Link = _Fifo

#: (src, dst, channel, owner): one connection's messages in one direction
HeldKey = tuple[Endpoint, Endpoint, int, Endpoint]


class Receiver:
    """What an endpoint is to the network: the object arrivals are handed
    to (:meth:`Network.attach`). A compiled base class, so the network's
    call per message is a native method call: a bound method called as a
    generic callable (its vectorcall and argument parsing) was ~300
    instructions a message. The hosts and the client endpoints are
    receivers; a plain callable is wrapped in one."""

    def receive(self, src: Endpoint, msg: Any) -> None:
        raise NotImplementedError


class _CallbackReceiver(Receiver):
    """A callable ``receive(src, msg)`` attached as a receiver (tests, taps)."""

    def __init__(self, fn: Callable[[Endpoint, Any], None]) -> None:
        self.fn = fn

    def receive(self, src: Endpoint, msg: Any) -> None:
        self.fn(src, msg)


class _Arrival(Event):
    """A message's arrival on the loop's calendar, handed to the link's
    receiver by a native call (see ``events.py``: one object per message,
    where a generic entry was two tuples and a generic call). Reused: once
    its millisecond is over (:meth:`done`) it goes back to the network's
    spares, and the next message sent takes it (an object made and freed
    per message cost ~600 instructions)."""

    def __init__(self, seq: int, net: "Network", link: _Fifo, src: Endpoint, dst: Endpoint, msg: Any) -> None:
        self.seq = seq
        self.net = net
        self.link = link
        self.src = src
        self.dst = dst
        self.msg = msg

    def run(self) -> None:
        msg = self.msg
        self.msg = None  # the message goes when delivered, as it did with its entry
        net = self.net
        src = self.src
        # the arrival's checks here, not in a Network method (a native call
        # a message saved); len(), not truth: compiled, a set's truth is a
        # generic call (PyObject_IsTrue), its length a field read
        if (len(net.grudge) != 0 or len(net._held) != 0) and net._stopped(src, self.dst, msg):
            return
        # the link's receiver, not a lookup by dst
        recv = self.link.recv
        if recv is None:
            net.dropped += 1
            return
        net.delivered += 1
        recv.receive(src, msg)

    def done(self) -> None:
        self.net._spares.append(self)


class Network:
    def __init__(self, loop: EventLoop, rng: random.Random, default: LinkProfile | None = None,
                 request_timeout_ms: int = 30_000, wall: Callable[[Endpoint], int] | None = None,
                 heartbeat_interval_ms: int = 2000) -> None:
        self.loop = loop
        self.rng = rng
        self.default = default or LinkProfile()
        self.links: dict[tuple[Endpoint, Endpoint], LinkProfile] = {}
        self.grudge: set[tuple[Endpoint, Endpoint]] = set()
        #: ``--net-cut reject``: a cut resets the connection instead of holding it
        self.reject = False
        #: a held connection outlives no request timeout of its channel (the
        #: module docstring): the raft client's, the lifecycle's (its heartbeat
        #: interval), and the nodes' request.timeout.ms
        self.lifetime_ms: dict[int, int] = {RAFT: FETCH_RESEND_MS, RPC: request_timeout_ms,
                                            LIFECYCLE: heartbeat_interval_ms}
        #: an endpoint's wall clock now, on which its request timeouts run
        #: (None: the loop's time, as for every endpoint without a clock)
        self._wall = wall
        #: what each connection holds (see _Held, HeldKey)
        self._held: dict[HeldKey, _Held] = {}
        #: message type -> (channel, whether it answers a request), looked up once per type
        self._kinds: dict[type, tuple[int, bool]] = {}
        #: src -> dst -> the link's FIFO state (when its last message
        #: arrives). Two lookups by endpoint, not one by ``(src, dst)``: a
        #: tuple key is a tuple to make and hash and, when found, to compare
        #: item by item; and a mutable object per link, not an int per link
        #: in the dict, so a send stores an unboxed field, not a dict entry
        self._last_arrival: dict[Endpoint, dict[Endpoint, _Fifo]] = {}
        self._receivers: dict[Endpoint, Receiver] = {}
        #: endpoint -> the links to it (each keeps its receiver, see _Fifo)
        self._links_to: dict[Endpoint, list[_Fifo]] = {}
        #: endpoints that hear of their connections' end: endpoint -> "have
        #: I a request in flight to this peer" and "my connection to it reset"
        self._watchers: dict[Endpoint, tuple[Callable[[Endpoint], bool], Callable[[Endpoint, str], None]]] = {}
        #: endpoints that keep what their peers sent (a broker holding clients
        #: until it has caught up, ``host.py``): told when a peer's
        #: connection to them ends, so they drop what it left
        self._keepers: dict[Endpoint, Callable[[Endpoint], None]] = {}
        self.taps: list[Callable[[Endpoint, Endpoint, Any], None]] = []
        #: arrivals whose millisecond has run, for the next messages (_Arrival)
        self._spares: list[_Arrival] = []
        self.sent = 0
        self.dropped = 0
        self.delivered = 0
        # the generator's draw, bound once: ``rng.random()`` looked the method
        # up by name on every message
        self._random: Callable[[], float] = rng.random

    def attach(self, endpoint: Endpoint, receive: Receiver | Callable[[Endpoint, Any], None]) -> None:
        """What arrives for ``endpoint`` goes to ``receive``: a
        :class:`Receiver` (its ``receive``, natively) or a callable."""
        recv = receive if isinstance(receive, Receiver) else _CallbackReceiver(receive)
        self._receivers[endpoint] = recv
        for link in self._links_to.get(endpoint, ()):
            link.recv = recv

    def watch(self, endpoint: Endpoint, in_flight_to: Callable[[Endpoint], bool],
              reset: Callable[[Endpoint, str], None]) -> None:
        """``endpoint`` (a simulated client) hears its connections end: a dead
        peer's FIN reaches it (as a :class:`ConnectionLost` message) if it has
        a request in flight to that peer, and a reject cut's reset at once."""
        self._watchers[endpoint] = (in_flight_to, reset)

    def keeps(self, endpoint: Endpoint, closed: Callable[[Endpoint], None]) -> None:
        """``endpoint`` keeps requests it has not handled yet: ``closed(peer)``
        is called when ``peer``'s connection to it ends (a close, a reset,
        the peer's process dying), so it forgets what that peer sent."""
        self._keepers[endpoint] = closed

    def set_link(self, src: Endpoint, dst: Endpoint, profile: LinkProfile) -> None:
        self.links[(src, dst)] = profile

    # -- partitions --------------------------------------------------------
    def cut(self, pairs: Iterable[tuple[Endpoint, Endpoint]]) -> None:
        """Cut these links too."""
        self.grudge.update(pairs)

    def set_cut(self, pairs: Iterable[tuple[Endpoint, Endpoint]]) -> None:
        """Exactly these links are cut from now on (a nemesis grudge; the
        empty one heals everything)."""
        new = set(pairs)
        healed = self.grudge - new
        self.grudge.clear()
        self.grudge.update(new)
        self._healed(healed)

    def heal(self) -> None:
        self.set_cut(())

    def heal_pairs(self, pairs: Iterable[tuple[Endpoint, Endpoint]]) -> None:
        healed = self.grudge & set(pairs)
        self.grudge.difference_update(healed)
        self._healed(healed)

    def blocked(self, src: Endpoint, dst: Endpoint) -> bool:
        return (src, dst) in self.grudge

    def held(self) -> int:
        """How many messages cut links hold now."""
        return sum(len(h.msgs) for h in self._held.values())

    # -- connections -----------------------------------------------------------
    def close(self, a: Endpoint, b: Endpoint) -> None:
        """``a`` closed its connection to ``b`` (a client whose request timed
        out): what it holds either way is never delivered."""
        if self._held:
            for key in [k for k in self._held if (k[0] == a and k[1] == b) or (k[0] == b and k[1] == a)]:
                self._drop(key)
        keepers = self._keepers
        if keepers:
            for x, peer in ((b, a), (a, b)):
                closed = keepers.get(x)
                if closed is not None:
                    closed(peer)

    def endpoint_down(self, x: Endpoint) -> None:
        """``x``'s process died (a kill, a power loss, a halt): its connections
        end. What they hold is lost; every watcher with a request in flight to
        ``x`` is sent x's FIN, after whatever x sent it before."""
        for key in [k for k in self._held if k[0] == x or k[1] == x]:
            self._drop(key)
        for k, closed in self._keepers.items():
            if k != x:
                closed(x)
        for w, (in_flight_to, _reset) in self._watchers.items():
            if w != x and in_flight_to(x):
                self.send(x, w, ConnectionLost(TRANSPORT))

    def _drop(self, key: HeldKey) -> None:
        h = self._held.pop(key, None)
        if h is not None:
            self.dropped += len(h.msgs)

    def _wall_of(self, endpoint: Endpoint) -> int:
        return self.loop.now if self._wall is None else self._wall(endpoint)

    def _kind(self, msg: Any) -> tuple[int, bool]:
        """The message's channel, and whether it is an answer (so travels on
        the connection of the endpoint it answers): every message the core
        and the clients send is named ``...Request`` or ``...Response``."""
        t = type(msg)
        kind = self._kinds.get(t)
        if kind is None:
            chan = RAFT if t in _RAFT_TYPES else LIFECYCLE if t in _LIFECYCLE_TYPES else RPC
            kind = self._kinds[t] = (chan, t.__name__.endswith("Response"))
        return kind

    # -- delivery ------------------------------------------------------------
    def fifos(self, src: Endpoint) -> dict[Endpoint, _Fifo]:
        """``src``'s links' FIFO states, by destination: a sender that keeps
        it passes it to :meth:`send_from` (one lookup a message fewer)."""
        last_arrival = self._last_arrival.get(src)
        if last_arrival is None:
            last_arrival = self._last_arrival[src] = {}
        return last_arrival

    def send(self, src: Endpoint, dst: Endpoint, msg: Any) -> None:
        last_arrival = self._last_arrival.get(src)
        if last_arrival is None:
            last_arrival = self._last_arrival[src] = {}
        self.send_from(last_arrival, src, dst, msg)

    def send_from(self, last_arrival: dict[Endpoint, _Fifo], src: Endpoint, dst: Endpoint, msg: Any) -> None:
        """:meth:`send`, given ``src``'s :meth:`fifos` (the hosts and the
        client endpoints, which send nearly every message)."""
        fifo = last_arrival.get(dst)
        if fifo is None:
            fifo = last_arrival[dst] = self._new_link(dst)
        self.send_on(fifo, src, dst, msg)

    def link(self, last_arrival: dict[Endpoint, _Fifo], dst: Endpoint) -> _Fifo:
        """The link from the owner of ``last_arrival`` (its :meth:`fifos`)
        to ``dst``, made on first use: a sender that keeps it passes it to
        :meth:`send_on`. Each link is one object for good, whichever way it
        is found, so its FIFO order is one."""
        fifo = last_arrival.get(dst)
        if fifo is None:
            fifo = last_arrival[dst] = self._new_link(dst)
        return fifo

    def send_on(self, fifo: _Fifo, src: Endpoint, dst: Endpoint, msg: Any) -> None:
        """:meth:`send` on the link ``src`` -> ``dst`` (:meth:`link`) the
        sender holds: a host keeps its links to the other nodes by node id
        (``host.py``), so a message between nodes is sent without a lookup
        by endpoint. Finding the link draws nothing from the rng, so where
        it is found changes no schedule."""
        self.sent += 1
        if self.taps:
            for tap in self.taps:
                tap(src, dst, msg)
        links = self.links
        prof = links.get((src, dst), self.default) if links else self.default
        # LinkProfile.sample, inlined: random.expovariate(1 / jitter) is
        # -log(1 - random()) / (1 / jitter), computed here the same way
        jitter = prof.jitter_ms
        extra = -_log(1.0 - self._random()) / (1.0 / jitter) if jitter > 0 else 0.0
        loop = self.loop
        arrive = loop.now + prof.min_ms + int(extra)
        if prof.loss and self._random() < prof.loss:
            if prof.loss >= 1.0:  # every retransmission lost too: the connection times out
                self.dropped += 1
                return
            arrive += retransmission_delay(self._random, prof.loss)
        if arrive < fifo.last:
            arrive = fifo.last  # FIFO per link, like one TCP connection
        fifo.last = arrive
        # EventLoop.at, in two native calls' worth: arrive is never in the past
        seq = loop._seq = loop._seq + 1
        spares = self._spares
        if spares:
            entry = spares.pop()
            entry.seq = seq
            entry.link = fifo
            entry.src = src
            entry.dst = dst
            entry.msg = msg
        else:
            entry = _Arrival(seq, self, fifo, src, dst, msg)
        loop.push(arrive, entry)

    def _new_link(self, dst: Endpoint) -> _Fifo:
        """A link to ``dst``, told of ``dst``'s receiver now and on every attach."""
        link = _Fifo(self._receivers.get(dst), dst)
        links = self._links_to.get(dst)
        if links is None:
            links = self._links_to[dst] = []
        links.append(link)
        return link

    def _hand_over(self, src: Endpoint, dst: Endpoint, msg: Any) -> None:
        recv = self._receivers.get(dst)
        if recv is None:
            self.dropped += 1
            return
        self.delivered += 1
        recv.receive(src, msg)

    def _stopped(self, src: Endpoint, dst: Endpoint, msg: Any) -> bool:
        """Whether a cut (or what a cut still holds on its connection) stops
        this message here: held behind the connection's earlier messages, or
        lost to a reject cut's reset."""
        chan, answer = self._kind(msg)
        owner = dst if answer else src
        key = (src, dst, chan, owner)
        h = self._held.get(key)
        if h is None:
            if (src, dst) not in self.grudge:
                return False
            if self.reject:
                self.dropped += 1
                self._reset(src, dst)
                return True
            h = self._held[key] = _Held()
        h.msgs.append((self.loop.now, self._wall_of(owner), msg))
        return True

    def _reset(self, src: Endpoint, dst: Endpoint) -> None:
        """A reject cut answered ``src`` with a reset: the connection is gone
        both ways, and a watching sender's requests to ``dst`` fail now."""
        self.close(src, dst)
        watcher = self._watchers.get(src)
        if watcher is not None:
            watcher[1](dst, TRANSPORT)

    # -- heals -------------------------------------------------------------------
    def _healed(self, pairs: set[tuple[Endpoint, Endpoint]]) -> None:
        if not pairs or not self._held:
            return
        for key, h in list(self._held.items()):
            if h.due < 0 and (key[0], key[1]) in pairs:
                self._plan(key, h)

    def _plan(self, key: HeldKey, h: _Held) -> None:
        """A held connection's link is healed: plan its next retransmission
        or, if its owner's request timeout comes first, a look then.

        The timeout runs on the owner's wall clock, as Kafka's NetworkClient
        reads ``time.milliseconds()``, from when the connection's oldest
        message met the cut; a clock set back lets it live on, one jumped
        forward ends it. A connection that ended during the cut lost what it
        held then (its end placed as if the clock had run evenly since: a
        jump forward and back within one cut is not seen); what was held
        after went on a new one, whose first message starts the
        retransmissions over."""
        now = self.loop.now
        lifetime = self.lifetime_ms[key[2]]
        wall = self._wall_of(key[3])
        msgs = h.msgs
        while msgs:
            since, since_wall, _ = msgs[0]
            left = since_wall + lifetime - wall  # of the request timeout, on the owner's clock
            if left <= 0:
                ended = max(since, now + left)
                kept = [m for m in msgs if m[0] > ended]
                self.dropped += len(msgs) - len(kept)
                h.msgs = msgs = kept
                continue
            retransmit = first_retransmission(since, now)
            if retransmit <= now + left:
                prof = self.links.get((key[0], key[1]), self.default)
                h.due = retransmit + prof.min_ms
                self.loop.at(h.due, self._release, key, h)
            else:
                h.due = now + left
                self.loop.at(h.due, self._look, key, h)
            return
        del self._held[key]

    def _release(self, key: HeldKey, h: _Held) -> None:
        """The planned retransmission: through, unless the link was cut again
        (then the connection holds on, and the next heal plans again) or
        the owner's clock ran past the request timeout meanwhile."""
        if self._held.get(key) is not h or h.due != self.loop.now:
            return
        src, dst = key[0], key[1]
        if self._wall_of(key[3]) >= h.msgs[0][1] + self.lifetime_ms[key[2]]:
            self._plan(key, h)  # ended: what it held is lost
            return
        if (src, dst) in self.grudge:
            h.due = -1
            return
        del self._held[key]
        for _t, _w, msg in h.msgs:
            self._hand_over(src, dst, msg)

    def _look(self, key: HeldKey, h: _Held) -> None:
        """The request timeout was due before the retransmission: the
        connection has ended with all it held, unless the owner's clock was
        set back meanwhile (then plan again)."""
        if self._held.get(key) is not h or h.due != self.loop.now:
            return
        h.due = -1
        if (key[0], key[1]) not in self.grudge or self._wall_of(key[3]) >= h.msgs[0][1] + self.lifetime_ms[key[2]]:
            self._plan(key, h)
