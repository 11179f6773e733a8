"""The queue workload, shaped like Jepsen's Kafka workload.

* ``send``: one record with a unique integer value to one key (a topic-partition),
  through a per-process confluent-kafka producer with ``acks=all`` or ``acks=1``.
* ``poll``: read onwards from the process's own positions on every key, through
  a consumer that uses ``assign()`` with explicit offsets (no group protocol);
  or, with ``sub_via="subscribe"`` (Jepsen's ``:sub-via #{:subscribe}``),
  through a consumer of one group shared by every process, which
  ``subscribe()``s to the keys' topics: the group coordinator decides which
  partitions each process reads, rebalancing as members come and go, and each
  poll commits the offsets it read (``commitSync`` before the completion, as
  Jepsen's client does) so the next owner of a partition resumes after them.
  Assignment changes seen during an operation are recorded in its
  ``rebalance-log`` (Jepsen's field). A ``subscribe`` operation subscribes
  again (``value``: the keys whose topics are subscribed).
* final reads (``final: true``): after healing, every key is read from the
  beginning until the highest acknowledged offset is covered or a deadline passes.

A send's outcome (ok / fail / info) is :func:`workloads.outcome.send_outcome`
of the delivery report's error name, the rules the simulated clients use too,
given whether an earlier attempt of the record may have been persisted:
with retries (``--retries``, or idempotence) librdkafka may resend unseen,
and without them it still resends after leader errors.

Why the attempt count matters: a broker refuses acks=all with
NOT_ENOUGH_REPLICAS before appending, so that answer speaks only for its own
attempt. librdkafka resends a record without counting it against
``retries=0`` after leader errors (NOT_LEADER_OR_FOLLOWER and the like,
which it marks "not persisted"), yet a leader that appended the record and
then lost its leadership answers the parked produce with exactly that error;
the resend may then meet a leader under min ISR and end NOT_ENOUGH_REPLICAS
while the first copy survives (docs/analysis-kafka-4.4.md). The Python
client exposes neither a record's retry count nor librdkafka's persistence
status, so each producer counts its attempts from librdkafka's ``msg`` debug
log (:class:`ProduceAttempts`: one "Produce MessageSet" line per request
built, resends included); one operation is in flight per producer.
Consumers use ``auto.offset.reset=error`` so a truncated log is *seen*
(``_AUTO_OFFSET_RESET`` / OFFSET_OUT_OF_RANGE) rather than silently skipped.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from workloads.outcome import send_outcome

#: consumer errors meaning "your position is not in the log any more"
TRUNCATION_ERRORS = {KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET}


def split_key(key: str) -> tuple[str, int]:
    topic, _, part = key.rpartition("-")
    return topic, int(part)


_PRODUCE_LINE = re.compile(r": (\S+) \[(\d+)\]: Produce MessageSet with ")


class ProduceAttempts:
    """A producer's ``logger``: counts librdkafka's produce requests per
    topic-partition from its ``msg`` debug lines (``debug=msg``,
    ``log_level=7``); every other line is dropped, as the silent logger
    does. Lines are served by ``poll``/``flush`` on the main queue, ahead of
    the delivery report they precede."""

    CONF = {"debug": "msg", "log_level": 7}

    def __init__(self) -> None:
        self.counts: dict[tuple[str, int], int] = {}

    def reset(self, topic: str, partition: int) -> None:
        self.counts[(topic, partition)] = 0

    def of(self, topic: str, partition: int) -> int:
        return self.counts.get((topic, partition), 0)

    def log(self, _level: int, fmt: str, *args: Any, **_k: Any) -> None:
        text = fmt % args if args else fmt
        if "Produce MessageSet" in text:
            m = _PRODUCE_LINE.search(text)
            if m:
                tp = (m.group(1), int(m.group(2)))
                self.counts[tp] = self.counts.get(tp, 0) + 1

    def __getattr__(self, _name: str):
        return _silent_logger_fn


def _err_name(err: KafkaError) -> str:
    return err.name() or str(err.code())


class QueueClient:
    """One process: a producer with fixed acks and an assign()-based consumer."""

    def __init__(
        self,
        bootstrap: str,
        keys: list[str],
        acks: str,
        process: int,
        op_timeout: float,
        final_read_timeout: float = 30.0,
        extra_conf: dict[str, Any] | None = None,
        idempotent: bool = False,
        isolation_level: str = "read_committed",
        retries: int | None = None,
        auto_offset_reset: str = "error",
        sub_via: str = "assign",
        group_id: str | None = None,
        instance_id: str | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.keys = keys
        self.acks = acks
        #: enable.idempotence (acks=all only): the broker drops a retried
        #: batch by producer id + sequence instead of appending it twice
        self.idempotent = bool(idempotent) and acks == "all"
        self.process = process
        self.op_timeout = op_timeout
        self.final_read_timeout = final_read_timeout
        self.extra_conf = extra_conf or {}
        #: the consumers' isolation.level: read_committed (librdkafka's
        #: default) hides aborted and still-open transactions' records
        self.isolation_level = isolation_level
        #: the producer's retries: None is 0 without idempotence (so
        #: NOT_ENOUGH_REPLICAS is a definite failure), librdkafka's own
        #: default with it (idempotence needs retries)
        self.retries = retries
        self.auto_offset_reset = auto_offset_reset
        self.producer: Producer | None = None
        self.attempts = ProduceAttempts()
        self.consumer: Consumer | None = None
        self.positions: dict[str, int] = {}
        #: seconds a poll waits for its first record
        self.poll_wait = 0.5
        #: "assign" (explicit offsets) or "subscribe" (a consumer group)
        self.sub_via = sub_via
        #: the subscribe mode's consumer group, shared by every process of a run
        self.group_id = group_id or "kraftwerk-subscribers"
        #: subscribe mode: the consumer's group.instance.id (static membership,
        #: KIP-345), the worker thread's, so a replacement process rejoins as
        #: the same member and fences its predecessor; None: a dynamic member
        self.instance_id = instance_id
        #: assignment changes since the current operation began (Jepsen's :rebalance-log)
        self.rebalance_log: list[dict[str, Any]] = []
        #: monotonic time at which the running operation's process dies
        self.crash_at: float | None = None

    # -------------------------------------------------------------- lifecycle
    def _common(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "client.id": f"kraftwerk-p{self.process}",
            "socket.timeout.ms": max(1000, int(self.op_timeout * 1000) - 500),
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": 2000,
            "log_level": 0,
            "logger": _silent_logger,
            **self.extra_conf,
        }

    def _consumer_conf(self, tag: str) -> dict[str, Any]:
        return {
            **self._common(),
            "group.id": f"kraftwerk-{tag}",  # required by librdkafka even with assign()
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": self.auto_offset_reset,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 100,
            "isolation.level": self.isolation_level,
        }

    def _producer_conf(self) -> dict[str, Any]:
        msg_timeout = max(1000, int(self.op_timeout * 1000) - 1000)
        return {
            **self._common(),
            "acks": "all" if self.acks == "all" else self.acks,
            # retries=0: no counted resend (librdkafka still resends after
            # leader errors, which ProduceAttempts counts); an idempotent
            # producer needs retries, so it keeps the default
            **self._retries_conf(),
            "enable.idempotence": self.idempotent,
            "linger.ms": 0,
            "message.timeout.ms": msg_timeout,
            "request.timeout.ms": min(msg_timeout, 5000),
            **ProduceAttempts.CONF,
            "logger": self.attempts,
        }

    def _retries_conf(self) -> dict[str, Any]:
        if self.retries is not None:
            return {"retries": self.retries}
        return {} if self.idempotent else {"retries": 0}

    def _retried(self) -> bool:
        """Whether the producer may send a record more than once."""
        return self.retries != 0 if self.retries is not None else self.idempotent

    def open(self) -> None:
        self.producer = Producer(self._producer_conf())
        self._open_consumer()

    def _open_consumer(self) -> None:
        if self.sub_via == "subscribe":
            # a partition the group never committed is read from its start
            # (Jepsen's client), unless --auto-offset-reset says otherwise
            reset = "earliest" if self.auto_offset_reset == "error" else self.auto_offset_reset
            conf = {**self._consumer_conf(""), "group.id": self.group_id, "auto.offset.reset": reset,
                    "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
            if self.instance_id is not None:
                conf["group.instance.id"] = self.instance_id
            self.consumer = Consumer(conf)
            self.positions = {}
            self._subscribe()
            return
        self.consumer = Consumer(self._consumer_conf(f"p{self.process}"))
        self.positions = {k: 0 for k in self.keys}
        self._assign()

    def _subscribe(self) -> None:
        """Subscribe to the keys' topics; the group decides the partitions.
        Without an offset committed by the group a partition is read from
        its beginning (``auto.offset.reset=earliest``, as Jepsen's client)."""
        assert self.consumer is not None
        topics = sorted({split_key(k)[0] for k in self.keys})

        def on_assign(_c: Any, tps: list[TopicPartition]) -> None:
            self.rebalance_log.append({"event": "assigned", "keys": [f"{tp.topic}-{tp.partition}" for tp in tps]})

        def on_revoke(_c: Any, tps: list[TopicPartition]) -> None:
            self.rebalance_log.append({"event": "revoked", "keys": [f"{tp.topic}-{tp.partition}" for tp in tps]})

        self.consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)

    def _assign(self) -> None:
        assert self.consumer is not None
        self.consumer.assign([TopicPartition(*split_key(k), self.positions[k]) for k in self.keys])

    def close(self) -> None:
        # a process that ends (run over, or replaced after an info) leaves
        # its group as a killed one does (_close_consumer)
        self._close_consumer()
        if self.producer is not None:
            try:
                self.producer.purge()
                self.producer.flush(0)
            except Exception:
                pass
            self.producer = None

    # -------------------------------------------------------------- ops
    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        crash = op.get("crash")
        self.crash_at = time.monotonic() + crash / 1000 if crash is not None else None
        self.rebalance_log = []
        res = self._invoke(op)
        if crash is not None:  # the process dies mid-operation: nobody learns the outcome
            self.crash()
            return {"type": "info", "error": "crashed"}
        if self.rebalance_log:
            res["rebalance-log"] = self.rebalance_log
        return res

    def _invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        if op["f"] == "send":
            return self._send(op)
        if op["f"] == "subscribe":
            return self._subscribe_op(op)
        if op["f"] == "assign":
            return self._assign_op(op)
        if op["f"] == "poll" and op.get("final"):
            return self._final_read(op)
        if op["f"] == "poll":
            return self._poll(op)
        return {"type": "fail", "error": f"unknown f {op['f']!r}"}

    def crash_due(self) -> bool:
        """The operation's crash time has come (workloads/crash.py)."""
        return self.crash_at is not None and time.monotonic() >= self.crash_at

    def crash(self) -> None:
        """Die as a killed process does: what is queued or awaiting an answer
        is dropped unanswered (requests already sent still arrive), nothing
        is flushed, committed or aborted."""
        p, self.producer = self.producer, None
        if p is not None:
            try:
                p.purge(True, True)
            except Exception:
                pass
        self._abandon_consumer()

    def _abandon_consumer(self) -> None:
        """Drop the consumer as a killed process does: no LeaveGroup, no
        revocation; its group expires the member after its session timeout.

        The last reference goes on a thread of its own: confluent-kafka's
        dealloc destroys the handle with ``RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE``
        and without the GIL, so no rebalance callback runs. ``close()`` is
        not safe here: it runs the revocation through confluent-kafka's
        rebalance callback, whose fallback ``rd_kafka_assign`` waits on
        librdkafka's main thread *while holding the GIL*; with every broker
        killed that wait never ended once, and it froze every thread of the
        harness (a timed ``join`` cannot return without the GIL)."""
        holder, self.consumer = [self.consumer], None
        if holder[0] is not None:  # no other reference is left when the thread drops it
            threading.Thread(target=_drop, args=(holder,), name="consumer-drop", daemon=True).start()
        del holder

    def _subscribe_op(self, op: dict[str, Any]) -> dict[str, Any]:
        """Subscribe again to the topics of ``value`` (keys; default all)."""
        assert self.consumer is not None
        if self.sub_via != "subscribe":
            return {"type": "fail", "error": "subscribe needs --sub-via subscribe"}
        keys = [str(k) for k in op.get("value") or self.keys]
        self._subscribe()
        return {"type": "ok", "value": keys}

    def _close_consumer(self) -> None:
        """Close the consumer. A subscribed one is never closed but dropped
        as a killed process's is (:meth:`_abandon_consumer`): its close runs
        the revocation through confluent-kafka's rebalance callback, which
        can wait on librdkafka holding the GIL and freeze every thread of the
        harness; the group expires the member after its session instead (a
        static member's close sends no LeaveGroup either)."""
        if self.sub_via == "subscribe":
            self._abandon_consumer()
            return
        c, self.consumer = self.consumer, None
        if c is not None:
            _close_quietly(c)

    def _assign_op(self, op: dict[str, Any]) -> dict[str, Any]:
        """Assign exactly ``value`` (keys), each from offset 0; ``[]`` unassigns.
        A subscribed consumer leaves its group (dropped, :meth:`_close_consumer`)
        and the process goes on with a consumer of its own that assigns."""
        assert self.consumer is not None
        if self.sub_via == "subscribe":
            self._close_consumer()
            self.sub_via = "assign"
            self.consumer = Consumer(self._consumer_conf(f"p{self.process}"))
        keys = [str(k) for k in op.get("value") or []]
        self.keys = keys
        self.positions = {k: 0 for k in keys}
        if keys:
            self._assign()
        else:
            self.consumer.unassign()
        return {"type": "ok", "value": keys}

    def _deliver(self, topic: str, part: int, value: Any, deadline: float) -> tuple[KafkaError | None, int] | None:
        """Produce one record and wait for its delivery report until the
        deadline (or the operation's crash time): (error, offset), or None
        without a report. ``produce``'s own BufferError/KafkaException pass."""
        assert self.producer is not None
        box: list[tuple[KafkaError | None, int]] = []

        def on_delivery(err, msg) -> None:
            box.append((err, msg.offset() if msg is not None else -1))

        self.producer.produce(topic, value=str(value).encode(), partition=part, on_delivery=on_delivery)
        while not box and time.monotonic() < deadline and not self.crash_due():
            self.producer.flush(min(0.02 if self.crash_at else 0.2, max(0.0, deadline - time.monotonic())))
        return box[0] if box else None

    def _send(self, op: dict[str, Any]) -> dict[str, Any]:
        (_, key, value), = op["value"]
        topic, part = split_key(key)
        self.attempts.reset(topic, part)
        try:
            got = self._deliver(topic, part, value, time.monotonic() + self.op_timeout)
        except BufferError as e:
            return {"type": self._outcome("_QUEUE_FULL", False), "error": f"queue-full: {e}"}
        except KafkaException as e:
            name = _err_name(e.args[0])
            return {"type": self._outcome(name, self._retried()), "error": name}
        if got is None:
            return {"type": self._outcome("no-delivery-report", True), "error": "no-delivery-report"}
        err, offset = got
        name = _err_name(err) if err is not None else None
        t = self._outcome(name, self._retried() or self.attempts.of(topic, part) > 1)
        if t == "ok":
            return {"type": "ok", "value": [["send", key, [offset, value]]]}
        return {"type": t, "error": name or "acks=0"}

    def _outcome(self, error: str | None, retried: bool) -> str:
        """The shared rule (``workloads.outcome``); ``retried``: the record
        may have been sent more than once, so an earlier attempt may stand."""
        return send_outcome(error, self.acks, ambiguous_before=retried)

    def _poll(self, op: dict[str, Any]) -> dict[str, Any]:
        assert self.consumer is not None
        # consume(n, t) waits the whole t unless n arrive: wait for the first
        # message only, then take whatever else is already fetched.
        msgs = self.consumer.consume(num_messages=1, timeout=min(self.poll_wait, self.op_timeout / 4))
        if msgs:
            msgs += self.consumer.consume(num_messages=499, timeout=0)
        reads: dict[str, list[list[int]]] = {}
        resets: list[str] = []
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() in TRUNCATION_ERRORS and m.topic() is not None:
                    key = f"{m.topic()}-{m.partition()}"
                    resets.append(f"{key}@{self.positions.get(key)}:{_err_name(err)}")
                    self._skip_to_end(key)
                continue
            key = f"{m.topic()}-{m.partition()}"
            try:
                v = int(m.value())
            except (TypeError, ValueError):
                v = m.value().decode(errors="replace") if m.value() else None
            reads.setdefault(key, []).append([m.offset(), v])
            self.positions[key] = m.offset() + 1
        res: dict[str, Any] = {"type": "ok", "value": [["poll", reads]]}
        if resets:
            res["resets"] = resets  # a truncated log seen by a consumer
        if self.sub_via == "subscribe" and reads:
            err = self._commit_reads(reads)
            if err:
                res["commit-error"] = err
        return res

    def _commit_reads(self, reads: dict[str, list[list[int]]]) -> str | None:
        """commitSync the offsets after what this poll read. A refused commit
        (the group rebalanced meanwhile) does not undo the reads: the next
        owner of the partition reads them again, which the checker allows
        under subscribe (a rebalance explains it)."""
        assert self.consumer is not None
        offsets = [TopicPartition(*split_key(k), pairs[-1][0] + 1) for k, pairs in reads.items()]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            return _err_name(e.args[0])
        return None

    def _skip_to_end(self, key: str) -> None:
        """After a truncation the old position is gone: continue at the high
        watermark (a subscribed consumer resets itself: earliest)."""
        assert self.consumer is not None
        if self.sub_via == "subscribe":
            return
        try:
            _, high = self.consumer.get_watermark_offsets(TopicPartition(*split_key(key)), timeout=2)
        except KafkaException:
            return
        self.positions[key] = high
        self._assign()

    def _final_read(self, op: dict[str, Any]) -> dict[str, Any]:
        """Read ``key`` from the beginning with a fresh consumer until the
        highest acknowledged offset (``upto``) is covered, or the log's end is
        reached and stays put, or the deadline passes.

        ``ok`` means the read is complete: it covered ``upto`` or reached the
        current high watermark (acknowledged offsets beyond it are missing from
        the log). If the partition never answered (no leader), the read is
        ``info``: what it returned is not the whole log, so missing values
        prove nothing."""
        key = op["key"]
        upto = int(op.get("upto", -1))
        topic, part = split_key(key)
        c = Consumer(self._consumer_conf(f"final-{self.process}"))
        reads: list[list[Any]] = []
        seen: set[int] = set()
        resets: list[str] = []
        pos = 0
        reached_end = False
        deadline = time.monotonic() + self.final_read_timeout
        stable_since: float | None = None
        behind_lso = 0  # the HW, while a read_committed read waits at an LSO below it
        try:
            c.assign([TopicPartition(topic, part, OFFSET_BEGINNING)])
            while time.monotonic() < deadline:
                for m in c.consume(num_messages=1000, timeout=0.5):
                    err = m.error()
                    if err is not None:
                        if err.code() in TRUNCATION_ERRORS:
                            resets.append(f"{key}@{pos}:{_err_name(err)}")
                            c.assign([TopicPartition(topic, part, OFFSET_BEGINNING)])
                        continue
                    if m.offset() not in seen:
                        seen.add(m.offset())
                        try:
                            v: Any = int(m.value())
                        except (TypeError, ValueError):
                            v = m.value().decode(errors="replace") if m.value() else None
                        reads.append([m.offset(), v])
                    pos = max(pos, m.offset() + 1)
                pos = max(pos, _position(c, topic, part))
                try:
                    _, high = c.get_watermark_offsets(TopicPartition(topic, part), timeout=1, cached=False)
                except KafkaException:
                    stable_since = None
                    continue
                if pos >= high:
                    reached_end = True
                    if pos > upto:
                        break
                    # the end of the log is below acknowledged offsets: wait a
                    # little in case a leader is still catching up, then accept
                    stable_since = stable_since or time.monotonic()
                    if time.monotonic() - stable_since > min(5.0, self.final_read_timeout / 3):
                        # an LSO below the HW may still move (a transaction timing out): wait it out
                        behind_lso = behind_lso or self._hw_past(topic, part, pos)
                        if not behind_lso:
                            break
                else:
                    stable_since = None
        finally:
            try:
                c.close()
            except Exception:
                pass
        reads.sort()
        caught_up = pos > upto
        res: dict[str, Any] = {"type": "ok" if caught_up or reached_end else "info",
                               "value": [["poll", {key: reads}]], "caught_up": caught_up}
        if res["type"] == "info":
            res["error"] = "final-read-incomplete: partition unreadable until the deadline"
        if resets:
            res["resets"] = resets
        if behind_lso and not caught_up and self._hw_past(topic, part, pos):
            res["lso_stuck"] = {"position": pos, "hw": behind_lso}
        return res

    def _hw_past(self, topic: str, part: int, pos: int) -> int:
        """The high watermark when a read_committed read's end (the last
        stable offset) is below it, else 0: records past an open transaction
        that the read cannot reach until the transaction ends."""
        if self.isolation_level != "read_committed":
            return 0
        c = Consumer({**self._consumer_conf(f"final-hw-{self.process}"), "isolation.level": "read_uncommitted"})
        try:
            _, high = c.get_watermark_offsets(TopicPartition(topic, part), timeout=2, cached=False)
        except KafkaException:
            return 0
        finally:
            _close_quietly(c)
        return high if high > pos else 0


