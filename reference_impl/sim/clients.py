"""Simulated Kafka clients that behave like librdkafka, recording a history.

Each client is a network endpoint (``"c3"``), so client <-> node links can be
cut. Requests carry ``ref = (client name, request id)``; the runtime routes a
node's ``Reply`` back by it.

Producers (one operation in flight per process, as in Jepsen) retry the way
librdkafka does and end each send ok / fail / info by the one rule both
runtimes' clients follow, :mod:`workloads.outcome` (what to do after an error:
``producer_action``; whether the attempt may have reached the log:
``possibly_persisted``; the outcome: ``send_outcome``). Leader errors refresh
metadata and retry without spending a retry; NOT_ENOUGH_REPLICAS,
REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND and no answer spend one;
the delivery timeout ends the send as ``info``.

A process whose operation ended ``info`` never issues another: the client
continues under a fresh process id (Jepsen's convention).

Consumers ``assign`` every partition and ``poll`` from their position; a broker
only serves offsets below the HW. Final readers read each key from the
beginning until the highest acknowledged offset is covered or a deadline
passes; their operations carry ``"final": true``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial
from math import log as _log
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Final, Sequence, TypeVar

from reference_impl.core.groups.messages import (
    CommittedOffset,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupErrors,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from reference_impl.core.messages import (
    ClientFetchRequest,
    ClientFetchResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ReassignPartition,
    UnregisterBrokerRequest,
    Errors,
    FetchPartitionRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    NewTopic,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)

from checkers.history.recorder import Clock, Recorder
from workloads.outcome import REFRESH, RETRY, possibly_persisted, producer_action, send_outcome

from .events import EventLoop, TimeoutQueue
from .network import TIMED_OUT, ConnectionLost

if TYPE_CHECKING:
    from .simulation import Simulation

FINAL_READER_BASE: Final = 1_000_000
#: the final phase's probe writers (the availability checker's acks=all
#: writes after the heal) take process ids from here, outside the worker
#: slots, :data:`PROBE_WRITER_SPACING` apart (a writer's id moves on by the
#: worker stride after each ``info``)
PROBE_WRITER_BASE: Final = 2_000_000
PROBE_WRITER_SPACING: Final = 100_000
#: a crashed client dies within this many ms of its operation's start
#: (workloads/crash.py's MAX_CRASH_MS, which real runs use)
MAX_CRASH_MS: Final = 100

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
    request_timeout_ms: int = 5000
    delivery_timeout_ms: int = 15000
    retries: int = 1 << 30
    retry_backoff_ms: int = 100
    metadata_backoff_ms: int = 100
    fetch_max_wait_ms: int = 100
    poll_interval_ms: int = 200


class Endpoint:
    """A network endpoint that sends requests and matches replies by ref.

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
        self._pending: dict[int, Callable[[Any], None]] = {}
        #: rid -> the node the request went to (dict order is rid order)
        self._dst: dict[int, Any] = {}
        # one queue per timeout length; see TimeoutQueue for why not loop.after
        self._timeouts: dict[int, TimeoutQueue] = {}
        sim.net.attach(name, self._receive)
        sim.net.watch(name, self._in_flight_to, self._lost)

    def request(self, node: int, make: Callable[[Any], Any], on_reply: Callable[[Any], None], timeout_ms: int) -> None:
        self._rid += 1
        rid = self._rid
        self._pending[rid] = on_reply
        self._dst[rid] = node
        self.sim.net.send(self.name, node, make((self.name, rid)))
        q = self._timeouts.get(timeout_ms)
        if q is None:
            q = self._timeouts[timeout_ms] = TimeoutQueue(self.sim.loop, timeout_ms, self._timeout, self._pending)
        q.add(rid)

    def _timeout(self, rid: int) -> None:
        """Request ``rid`` timed out: its connection is closed first (a
        request its handler sends goes on a new one), then it and every
        other request in flight to that node fail."""
        node = self._dst[rid]
        self.sim.net.close(self.name, node)
        others = [r for r, n in self._dst.items() if n == node and r != rid]
        self._answer(rid, None)
        for r in others:
            self._answer(r, ConnectionLost(TIMED_OUT))

    def _in_flight_to(self, node: Any) -> bool:
        return node in self._dst.values()

    def _lost(self, node: Any, error: str) -> None:
        """The connection to ``node`` ended: its requests fail with ``error``."""
        lost = ConnectionLost(error)
        for r in [r for r, n in self._dst.items() if n == node]:
            self._answer(r, lost)

    def _receive(self, src: Any, msg: Any) -> None:
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
        cb = pending.get(rid)
        if cb is not None:
            del pending[rid]
            del self._dst[rid]
            cb(msg)

    def cancel_all(self) -> None:
        """The client process is gone (a crash, the run's end): its requests
        are forgotten and its connections closed, so what a cut held of them
        is never delivered; a fresh process takes the same endpoint."""
        self._pending.clear()
        self._dst.clear()
        self.sim.net.endpoint_down(self.name)


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
            for t in msg.topics:
                for p in t.partitions:
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


