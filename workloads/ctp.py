"""Consume-transform-produce: the loop stream processors run, and where
"records processed twice after a heal" comes from.

Every process is a member of one consumer group (``subscribe()`` to the
input topics, as ``--sub-via subscribe``). A ``ctp`` operation polls the
input partitions the group gave it, produces one output record per input
record to the output topic (``<prefix>out``, same partition number as the
input) and commits the input offsets after what it read. The transform is
the identity on the value: input values are unique, so an output record
names the input it came from, and the checker
(:mod:`checkers.queue.processing`) can say which input was processed twice
(``duplicate-processing``) and which committed input never reached the
output (``lost-processing``). Sends to the input topics are the queue
workload's (``send`` operations, checked as usual).

Two modes:

* at-least-once (default; db reference and db kafka): outputs are produced
  (acks=all) and acknowledged, then the offsets are committed with
  ``commitSync``. A crash or failure between the two leaves outputs whose
  inputs the next owner processes again: duplicates are allowed.
* exactly-once (``--ctp-txn``, db kafka: the reference implementation has
  no transaction coordinator): the outputs and the offsets
  (``send_offsets_to_transaction`` with the consumer's group metadata,
  KIP-447) are one transaction, read back ``read_committed``; a duplicate
  is then an anomaly.

History (Jepsen's micro-op vocabulary, ``f: "ctp"``): the invocation's
value is ``[["poll"]]``; the completion's is the poll micro-op of what was
read followed by one send micro-op per output acknowledged:
``[["poll", {in_key: [[offset, v], ...]}], ["send", out_key, [offset, v]], ...]``,
with ``"txn": true|false`` on both. Outcomes:

* ``ok``: every output acknowledged and the offsets committed (with the
  transaction, when there is one). A refused commit (the group moved the
  partition meanwhile) keeps the op ``ok`` with ``commit-error``: its
  outputs exist, its offsets were not committed.
* ``fail``: nothing can have taken effect (exactly-once: aborted; at least
  once: nothing was read, or no output can have been written).
* ``info``: some outputs may exist and the offsets were not committed
  (at least once), or the commit was asked for and never answered.

The queue checker does not read ``ctp`` operations; the final reads of
the output keys carry ``"output": true`` and are the processing checker's.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

import generator as g
from workloads.queue import QueueClient, _err_name, split_key
from workloads.txn import TxnClient, _Abort, _describe


def output_topic(prefix: str) -> str:
    """The output topic of a run whose input topics are ``<prefix><n>``."""
    return f"{prefix}out"


def output_key(in_key: str, prefix: str) -> str:
    """The output key of an input key: same partition number."""
    _, part = split_key(in_key)
    return f"{output_topic(prefix)}-{part}"


class CtpClient(TxnClient):
    """One processing member: a subscribed consumer of the input topics and
    a producer of the output topic (transactional with ``transactional``)."""

    def __init__(self, bootstrap: str, keys: list[str], process: int, op_timeout: float, *,
                 group_id: str, topic_prefix: str, transactional: bool, transactional_id: str,
                 idempotent: bool = False, final_read_timeout: float = 30.0,
                 isolation_level: str = "read_committed", retries: int | None = None,
                 auto_offset_reset: str = "error", extra_conf: dict[str, Any] | None = None,
                 instance_id: str | None = None) -> None:
        super().__init__(bootstrap, keys, process, op_timeout, transactional_id, final_read_timeout,
                         isolation_level, extra_conf, retries=retries, auto_offset_reset=auto_offset_reset)
        self.sub_via = "subscribe"
        self.instance_id = instance_id
        self.group_id = group_id
        self.prefix = topic_prefix
        self.transactional = transactional
        self.idempotent = bool(idempotent) or transactional
        self.poll_wait = 0.2
        #: exactly-once: the input sends' own producer (a transactional
        #: producer sends only inside a transaction)
        self.input_producer: Producer | None = None

    def _producer_conf(self) -> dict[str, Any]:
        if self.transactional:
            return super()._producer_conf()
        return QueueClient._producer_conf(self)

    def open(self) -> None:
        if self.transactional:
            super().open()  # the producer registers at the first operation
        else:
            QueueClient.open(self)

    def close(self) -> None:
        p, self.input_producer = self.input_producer, None
        if p is not None:
            _purge(p)
        super().close()

    def crash(self) -> None:
        p, self.input_producer = self.input_producer, None
        if p is not None:
            _purge(p)
        super().crash()

    def _send(self, op: dict[str, Any]) -> dict[str, Any]:
        """An input send, by the queue workload's rule; exactly-once rounds
        keep the transactional producer for the outputs alone."""
        if not self.transactional:
            return QueueClient._send(self, op)
        if self.input_producer is None:
            self.input_producer = Producer(QueueClient._producer_conf(self))
        txp, self.producer = self.producer, self.input_producer
        try:
            return QueueClient._send(self, op)
        finally:
            self.producer = txp

    def _invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        if op["f"] == "ctp":
            res = self._ctp(op)
            res["txn"] = self.transactional
            return res
        return QueueClient._invoke(self, op)

    # ------------------------------------------------------------ one round
    def _read(self) -> dict[str, list[list[Any]]]:
        """One poll of the input partitions the group assigned, no commit."""
        assert self.consumer is not None
        msgs = self.consumer.consume(num_messages=1, timeout=self.poll_wait)
        if msgs:
            msgs += self.consumer.consume(num_messages=99, timeout=0)
        reads: dict[str, list[list[Any]]] = {}
        for m in msgs:
            if m.error() is not None:
                continue  # a subscribed consumer resets itself (auto.offset.reset)
            try:
                v: Any = int(m.value())
            except (TypeError, ValueError):
                v = m.value().decode(errors="replace") if m.value() else None
            reads.setdefault(f"{m.topic()}-{m.partition()}", []).append([m.offset(), v])
        return reads

    def _produce_outputs(self, reads: dict[str, list[list[Any]]], deadline: float
                         ) -> tuple[list[list[Any]], str | None, bool, int]:
        """Produce one output per input record and wait for every report:
        (acknowledged send micro-ops, first error, whether all were
        reported, how many were handed to the producer)."""
        assert self.producer is not None
        reports: list[tuple[str, Any, KafkaError | None, int]] = []
        n = 0
        for key, pairs in sorted(reads.items()):
            out = output_key(key, self.prefix)
            topic, part = split_key(out)
            for _off, v in pairs:
                def cb(err: Any, msg: Any, out: str = out, v: Any = v) -> None:
                    reports.append((out, v, err, msg.offset() if msg is not None else -1))
                try:
                    self.producer.produce(topic, value=str(v).encode(), partition=part, on_delivery=cb)
                except (BufferError, KafkaException) as e:
                    self.producer.flush(0)
                    why = _describe(e) if isinstance(e, KafkaException) else f"queue-full: {e}"
                    return self._sends(reports), f"produce: {why}", False, n
                n += 1
        while len(reports) < n and time.monotonic() < deadline and not self.crash_due():
            self.producer.flush(min(0.05, max(0.0, deadline - time.monotonic())))
        errors = [_err_name(err) for _k, _v, err, _o in reports if err is not None]
        return self._sends(reports), (errors[0] if errors else None), len(reports) == n, n

    @staticmethod
    def _sends(reports: list[tuple[str, Any, Any, int]]) -> list[list[Any]]:
        return [["send", k, [o, v]] for k, v, err, o in reports if err is None]

    def _ctp(self, op: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + max(1.0, self.op_timeout - 0.5)
        if self.transactional:
            return self._ctp_txn(deadline)
        assert self.consumer is not None and self.producer is not None
        reads = self._read()
        done: list[list[Any]] = [["poll", reads]]
        if not reads:
            return {"type": "ok", "value": done}
        sends, err, complete, handed = self._produce_outputs(reads, deadline)
        done += sends
        if self.crash_due():
            return {"type": "info", "value": done, "error": "crashed"}
        if err is not None or not complete:
            # some outputs may exist (none if none was handed to the
            # producer), the offsets stay where they were: the process is
            # replaced and the group's next owner processes them again
            return {"type": "info" if handed else "fail", "value": done,
                    "error": f"output: {err or 'no-delivery-report'}"}
        res: dict[str, Any] = {"type": "ok", "value": done}
        cerr = self._commit_reads(reads)
        if cerr:
            res["commit-error"] = cerr
        return res

    def _ctp_txn(self, deadline: float) -> dict[str, Any]:
        if self.producer is None:
            try:
                self._open_producer()
            except KafkaException as e:
                return {"type": "fail", "value": [], "error": f"init-transactions: {_describe(e)}"}
        assert self.producer is not None and self.consumer is not None
        # read first: a round that read nothing opens no transaction (an
        # empty one would cost the coordinator an EndTxn per idle poll)
        reads = self._read()
        done: list[list[Any]] = [["poll", reads]]
        if not reads:
            return {"type": "ok", "value": done}
        try:
            try:
                self.producer.begin_transaction()
            except KafkaException as e:
                raise _Abort(_describe(e)) from None
            sends, err, complete, _ = self._produce_outputs(reads, deadline)
            done += sends
            if self.crash_due():
                return {"type": "info", "value": done, "error": "crashed"}
            if err is not None or not complete:
                raise _Abort(f"output: {err or 'no-delivery-report'}")
            offsets = [TopicPartition(*split_key(k), pairs[-1][0] + 1) for k, pairs in reads.items()]
            try:
                self.producer.send_offsets_to_transaction(
                    offsets, self.consumer.consumer_group_metadata(), max(0.5, deadline - time.monotonic()))
            except KafkaException as e:
                raise _Abort(f"send-offsets: {_describe(e)}") from None
        except _Abort as a:
            if self.crash_due():
                return {"type": "info", "value": done, "error": "crashed"}
            aborted = self._abort(deadline)
            self._seek_back(reads)
            res: dict[str, Any] = {"type": "fail", "value": done, "error": a.error}
            if not aborted:
                res["abort-error"] = "abort-unconfirmed"
            return res
        res = self._commit(done, {}, deadline)
        if res["type"] == "fail":
            self._seek_back(reads)
        return res

    def _rewind(self, start: dict[str, int]) -> None:
        """TxnClient's rewind is for assign(); here :meth:`_seek_back` does it."""

    def _seek_back(self, reads: dict[str, list[list[Any]]]) -> None:
        """After an abort, back to the first record the transaction read on
        each partition (its offsets were not committed). A partition the
        group has meanwhile taken away is left to its new owner."""
        if self.consumer is None:
            return
        for k, pairs in reads.items():
            if pairs:
                try:
                    self.consumer.seek(TopicPartition(*split_key(k), pairs[0][0]))
                except KafkaException:
                    pass


def _purge(p: Producer) -> None:
    try:
        p.purge(True, True)
    except Exception:
        pass


# ---------------------------------------------------------------- generators
def ctp_generator(keys: list[str], acks_for_thread, idempotent_for_thread=None, transactional: bool = False,
                  send_weight: int = 2) -> g.Gen:
    """Sends of unique increasing values to the input keys and ``ctp``
    rounds, ``send_weight`` : 1; each round says its mode (``txn``)."""
    counter = itertools.count()

    def send(ctx: g.Context) -> dict[str, Any]:
        t = ctx.rng.choice(ctx.free_threads())
        return {"f": "send", "process": ctx.process_of[t], "value": [["send", ctx.rng.choice(keys), next(counter)]],
                "acks": acks_for_thread(t),
                "idempotent": bool(idempotent_for_thread(t)) if idempotent_for_thread else False}

    def ctp(_ctx: g.Context) -> dict[str, Any]:
        return {"f": "ctp", "value": [["poll"]], "txn": transactional}

    return g.mix(*([send] * send_weight), ctp)


def output_keys(keys: list[str], prefix: str) -> list[str]:
    """Every output key of the input ``keys``, sorted."""
    return sorted({output_key(k, prefix) for k in keys})

