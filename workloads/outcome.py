"""ok / fail / info for a producer's send: the one place the rules live.

Both clients use it: the real one (``workloads.queue``, librdkafka through
confluent-kafka, which hands the application one error name per delivery
report) and the simulated one (``reference_impl.sim.clients``, which plays
librdkafka's retries itself and so also knows whether an earlier attempt of
the same send may have reached the log). The rules are a pure function of
(acks, the error's name, whether an earlier attempt was possibly
persisted); the error names are librdkafka's (``name()`` of a
``KafkaError``, ``_``-prefixed for client-side errors) or Kafka's protocol
names, which the simulated broker uses; where the two spell one error
differently both are listed.

What an error says about the record, from librdkafka's produce error
actions (``rd_kafka_err_action``: each error is marked "not persisted",
"possibly persisted" or fatal) and Kafka's produce path
(``ReplicaManager.appendRecords``, ``DelayedProduce``):

* ``ok``: a delivery report without error, acks >= 1.
* ``fail``: the error proves nothing was appended, and no earlier attempt of
  the same send may have been: the broker refused before appending
  (NOT_ENOUGH_REPLICAS is checked before the append; size, record and
  request errors are validation), or the client never sent it (queue full,
  unknown partition, purged from the queue).
* ``info``: everything else, since the record may be in the log: the
  request or delivery timed out, the connection dropped, the leader
  appended and then gave up waiting (NOT_ENOUGH_REPLICAS_AFTER_APPEND,
  REQUEST_TIMED_OUT), a purge of an in-flight request, the idempotent
  producer's fatal errors, acks=0 (nothing is acknowledged), and any error
  these tables do not know: a ``fail`` must be proof, so an unknown error
  is never taken as one.
* Leader errors (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, fenced or
  unknown leader epoch, unknown partition): librdkafka refreshes metadata
  and retries without spending a retry. With acks=1 the broker refused
  before appending; with acks=all Kafka's ``DelayedProduce`` also answers
  NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION or
  KAFKA_STORAGE_ERROR when the partition left the broker *after* the
  append, while the request waited for the ISR, so under acks=all those
  attempts are possibly persisted.
* Status only rises: once an attempt was possibly persisted, a later
  definite error cannot make the send a ``fail`` (librdkafka keeps a
  message's persistence status at the highest it reached): after a retry,
  NOT_ENOUGH_REPLICAS (min ISR is checked before the append, so a retry can
  be refused while the first copy stands) is ``info``. A client that
  cannot see its attempts (a retrying real producer) passes
  ``ambiguous_before=True``. Errors about the record itself (its size,
  format, the request's acks, authorization) and errors raised before it
  was queued at all are the same on every attempt, so no earlier attempt
  can have been appended: they stay ``fail``.
"""

from __future__ import annotations

from typing import Final

OK: Final = "ok"
FAIL: Final = "fail"
INFO: Final = "info"

#: what a producer does with an error on one attempt
REFRESH: Final = "refresh"  # refresh metadata, retry without spending a retry
RETRY: Final = "retry"  # retry after the backoff, spending one retry
STOP: Final = "stop"  # the send ends with this error

#: leader moved or unknown: refresh metadata and retry (before the append
#: under acks=1; possibly after it under acks=all, see the module docstring)
LEADER_ERRORS: Final = frozenset({
    "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION", "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH", "UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_OR_PARTITION", "BROKER_NOT_AVAILABLE",
    "REPLICA_NOT_AVAILABLE",
})

#: proof that this attempt appended nothing
NOT_PERSISTED: Final = frozenset({
    # broker: checked before the append
    "NOT_ENOUGH_REPLICAS", "MSG_SIZE_TOO_LARGE", "MESSAGE_TOO_LARGE", "INVALID_RECORD", "RECORD_LIST_TOO_LARGE",
    "INVALID_REQUIRED_ACKS", "INVALID_MSG", "CORRUPT_MESSAGE", "INVALID_REQUEST", "INVALID_TOPIC_EXCEPTION",
    "TOPIC_AUTHORIZATION_FAILED",
    # client: never sent
    "_QUEUE_FULL", "_INVALID_ARG", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC",
    "_PURGE_QUEUE", "_TIMED_OUT_QUEUE",
})

#: refused for what the record or request is (or never queued): every
#: attempt of the send meets the same answer, so none was appended
REFUSED_EVERY_ATTEMPT: Final = frozenset({
    "MSG_SIZE_TOO_LARGE", "MESSAGE_TOO_LARGE", "INVALID_RECORD", "RECORD_LIST_TOO_LARGE", "INVALID_REQUIRED_ACKS",
    "INVALID_MSG", "CORRUPT_MESSAGE", "INVALID_REQUEST", "INVALID_TOPIC_EXCEPTION", "TOPIC_AUTHORIZATION_FAILED",
    "_QUEUE_FULL", "_INVALID_ARG", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC",
})

#: the attempt may have appended the record
POSSIBLY_PERSISTED: Final = frozenset({
    "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    # client: sent, answer lost or never awaited
    "_TIMED_OUT", "_TRANSPORT", "_MSG_TIMED_OUT", "_PURGE_INFLIGHT", "_BAD_MSG",
    # the simulated client's names for the same: no answer within the
    # request timeout, the delivery timeout, the run ending mid-send
    "request-timeout", "delivery-timeout", "init-timeout", "run-ended", "no-delivery-report",
})

#: the idempotent producer's fatal errors: its sequence state is lost, so
#: whether earlier attempts landed is unknown
FATAL: Final = frozenset({
    "_FATAL", "OUT_OF_ORDER_SEQUENCE_NUMBER", "INVALID_PRODUCER_EPOCH", "UNKNOWN_PRODUCER_ID",
    "INVALID_PRODUCER_ID_MAPPING", "PRODUCER_FENCED",
})

#: retried while retries remain, spending one (librdkafka's RETRY action)
RETRIABLE: Final = frozenset({
    "NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "KAFKA_STORAGE_ERROR",
    "_TIMED_OUT", "_TRANSPORT", "request-timeout",
})


#: answered by Kafka's ``DelayedProduce`` too, after the append, when the
#: partition left this broker (or its log went offline) while the request
#: waited for the ISR: possibly persisted under acks=all, not under acks=1
AFTER_APPEND_UNDER_ACKS_ALL: Final = frozenset({
    "NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION", "UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_OR_PARTITION",
    "KAFKA_STORAGE_ERROR",
})


def possibly_persisted(error: str, acks: str) -> bool:
    """Whether an attempt that ended with ``error`` may have appended the record."""
    if error in AFTER_APPEND_UNDER_ACKS_ALL:
        return acks == "all"
    if error in NOT_PERSISTED or error in LEADER_ERRORS:
        return False
    return True  # POSSIBLY_PERSISTED, FATAL, and whatever is unknown


def producer_action(error: str) -> str:
    """What a producer does after one attempt failed with ``error``:
    :data:`REFRESH`, :data:`RETRY` or :data:`STOP`."""
    if error in LEADER_ERRORS:
        return REFRESH
    if error in RETRIABLE:
        return RETRY
    return STOP


def send_outcome(error: str | None, acks: str, ambiguous_before: bool = False) -> str:
    """ok / fail / info for a send that ended with ``error`` (None: a
    delivery report without error), produced with ``acks``, after earlier
    attempts of which at least one was possibly persisted
    (``ambiguous_before``)."""
    if acks == "0":
        return INFO
    if error is None:
        return OK
    if error in REFUSED_EVERY_ATTEMPT:
        return FAIL
    if ambiguous_before or possibly_persisted(error, acks):
        return INFO
    return FAIL