class Workload:
    """Owns the history, the value counter and every client process."""

    def __init__(self, sim: "Simulation", history: Recorder, tps: list[TopicPartition], cfg: ClientConfig | None = None) -> None:
        self.sim = sim
        self.history = history
        self.tps = tps
        self.topics = tuple(sorted({tp.topic for tp in tps}))
        self.cfg = cfg or ClientConfig()
        self.next_value = 0
        self.producers: list[Producer] = []
        self.consumers: list[Consumer] = []
        self.final_readers: list[Consumer] = []
        self.probe_writers: list[Producer] = []
        self.n_processes = 0
        self.max_acked: dict[str, int] = {}
        self.stopped = False
        #: --crash-clients: one operation is marked to crash every this many
        #: ms (0: never), the first one due at or after :attr:`next_crash_at`
        self.crash_period_ms = 0
        self.next_crash_at = 0
        self.by_key: dict[str, TopicPartition] = {str(tp): tp for tp in tps}

    def crash_mark(self) -> int:
        """For an operation being invoked: how many ms into it its client
        dies (-1: it does not), Jepsen's --crash-clients as
        ``workloads.crash`` paces it (one mark per period, the first
        operation due after each; the ms drawn from the seeded rng). Draws
        nothing while crashes are off, so their histories are unchanged."""
        if self.crash_period_ms <= 0 or self.sim.now < self.next_crash_at:
            return -1
        self.next_crash_at += self.crash_period_ms
        return self.sim.rng.randint(0, MAX_CRASH_MS)

    def value(self) -> int:
        v = self.next_value
        self.next_value += 1
        return v

    def add_producer(self, acks: str, idempotent: bool = False) -> "Producer":
        p = Producer(self, f"c{self.n_processes}", self.n_processes, acks, idempotent)
        self.n_processes += 1
        self.producers.append(p)
        return p

    def add_consumer(self) -> "Consumer":
        c = Consumer(self, f"c{self.n_processes}", self.n_processes)
        self.n_processes += 1
        self.consumers.append(c)
        return c

    def add_group_member(self, group_id: str, static: bool = False) -> "GroupMember":
        """A consumer of ``group_id`` that subscribes to every topic (Jepsen's
        sub-via subscribe); with ``static`` its slot's group.instance.id."""
        name = f"c{self.n_processes}"
        c = GroupMember(self, name, self.n_processes, group_id, name if static else None)
        self.n_processes += 1
        self.consumers.append(c)
        return c

    def add_final_reader(self) -> "Consumer":
        """Final readers live outside the worker slots (ids from 1,000,000) so
        that the process-id stride of the workers never changes."""
        i = len(self.final_readers)
        c = Consumer(self, f"final{i}", FINAL_READER_BASE + i)
        self.final_readers.append(c)
        return c

    def add_probe_writer(self, idempotent: bool = False) -> "Producer":
        """An acks=all producer for the final phase's probe writes, outside
        the worker slots (ids from :data:`PROBE_WRITER_BASE`), idempotent as
        the run's acks=all producers are: its sends say ``probe: true``."""
        i = len(self.probe_writers)
        p = Producer(self, f"probe{i}", PROBE_WRITER_BASE + i * PROBE_WRITER_SPACING, "all", idempotent)
        p.probe = True
        self.probe_writers.append(p)
        return p

    def n_processes_stride(self) -> int:
        """Process ids advance by the number of client slots after an ``info``."""
        return max(1, self.n_processes)

    def record(self, process: Any, type_: str, f: str, value: Any, error: Any = None, **extra: Any) -> None:
        self.history.append(process, type_, f, value, error, extra)

    def finish(self) -> None:
        """End of the run: every operation still in flight is indeterminate."""
        self.stopped = True
        for p in self.producers + self.probe_writers:
            p.abandon()
        for c in self.consumers + self.final_readers:
            c.abandon()


class Arrivals:
    """The workload's open-loop arrivals: a Poisson process at ``rate``
    operations per simulated second, each handed to a producer chosen at
    random among the idle ones (none idle: the arrival is counted in
    :attr:`skipped`). Compiled with the clients: one arrival per operation,
    and picking among the idle producers walks them all."""

    def __init__(self, sim: "Simulation", producers: list["Producer"], rate: float) -> None:
        self.sim = sim
        self.producers = producers
        self.rate = rate
        self.running = False
        self.skipped = 0
        # a float clock keeps the long-run rate exact although events land
        # on whole milliseconds
        self._t = 0.0

    def start(self) -> None:
        self.running = True
        if self.rate > 0:
            self._next()

    def stop(self) -> None:
        self.running = False

    def _next(self) -> None:
        sim = self.sim
        if self._t < sim.loop.now:
            self._t = float(sim.loop.now)
        # random.expovariate, inlined (it is interpreted): the same draw
        self._t += -_log(1.0 - sim.rng.random()) / self.rate * 1000.0
        sim.loop.at(int(self._t), self._arrive)

    def _arrive(self) -> None:
        if not self.running:
            return
        # choose(rng, [idle producers]) without building the list (32 appends
        # per operation): count them, draw the index as choose does, then
        # walk to that idle producer
        producers = self.producers
        n = 0
        for p in producers:
            if not p.busy:
                n += 1
        if n:
            r = _randbelow(self.sim.rng, n)
            for p in producers:
                if not p.busy:
                    if r == 0:
                        p.send()
                        break
                    r -= 1
        else:
            self.skipped += 1
        self._next()


