"""What every simulated client stands on: a network endpoint that matches
replies to requests, a metadata cache, the clients' settings, and the error
names a history records (Kafka's, as librdkafka reports them).

Each client is a network endpoint (``"c3"``), so client <-> node links can
be cut. Requests carry ``ref = (client name, request id)``; the runtime routes
a node's ``Reply`` back by it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from reference_impl.core.groups.messages import GroupErrors
from reference_impl.core.messages import Errors, MetadataRequest, MetadataResponse, TopicPartition

from .events import TimeoutQueue
from .network import TIMED_OUT, ConnectionLost, Receiver

if TYPE_CHECKING:
    from .simulation import Simulation

ERROR_NAMES = {v: k for k, v in vars(Errors).items() if isinstance(v, int) and not k.startswith("_") and k != "FENCED_EPOCH"}
GROUP_ERROR_NAMES = {v: k for k, v in vars(GroupErrors).items() if isinstance(v, int) and not k.startswith("_")}

_T = TypeVar("_T")


def _randbelow(rng: random.Random, n: int) -> int:
    """A random int in ``[0, n)``, ``n > 0``, drawn exactly as CPython's
    ``Random._randbelow_with_getrandbits`` draws it (what ``choice`` uses)."""
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return r


def choose(rng: random.Random, seq: Sequence[_T]) -> _T:
    """``rng.choice(seq)``, compiled: the same draws from the generator as
    CPython's ``Random.choice``, so the same element, without two interpreted
    calls per operation."""
    n = len(seq)
    if n == 0:
        raise IndexError("Cannot choose from an empty sequence")
    return seq[_randbelow(rng, n)]


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"ERROR_{code}")


def group_error_name(code: int) -> str:
    return GROUP_ERROR_NAMES.get(code, f"ERROR_{code}")


@dataclass
class ClientConfig:
    """The simulated clients' settings, in librdkafka's terms (ms). The
    harness sets them from the test as the real clients are set
    (``workloads.queue.QueueClient``): the delivery timeout
    (``message.timeout.ms``) one second under the op timeout, the request
    timeout at most 5 s, the final read's own deadline."""

    request_timeout_ms: int = 5000
    delivery_timeout_ms: int = 15000
    #: a producer's retries unless it is given its own
    retries: int = 1 << 30
    retry_backoff_ms: int = 100
    metadata_backoff_ms: int = 100
    fetch_max_wait_ms: int = 100
    final_read_timeout_ms: int = 30000


