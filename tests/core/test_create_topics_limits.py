"""CreateTopics limits, as Kafka 4.4's controller has them
(ReplicationControlManager.MAX_PARTITIONS_PER_BATCH and
validateTotalNumberOfPartitions; QuorumController.MAX_RECORDS_PER_USER_OP):
a request over either is refused whole, at once, with POLICY_VIOLATION and
Kafka's words, and nothing of it is written; requests within them are
created as before. The controller is driven by hand-made broker requests
(``controllerkit``)."""

from __future__ import annotations

import pytest

from reference_impl.core.config import ConfigError, ProtocolConfig
from reference_impl.core.controller.replication_control import TOO_MANY_PARTITIONS, TOO_MANY_RECORDS
from reference_impl.core.effects import Send
from reference_impl.core.messages import CreateTopicsRequest, Errors, NewTopic, TopicPartition
from tests.core.controllerkit import CTL, OneController


def _ask(c: OneController, *topics: NewTopic):
    """(results, metadata records appended by the request)."""
    before = c.ctl.raft.end_offset
    resp = c.ask(CreateTopicsRequest("r", tuple(topics)), 0)
    return {r.name: r for r in resp.results}, c.ctl.raft.end_offset - before


def test_a_request_over_max_partitions_per_batch_is_refused_whole_with_policy_violation_and_nothing_written():
    c = OneController(ProtocolConfig(), 0)
    res, appended = _ask(c, NewTopic("bomb", 50_000, 1), NewTopic("fine", 1, 1))
    assert {n: (r.error, r.message) for n, r in res.items()} == {
        "bomb": (Errors.POLICY_VIOLATION, TOO_MANY_PARTITIONS),
        "fine": (Errors.POLICY_VIOLATION, TOO_MANY_PARTITIONS),
    }
    assert TOO_MANY_PARTITIONS == "Excessively large number of partitions per request."
    assert appended == 0
    assert "bomb" not in c.ctl.image.topics and "fine" not in c.ctl.image.topics
    # the controller is still the active one and answers the next request
    res, _ = _ask(c, NewTopic("fine", 2, 3))
    assert res["fine"].error == Errors.NONE and c.ctl.is_active
    assert sorted(tp for tp in c.ctl.image.partitions if tp.topic == "fine") == [
        TopicPartition("fine", 0), TopicPartition("fine", 1)]


def test_the_refusal_is_answered_in_the_same_step_without_waiting_for_a_commit():
    c = OneController(ProtocolConfig(), 0)
    effects = c.loop.deliver(CTL, CreateTopicsRequest("r", (NewTopic("bomb", 50_000, 1),)), 0)
    answers = [e.msg for e in effects if isinstance(e, Send) and e.dst == 0]
    assert [a.results[0].error for a in answers] == [Errors.POLICY_VIOLATION]


def test_partitions_are_counted_over_every_topic_of_the_request_as_kafka_counts_them():
    cfg = ProtocolConfig(max_partitions_per_batch=10, max_records_per_user_op=100, num_partitions=4)
    c = OneController(cfg, 0)
    # 6 + 5: over the cap together though each topic is under it
    res, appended = _ask(c, NewTopic("a", 6, 1), NewTopic("b", 5, 1))
    assert {r.error for r in res.values()} == {Errors.POLICY_VIOLATION} and appended == 0
    # -1 is the broker default (4), a manual assignment counts its length: 4 + 3 + 3 = 10, at the cap
    res, appended = _ask(c, NewTopic("d", -1, 1), NewTopic("m", -1, -1, assignments=((0,), (1,), (2,))),
                         NewTopic("e", 3, 1))
    assert {n: r.error for n, r in res.items()} == {"d": Errors.NONE, "m": Errors.NONE, "e": Errors.NONE}
    assert appended == 3 + 10  # a TopicRecord per topic, a PartitionRecord per partition
    # a count that is not positive counts nothing: that topic is refused on its own
    res, _ = _ask(c, NewTopic("zero", 0, 1), NewTopic("ten", 10, 1))
    assert res["zero"].error == Errors.INVALID_PARTITIONS and res["ten"].error == Errors.NONE


def test_a_request_over_max_records_per_user_op_is_refused_whole_with_policy_violation():
    c = OneController(ProtocolConfig(max_records_per_user_op=10), 0)
    # 5 + 5 partitions and two TopicRecords: 12 records
    res, appended = _ask(c, NewTopic("a", 5, 1), NewTopic("b", 5, 1))
    assert {(r.error, r.message) for r in res.values()} == {(Errors.POLICY_VIOLATION, TOO_MANY_RECORDS)}
    assert TOO_MANY_RECORDS == "Unable to perform excessively large batch operation."
    assert appended == 0 and "a" not in c.ctl.image.topics
    # Kafka's own limits: 10000 partitions in one topic are 10001 records
    big = OneController(ProtocolConfig(), 0)
    res, appended = _ask(big, NewTopic("big", 10_000, 1))
    assert (res["big"].error, res["big"].message, appended) == (Errors.POLICY_VIOLATION, TOO_MANY_RECORDS, 0)


def test_only_the_records_a_request_would_write_count_towards_max_records_per_user_op():
    c = OneController(ProtocolConfig(max_records_per_user_op=4), 0)
    # "t" exists (refused on its own, no records); "x" is 1 + 3 records, at the cap
    res, appended = _ask(c, NewTopic("t", 3, 1), NewTopic("x", 3, 1))
    assert res["t"].error == Errors.TOPIC_ALREADY_EXISTS and res["x"].error == Errors.NONE
    assert appended == 4


def test_a_refused_request_places_no_replicas():
    """The round-robin placement of the next topic is the same whether or
    not a refused request came first."""
    cfg = ProtocolConfig(max_records_per_user_op=6)
    refused, fresh = OneController(cfg, 0), OneController(cfg, 0)
    res, _ = _ask(refused, NewTopic("a", 3, 1), NewTopic("b", 3, 1))
    assert res["a"].error == Errors.POLICY_VIOLATION
    for c in (refused, fresh):
        res, _ = _ask(c, NewTopic("c", 3, 2))
        assert res["c"].error == Errors.NONE
    assert ([refused.ctl.image.partitions[TopicPartition("c", p)].replicas for p in range(3)]
            == [fresh.ctl.image.partitions[TopicPartition("c", p)].replicas for p in range(3)])


def test_the_limits_are_settings_named_after_kafkas_constants():
    cfg = ProtocolConfig.from_properties({"max.partitions.per.batch": "20", "max_records_per_user_op": 30})
    assert (cfg.max_partitions_per_batch, cfg.max_records_per_user_op) == (20, 30)
    assert (ProtocolConfig().max_partitions_per_batch, ProtocolConfig().max_records_per_user_op) == (10_000, 10_000)
    with pytest.raises(ConfigError, match="at least 1"):
        ProtocolConfig.from_properties({"max.partitions.per.batch": "0"})