def _position(c: Consumer, topic: str, part: int) -> int:
    """The consumer's position (-1 if it has none yet). A transactional
    topic's commit and abort markers take offsets no message carries:
    librdkafka's position steps past them, the last message's offset + 1
    does not, so a log ending in a marker would never look read to its end."""
    try:
        got = c.position([TopicPartition(topic, part)])
    except KafkaException:
        return -1
    return got[0].offset if got and got[0].offset is not None and got[0].offset >= 0 else -1


def _drop(holder: list[Consumer]) -> None:
    """Release the last reference to a consumer on this thread (see
    :meth:`QueueClient._abandon_consumer`)."""
    holder.clear()


def _close_quietly(c: Consumer) -> None:
    try:
        c.close()
    except Exception:
        pass


def _silent_logger_fn(*_a: Any) -> None:
    return None


class _SilentLogger:
    """librdkafka logs connection churn at error level during partitions; the
    harness reports outcomes through the history instead."""

    def log(self, *_a: Any, **_k: Any) -> None:
        return None

    def __getattr__(self, _name: str):
        return _silent_logger_fn


_silent_logger = _SilentLogger()


# ---------------------------------------------------------------- generators
# the queue workload's generators are workloads.queue_gen's (no client
# library there: the simulator runs them too, compiled)
from workloads.queue_gen import SUBSCRIBE_SHARE, final_generator, observe, workload_generator  # noqa: E402,F401
