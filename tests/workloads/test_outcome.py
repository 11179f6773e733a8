"""The send outcome rules (workloads/outcome.py), one rule per test, checked
on the names both clients use: librdkafka's (the real client's
``KafkaError.name()``) and Kafka's (the simulated broker's), and, where the
machine can make the error without a cluster, on both clients themselves."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from reference_impl.core.messages import Errors
from reference_impl.sim.clients import ClientConfig, ClientSettings, Workload, error_name
from reference_impl.sim.script import Scenario
from workloads.outcome import (
    FATAL,
    LEADER_ERRORS,
    NOT_PERSISTED,
    POSSIBLY_PERSISTED,
    REFRESH,
    RETRY,
    STOP,
    possibly_persisted,
    producer_action,
    send_outcome,
)
from workloads.queue import QueueClient
from reference_impl.server.ports import free_ports


def rd(code: int) -> str:
    """librdkafka's name for an error, as the real client records it."""
    return KafkaError(code).name()


def both(rd_code: int, kafka_code: int | None) -> list[str]:
    return [rd(rd_code)] + ([error_name(kafka_code)] if kafka_code is not None else [])


def test_a_delivery_without_error_is_ok_under_acks_1_and_all():
    assert send_outcome(None, "all") == send_outcome(None, "1") == "ok"
    assert send_outcome(None, "all", ambiguous_before=True) == "ok"


def test_acks_0_is_always_info_nothing_is_acknowledged():
    assert send_outcome(None, "0") == "info"
    assert send_outcome(rd(KafkaError.NOT_ENOUGH_REPLICAS), "0") == "info"


@pytest.mark.parametrize("name", both(KafkaError.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS)
                         + both(KafkaError.MSG_SIZE_TOO_LARGE, Errors.MESSAGE_TOO_LARGE)
                         + both(KafkaError.INVALID_RECORD, Errors.INVALID_RECORD)
                         + both(KafkaError.INVALID_REQUEST, Errors.INVALID_REQUEST)
                         + [rd(KafkaError._QUEUE_FULL), rd(KafkaError._PURGE_QUEUE)])
def test_an_error_refused_before_the_append_is_a_definite_fail(name):
    """NOT_ENOUGH_REPLICAS is checked before the leader appends; validation
    errors likewise; a queue-side error was never sent."""
    assert send_outcome(name, "all") == send_outcome(name, "1") == "fail"


