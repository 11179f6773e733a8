"""The transactional workload, Jepsen's ``txn`` operations against Kafka.

An operation is one Kafka transaction of several micro-operations, in
Jepsen's Kafka vocabulary (``checkers/history/op.py``):
``{"f": "txn", "value": [["send", key, v], ["poll"], ...]}`` completes as
``[["send", key, [offset, v]], ["poll", {key: [[offset, v], ...]}], ...]``.
The generator decides, with ``abort_probability``, whether the client ends
the transaction with an abort instead of a commit (``"abort": true`` on the
invocation), so the seed decides which transactions are aborted.

The client (:class:`TxnClient`) is the queue workload's client (its
``assign()`` consumer, positions, polls and final reads) with a
transactional producer: ``transactional.id`` is the worker thread's, so the
fresh client that replaces a crashed or timed-out process fences the old
one's producer (InitProducerId bumps the epoch and aborts what it left
open: Kafka's zombie fencing).

Outcomes (librdkafka's transactional API: ``txn_requires_abort``,
``retriable``, ``fatal`` on each error):

* ``ok``: ``commit_transaction`` returned.
* ``fail``: the transaction cannot have committed, because
  ``commit_transaction`` was never called (a deliberate abort, a send that
  failed, a poll or begin that raised) or librdkafka said the commit needs
  an abort and the abort returned. A coordinator commits only on the
  client's EndTxn(COMMIT); anything else it ends by aborting (on the abort,
  the transaction timeout, or the next InitProducerId of the same id). The
  completion keeps the micro-ops done so far, so an ``ok`` poll that
  returns one of its sends is Jepsen's G1a (aborted read).
* ``info``: commit was called and did not return (timeout, retriable errors
  until the deadline, a fatal error such as being fenced meanwhile).

After a ``fail`` the consumer goes back to its positions at ``begin``: the
aborted transaction's polls are processed again, as a consume-transform-
produce loop would after an abort. A fatal producer error (fenced, or an
unrecoverable state) drops the producer; the next operation starts a fresh
one with the same ``transactional.id``.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

import generator as g
from workloads.queue import QueueClient, _err_name, split_key


def _kafka_error(e: BaseException) -> KafkaError | None:
    arg = e.args[0] if getattr(e, "args", None) else None
    return arg if isinstance(arg, KafkaError) else None


def _describe(e: BaseException) -> str:
    err = _kafka_error(e)
    return _err_name(err) if err is not None else f"{type(e).__name__}: {e}"[:200]


def _close(p: Producer) -> None:
    try:
        p.purge()
        p.flush(0)
    except Exception:
        pass


class _Abort(Exception):
    """Ends the transaction before commit: it is aborted (``fail``)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class TxnClient(QueueClient):
    """One process: a transactional producer and an ``assign()`` consumer."""

    def __init__(self, bootstrap: str, keys: list[str], process: int, op_timeout: float,
                 transactional_id: str, final_read_timeout: float = 30.0,
                 isolation_level: str = "read_committed", extra_conf: dict[str, Any] | None = None,
                 retries: int | None = None, auto_offset_reset: str = "error") -> None:
        super().__init__(bootstrap, keys, "all", process, op_timeout, final_read_timeout, extra_conf,
                         idempotent=True, isolation_level=isolation_level, retries=retries,
                         auto_offset_reset=auto_offset_reset)
        self.transactional_id = transactional_id
        #: a poll inside a transaction waits this long for a first record
        #: (Jepsen's poll-ms is 100 ms): the transaction stays open meanwhile
        self.poll_wait = 0.1

    def _producer_conf(self) -> dict[str, Any]:
        ms = max(2000, int(self.op_timeout * 1000))
        return {
            **self._common(),
            "transactional.id": self.transactional_id,
            "enable.idempotence": True,
            "acks": "all",
            **self._retries_conf(),
            "linger.ms": 0,
            # a transaction outlives no operation: the coordinator aborts it
            # on its own once the client is gone for this long
            "transaction.timeout.ms": ms + 10_000,
            "message.timeout.ms": max(1000, ms - 1000),
            "request.timeout.ms": min(max(1000, ms - 1000), 5000),
        }

    def open(self) -> None:
        """The consumer now; the producer at the first transaction (its
        registration needs the coordinator, which a fault may hide)."""
        self._open_consumer()

    def _open_producer(self) -> None:
        """A transactional producer, registered with its coordinator (which
        fences every earlier producer of the same id)."""
        if self.producer is not None:
            self._drop_producer()
        p = Producer(self._producer_conf())
        deadline = time.monotonic() + max(1.0, self.op_timeout - 1)
        while True:
            try:
                p.init_transactions(max(0.5, deadline - time.monotonic()))
                break
            except KafkaException as e:  # e.g. the coordinator still loading its log
                err = _kafka_error(e)
                if err is None or not err.retriable() or time.monotonic() >= deadline:
                    _close(p)
                    raise
                time.sleep(0.1)
        self.producer = p

    def _drop_producer(self) -> None:
        p, self.producer = self.producer, None
        if p is not None:
            _close(p)

    def _invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        if op["f"] == "txn":
            return self._txn(op)
        return super()._invoke(op)

    # ------------------------------------------------------------ transactions
    def _txn(self, op: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + max(1.0, self.op_timeout - 0.5)
        if self.producer is None:  # first use, or the last one died of a fatal error
            try:
                self._open_producer()
            except KafkaException as e:  # nothing began: nothing can commit
                return {"type": "fail", "value": [], "error": f"init-transactions: {_describe(e)}"}
        assert self.producer is not None
        start = dict(self.positions)
        done: list[list[Any]] = []
        try:
            try:
                self.producer.begin_transaction()
            except KafkaException as e:
                raise _Abort(_describe(e)) from None
            for mop in op["value"]:
                if self.crash_due():
                    return {"type": "info", "value": done, "error": "crashed"}
                done.append(self._micro_op(mop, deadline))
            if self.crash_due():
                return {"type": "info", "value": done, "error": "crashed"}
            if op.get("abort"):
                raise _Abort("aborted")
        except _Abort as a:
            if self.crash_due():  # a killed process aborts nothing
                return {"type": "info", "value": done, "error": "crashed"}
            return self._aborted(done, a.error, start, deadline)
        return self._commit(done, start, deadline)

    def _micro_op(self, mop: list[Any], deadline: float) -> list[Any]:
        if mop[0] == "poll":
            res = self._poll({"f": "poll"})
            return res["value"][0]
        _, key, value = mop
        offset, err = self._send_one(key, value, deadline)
        if err is not None:
            raise _Abort(err)
        return ["send", key, [offset, value]]

    def _send_one(self, key: str, value: Any, deadline: float) -> tuple[int, str | None]:
        """(offset, None) once delivered, else (-1, why)."""
        topic, part = split_key(key)
        try:
            got = self._deliver(topic, part, value, deadline)
        except BufferError as e:
            return -1, f"queue-full: {e}"
        except KafkaException as e:
            return -1, _describe(e)
        if got is None:
            return -1, "crashed" if self.crash_due() else "no-delivery-report"
        err, offset = got
        return offset, (_err_name(err) if err is not None else None)

    def _aborted(self, done: list, error: str, start: dict[str, int], deadline: float) -> dict[str, Any]:
        """Abort (commit was never asked for, so the coordinator can only
        abort): ``fail``, and the consumer goes back to where it began."""
        aborted = self._abort(deadline)
        self._rewind(start)
        res: dict[str, Any] = {"type": "fail", "value": done, "error": error}
        if not aborted:
            res["abort-error"] = "abort-unconfirmed"
        return res

    def _abort(self, deadline: float) -> bool:
        """abort_transaction until it returns or the deadline; a fatal error
        drops the producer (the coordinator aborts on its own)."""
        while self.producer is not None:
            try:
                self.producer.abort_transaction(max(0.5, deadline - time.monotonic()))
                return True
            except KafkaException as e:
                err = _kafka_error(e)
                if err is None or err.fatal() or time.monotonic() >= deadline or not err.retriable():
                    self._drop_producer()
                    return False
        return False

    def _commit(self, done: list, start: dict[str, int], deadline: float) -> dict[str, Any]:
        assert self.producer is not None
        if self.crash_at is not None:  # the crash may land while the commit is in flight
            deadline = min(deadline, max(self.crash_at, time.monotonic() + 0.001))
        while True:
            try:
                self.producer.commit_transaction(max(0.001, deadline - time.monotonic()))
                return {"type": "ok", "value": done}
            except KafkaException as e:
                err = _kafka_error(e)
                if err is not None and err.txn_requires_abort():
                    if self._abort(deadline):
                        self._rewind(start)
                        return {"type": "fail", "value": done, "error": _err_name(err)}
                    return {"type": "info", "value": done, "error": f"{_err_name(err)}; abort unconfirmed"}
                if err is not None and err.retriable() and not err.fatal() and time.monotonic() < deadline:
                    continue  # librdkafka: a retriable commit error may be retried
                if err is None or err.fatal():
                    self._drop_producer()
                return {"type": "info", "value": done, "error": _describe(e)}

    def _rewind(self, start: dict[str, int]) -> None:
        """Back to the positions the transaction began at."""
        if self.consumer is None or start == self.positions:
            return
        self.positions = {k: start.get(k, 0) for k in self.keys}
        self._assign()


# ---------------------------------------------------------------- generators
def txn_generator(keys: list[str], max_length: int, abort_probability: float) -> g.Gen:
    """Transactions of 1..``max_length`` micro-ops, each a send of a unique
    increasing value to a random key or a poll (even odds); aborted with
    ``abort_probability``. Transactional producers are idempotent and
    acks=all, which each operation says for the checker."""
    counter = itertools.count()

    def txn(ctx: g.Context) -> dict[str, Any]:
        mops: list[list[Any]] = []
        for _ in range(ctx.rng.randint(1, max_length)):
            if ctx.rng.random() < 0.5:
                mops.append(["send", ctx.rng.choice(keys), next(counter)])
            else:
                mops.append(["poll"])
        op: dict[str, Any] = {"f": "txn", "value": mops, "acks": "all", "idempotent": True}
        if abort_probability and ctx.rng.random() < abort_probability:
            op["abort"] = True
        return op

    return g.mix(txn)