class _Send:
    """The send a producer has in flight (one at a time, as Jepsen's
    processes): what it sends, until when, what went wrong so far. A class,
    not a dict: every attempt and reply reads it several times."""

    def __init__(self, tp: TopicPartition, value: Any, deadline: int, done: Callable[[str, Any], None] | None,
                 gen: int) -> None:
        self.tp = tp
        self.value = value
        self.deadline = deadline
        self.ambiguous = False
        self.retries = 0
        self.last_error: Any = None
        self.done = done
        self.gen = gen
        #: ms into the send its client dies (--crash-clients), -1: never
        self.crash = -1


class Producer:
    def __init__(self, wl: Workload, name: str, process: int, acks: str, idempotent: bool = False) -> None:
        self.wl = wl
        self.sim = wl.sim
        self.ep = Endpoint(wl.sim, name)
        self.meta = MetadataCache(self.ep, wl.topics, wl.cfg)
        self.process = process
        self.acks = acks
        #: librdkafka's enable.idempotence: a producer id from InitProducerId
        #: and one sequence number per partition, reused by every retry of a
        #: batch, so the partition leader drops a retried append (seed 000,
        #: producer state); only with acks=all
        self.idempotent = bool(idempotent) and acks == "all"
        self.pid = -1
        self.pepoch = -1
        self.seqs: dict[TopicPartition, int] = {}
        self.busy = False
        self._op: _Send | None = None
        self._gen = 0
        #: a probe writer's (``Workload.add_probe_writer``): its sends say ``probe: true``
        self.probe = False

    @property
    def name(self) -> str:
        return self.ep.name

    def send(self, tp: TopicPartition | None = None, value: int | None = None,
             done: Callable[[str, Any], None] | None = None) -> bool:
        """Invoke one send; returns False if a send is already in flight."""
        if self.busy or self.wl.stopped:
            return False
        if tp is None:
            tp = choose(self.sim.rng, self.wl.tps)
        if value is None:
            value = self.wl.value()
        key = str(tp)
        self.busy = True
        self._gen += 1
        cfg = self.wl.cfg
        self._op = op = _Send(tp, value, self.sim.now + cfg.delivery_timeout_ms, done, self._gen)
        op.crash = self.wl.crash_mark()
        if op.crash >= 0:
            self.wl.record(self.process, "invoke", "send", [["send", key, value]], acks=self.acks,
                           idempotent=self.idempotent, crash=op.crash)
            self.sim.loop.after(op.crash, self._crash, self._gen)
        elif self.probe:
            self.wl.record(self.process, "invoke", "send", [["send", key, value]], acks=self.acks,
                           idempotent=self.idempotent, probe=True)
        else:
            self.wl.record(self.process, "invoke", "send", [["send", key, value]], acks=self.acks,
                           idempotent=self.idempotent)
        self._attempt(self._gen)
        return True

    def _crash(self, gen: int) -> None:
        """The client dies mid-send: nobody learns the outcome (``info``)."""
        op = self._op
        if op is not None and op.gen == gen:
            self._complete("info", None, "crashed")

    def _replace(self) -> None:
        """A fresh client takes the dead one's place: unanswered requests
        are dropped (those on the wire still arrive), no producer id, no
        sequence numbers, no metadata."""
        self.ep.cancel_all()
        self.pid, self.pepoch, self.seqs = -1, -1, {}
        self.meta = MetadataCache(self.ep, self.wl.topics, self.wl.cfg)

    def _attempt(self, gen: int) -> None:
        op = self._op
        if op is None or op.gen != gen:
            return
        if self.sim.now >= op.deadline:
            self._complete(send_outcome("delivery-timeout", self.acks, op.ambiguous), None,
                           op.last_error or "delivery-timeout")
            return
        tp = op.tp
        leader = self.meta.leader(tp)
        if leader < 0:
            self.meta.refresh(lambda: self._after_refresh(gen))
            return
        if self.idempotent and self.pid < 0:
            self.ep.request(leader, lambda ref: InitProducerIdRequest(ref),
                            lambda msg: self._on_init(gen, msg), self.wl.cfg.request_timeout_ms + 100)
            return
        acks = -1 if self.acks == "all" else int(self.acks)
        cfg = self.wl.cfg
        pid, pepoch, seq = (self.pid, self.pepoch, self.seqs.get(tp, 0)) if self.idempotent else (-1, -1, -1)
        self.ep.request(
            leader,
            lambda ref: ProduceRequest(ref, tp, acks, 1, (op.value,), timeout_ms=cfg.request_timeout_ms,
                                       producer_id=pid, producer_epoch=pepoch, base_sequence=seq),
            lambda msg: self._on_reply(gen, msg),
            cfg.request_timeout_ms + 100,
        )

    def _on_init(self, gen: int, msg: Any) -> None:
        op = self._op
        if op is None or op.gen != gen:
            return
        if isinstance(msg, InitProducerIdResponse) and msg.error == Errors.NONE:
            self.pid, self.pepoch = msg.producer_id, msg.producer_epoch
            self.seqs = {}
            self._attempt(gen)
            return
        op.last_error = (error_name(msg.error) if isinstance(msg, InitProducerIdResponse)
                         else msg.error if isinstance(msg, ConnectionLost) else "init-timeout")
        self.meta.invalidate(op.tp)
        self.sim.loop.after(self.wl.cfg.retry_backoff_ms, self._attempt, gen)

    def _after_refresh(self, gen: int) -> None:
        op = self._op
        if op is None or op.gen != gen:
            return
        if self.meta.leader(op.tp) < 0:
            op.last_error = op.last_error or "LEADER_NOT_AVAILABLE"
            self.sim.loop.after(self.wl.cfg.metadata_backoff_ms, self._attempt, gen)
        else:
            self._attempt(gen)

    def _on_reply(self, gen: int, msg: Any) -> None:
        op = self._op
        if op is None or op.gen != gen:
            return
        if not isinstance(msg, ProduceResponse):
            self.meta.invalidate(op.tp)
            self._attempt_failed(gen, op, msg.error if isinstance(msg, ConnectionLost) else "request-timeout")
            return
        err = msg.error
        if err == Errors.NONE:
            self._complete(send_outcome(None, self.acks, op.ambiguous), msg.base_offset, None)
            return
        self._attempt_failed(gen, op, error_name(err))

    def _attempt_failed(self, gen: int, op: _Send, error: str) -> None:
        """One attempt ended with ``error``: note whether it may have
        appended the record, then refresh and retry, retry, or end the send
        (``workloads.outcome``)."""
        op.last_error = error
        if possibly_persisted(error, self.acks):
            op.ambiguous = True
        action = producer_action(error)
        if action == REFRESH:
            self.meta.invalidate(op.tp)
            self.sim.loop.after(self.wl.cfg.retry_backoff_ms, self._attempt, gen)
        elif action == RETRY:
            op.retries += 1
            if op.retries > self.wl.cfg.retries:
                self._complete(send_outcome(error, self.acks, op.ambiguous), None, error)
            else:
                self.sim.loop.after(self.wl.cfg.retry_backoff_ms, self._attempt, gen)
        else:
            self._complete(send_outcome(error, self.acks, op.ambiguous), None, error)

    def _complete(self, type_: str, offset: int | None, error: Any) -> None:
        op = self._op
        assert op is not None
        self._op = None
        self.busy = False
        key = str(op.tp)
        crashed = op.crash >= 0
        if crashed:  # however the send ended, its client died before learning it
            type_, offset, error = "info", None, "crashed"
        if self.idempotent:
            if type_ == "ok":
                self.seqs[op.tp] = self.seqs.get(op.tp, 0) + 1
            else:
                # after an ambiguous or fatal outcome (info, or e.g.
                # OUT_OF_ORDER_SEQUENCE_NUMBER) the sequence state is unknown:
                # start over with a fresh producer id
                self.pid = -1
        if type_ == "ok":
            value = [["send", key, [offset, op.value]]]
            if offset is not None and offset > self.wl.max_acked.get(key, -1):
                self.wl.max_acked[key] = offset
        else:
            value = [["send", key, op.value]]
        if self.probe:
            self.wl.record(self.process, type_, "send", value, error, acks=self.acks, idempotent=self.idempotent,
                           probe=True)
        else:
            self.wl.record(self.process, type_, "send", value, error, acks=self.acks, idempotent=self.idempotent)
        if type_ == "info":
            self.process += self.wl.n_processes_stride()
        if crashed:
            self._replace()
        if op.done is not None:
            op.done(type_, offset if type_ == "ok" else error)

    def abandon(self) -> None:
        if self._op is not None:
            self._complete(send_outcome("run-ended", self.acks, self._op.ambiguous), None, "run-ended")
        self.ep.cancel_all()


