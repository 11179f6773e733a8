"""A simulated producer that behaves like librdkafka's.

One send in flight at a time (one operation per process, as in Jepsen).
Each send ends ok / fail / info by the one rule both runtimes' clients
follow, :mod:`workloads.outcome` (what to do after an error:
``producer_action``; whether the attempt may have reached the log:
``possibly_persisted``; the outcome: ``send_outcome``). Leader errors
refresh metadata and retry without spending a retry; NOT_ENOUGH_REPLICAS,
REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND and no answer spend
one; the delivery timeout ends the send as ``info``. A send marked to crash
(``--crash-clients``) ends ``info`` with error ``crashed`` when its client
dies, or when it ends, whichever comes first: the process never learns.

The producer records nothing: its owner (the harness's interpreter, through
:class:`reference_impl.sim.clients.SimClient`) records the invocation and
the completion it is handed.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from reference_impl.core.messages import (
    Errors,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from workloads.outcome import REFRESH, RETRY, possibly_persisted, producer_action, send_outcome

from .endpoint import ClientConfig, Endpoint, MetadataCache, ReplyHandler, error_name
from .network import ConnectionLost

if TYPE_CHECKING:
    from .simulation import Simulation

#: ``done(type, offset or None, error or None)``
SendDone = Callable[[str, Any, Any], None]


class SendCompletion:
    """A send's completion callback the producer calls natively
    (:meth:`sent`), where any other ``SendDone`` is called through Python's
    protocol (the simulated clients' is one, once a send). Calling one is
    calling :meth:`sent`."""

    def sent(self, type_: str, offset: Any, error: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, type_: str, offset: Any, error: Any) -> None:
        self.sent(type_, offset, error)


class _Send(ReplyHandler):
    """The send a producer has in flight: what it sends, until when, what
    went wrong so far. A class, not a dict: every attempt and reply reads
    it several times. It is also each attempt's reply callback, handing the
    reply to its producer with the send's generation (a native callable:
    one object per send, where each attempt made one of its own)."""

    def __init__(self, producer: "Producer", tp: TopicPartition, value: Any, deadline: int, done: SendDone,
                 gen: int, crash: int) -> None:
        self.producer = producer
        self.tp = tp
        self.value = value
        self.deadline = deadline
        self.ambiguous = False
        self.retries = 0
        self.last_error: Any = None
        self.done = done
        self.gen = gen
        #: ms into the send its client dies (--crash-clients), -1: never
        self.crash = crash

    def reply(self, msg: Any) -> None:
        self.producer._on_reply(self.gen, msg)


def _init_producer_id(ref: Any) -> InitProducerIdRequest:
    return InitProducerIdRequest(ref)


class Producer:
    def __init__(self, sim: "Simulation", ep: Endpoint, topics: tuple[str, ...], cfg: ClientConfig, acks: str,
                 idempotent: bool = False, retries: int | None = None) -> None:
        self.sim = sim
        self.ep = ep
        self.topics = topics
        self.cfg = cfg
        self.meta = MetadataCache(ep, topics, cfg)
        self.acks = acks
        self.retries = cfg.retries if retries is None else retries
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
        #: called when a send marked to crash ends: its client dies
        self.on_crash: Callable[[], None] | None = None

    @property
    def name(self) -> str:
        return self.ep.name

    def send(self, tp: TopicPartition, value: Any, done: SendDone, crash: int = -1) -> bool:
        """Invoke one send; returns False if a send is already in flight."""
        if self.busy:
            return False
        self.busy = True
        self._gen += 1
        self._op = _Send(self, tp, value, self.sim.now + self.cfg.delivery_timeout_ms, done, self._gen, crash)
        if crash >= 0:
            self.sim.loop.after(crash, self._crash, self._gen)
        self._attempt(self._gen)
        return True

    def _crash(self, gen: int) -> None:
        """The client dies mid-send: nobody learns the outcome (``info``)."""
        op = self._op
        if op is not None and op.gen == gen:
            self._complete("info", None, "crashed")

    def reset(self) -> None:
        """A fresh client in this one's place: the send in flight is
        forgotten (its answer is never heard), no producer id, no sequence
        numbers, no metadata. The endpoint's unanswered requests are its
        owner's to drop."""
        self._op = None
        self.busy = False
        self._gen += 1
        self.pid, self.pepoch, self.seqs = -1, -1, {}
        self.meta = MetadataCache(self.ep, self.topics, self.cfg)

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
            self.meta.refresh(partial(self._after_refresh, gen))
            return
        cfg = self.cfg
        if self.idempotent and self.pid < 0:
            self.ep.request(leader, _init_producer_id, partial(self._on_init, gen), cfg.request_timeout_ms + 100)
            return
        acks = -1 if self.acks == "all" else int(self.acks)
        if self.idempotent:
            pid, pepoch, seq = self.pid, self.pepoch, self.seqs.get(tp, 0)
        else:
            pid, pepoch, seq = -1, -1, -1
        # the request made here, given its ref (Endpoint.new_ref), where a
        # factory object made it when the endpoint called it, once a send
        ep = self.ep
        ref = ep.new_ref()
        ep.send_request(leader, ref, ProduceRequest(ref, tp, acks, 1, (op.value,), timeout_ms=cfg.request_timeout_ms,
                                                    producer_id=pid, producer_epoch=pepoch, base_sequence=seq),
                        op, cfg.request_timeout_ms + 100)

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
        self.sim.loop.after(self.cfg.retry_backoff_ms, self._attempt, gen)

    def _after_refresh(self, gen: int) -> None:
        op = self._op
        if op is None or op.gen != gen:
            return
        if self.meta.leader(op.tp) < 0:
            op.last_error = op.last_error or "LEADER_NOT_AVAILABLE"
            self.sim.loop.after(self.cfg.metadata_backoff_ms, self._attempt, gen)
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
            self.sim.loop.after(self.cfg.retry_backoff_ms, self._attempt, gen)
        elif action == RETRY:
            op.retries += 1
            if op.retries > self.retries:
                self._complete(send_outcome(error, self.acks, op.ambiguous), None, error)
            else:
                self.sim.loop.after(self.cfg.retry_backoff_ms, self._attempt, gen)
        else:
            self._complete(send_outcome(error, self.acks, op.ambiguous), None, error)

    def _complete(self, type_: str, offset: int | None, error: Any) -> None:
        op = self._op
        assert op is not None
        self._op = None
        self.busy = False
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
        if crashed and self.on_crash is not None:
            self.on_crash()
        done = op.done
        if isinstance(done, SendCompletion):
            done.sent(type_, offset if type_ == "ok" else None, error)
        else:
            done(type_, offset if type_ == "ok" else None, error)
