"""The simulated clients of a test: one per worker thread, as the harness's
interpreter asks for them (``harness.lifecycle.virtual``), doing what the
real queue workload's client does (``workloads.queue.QueueClient``) against
the simulated cluster; and the admin client the set-up and the nemesis use.

A :class:`SimClient` is one process of a thread: a librdkafka-like producer
(:mod:`reference_impl.sim.producer`) and a consumer that assigns
(:mod:`reference_impl.sim.consumer`) or joins the test's group
(:mod:`reference_impl.sim.groups`), over the thread's network endpoint
(``"c3"``: client <-> node links can be cut). It takes the queue workload's
operations (``send``, ``poll``, ``subscribe``, ``assign``, the final
``poll`` of one key, ``crash`` marks from ``workloads.crash``) and answers
each, at a virtual time, with the fields a real client's ``invoke``
returns: Jepsen's ok / fail / info, by the outcome rules both runtimes
share (``workloads.outcome``). It records nothing: the interpreter records
invocations and completions, as on real processes. When the thread's
process changes (after an ``info``) the thread's client starts afresh, as
the real interpreter opens a new client: no producer id, no metadata,
positions from 0, a new group member.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from reference_impl.core.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    Errors,
    NewTopic,
    ReassignPartition,
    TopicPartition,
    UnregisterBrokerRequest,
)

from checkers.history.recorder import Clock, Recorder

from .consumer import Consumer, RecordPairs
from .endpoint import (
    ClientConfig,
    Endpoint,
    InterpretedClient,
    MetadataCache,
    Partitions,
    choose,
    complete_ok,
    error_name,
    group_error_name,
)
from .events import EventLoop
from .groups import GroupMember
from .host import DOWN
from .producer import Producer, SendCompletion

if TYPE_CHECKING:
    from .simulation import Simulation

__all__ = ["Admin", "ClientConfig", "ClientSettings", "Endpoint", "MetadataCache", "Partitions", "SimClient",
           "VirtualClock", "Workload", "choose", "error_name", "group_error_name", "sim_history"]

#: ``done(result)``: a completion's fields (type, value, error, extras)
Done = Callable[[dict[str, Any]], None]


class VirtualClock(Clock):
    """The event loop's virtual time in nanoseconds: the history's clock."""

    def __init__(self, loop: EventLoop) -> None:
        self.loop = loop

    def now_ns(self) -> int:
        return self.loop.now * 1_000_000


def sim_history(sim: "Simulation", path: str | Path | None = None) -> Recorder:
    """The history recorder (``checkers.history.recorder``, the one both
    runtimes use) on the simulation's clock: virtual nanoseconds from 0,
    one thread, every operation kept for the checkers; with ``path`` the
    lines also go to that file."""
    return Recorder(path, keep=True, clock=VirtualClock(sim.loop), epoch=0, background=False)


class ClientSettings:
    """What one thread's client is (the test decides it per thread, as for
    real clients): its producer's acks, idempotence and retries, and the
    group its consumer joins (None: it assigns), static or not."""

    def __init__(self, acks: str = "all", idempotent: bool = False, retries: int | None = None,
                 group_id: str | None = None, instance_id: str | None = None) -> None:
        self.acks = acks
        self.idempotent = idempotent
        self.retries = retries
        self.group_id = group_id
        self.instance_id = instance_id


class Workload:
    """The test's client plumbing: the partitions, the clients' settings,
    and each worker thread's client (:meth:`client`), kept for the run so
    its endpoint outlives its processes."""

    def __init__(self, sim: "Simulation", tps: list[TopicPartition], cfg: ClientConfig | None = None,
                 threads: int = 0) -> None:
        self.sim = sim
        self.tps = tps
        self.topics = tuple(sorted({tp.topic for tp in tps}))
        self.cfg = cfg or ClientConfig()
        #: the partitions the clients name, the brokers' objects once known
        self.parts = Partitions(tps)
        #: ``topic-N`` -> partition (the shared :attr:`Partitions.by_key`)
        self.by_key: dict[str, TopicPartition] = self.parts.by_key
        #: the records read, as pairs every client's consumer shares
        self.pairs = RecordPairs()
        self.clients: dict[int, SimClient] = {}
        #: each worker thread's network endpoint (``c<thread>``), there from
        #: the start, so a cut of the clients covers a client not opened yet
        self.endpoints: dict[int, Endpoint] = {}
        for t in range(threads):
            self.endpoint(t)

    def endpoint(self, thread: int) -> Endpoint:
        ep = self.endpoints.get(thread)
        if ep is None:
            ep = self.endpoints[thread] = Endpoint(self.sim, f"c{thread}")
            ep.parts = self.parts
        return ep

    def client(self, thread: int, process: int, settings: ClientSettings) -> "SimClient":
        """Thread ``thread``'s client as process ``process``: the thread's
        first, or its client started afresh for a new process."""
        c = self.clients.get(thread)
        if c is None:
            c = self.clients[thread] = SimClient(self, self.endpoint(thread), process, settings)
        elif c.process != process:
            c.reopen(process)
        return c

    def endpoint_names(self) -> list[str]:
        """Every client endpoint (the contract's pseudo-node ``client``)."""
        return [ep.name for ep in self.endpoints.values()]

    def stop(self) -> None:
        """The run is over: no client keeps its group conversation going."""
        for c in self.clients.values():
            c.kill()


class _Sent(SendCompletion):
    """A send's completion from its producer's outcome: ``ok`` with the
    offset beside the value, else the type and error (a native callable,
    where a closure was an object and its environment). A client keeps one
    for the sends it hands its producer one at a time (SimClient._send)."""

    def __init__(self, done: Done, key: Any, value: Any) -> None:
        self.done = done
        self.key = key
        self.value = value

    def sent(self, type_: str, offset: Any, error: Any) -> None:
        if type_ == "ok":
            complete_ok(self.done, [["send", self.key, [offset, self.value]]])
        else:
            self.done({"type": type_, "error": error})


def _never(res: dict[str, Any]) -> None:
    """The completion of no send (a client's before its first)."""
    raise AssertionError(f"no send in flight to complete with {res!r}")


def _crash_ms(op: dict[str, Any]) -> int:
    """``int(op.get("crash", -1))``: ms into the op its client dies
    (``--crash-clients``), -1: never (compiled, ``int()`` of every op's
    default was a generic call)."""
    c = op.get("crash", -1)
    return c if type(c) is int else int(c)


class SimClient(InterpretedClient):
    """One process of a worker thread: the queue workload's client."""

    def __init__(self, wl: Workload, ep: Endpoint, process: int, settings: ClientSettings) -> None:
        self.wl = wl
        self.sim = wl.sim
        self.process = process
        self.settings = settings
        self.ep = ep
        s = settings
        self.producer = Producer(wl.sim, self.ep, wl.topics, wl.cfg, s.acks, s.idempotent, s.retries)
        self.producer.on_crash = self.kill
        self.consumer: Consumer = self._consumer()
        self.consumer.start()
        #: the completion of the send the producer has in flight, set anew
        #: for each send (see _send)
        self._sent = _Sent(_never, None, None)

    def _consumer(self) -> Consumer:
        wl, s = self.wl, self.settings
        c: Consumer
        if s.group_id is not None:
            c = GroupMember(wl.sim, self.ep, wl.tps, wl.topics, wl.cfg, s.group_id, s.instance_id, wl.pairs)
        else:
            c = Consumer(wl.sim, self.ep, wl.tps, wl.topics, wl.cfg, wl.pairs)
        c.on_crash = self.kill
        return c

    def kill(self) -> None:
        """The process dies: what it awaits is never heard, what it was
        doing is forgotten (a group member's place is left to its session)."""
        self.ep.cancel_all()
        self.producer.reset()
        self.consumer.reset()

    def reopen(self, process: int) -> None:
        """A new process on this thread: a fresh client, as the real
        interpreter opens one."""
        self.kill()
        self.process = process
        self.producer = Producer(self.sim, self.ep, self.wl.topics, self.wl.cfg, self.settings.acks,
                                 self.settings.idempotent, self.settings.retries)
        self.producer.on_crash = self.kill
        self.consumer = self._consumer()
        self.consumer.start()

    def invoke(self, op: dict[str, Any], done: Done) -> None:
        f: str = op["f"]  # typed: the comparisons below are native
        if f == "send":
            self._send(op, done)
        elif f == "poll" and op.get("final"):
            self.consumer.final_read(self.wl.by_key[op["key"]], int(op.get("upto", -1)), done)
        elif f == "poll":
            self.consumer.poll(done, _crash_ms(op))
        elif f in ("assign", "subscribe"):
            (self._assign if f == "assign" else self._subscribe)(op, done if "crash" not in op else self._crashes(done))
        else:
            done({"type": "fail", "error": f"unknown f {f!r}"})

    def _crashes(self, done: Done) -> Done:
        """An op that answers at once but is marked to crash: its process
        dies before it learns the answer (``info``)."""
        def crashed(_res: dict[str, Any]) -> None:
            self.kill()
            done({"type": "info", "error": "crashed"})
        return crashed

    def _send(self, op: dict[str, Any], done: Done) -> None:
        mops = op["value"]
        if type(mops) is not list or len(mops) != 1 or type(mops[0]) is not list or len(mops[0]) != 3:
            if len(mops) != 1 or len(mops[0]) != 3:  # one micro-op, [f, key, value]
                raise ValueError(f"a send is one [send, key, value], not {mops!r}")
            mops = [list(mops[0])]
        # typed lists: compiled, an untyped value was indexed by the generic protocol
        ms: list[list[Any]] = mops
        mop = ms[0]  # indexed: unpacking went through the iterator protocol
        key = mop[1]
        value = mop[2]
        tp = self.wl.by_key[key]
        producer = self.producer
        if producer.busy:  # refused (the interpreter never asks so): the send in flight keeps its completion
            producer.send(tp, value, _Sent(done, key, value), _crash_ms(op))
            return
        # The producer takes one send at a time, calling its completion once
        # and never after it ended or was forgotten (Producer._complete,
        # reset), so the client's one completion object is set anew for
        # each send, where one was made and freed per send. _Sent.sent reads
        # its fields before it completes the op (whose completion may hand
        # this client its next send at once).
        sent = self._sent
        sent.done = done
        sent.key = key
        sent.value = value
        producer.send(tp, value, sent, _crash_ms(op))

    def _assign(self, op: dict[str, Any], done: Done) -> None:
        """Assign exactly the op's keys, each from offset 0; a group member
        leaves its group as a dead process's does (no LeaveGroup: the real
        client drops its group consumer here, never closes it, see
        workloads/queue.py ``_close_consumer``) and the process goes on
        assigning."""
        keys = [str(k) for k in op.get("value") or []]
        if isinstance(self.consumer, GroupMember):
            self.consumer.leave()
            self.consumer = Consumer(self.sim, self.ep, self.wl.tps, self.wl.topics, self.wl.cfg, self.wl.pairs)
            self.consumer.on_crash = self.kill
        self.consumer.assign([self.wl.by_key[k] for k in keys])
        done({"type": "ok", "value": keys})

    def _subscribe(self, op: dict[str, Any], done: Done) -> None:
        """Subscribe again to the same topics: the group goes on as it was."""
        if not isinstance(self.consumer, GroupMember):
            done({"type": "fail", "error": "subscribe needs --sub-via subscribe"})
            return
        done({"type": "ok", "value": [str(k) for k in op.get("value") or self.wl.by_key]})


class Admin:
    """CreateTopics through any broker, retried until every partition has a
    leader; AlterPartitionReassignments for the reassign fault."""

    def __init__(self, sim: "Simulation", name: str = "admin") -> None:
        self.sim = sim
        self.ep = Endpoint(sim, name)
        self.created = False
        self.result: Any = None
        #: reassignments answered: partition -> error code (0: accepted)
        self.reassigned: dict[TopicPartition, int] = {}
        #: unregistrations answered: broker -> error code (0: done)
        self.unregistered: dict[int, int] = {}

    def create_topics(self, topics: tuple[NewTopic, ...], timeout_ms: int = 5000) -> None:
        broker = self.sim.rng.choice(self.sim.broker_ids)
        self.ep.request(broker, lambda ref: CreateTopicsRequest(ref, topics, timeout_ms=timeout_ms),
                        lambda msg: self._on_created(topics, msg), timeout_ms + 1000)

    def _on_created(self, topics: tuple[NewTopic, ...], msg: Any) -> None:
        if isinstance(msg, CreateTopicsResponse) and all(
                r.error in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS) for r in msg.results):
            self.created = True
            self.result = msg
            return
        self.sim.loop.after(200, self.create_topics, topics)

    def reassign(self, tp: TopicPartition, replicas: tuple[int, ...], attempt: int = 0,
                 timeout_ms: int = 5000) -> None:
        """AlterPartitionReassignments (KIP-455) through a broker, the next
        one on each attempt (a broker cut from every controller times out),
        until the controller has answered for the partition, at most five
        times. A broker whose process is down refuses the connection at once
        (its host answers the SYN with a reset), so the next one is asked
        without waiting out the request timeout, as ``harness.dbs.admin``
        meets ECONNREFUSED on real hosts: waiting there held a move 12 s
        that Kafka made at once, and a replay of the model's schedule on
        Kafka met other replicas at every later move. The outcome is kept
        in :attr:`reassigned` (tp -> error code)."""
        brokers = self.sim.broker_ids
        broker = brokers[(tp.partition + attempt) % len(brokers)]
        if self.sim.hosts[broker].state == DOWN:  # paused: its kernel still takes the connection
            if attempt < 4:
                self.reassign(tp, replicas, attempt + 1, timeout_ms)
            else:
                self.reassigned[tp] = Errors.REQUEST_TIMED_OUT
            return
        req = (ReassignPartition(tp, replicas),)
        self.ep.request(broker, lambda ref: AlterPartitionReassignmentsRequest(ref, req, timeout_ms=timeout_ms),
                        lambda msg: self._on_reassigned(tp, replicas, attempt, msg), timeout_ms + 1000)

    def _on_reassigned(self, tp: TopicPartition, replicas: tuple[int, ...], attempt: int, msg: Any) -> None:
        err = msg.results[0].error if isinstance(msg, AlterPartitionReassignmentsResponse) and msg.results else None
        if err in (None, Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT) and attempt < 4:
            self.sim.loop.after(200, self.reassign, tp, replicas, attempt + 1)
            return
        self.reassigned[tp] = Errors.REQUEST_TIMED_OUT if err is None else err

    def unregister(self, broker_id: int, attempt: int = 0, timeout_ms: int = 5000) -> None:
        """UnregisterBroker (KIP-631) through a broker other than the one
        leaving, the next one on each attempt, at most five times; the
        outcome is kept in :attr:`unregistered` (broker -> error code)."""
        others = [b for b in self.sim.broker_ids if b != broker_id] or list(self.sim.broker_ids)
        via = others[attempt % len(others)]
        self.ep.request(via, lambda ref: UnregisterBrokerRequest(ref, broker_id, timeout_ms=timeout_ms),
                        lambda msg: self._on_unregistered(broker_id, attempt, msg), timeout_ms + 1000)

    def _on_unregistered(self, broker_id: int, attempt: int, msg: Any) -> None:
        err = getattr(msg, "error", None)
        if err in (None, Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT) and attempt < 4:
            self.sim.loop.after(200, self.unregister, broker_id, attempt + 1)
            return
        self.unregistered[broker_id] = Errors.REQUEST_TIMED_OUT if err is None else err