class Consumer:
    """assign() + poll(): one fetch per leader, records below the HW."""

    def __init__(self, wl: Workload, name: str, process: int) -> None:
        self.wl = wl
        self.sim = wl.sim
        self.ep = Endpoint(wl.sim, name)
        self.meta = MetadataCache(self.ep, wl.topics, wl.cfg)
        self.process = process
        self.positions: dict[TopicPartition, int] = {tp: 0 for tp in wl.tps}
        self.busy = False
        self._gen = 0
        self._poll: dict[str, Any] | None = None

    def poll(self, tps: list[TopicPartition] | None = None, final: bool = False, from_start: bool = False,
             until: dict[str, int] | None = None, deadline_ms: int | None = None,
             done: Callable[[dict[str, list[list[int]]]], None] | None = None) -> bool:
        if self.busy:
            return False
        self.busy = True
        self._gen += 1
        tps = list(tps if tps is not None else self.wl.tps)
        if from_start:
            for tp in tps:
                self.positions[tp] = 0
        extra: dict[str, Any] = {"final": True} if final else {}
        crash = -1 if final else self.wl.crash_mark()
        if crash >= 0:
            extra["crash"] = crash
        self.wl.record(self.process, "invoke", "poll", [["poll"]], **extra)
        self._poll = {"tps": tps, "got": {}, "final": final, "until": until or {}, "gen": self._gen,
                      "deadline": self.sim.now + (deadline_ms if deadline_ms is not None else self.wl.cfg.request_timeout_ms),
                      "outstanding": 0, "resets": {}, "done": done, "errors": set(), "crash": crash}
        if crash >= 0:
            self.sim.loop.after(crash, self._crash, self._gen)
        self._round(self._gen)
        return True

    def _crash(self, gen: int) -> None:
        """The client dies mid-poll: the poll is ``info`` and a fresh client
        takes its place."""
        st = self._poll
        if st is not None and st["gen"] == gen:
            self._crashed(st)

    def _crashed(self, st: dict[str, Any]) -> None:
        self._poll = None
        self.busy = False
        self.wl.record(self.process, "info", "poll", [["poll"]], "crashed", crash=st["crash"])
        self.process += self.wl.n_processes_stride()
        self._replace()
        if st["done"] is not None:
            st["done"]({})

    def _replace(self) -> None:
        """A fresh assigning client: every position back to the start."""
        self.ep.cancel_all()
        self.meta = MetadataCache(self.ep, self.wl.topics, self.wl.cfg)
        self.positions = {tp: 0 for tp in self.wl.tps}

    def _round(self, gen: int) -> None:
        st = self._poll
        if st is None or st["gen"] != gen:
            return
        by_leader: dict[int, list[TopicPartition]] = {}
        missing = False
        for tp in st["tps"]:
            if st["final"] and self._covered(tp):
                continue
            leader = self.meta.leader(tp)
            if leader < 0:
                missing = True
                continue
            by_leader.setdefault(leader, []).append(tp)
        if not by_leader:
            if missing and self.sim.now < st["deadline"]:
                self.meta.refresh(lambda: self._round(gen))
            else:
                self._complete()
            return
        cfg = self.wl.cfg
        st["outstanding"] = len(by_leader)
        st["missing"] = missing
        for leader in sorted(by_leader):
            parts = tuple(FetchPartitionRequest(tp, self.positions[tp]) for tp in by_leader[leader])
            self.ep.request(
                leader,
                partial(_client_fetch, parts, cfg.fetch_max_wait_ms),
                partial(self._on_fetch, gen),
                cfg.fetch_max_wait_ms + cfg.request_timeout_ms,
            )

    def _covered(self, tp: TopicPartition, st: dict[str, Any] | None = None) -> bool:
        st = st if st is not None else self._poll
        assert st is not None
        target = st["until"].get(str(tp), -1)
        return self.positions[tp] > target

    def _on_fetch(self, gen: int, msg: Any) -> None:
        st = self._poll
        if st is None or st["gen"] != gen:
            return
        st["outstanding"] -= 1
        if isinstance(msg, ClientFetchResponse):
            for pr in msg.partitions:
                tp = pr.tp
                if pr.error == Errors.NONE:
                    pos = self.positions.get(tp, 0)
                    out = st["got"].setdefault(str(tp), [])
                    for b in pr.batches:
                        # the records at or past pos, each [offset, value]:
                        # a consumer reads every record, so the loop is kept lean
                        payload = b.payload
                        base = b.base_offset
                        n = len(payload) if payload is not None else 0
                        for i in range(pos - base if pos > base else 0, b.count):
                            out.append([base + i, payload[i] if i < n else None])
                        if b.next_offset > pos:
                            pos = b.next_offset
                    self.positions[tp] = pos
                elif pr.error == Errors.OFFSET_OUT_OF_RANGE:
                    # auto.offset.reset=error: record the reset instead of silently seeking
                    to = max(0, pr.high_watermark) if pr.high_watermark >= 0 else 0
                    st["resets"][str(tp)] = [self.positions.get(tp, 0), to]
                    self.positions[tp] = to if to < self.positions.get(tp, 0) else self.positions.get(tp, 0)
                else:
                    st["errors"].add(error_name(pr.error))
                    self.meta.invalidate(tp)
        else:
            st["errors"].add(msg.error if isinstance(msg, ConnectionLost) else "fetch-timeout")
            for tp in st["tps"]:
                self.meta.invalidate(tp)
        if st["outstanding"] > 0:
            return
        if st["final"] and self.sim.now < st["deadline"] and not all(self._covered(tp) for tp in st["tps"]):
            self.sim.loop.after(self.wl.cfg.retry_backoff_ms, self._refresh_then_round, gen)
            return
        self._complete()

    def _refresh_then_round(self, gen: int) -> None:
        self.meta.refresh(lambda: self._round(gen))

    def _complete(self) -> None:
        st = self._poll
        assert st is not None
        if st["crash"] >= 0:  # it ended, but its client died before learning it
            self._crashed(st)
            return
        got = {k: st["got"][k] for k in sorted(st["got"])}
        extra: dict[str, Any] = {}
        if st["final"]:
            extra["final"] = True
            short = sorted(str(tp) for tp in st["tps"] if not self._covered(tp, st))
            if short:
                extra["incomplete"] = short
        if st["resets"]:
            extra["reset"] = st["resets"]
        self._finish(st, got, extra)

    def _finish(self, st: dict[str, Any], got: dict[str, list[list[Any]]], extra: dict[str, Any]) -> None:
        """Record the poll ``ok`` and hand its reads on."""
        self._poll = None
        self.busy = False
        self.wl.record(self.process, "ok", "poll", [["poll", got]], **extra)
        if st["done"] is not None:
            st["done"](got)

    def abandon(self) -> None:
        if self._poll is not None:
            st = self._poll
            self._poll = None
            self.busy = False
            extra = {"final": True} if st["final"] else {}
            self.wl.record(self.process, "fail", "poll", [["poll"]], "run-ended", **extra)
        self.ep.cancel_all()