class Completion:
    """A completion callback a simulated client may hand its fields to
    (``done(result)``: the completion's fields, as a real client's
    ``invoke`` returns them), that also takes an ``ok`` completion of a
    value as it is (:meth:`ok`).

    The clients complete nearly every op ``ok`` with a value: a callback
    of this class (the virtual-time interpreter's) is handed the value,
    where the fields as a dict were made by the client, copied into the
    completion and gone over again for its extra fields, once an
    operation. Any other callable is called with the fields
    (:func:`complete_ok`)."""

    def __call__(self, res: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def ok(self, value: Any) -> None:
        """``self({"type": "ok", "value": value})``, what an override must equal."""
        self({"type": "ok", "value": value})

    def ok_json(self, value: Any, value_json: bytes | None) -> None:
        """:meth:`ok`, told also the value's JSON as a history line spells
        it (``orjson.dumps(value)``; None: not known), for a callback that
        records the completion: a poll's value is every record it read,
        each spelt once for the run (``consumer.poll_json``), where the
        recorder encoded them anew for every poll. An override must
        complete as :meth:`ok` does."""
        self.ok(value)


class InterpretedClient:
    """A simulated client the virtual-time interpreter
    (``harness.lifecycle.virtual``) calls natively: ``invoke(op, done)``
    returns at once and calls ``done`` when the op completes (the
    interpreter's ``VirtualClient``). Any other client is called through
    Python's protocol, where this one's call was a method looked up by name
    and its arguments parsed, once an operation."""

    def invoke(self, op: dict[str, Any], done: Callable[[dict[str, Any]], None]) -> None:  # pragma: no cover
        raise NotImplementedError


def complete_ok(done: Callable[[dict[str, Any]], None], value: Any) -> None:
    """Complete ``ok`` with ``value``: ``done({"type": "ok", "value": value})``,
    through :meth:`Completion.ok` for a :class:`Completion`."""
    if isinstance(done, Completion):
        done.ok(value)
    else:
        done({"type": "ok", "value": value})


def complete_ok_json(done: Callable[[dict[str, Any]], None], value: Any, value_json: bytes | None) -> None:
    """:func:`complete_ok`, handing a :class:`Completion` the value's JSON
    too (:meth:`Completion.ok_json`)."""
    if isinstance(done, Completion):
        done.ok_json(value, value_json)
    else:
        done({"type": "ok", "value": value})


class ReplyHandler:
    """A request's reply handler the endpoint calls natively
    (:meth:`reply`), where any other callable handed to :meth:`Endpoint.request`
    is called through Python's protocol: the clients' produce and fetch
    handlers are these, once a reply. Calling one is calling :meth:`reply`."""

    def reply(self, msg: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, msg: Any) -> None:
        self.reply(msg)


class Endpoint(Receiver):
    """A network endpoint that sends requests and matches replies by ref
    (the network's :class:`~reference_impl.sim.network.Receiver` of what
    arrives for it).

    Its connections behave as librdkafka's (``rdkafka_broker.c``): a request
    that times out takes its connection to that node down
    (``rd_kafka_broker_timeout_scan``, ``socket.max.fails`` 1), so the
    network drops what the connection held (``Network.close``) and every
    other request in flight to the node fails with ``_TIMED_OUT``
    (``rd_kafka_broker_fail``); a connection the node ended (its process
    died: its FIN arrives; or a reject cut reset it) fails them with
    ``_TRANSPORT``. A handler gets the reply, None for its own timeout, or
    a :class:`~reference_impl.sim.network.ConnectionLost`. The next request
    to the node goes on a new connection."""

    def __init__(self, sim: "Simulation", name: str) -> None:
        self.sim = sim
        self.name = name
        self._rid = 0
        #: rid -> (the reply's handler, the node the request went to), in
        #: rid order; keyed by the boxed rid (Any, not int): compiled, an
        #: int key is boxed anew for every dict it goes into (see request).
        #: One dict of pairs, where a dict of handlers beside one of nodes
        #: took an insert and a delete more per request
        self._pending: dict[Any, tuple[Callable[[Any], None], Any]] = {}
        # one queue per timeout length; see TimeoutQueue for why not loop.after
        self._timeouts: dict[int, TimeoutQueue] = {}
        self._last_q: TimeoutQueue | None = None
        self._last_timeout_ms = 0
        sim.net.attach(name, self)
        #: this endpoint's links' FIFO states (``Network.fifos``), for ``send_from``
        self._fifos = sim.net.fifos(name)
        sim.net.watch(name, self._in_flight_to, self._lost)
        #: the test's partitions, shared by the clients on this endpoint
        #: (set by their :class:`~reference_impl.sim.clients.Workload`; None:
        #: a lone client keeps the objects it was given)
        self.parts: Partitions | None = None

    def request(self, node: int, make: Callable[[Any], Any], on_reply: Callable[[Any], None], timeout_ms: int) -> None:
        """Send ``node`` the request ``make(ref)``; ``on_reply`` gets its
        reply, None when ``timeout_ms`` passes first, or a lost connection."""
        ref = self.new_ref()
        self.send_request(node, ref, make(ref), on_reply, timeout_ms)

    def new_ref(self) -> tuple[str, Any]:
        """The ref of the next request, for its message: the caller sends
        that message at once (:meth:`send_request`). The clients' produce
        and fetch requests are made so, where a factory object handed to
        :meth:`request` was made and called for every message."""
        self._rid += 1
        # boxed once for the two dicts and the ref (a request id soon passes
        # the small ints CPython keeps, so each boxing is an allocation)
        key: Any = self._rid
        return (self.name, key)

    def send_request(self, node: int, ref: tuple[str, Any], msg: Any, on_reply: Callable[[Any], None],
                     timeout_ms: int) -> None:
        """Send ``node`` the request ``msg`` of ref ``ref`` (:meth:`new_ref`
        just gave it; see :meth:`request`)."""
        key: Any = ref[1]
        rid: int = key
        self._pending[key] = (on_reply, node)
        self.sim.net.send_from(self._fifos, self.name, node, msg)
        q = self._last_q
        if q is None or timeout_ms != self._last_timeout_ms:
            # nearly every request has the client's one timeout: the last
            # queue is kept, not looked up by its delay every time
            q = self._timeouts.get(timeout_ms)
            if q is None:
                q = self._timeouts[timeout_ms] = TimeoutQueue(self.sim.loop, timeout_ms, self._timeout, self._pending)
            self._last_q = q
            self._last_timeout_ms = timeout_ms
        q.add(rid)

    def _timeout(self, rid: int) -> None:
        """Request ``rid`` timed out: its connection is closed first (a
        request its handler sends goes on a new one), then it and every
        other request in flight to that node fail."""
        node = self._pending[rid][1]
        self.sim.net.close(self.name, node)
        others = [r for r, e in self._pending.items() if e[1] == node and r != rid]
        self._answer(rid, None)
        for r in others:
            self._answer(r, ConnectionLost(TIMED_OUT))

    def _in_flight_to(self, node: Any) -> bool:
        return any(e[1] == node for e in self._pending.values())

    def _lost(self, node: Any, error: str) -> None:
        """The connection to ``node`` ended: its requests fail with ``error``."""
        lost = ConnectionLost(error)
        for r in [r for r, e in self._pending.items() if e[1] == node]:
            self._answer(r, lost)

    def receive(self, src: Any, msg: Any) -> None:
        ref = getattr(msg, "ref", None)
        if not isinstance(ref, tuple) or len(ref) != 2:
            if isinstance(msg, ConnectionLost):  # the node's FIN
                self._lost(src, msg.error)
            return
        self._answer(ref[1], msg)

    def _answer(self, rid: Any, msg: Any) -> None:
        """The reply (None: the timeout) to request ``rid``, if still awaited.
        A lookup and a delete: compiled, ``dict.pop(k, None)`` is a method
        call by name."""
        pending = self._pending
        entry = pending.get(rid)
        if entry is not None:
            del pending[rid]
            h = entry[0]
            if isinstance(h, ReplyHandler):
                h.reply(msg)
            else:
                h(msg)

    def cancel_all(self) -> None:
        """The client process is gone (a crash, the run's end): its requests
        are forgotten and its connections closed, so what a cut held of them
        is never delivered; a fresh process takes the same endpoint."""
        self._pending.clear()
        self.sim.net.endpoint_down(self.name)


class Partitions:
    """The test's partitions as its clients name them: one object per
    partition, the brokers' own once a metadata reply has shown it.

    The clients' ``TopicPartition`` s were made by the harness, the
    brokers' by the controller (``PartitionRecord``, seed 000's metadata
    log), so each dict keyed by one and looked up by the other (the
    broker's partitions by a request's, a consumer's positions by a fetch
    response's, the metadata cache's leaders by a send's) found the key by
    hash and then called ``__eq__``: ~22,000 compiled-to-interpreted
    comparisons in a 10 s seed. The same object on both sides is found by
    identity. Equal objects, so nothing a client sends or records changes."""

    def __init__(self, tps: list[TopicPartition]) -> None:
        #: ``topic-N`` -> the partition (the workload's keys)
        self.by_key: dict[str, TopicPartition] = {str(tp): tp for tp in tps}
        #: bumped whenever an object is replaced: a consumer holding
        #: partitions takes the new ones on its next poll
        self.version = 0

    def adopt(self, tp: TopicPartition) -> None:
        """Take ``tp`` (a metadata reply's) in place of the equal partition
        held, if another object."""
        key = str(tp)
        cur = self.by_key.get(key)
        if cur is not None and cur is not tp and cur == tp:
            self.by_key[key] = tp
            self.version += 1

    def canon(self, tp: TopicPartition) -> TopicPartition:
        """The object held for ``tp``'s partition (``tp`` if none)."""
        cur = self.by_key.get(str(tp))
        return tp if cur is None else cur


class MetadataCache:
    """Leader per partition, refreshed from any reachable broker."""

    def __init__(self, ep: Endpoint, topics: tuple[str, ...], cfg: ClientConfig) -> None:
        self.ep = ep
        self.topics = topics
        self.cfg = cfg
        self.leaders: dict[TopicPartition, tuple[int, int]] = {}
        self._inflight = False
        self._waiters: list[Callable[[], None]] = []

    def leader(self, tp: TopicPartition) -> int:
        cur = self.leaders.get(tp)
        return -1 if cur is None else cur[0]

    def invalidate(self, tp: TopicPartition) -> None:
        self.leaders.pop(tp, None)

    def refresh(self, then: Callable[[], None]) -> None:
        self._waiters.append(then)
        if self._inflight:
            return
        self._inflight = True
        sim = self.ep.sim
        broker = sim.rng.choice(sim.broker_ids)
        self.ep.request(broker, lambda ref: MetadataRequest(ref, self.topics), self._on_reply, self.cfg.request_timeout_ms)

    def _on_reply(self, msg: Any) -> None:
        if isinstance(msg, MetadataResponse):
            parts = self.ep.parts
            for t in msg.topics:
                for p in t.partitions:
                    if parts is not None:
                        parts.adopt(p.tp)
                    if p.leader >= 0 and p.error == Errors.NONE:
                        self.leaders[p.tp] = (p.leader, p.leader_epoch)
                    else:
                        self.leaders.pop(p.tp, None)
            delay = 0
        else:
            delay = self.cfg.metadata_backoff_ms
        waiters, self._waiters = self._waiters, []
        self._inflight = False
        for w in waiters:
            self.ep.sim.loop.after(delay, w)