@pytest.mark.parametrize("name", both(KafkaError.REQUEST_TIMED_OUT, Errors.REQUEST_TIMED_OUT)
                         + both(KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
                         + [rd(KafkaError._MSG_TIMED_OUT), rd(KafkaError._TIMED_OUT), rd(KafkaError._TRANSPORT),
                            rd(KafkaError._PURGE_INFLIGHT), "request-timeout", "delivery-timeout", "run-ended"])
def test_an_error_after_the_append_or_without_an_answer_is_info(name):
    assert send_outcome(name, "all") == send_outcome(name, "1") == "info"


@pytest.mark.parametrize("name", both(KafkaError.NOT_LEADER_FOR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER)
                         + both(KafkaError.UNKNOWN_TOPIC_OR_PART, Errors.UNKNOWN_TOPIC_OR_PARTITION))
def test_leadership_lost_is_info_under_acks_all_and_fail_under_acks_1(name):
    """Kafka's DelayedProduce answers NOT_LEADER_OR_FOLLOWER after the append
    when the partition moved while waiting for the ISR; under acks=1 the
    answer comes before any append."""
    assert send_outcome(name, "all") == "info"
    assert send_outcome(name, "1") == "fail"


@pytest.mark.parametrize("name", both(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)
                         + both(KafkaError.INVALID_PRODUCER_EPOCH, Errors.INVALID_PRODUCER_EPOCH)
                         + [rd(KafkaError._FATAL)])
def test_an_idempotent_producers_fatal_error_is_info(name):
    assert name in FATAL
    assert send_outcome(name, "all") == "info"


def test_an_unknown_error_is_info_a_fail_must_be_proof():
    assert send_outcome("SOMETHING_NEW", "all") == send_outcome("_SOMETHING_LOCAL", "1") == "info"


def test_status_only_rises_a_definite_error_after_an_ambiguous_attempt_is_info():
    """NOT_ENOUGH_REPLICAS is checked before the append: with retries=0 it
    proves the record is not in the log (fail); after a retry an earlier
    attempt whose answer was lost may stand (info)."""
    for name in both(KafkaError.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS):
        assert send_outcome(name, "all") == "fail"
        assert send_outcome(name, "all", ambiguous_before=True) == "info"


@pytest.mark.parametrize("name", both(KafkaError.MSG_SIZE_TOO_LARGE, Errors.MESSAGE_TOO_LARGE)
                         + both(KafkaError.INVALID_REQUEST, Errors.INVALID_REQUEST) + [rd(KafkaError._QUEUE_FULL)])
def test_a_refusal_of_the_record_itself_is_fail_even_after_retries(name):
    """Every attempt of the same record meets the same refusal: none was
    appended, however many were made."""
    assert send_outcome(name, "all", ambiguous_before=True) == "fail"


def test_leader_errors_refresh_retriable_errors_spend_a_retry_others_stop():
    for code in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.LEADER_NOT_AVAILABLE, Errors.FENCED_LEADER_EPOCH,
                 Errors.UNKNOWN_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION):
        assert producer_action(error_name(code)) == REFRESH
    for code in (Errors.NOT_ENOUGH_REPLICAS, Errors.REQUEST_TIMED_OUT, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        assert producer_action(error_name(code)) == RETRY
    assert producer_action("request-timeout") == RETRY
    for code in (Errors.INVALID_REQUEST, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, Errors.MESSAGE_TOO_LARGE):
        assert producer_action(error_name(code)) == STOP


def test_the_tables_do_not_contradict_each_other():
    assert not NOT_PERSISTED & POSSIBLY_PERSISTED
    assert not NOT_PERSISTED & FATAL and not POSSIBLY_PERSISTED & FATAL
    assert not LEADER_ERRORS & POSSIBLY_PERSISTED
    assert not possibly_persisted(error_name(Errors.LEADER_NOT_AVAILABLE), "all")


# ------------------------------------------------------------- the clients themselves
def test_real_client_a_record_larger_than_allowed_is_a_fail_it_was_never_sent():
    """librdkafka refuses it in produce() (MSG_SIZE_TOO_LARGE): nothing
    left the client, whatever the broker (none is needed)."""
    c = QueueClient("127.0.0.1:9", ["t0-0"], "all", 0, op_timeout=3, extra_conf={"message.max.bytes": 1000})
    c.open()
    try:
        r = c.invoke({"f": "send", "value": [["send", "t0-0", 10 ** 1500]]})
    finally:
        c.close()
    assert r == {"type": "fail", "error": "MSG_SIZE_TOO_LARGE"}


def test_real_client_no_broker_until_the_delivery_timeout_is_info():
    c = QueueClient(f"127.0.0.1:{free_ports(1)[0]}", ["t0-0"], "all", 0, op_timeout=2.5)
    c.open()
    try:
        r = c.invoke({"f": "send", "value": [["send", "t0-0", 1]]})
    finally:
        c.close()
    assert r["type"] == "info" and r["error"] in ("_MSG_TIMED_OUT", "no-delivery-report")


def test_simulated_client_a_request_the_broker_refuses_is_a_definite_fail():
    """acks=2 is refused by the leader before any append (INVALID_REQUEST):
    fail, with no retry."""
    s = Scenario(seed=31)
    (tp,) = s.start(replicas=(1, 2, 3))
    c = Workload(s.sim, [tp], ClientConfig()).client(0, 0, ClientSettings("2"))
    done: list = []
    c.invoke({"f": "send", "value": [["send", str(tp), 5]]}, done.append)
    s.wait(lambda: bool(done), what="the send completing")
    assert done == [{"type": "fail", "error": "INVALID_REQUEST"}]