class GroupMember(Consumer):
    """A consumer in a group (Jepsen's sub-via subscribe), as librdkafka's
    classic protocol drives it: FindCoordinator, JoinGroup (KIP-394's
    MEMBER_ID_REQUIRED round trip for a dynamic member; with
    ``instance_id`` a static member, KIP-345), SyncGroup (the leader
    assigns ranges of the sorted partitions to the sorted members),
    heartbeats every :attr:`HEARTBEAT_MS`; the assignment is eager: every
    rebalance revokes all and assigns anew, and each assigned partition
    starts at the group's committed offset (OffsetFetch; none: the start,
    Jepsen's ``auto.offset.reset=earliest``). A poll reads the assigned
    partitions and, when it read something, commits the offsets after its
    reads (OffsetCommit) before it completes; a refused commit is kept as
    ``commit-error``. Assignment changes since the last poll completed are
    its ``rebalance-log``. The group runs beside the polls, as librdkafka's
    background thread does; a crash (``--crash-clients``) abandons the
    member and a fresh one joins (static: under the same instance id)."""

    SESSION_MS: Final = 6000
    REBALANCE_MS: Final = 10000
    HEARTBEAT_MS: Final = 500

    def __init__(self, wl: Workload, name: str, process: int, group_id: str, instance_id: str | None = None) -> None:
        super().__init__(wl, name, process)
        self.group_id = group_id
        self.instance_id = instance_id
        self.coordinator = -1
        self.member_id = ""
        self.generation = -1
        self.assigned: list[TopicPartition] = []
        #: assigned partitions whose committed offset is known (pollable)
        self.ready: list[TopicPartition] = []
        self.stable = False
        self.rebalance_log: list[dict[str, Any]] = []
        #: bumped whenever the member's group conversation restarts (a
        #: crash, a rejoin): answers to an older one are dropped
        self.epoch = 0

    # -- the group conversation -----------------------------------------------------------------------
    def start(self) -> None:
        """Subscribe (recorded, as the queue workload's ``subscribe``) and join."""
        keys = [str(tp) for tp in self.wl.tps]
        self.wl.record(self.process, "invoke", "subscribe", keys)
        self.wl.record(self.process, "ok", "subscribe", keys)
        self._find(self.epoch)

    def _live(self, epoch: int) -> bool:
        return epoch == self.epoch and not self.wl.stopped

    def _later(self, fn: Callable[[int], None], epoch: int) -> None:
        self.sim.loop.after(self.wl.cfg.retry_backoff_ms, fn, epoch)

    def _find(self, epoch: int) -> None:
        if not self._live(epoch):
            return
        self.coordinator = -1
        broker = choose(self.sim.rng, self.sim.broker_ids)
        self.ep.request(broker, lambda ref: FindCoordinatorRequest(ref, (self.group_id,)),
                        lambda msg: self._on_find(epoch, msg), self.wl.cfg.request_timeout_ms)

    def _on_find(self, epoch: int, msg: Any) -> None:
        if not self._live(epoch):
            return
        if isinstance(msg, FindCoordinatorResponse) and msg.coordinators and msg.coordinators[0].error == 0:
            self.coordinator = msg.coordinators[0].node_id
            self._join(epoch)
        else:
            self._later(self._find, epoch)

    def _rejoin(self, epoch: int, forget_id: bool = False) -> None:
        """Leave the generation and join again (REBALANCE_IN_PROGRESS and the like)."""
        self.epoch += 1
        if forget_id:
            self.member_id = ""
        self.stable = False
        self._revoke()
        self._later(self._join if self.coordinator >= 0 else self._find, self.epoch)

    def _join(self, epoch: int) -> None:
        if not self._live(epoch):
            return
        req = partial(JoinGroupRequest, group_id=self.group_id, session_timeout_ms=self.SESSION_MS,
                      rebalance_timeout_ms=self.REBALANCE_MS, member_id=self.member_id, protocol_type="consumer",
                      protocols=(("range", b""),), client_id=self.ep.name, group_instance_id=self.instance_id)
        self.ep.request(self.coordinator, lambda ref: req(ref), lambda msg: self._on_join(epoch, msg),
                        self.REBALANCE_MS + self.wl.cfg.request_timeout_ms)

    def _on_join(self, epoch: int, msg: Any) -> None:
        if not self._live(epoch):
            return
        if not isinstance(msg, JoinGroupResponse):
            self._later(self._find, epoch)
            return
        err = msg.error
        if err == GroupErrors.MEMBER_ID_REQUIRED:
            self.member_id = msg.member_id
            self._join(epoch)
        elif err in (GroupErrors.UNKNOWN_MEMBER_ID, GroupErrors.FENCED_INSTANCE_ID):
            self.member_id = ""
            self._later(self._join, epoch)
        elif err in (GroupErrors.NOT_COORDINATOR, GroupErrors.COORDINATOR_NOT_AVAILABLE,
                     GroupErrors.COORDINATOR_LOAD_IN_PROGRESS):
            self._later(self._find, epoch)
        elif err != 0:
            self._later(self._join, epoch)
        else:
            self.member_id = msg.member_id
            self.generation = msg.generation_id
            given: tuple[tuple[str, bytes], ...] = ()
            if msg.leader == msg.member_id and not msg.skip_assignment:
                given = self._assign_ranges([m.member_id for m in msg.members])
            self._sync(epoch, given)

    def _assign_ranges(self, members: list[str]) -> tuple[tuple[str, bytes], ...]:
        """Round-robin of the sorted partitions over the sorted members; an
        assignment is its keys, comma-separated (only these clients read it)."""
        ids = sorted(members)
        tps = sorted(self.wl.tps, key=str)
        shares: dict[str, list[str]] = {m: [] for m in ids}
        for i, tp in enumerate(tps):
            shares[ids[i % len(ids)]].append(str(tp))
        return tuple((m, ",".join(shares[m]).encode()) for m in ids)

    def _sync(self, epoch: int, given: tuple[tuple[str, bytes], ...]) -> None:
        req = partial(SyncGroupRequest, group_id=self.group_id, generation_id=self.generation,
                      member_id=self.member_id, assignments=given, group_instance_id=self.instance_id)
        self.ep.request(self.coordinator, lambda ref: req(ref), lambda msg: self._on_sync(epoch, msg),
                        self.REBALANCE_MS + self.wl.cfg.request_timeout_ms)

    def _on_sync(self, epoch: int, msg: Any) -> None:
        if not self._live(epoch):
            return
        if not isinstance(msg, SyncGroupResponse) or msg.error in (GroupErrors.NOT_COORDINATOR,
                                                                   GroupErrors.COORDINATOR_NOT_AVAILABLE):
            self._later(self._find, epoch)
            return
        if msg.error != 0:
            self._rejoin(epoch, forget_id=msg.error in (GroupErrors.UNKNOWN_MEMBER_ID, GroupErrors.FENCED_INSTANCE_ID))
            return
        keys = [k for k in msg.assignment.decode().split(",") if k] if msg.assignment else []
        self.assigned = [self.wl.by_key[k] for k in keys if k in self.wl.by_key]
        self.stable = True
        self.rebalance_log.append({"event": "assigned", "keys": sorted(keys)})
        self._fetch_offsets(epoch)
        self.sim.loop.after(self.HEARTBEAT_MS, self._heartbeat, epoch)

    def _revoke(self) -> None:
        if self.assigned:
            self.rebalance_log.append({"event": "revoked", "keys": sorted(str(tp) for tp in self.assigned)})
        self.assigned, self.ready = [], []

    def _fetch_offsets(self, epoch: int) -> None:
        tps = tuple(self.assigned)
        if not tps:
            return
        self.ep.request(self.coordinator, lambda ref: OffsetFetchRequest(ref, self.group_id, tps),
                        lambda msg: self._on_offsets(epoch, msg), self.wl.cfg.request_timeout_ms)

    def _on_offsets(self, epoch: int, msg: Any) -> None:
        if not self._live(epoch):
            return
        if not isinstance(msg, OffsetFetchResponse) or msg.error != 0:
            self._later(self._fetch_offsets, epoch)
            return
        for o in msg.offsets:
            self.positions[o.tp] = o.offset if o.offset >= 0 else 0
        self.ready = list(self.assigned)

    def _heartbeat(self, epoch: int) -> None:
        if not self._live(epoch):
            return
        req = partial(HeartbeatRequest, group_id=self.group_id, generation_id=self.generation,
                      member_id=self.member_id, group_instance_id=self.instance_id)
        self.ep.request(self.coordinator, lambda ref: req(ref), lambda msg: self._on_heartbeat(epoch, msg),
                        self.wl.cfg.request_timeout_ms)

    def _on_heartbeat(self, epoch: int, msg: Any) -> None:
        if not self._live(epoch):
            return
        err = msg.error if isinstance(msg, HeartbeatResponse) else GroupErrors.NOT_COORDINATOR
        if err == 0:
            self.sim.loop.after(self.HEARTBEAT_MS, self._heartbeat, epoch)
        elif err in (GroupErrors.NOT_COORDINATOR, GroupErrors.COORDINATOR_NOT_AVAILABLE):
            self.coordinator = -1
            self._rejoin(epoch)
        else:  # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID
            self._rejoin(epoch, forget_id=err in (GroupErrors.UNKNOWN_MEMBER_ID, GroupErrors.FENCED_INSTANCE_ID))

    # -- polls ------------------------------------------------------------------------------------------
    def poll(self, tps: list[TopicPartition] | None = None, final: bool = False, from_start: bool = False,
             until: dict[str, int] | None = None, deadline_ms: int | None = None,
             done: Callable[[dict[str, list[list[int]]]], None] | None = None) -> bool:
        """A poll of the partitions the group gave this member (none yet: an empty poll)."""
        return super().poll(tps=list(self.ready) if tps is None else tps, final=final, from_start=from_start,
                            until=until, deadline_ms=deadline_ms, done=done)

    def _finish(self, st: dict[str, Any], got: dict[str, list[list[Any]]], extra: dict[str, Any]) -> None:
        """Commit what the poll read (commitSync), then record it."""
        if self.rebalance_log:
            extra["rebalance-log"], self.rebalance_log = self.rebalance_log, []
        offsets = tuple(CommittedOffset(self.wl.by_key[k], pairs[-1][0] + 1) for k, pairs in got.items() if pairs)
        if not offsets or st["final"]:
            super()._finish(st, got, extra)
            return
        if not self.stable or self.coordinator < 0:
            extra["commit-error"] = "not-in-group"
            super()._finish(st, got, extra)
            return
        gen = st["gen"]
        req = partial(OffsetCommitRequest, group_id=self.group_id, generation_id=self.generation,
                      member_id=self.member_id, offsets=offsets, group_instance_id=self.instance_id)
        self.ep.request(self.coordinator, lambda ref: req(ref), lambda msg: self._on_commit(gen, got, extra, msg),
                        self.wl.cfg.request_timeout_ms)

    def _on_commit(self, gen: int, got: dict[str, list[list[Any]]], extra: dict[str, Any], msg: Any) -> None:
        st = self._poll
        if st is None or st["gen"] != gen:
            return
        if not isinstance(msg, OffsetCommitResponse):
            extra["commit-error"] = "commit-timeout"
        else:
            errs = sorted({e for _, e in msg.results if e})
            if errs:
                extra["commit-error"] = group_error_name(errs[0])
        if st["crash"] >= 0:
            self._crashed(st)
            return
        super()._finish(st, got, extra)

    def _replace(self) -> None:
        """A fresh member: the dead one's membership is left to its session
        timeout (a static member's replacement takes its place at once)."""
        self.ep.cancel_all()
        self.meta = MetadataCache(self.ep, self.wl.topics, self.wl.cfg)
        self.epoch += 1
        self.member_id, self.generation, self.stable, self.coordinator = "", -1, False, -1
        self.assigned, self.ready, self.rebalance_log = [], [], []
        self.sim.loop.after(self.wl.cfg.retry_backoff_ms, self._restart, self.epoch)

    def _restart(self, epoch: int) -> None:
        if self._live(epoch):
            self.start()


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
        times. The outcome is kept in :attr:`reassigned` (tp -> error code)."""
        brokers = self.sim.broker_ids
        broker = brokers[(tp.partition + attempt) % len(brokers)]
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


def _client_fetch(parts: tuple[FetchPartitionRequest, ...], max_wait_ms: int, ref: Any) -> ClientFetchRequest:
    """The fetch a consumer sends one leader, once the endpoint has given it a ref."""
    return ClientFetchRequest(ref, parts, max_wait_ms=max_wait_ms)
